// Package engine runs a topology's tasks (Storm's local mode, and gale's
// default): Start builds every task, Stop drains and closes them, Stats reads exact
// counters.
//
// # Tasks and goroutines
//
// Every spout and bolt task runs on one goroutine of its own, so user code needs no
// locks; every acker task runs one more around a pure acker.Ledger. Task ids are global
// (spouts and bolts from 1 in declaration order, then ackers) and are all a task needs
// to reach another through the transport.Transport, in-process by default: the
// executors never assume that a task lives in this process.
//
// # What a tuple costs
//
// An emit routes the values (grouping), makes one tuple per target task with a fresh
// random edge id per anchor, and appends it to that target's batch; a full batch (or
// the end of the input batch, or of a round of NextTuple calls, or the flush interval)
// is sent on the target's bounded queue. An ack appends one message for the acker of each of the tuple's roots
// (root id modulo the number of ackers), coalescing consecutive acks of one tree.
// Acker messages travel on a control lane that never blocks, and are flushed before
// data, so acks cannot deadlock behind tuples (STORM-3637, STORM-3314).
//
// # Concurrency rules
//
// A bolt's OutputCollector may be called from any goroutine. A tuple's tracking state
// (its acked or failed status and the XOR of its children's edges) belongs to the task
// that received it and is guarded by that task's collector mutex; that is why only the
// receiving task may ack, fail or anchor to a tuple. A BasicCollector is valid only
// during its Execute. Misuse is counted per component and kind (the Misuse* names),
// logged once per task and kind, and returned as topology.ErrMisuse.
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
// I/O (a sink's transactions), and its end is a hard stop. Cancelling it (the
// README's signal-context pattern) stops NextTuple calls and cuts blocked sends at
// once; the trees in flight are abandoned, never failed: a failure a bolt reports
// because its context was cancelled ("context canceled" from a transaction) is the
// stop's doing, so the spout is not told (the spout reads the context itself, so
// such a failure cannot reach it first). Their spouts replay them on the next run.
//
// Stop's context bounds a graceful stop (Config.ShutdownTimeout if it has no
// deadline). Stop stops NextTuple calls (Storm's deactivate) and tells every bolt
// that implements topology.Drainer to write what it holds each time its queue runs
// empty, then waits until every spout's pending trees are acked, failed or timed
// out; meanwhile failures are real and delivered. Then the task queues close in
// topological order: a bolt's queue closes when its last producer has exited, the
// bolt drains it (a Drainer once more), calls Cleanup and exits; ackers stop last.
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
