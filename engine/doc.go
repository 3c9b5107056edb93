// Package engine runs a topology's tasks: Start builds the tasks this engine hosts
// (every task in local mode, gale's default; those of its Assignment otherwise),
// Stop drains and closes them, Stats reads exact counters.
//
// # Tasks, hosts and messages
//
// Every spout and bolt task runs on one goroutine of its own, so user code needs no
// locks; every acker task runs one more around a pure acker.Ledger. Task ids are global
// (spouts and bolts from 1 in declaration order, then ackers: TaskIDs) and are all a
// task needs to reach another. An engine hosts the tasks its Assignment gives it
// (every task by default: local mode); the engines of one topology share a
// transport.Transport (WithTransport), in this process or, with a remote transport,
// across processes. Tasks never touch each other's state: everything they say to
// each other is a transport.Message, and the same code runs whether the other task
// is in this engine or elsewhere.
//
//   - Tuples travel in batches on the edge from a producing task to a consuming
//     task, under credit (package transport/flow): the consumer grants room
//     cumulatively as it takes batches for execution, the producer waits only when
//     its edge has none (backpressure) and probes the consumer every resend interval
//     meanwhile, so a lost grant never stalls it. Edge state is made at the first
//     tuple on the edge: memory follows the destinations a task actually uses.
//   - Acker messages and outcomes travel on the control lane, which never waits.
//     Every numbered message is checked against its link's duplicate filter, so a
//     duplicated ack can never XOR an edge twice.
//   - When a spout or bolt task exits, it ends its edges: one end of stream per
//     host it feeds, re-sent until that host acknowledges it. A bolt's input ends
//     when every producer task has ended (what they sent before is executed first);
//     an acker stops when every spout and bolt task has ended.
//   - Each engine has a host endpoint (transport.Host) for what concerns the engine
//     rather than one task: ends, Stop and its deadline (told to every other host),
//     ClusterStats (each host answers with its tasks' counters and histograms),
//     and the lineage of failed trees (tree-ended notices to every host, holder
//     reports back to the spout's host).
//
// A transport may lose, duplicate or reorder messages: a lost tuple or ack makes its
// tree time out and replay, a lost grant or end is re-sent, a duplicate is dropped.
// WithSerialization sends every message through the codec in one process too (the
// tests run so), so a value that could not cross a process fails in a test.
//
// # What a tuple costs
//
// An emit routes the values (grouping; fields grouping hashes the values' encoding,
// codec.FieldsHash, so a key goes to the same task in every process), makes one tuple
// per target task with a fresh random edge id per anchor, and appends it to that
// edge's batch; a full batch (or the end of the input batch, or of a round of
// NextTuple calls, or the flush interval) is sent. An ack appends one message for the
// acker of each of the tuple's roots (root id modulo the number of ackers),
// coalescing consecutive acks of one tree; acker messages are flushed before data.
//
// # Concurrency rules
//
// A bolt's OutputCollector may be called from any goroutine. A tuple's tracking state
// (its acked or failed status and the XOR of its children's edges) belongs to the task
// that received it and is guarded by that task's collector mutex; that is why only the
// receiving task may ack, fail or anchor to a tuple. A BasicCollector is valid only
// during its Execute. Misuse is counted per component and kind (the Misuse* names),
// logged as a warning (below), and returned as topology.ErrMisuse.
//
// # Warnings
//
// A wrong topology is logged at WARN on Config.Logger (slog.Default() unless set):
// an emit refused (an undeclared stream, values not matching the declared fields, a
// direct emit mismatch, a value the codec cannot encode), each kind of misuse, an
// error a BasicBolt returns (its input is failed), and a spout's trees failing or
// timing out at more than 10 a second over 10 s, with their reasons and, with
// WithLineage, the components that failed them or hold the timed-out ones. Each
// component and kind is logged at most once per 10 s (on the engine's clock): the
// first error of those 10 s in full, and the number not logged since the line before
// (more_since_last_warning); those not logged when the tasks exit are counted in a
// last line then. A line about trees counts those of its 10 s, by reason.
//
// # Timeouts
//
// Each spout task keeps its trees in flight in a rotating map of 5 buckets turned
// every MessageTimeout/4, so a tree times out between 1 and 1.25 timeouts after its
// emit (later, never earlier, if the spout task itself was stalled); the acker's buckets keep entries one rotation longer, then drop them silently
// (counted as expired, or as orphans if no init ever came). An outcome that reaches the
// spout after its tree timed out is ignored and counted (LateOutcomes).
//
// # Shutdown, and which context governs what
//
// Start's context is handed to every Open and Prepare: a task uses it for its own
// I/O (a sink's transactions), and its end is a hard stop. Cancelling it (a signal
// context; docs/repair.md, "A stop charges nothing") stops NextTuple calls and cuts
// blocked sends at once; the trees in flight are abandoned, never failed: a failure a bolt reports
// because its context was cancelled ("context canceled" from a transaction) is the
// stop's doing, so the spout is not told (the spout reads the context itself, so
// such a failure cannot reach it first). Their spouts replay them on the next run.
//
// Stop's context bounds a graceful stop (Config.ShutdownTimeout if it has no
// deadline). Stop stops NextTuple calls (Storm's deactivate) on every host and tells
// every bolt that implements topology.Drainer to write what it holds each time its
// queue runs empty, then waits until every spout's pending trees are acked, failed or
// timed out; meanwhile failures are real and delivered. Then the edges end in
// topological order: a bolt's input ends when its last producer has ended its edge,
// the bolt executes what is left (a Drainer once more), calls Cleanup and exits;
// ackers stop last.
// At Stop's deadline the trees still pending are abandoned, as at a hard stop: from
// then on nothing is delivered as Fail or timed out. Abandoned trees are counted
// (Abandoned) and get neither Ack nor Fail, so a stop never charges a spout's
// source for work it interrupted; a process that dies does not get that far, and
// its spout's source decides at the next start (the ingest spout charges one
// attempt).
//
// # Flushing
//
// Besides full batches and batch ends, a flusher goroutine sends every
// Config.FlushInterval (10 ms) the partial batches and acker messages of each task
// not inside its emitter at that moment, so a slow NextTuple or Execute does not hold
// back what it emitted or acked (Storm 2's flush tuple). It never blocks: a batch
// refused by a full queue leaves with the task's next send.
package engine
