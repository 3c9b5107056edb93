// Package kafka connects gale to Apache Kafka with franz-go (kgo): a spout that
// reads topics as a consumer group (NewSource), and a sink bolt that writes to a
// topic (NewSink). It follows storm-kafka-client where that is sound.
//
// # The spout
//
// Each spout task is one member of the group. A poller goroutine (owned by the
// task, stopped by Close) polls kgo with BlockRebalanceOnPoll, hands the records to
// the task's buffers, applies seeks and commits, and only then allows a rebalance:
// no seek or commit can cross one. NextTuple emits one buffered record and never
// waits on Kafka. The message id is a MessageID: topic/partition/offset.
//
// Commits. Auto-commit is off; nothing that is not acked is ever committed. Per
// partition a pure tracker keeps the records fetched and not finished (buffered,
// in flight, waiting for a replay or for their dead letter), and the offset
// committed is the lowest of them, or one past the last record fetched when none
// is open: the contiguous acked prefix, never past an unacked record
// (STORM-2343, connect#4010). Offsets with gaps (compaction, transaction markers)
// are passed over. The prefix is committed every WithCommitInterval, on revoke and
// on Close.
//
// Rebalances. On OnPartitionsRevoked the spout stops emitting from the revoked
// partitions and drops their buffers, waits up to WithRevokeWait for their
// pending trees (acks keep arriving on the task goroutine meanwhile), commits
// their acked prefix synchronously and forgets them; the next owner starts from
// that commit and replays what was still pending. OnPartitionsLost (a fatal
// group error) drops the partitions without committing: the commit would be
// fenced. An ack or fail for a partition that was since revoked is ignored (the
// id carries the assignment it was emitted under).
//
// Replays. A failed tree is not held in memory: its offset waits (with a
// backoff, WithRetryBackoff) and the partition is then sought back to the
// lowest due offset and re-read from Kafka; on the re-read the tracker emits
// only the records due for replay and skips those acked or in flight. A
// replay therefore breaks per-partition order downstream: a replayed record
// arrives after records that followed it in the partition. Memory is one small
// entry per unfinished record; WithMaxBuffered bounds the fetched records held.
//
// Dead letters. With WithDeadLetter(topic, n), a record whose tree failed n times
// is re-read and produced to topic, keyed "topic/partition/offset", its value
// kept, with headers gale.topic, gale.partition, gale.offset, gale.key (the
// original key), gale.attempts and gale.error (the last failure's reason, from
// FailWith); once the broker acknowledged it, the partition moves past it.
// Without the option a record is replayed until its tree completes.
//
// Options: WithOffsetReset (auto.offset.reset earliest or latest), WithReadCommitted
// (isolation.level=read_committed), and Lag/Collector for the consumer lag per
// partition (high watermark minus committed).
//
// # The sink
//
// The sink bolt produces each input with kgo's idempotent producer (the default)
// and acks the input from the produce promise once the broker acknowledged the
// record (the OutputCollector is safe for concurrent use), with at most
// WithMaxInFlight records in flight per task (Execute waits for room). A record
// the broker refuses for good fails its input, with the error as reason.
//
// A broker outage is not charged to the events: kgo retries a produce until it
// succeeds (no delivery timeout), and the sink restarts the message timeout of
// inputs held longer than WithHoldRefresh (ResetTimeout), so the spout neither
// fails nor replays them. Set it below the topology's MessageTimeout.
//
// Idempotence covers one producer session only: it removes the duplicates of
// kgo's own retries, within one producer id. A replayed tree (the spout re-emits
// after a failure or timeout), a restarted task or a new producer instance gets a
// new producer id, and its record is written again. Consumers of the output that
// need exactly-once effects must dedupe by an application key (the source's
// topic/partition/offset, or an event id) - the sink does not do that.
//
// WithTransactions makes each task a transactional producer (id
// transactionalID-<task index>): inputs are produced in a transaction committed
// every interval and on Drain, and acked only once the broker acknowledged the
// commit. A transaction that fails - a record the broker refuses for good, or a
// commit that fails or whose outcome is unknown - is aborted and its inputs are
// failed, so the spout replays them into a later transaction. Guaranteed: a
// read_committed consumer sees the records of a transaction all or none, never
// those of an aborted one, and the record of every acked input; a new producer
// with a task's transactional id (the task restarted) fences that task's open
// transaction, which is aborted, and the fenced task fails its inputs.
//
// Not guaranteed: exactly-once from the spout. The source offsets are committed by
// the spout's group, outside the transaction, so a replayed tree (a failure or
// timeout downstream, or a commit reported failed that had in fact completed at
// the broker) writes its record again in a later transaction: read_committed
// consumers can see a record twice and still need a key to dedupe.
// read_uncommitted consumers also see aborted records. A fenced task fails every
// input from then on: never run two topologies with one transactional id. Acks
// wait for the commit, so latency grows by up to the interval; an open
// transaction holds back read_committed readers of its partitions until it ends,
// and one left open by a hard stop (no Drain) ends at the transaction timeout
// (kgo.TransactionTimeout, 40 s by default) or when the task's successor starts.
package kafka
