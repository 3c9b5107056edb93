// Package jslog is gale serve's event log on a JetStream stream (gale serve --log
// jetstream): the same contract as the Pebble log (package eventlog) as
// ingest.Service uses it, with the records stored on a quorum of the stream's
// replicas before PERSISTED is answered.
//
// # The model
//
//   - Records: one stream, PREFIX-log. An event's records go to the subject
//     PREFIX.log.<id in base64url>; the record's seq is its stream sequence, so seqs
//     are contiguous from 1 as the log spout and the committed offset expect.
//   - Dedupe: the stream is the index. Lookup reads the last record of the id's
//     subject (JetStream's per-subject last message). Submit publishes a record of
//     generation 0 with Nats-Expected-Last-Subject-Sequence 0, and one of a later
//     generation expecting the id's current last seq: the server refuses a second
//     record of an id, so two serve processes, or a resend whose first answer was
//     lost, never store it twice (the loser gets ErrExists; its resend is a
//     duplicate). No separate index can disagree with the records. So the
//     ingest service publishes a new id without a Lookup first: SubmitEach says
//     per record which ones the stream refused (Exists), and only those are
//     looked up, to answer the duplicate or conflict.
//   - PERSISTED: Submit's done runs once every record's PubAck came back: the
//     record is stored on a quorum of the replicas. A publish not acknowledged
//     within the timeout (no quorum: a minority partition; the server gone) is
//     ErrNotStored, so the answer is FAILED_RETRYABLE, never a false PERSISTED; it
//     may have been stored, and a resend then finds it.
//   - Documents (status documents, dead letters) and the committed offset: the KV
//     bucket PREFIX-logdocs, replicated as the stream. Apply stores the documents,
//     waits for every acknowledgement, then moves the offset: a crash in between
//     leaves the offset behind its documents (a replay, which the idempotent sink
//     absorbs), never ahead.
//   - Nothing is sticky: an outage fails the calls it interrupts (retryable), and
//     the next ones work once the cluster is back.
//   - Several serve processes share one log (lease.go): each takes events in and
//     answers for any of them; one at a time, the holder of key spout in the
//     bucket PREFIX-loglease, reads the log (Holding), and its committed-offset
//     writes are fenced against an earlier holder's (ErrFenced). OnStatusChange
//     (watch.go) tells the others of status documents, so their ack=processed
//     answers wake when the holder finishes an event.
//   - Losses in JetStream itself (hwm.go): a high-water mark of what was stored,
//     a stream ending below it refused at Open, a gap past the committed offset
//     stopping Read (Damaged), and Salvage recording what is lost (Lost) and
//     filling a lost tail so that no seq is given out twice.
//
// # What PERSISTED means
//
// A PubAck means stored by a quorum, not fsynced: NATS by default fsyncs every two
// minutes, and Jepsen's NATS 2.12.1 analysis lost 131,418 of 930,005 acknowledged
// writes on a power failure of every node that way. Config.Durability is the word
// every answer carries: "replicated:3+fsync" when every server syncs each write
// (sync_interval: always, as the nodes gale nats starts), "replicated:3" when they
// do not, "unknown" when it cannot be told. DurabilityProbe finds the word: it
// asks every server through a system-account connection, or trusts what an
// embedded node recorded of itself.
package jslog
