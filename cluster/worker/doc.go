// Package worker is what `gale worker` runs: a process that joins a gale cluster on
// NATS and runs its part of every topology the cluster's scheduler assigns it, as a
// Storm supervisor runs its worker processes.
//
// # Joining
//
// A Worker keeps a heartbeat in the cluster's workers bucket (cluster.Heartbeat),
// stands for scheduler (cluster.Scheduler: one holds the lease, any other takes
// over), and watches the assignments bucket (Store.WatchRecords). Its heartbeat
// says which generation of each topology it runs (WorkerInfo.Running) and which
// topologies it refuses and why (WorkerInfo.Refused).
//
// # Running a generation
//
// For each topology a runner goroutine takes the newest record (older ones it has
// not got to are skipped) and makes what runs match it. If the record's assignment
// names this worker, the runner builds the topology from the Registry with the
// submitted arguments, compares its fingerprint with the submitter's
// (cluster.Check; a mismatch, or a topology missing from the build, is a refusal:
// the scheduler places it elsewhere), and starts an engine for its tasks
// (cluster.EngineAssignment) on a natstransport whose subjects carry the topology
// and the generation (SubjectPrefix), with local delivery between its own tasks.
// A worker left on an older generation, cut off or paused past its heartbeat,
// publishes where nobody of the newer generation listens, and hears nothing of
// it: fencing by subject. A failed start (not a refusal) is tried again after
// Config.RetryStart.
//
// # Stopping a generation
//
// A newer generation, a kill, a deactivate, or the assignment no longer naming
// this worker stops what runs, in one of two ways:
//
//   - Planned (every worker of the running generation is live, and this worker
//     was not declared lost since it started it): a kill, deactivate or
//     rebalance, or a worker joining. A drain, bounded by Config.StopTimeout:
//     the engine's Stop tells every other host of the generation, so they all
//     drain together (spouts stop, trees in flight complete, then the tasks
//     close), and nothing is replayed.
//   - Otherwise (the scheduler moved tasks off a lost worker, or this worker is
//     the one that was lost and is back): at once. The lost worker's trees cannot
//     complete, so the generation is cut off and the trees in flight abandoned,
//     never failed; the spouts of the next generation replay them from their
//     durable source (word count: the committed offsets).
//
// An engine that ends by itself (another host drained it) is not started again
// until a newer record says so. When its context ends, a Worker drains what it
// runs and then deletes its heartbeat, so the scheduler moves its tasks only once
// they have stopped.
//
// # The web UI
//
// UI is `gale worker --ui`: package ui's page for each topology the worker runs,
// following its generations through Config.OnStart and OnStop (Hook), with the
// cluster's section (the workers, the scheduler, each task's worker, read from the
// Store) and, with a token, Storm's actions, which it asks of the scheduler.
//
// Restarting a dead worker process is not the worker's job: systemd, Kubernetes
// or a shell loop does that, as Storm's supervisor restarts its workers.
package worker
