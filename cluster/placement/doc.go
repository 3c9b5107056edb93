// Package placement is the cluster scheduler's placement logic: where each task of a
// topology runs. It is a pure function, in the style of etcd-io/raft: inputs in,
// decision out, no goroutines, no clock, no randomness, no I/O. The scheduler (one
// at a time, elected through a JetStream KV lease) reads the live workers from the
// heartbeat bucket and the assignments from theirs, calls Place for each topology,
// and writes back what changed with a compare-and-set.
//
// # The model
//
// A worker (gale worker --slots K) has K slots; a topology takes one slot on each
// worker it uses, however many of its tasks run there, as a Storm worker slot runs
// one topology's worker process. Worker.Runs says which topologies hold its slots;
// Occupy derives it from the assignments. A topology is its tasks, each an id and a
// component (spouts, bolts and ackers alike, numbered as engine.TaskIDs does), and
// optional pins: task -> worker name. A dedicated worker takes only the tasks
// pinned to it, as a Kubernetes node tainted NoSchedule: gale serve joins so, and
// keeps its log spout and SQLite sink while the bolts run on the other workers.
//
// An Assignment is the decision: the topology, a generation, the wanted number of
// workers (Want), the chosen workers and every task's worker. Place returns it with
// the tasks that moved (from -> to), whether it changed, and how many workers it is
// short. A refusal is a typed error: *InputError (ErrInvalid, ErrEmptyTopology,
// ErrDuplicateTask, ErrPinsExceedWant), ErrNoWorkers, *SlotsError (ErrNoFreeSlots:
// how many are asked, which workers have a slot and which are full, with what) and
// *PinError (ErrWorkerNotLive, ErrNoFreeSlots). On a refusal the scheduler keeps
// the current assignment.
//
// # The rules
//
//   - Deterministic: the same Input gives the same Result whatever the order of its
//     slices; ties are broken by worker name, then task id.
//   - Generation: 1 for a new topology; the same when nothing moves (Changed is
//     false and nothing needs writing); one more when any task changes worker.
//     Frames carry it and receivers drop older ones, so a worker that comes back
//     after it was replaced is fenced off.
//   - How many workers: Want non-dedicated ones, but no more than can each hold a
//     task (one task each when Want exceeds them; a worker with nothing would hold
//     a slot for nothing); pinned workers count towards Want, dedicated ones do not.
//     A submit (no Current) or a rebalance (a new Want) with fewer live workers
//     having a slot is refused with a *SlotsError. The scheduler's pass after a
//     membership change (Want 0 or Current's) places the topology short instead
//     (Result.Short), over the workers it can get, and the next pass fills the gap
//     once a worker with a free slot is live: a lost worker's tasks go to a live
//     worker with a free slot when there is one, else they spread over the others.
//   - Which workers: those pinned to; then those already running the topology
//     (most tasks first, so a rebalance to fewer workers drops those with the
//     fewest); then workers whose Runs list it; then the most free slots; then by
//     name. A worker already running the topology keeps it while it is wanted.
//   - Fewer slots: a worker that comes back with fewer slots than the topologies
//     it runs (gale worker --slots 0 drains it) keeps the first of them by name,
//     as many as it has slots. The others lose their slot there, as if the worker
//     were lost to them: the next pass moves their tasks, and only those, to
//     workers with a free slot, or places them short, or, with no slot anywhere,
//     is refused and the scheduler keeps them where they are. Each topology is
//     placed alone and its name is what every pass sees alike, so the passes
//     agree which keep their slot, whatever order they run in.
//   - Evenness, over the non-dedicated chosen workers: tasks per worker differ by
//     at most one, and so do each component's tasks (a deal, as engine.Spread does
//     it, when nothing is placed yet). Pins can prevent it: then no worker holding
//     a task that is not pinned has more than one task over the emptiest, and no
//     such task could move (alone, or swapped for another) to a worker with two
//     fewer of its component while keeping that.
//   - Fewest moves: a task whose worker is live and still chosen stays unless
//     evenness needs the move. Place works on counts (tasks of each component on
//     each worker): it places the tasks without a worker, evens the totals, then
//     the components, then cancels needless moves (cycles and paths of workers
//     passing tasks on, found with Bellman-Ford; see fewerMoves). Without pins no
//     even placement on the chosen workers moves fewer tasks: it is the optimality
//     condition of the min-cost flow the problem is, and the tests check it
//     against every placement of small topologies. Tasks are then bound to the
//     counts, each worker keeping its own lowest-numbered ones.
//
// Check verifies the invariants of an assignment (every task placed exactly once,
// on a chosen live worker with a slot, pins honoured, dedicated workers holding
// pinned tasks only, the spread above); the tests run it after every step.
//
// # Cost
//
// Placing 10,000 tasks on 100 workers takes a few milliseconds (BenchmarkPlace):
// the work is linear in the tasks, plus the counts (workers times components) for
// the evening and, per cancelled cycle, a Bellman-Ford over the workers.
package placement
