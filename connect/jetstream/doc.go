// Package natsjs connects a gale topology to NATS JetStream: a spout that reads a
// stream through a durable pull consumer (Source), and a sink bolt that publishes
// to a stream and acks each input once it is stored (Sink). It lives in
// connect/jetstream and is named natsjs so that it can be imported next to
// nats.go's jetstream package. Example is a whole topology on an embedded server.
//
// # The spout: at least once, resumable
//
// Each spout task pulls from the durable consumer (AckExplicit) in a background
// goroutine, and NextTuple emits what it fetched without waiting. A message roots
// a tuple tree whose message id is its stream sequence (a uint64); its values are
// the fields chosen with WithFields (subject, payload, sequence, delivery count,
// headers). Then:
//
//	tree completed        Ack
//	tree failed/timed out NakWithDelay, the delay doubling per failure (WithBackoff)
//	max attempts reached  dead letter published (WithDeadLetter), then TermWithReason(last error)
//	bolt's ResetTimeout   InProgress (the server's AckWait clock restarts with the tree's)
//	tree pending long     InProgress at AckWait/2, however long a bolt keeps it alive
//	Close (stop, move)    Nak of whatever the task still held: the next spout gets it at once
//
// The consumer is created or updated at each task's Open with MaxAckPending =
// tasks × Config.MaxSpoutPending, and AckWait (default 2 × Config.MessageTimeout)
// refused below 1.25 × MessageTimeout, the latest a tree can time out (ErrAckWait):
// the server then never redelivers a message whose tree may still be in flight.
// A bolt's ResetTimeout reaches the spout (topology.TimeoutResetSpout), which sends
// InProgress for that message at once; every tree pending past AckWait/2 also gets
// InProgress, so a slow acker or a lost reset cannot bring a redelivery.
//
// A spout moved to another worker (a new generation) opens the same durable and
// resumes with nothing lost: what the old task acked stays acked, what it held is
// Nak'd at its Close, or, if its process died, redelivered by the server after
// AckWait. Sinks must be idempotent: a redelivered message is processed again.
//
// Acks are plain Acks, not DoubleAck (AckSync). A lost ack only makes the server
// redeliver the message after AckWait, which at least once allows and an idempotent
// sink absorbs; DoubleAck would cost a round trip per message on the spout's
// goroutine (or a goroutine per ack) to learn of a loss that changes nothing.
//
// Attempts are counted by the spout task from its failed trees, not from the
// server's delivery count, because the delivery count also counts stops and moves,
// and a stop or an outage is never charged to the event it interrupted. So a move
// starts a message's count again, and with several spout tasks a redelivery may go
// to a task that has not seen its earlier failures: a message gets at least max
// attempts, never fewer, before it is dead-lettered.
//
// Stale deliveries (nats-server#4786: an ack sent after AckWait may be applied to
// the message's redelivery). The spout compares each delivery against what it
// holds: a message that waited in the task past 90% of AckWait is neither emitted
// nor Nak'd (the server redelivers it); a redelivery that reaches the task while an
// earlier delivery's tree is still pending there (higher delivery count, same
// sequence) is not emitted again, and that tree's outcome is sent on the newer
// delivery; a tree that fails after its delivery went stale sends no Nak or Term,
// which could otherwise cut short a redelivery in progress elsewhere. An Ack of a
// stale delivery is still sent: that message was processed in full, so if the server
// applies it to a redelivery, that redelivery was redundant. SourceStats counts each.
//
// # The sink: stored once within the duplicate window
//
// The sink bolt publishes each input to its subject with the event id (a string
// field, WithEventIDField) as the Nats-Msg-Id header, asynchronously, at most
// WithMaxInFlight publishes awaiting their PubAck per task, and acks the input only
// after its PubAck: an acked input is stored. A replayed input with the same event id
// is dropped by the stream and counted (SinkStats.Duplicates, from PubAck.Duplicate).
// That dedupe holds only within the stream's duplicate window (StreamConfig.Duplicates,
// 2 minutes by default): a replay after the window is stored a second time. Set the
// window longer than the longest a message can take to be retried (its attempts ×
// (message timeout + backoff), plus any outage), or dedupe downstream by event id.
//
// A publish failure is one of two kinds. The event's own fault (no event id, a
// payload of another type, a message larger than the connection or the stream
// allows) fails the input with the reason. Anything else (no response from the
// stream: a server restarting, a stream deleted or not yet elected; a PubAck
// timeout; a closed connection) is an outage, which is never charged to the event:
// the task holds every input it has, in order, resets their trees' timeouts and
// probes with one publish at a time after a growing pause (WithRetryBackoff); once
// one is stored, the rest follow, and copies that had reached the stream are dropped
// as duplicates. A stop during an outage abandons what is held (neither acked nor
// failed), and the spout replays it on its next run. A subject that no stream
// captures when the task is prepared is an error (ErrNoStream): Start fails.
//
// # What to configure
//
// The source stream and, for the sink, a stream capturing its subject with a
// duplicate window as above; a stream capturing the dead-letter subject, if any;
// Config.MessageTimeout and MaxSpoutPending (they set the consumer's AckWait and
// MaxAckPending; Ackers at least 1); max attempts and backoff for failures.
package natsjs
