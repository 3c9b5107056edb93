// Package ingest is gale's front door: it takes events in over HTTP, answers each
// with how far it got, feeds the durable ones to a topology, and keeps every event's
// status, so an operator can say for any event id exactly what happened to it.
//
// # Statuses (seed 004's acknowledgement levels)
//
//	ACCEPTED          in this process's memory; answered only at ack=accepted
//	PERSISTED         in the log (eventlog), after the fsync covering it returned
//	PROCESSED         its tuple tree completed (so the sink committed), and this
//	                  status is itself synced before it is answered
//	FAILED_RETRYABLE  not taken in: failed fsync, overload, shutdown; resend as is
//	FAILED_FINAL      invalid, an id reused with other content, or dead-lettered
//	                  after max attempts (with the last error); :retry resubmits
//
// # Pieces
//
// Tracker and Offsets are pure state machines (time comes in as an argument, no
// goroutines or I/O, as etcd's raft): the Tracker holds the events in progress, their
// transitions, attempts and backoff; Offsets computes the committed offset, the
// contiguous prefix of finished log records. Service is the thin layer with the I/O:
// it decides new versus duplicate under one lock (an id leaves memory only once its
// record is durable, so the log's dedupe index answers for it from then on), appends
// new events to the log in one group commit per request, wakes whoever waits on a
// status, and syncs status documents, dead letters and the committed offset together
// (every 50 ms, or at once when someone waits for PROCESSED). Its log spout
// (Service.Spout) reads the log from the committed offset, roots a tracked tuple
// tree per event (message id: the log seq), replays failed trees after exponential
// backoff without holding back later events, and dead-letters at max attempts; it
// records attempts durably before running events that were pending at a restart, so
// a poison event that crashes the process ends as a dead letter, not a crash loop.
// On a log whose append is itself the dedupe (the JetStream log: a record of an id
// it holds is refused), an answer that waits for the log (ack=persisted, processed)
// does not look a new id up first: the event is appended at once, and only a
// refusal is looked up and answered the duplicate or conflict it is.
// Handler is the HTTP API on top, and Client its Go client. Who may call the API,
// from where and how much is package access's (ingest/access): gale serve puts its
// Guard in front of Handler and passes Guard.Admit as HTTPOptions.Admit, which
// checks each event's source against the token's scopes and the rate.
//
// # Guarantees, and their sources
//
//   - A duplicate is recognised only from durable state, never from an append still
//     in flight or one that failed (nats-server#6415).
//   - The committed offset never passes an unfinished event (STORM-2343, Benthos
//     #4010); a restart resumes there: at-least-once, with idempotent sinks for
//     exactly-once effects.
//   - A failed fsync fails the log for good (PostgreSQL's fsyncgate): every waiter
//     gets FAILED_RETRYABLE, /readyz turns 503, and a restart recovers.
//   - A sink outage is not the events' fault (Config.Sink): while the sink does not
//     take writes the spout emits nothing, /readyz is 503 naming why, and a tree that
//     timed out during or across the outage is replayed afterwards with no attempt
//     charged; only failures of the events themselves lead to FAILED_FINAL.
package ingest
