// Package cluster runs one topology across gale processes (workers) on NATS, as
// Storm runs one across supervisors and workers, without a home-made membership or
// consensus: NATS carries the frames and JetStream's key-value store holds the
// cluster's state.
//
// # Fingerprints
//
// Go cannot ship code the way Storm ships a jar: a topology is Go code compiled into
// each binary and registered by name. Before a worker runs its part of a submitted
// topology it compares fingerprints (FingerprintOf, Check): the shape (components,
// streams, fields, groupings, parallelism, and the config both ends of an edge or an
// acker must share) and the codec version must be equal, or the worker refuses and
// says which differs. The build's module version is shown beside them, not compared,
// so a rolling upgrade of unrelated code does not stop a topology.
//
// # Placement
//
// Which worker runs which task is decided by package cluster/placement, a pure
// function of the live workers, the topology and the current assignment.
//
// # State: four KV buckets
//
// Open binds (creating them if missing) four buckets named after Config.Prefix, so
// several clusters or tests share one NATS server, each with Config.Replicas copies
// (1 on one node, 3 on a three-node cluster):
//
//	Prefix-workers      key = worker name  WorkerInfo (heartbeat)  TTL HeartbeatTTL (3 s)
//	Prefix-lease        key "scheduler"    Lease                   TTL LeaseTTL (3 s)
//	Prefix-topologies   key = topology     Spec (the request)      no TTL
//	Prefix-assignments  key = topology     Record (the answer)     no TTL
//	                    key "_fence"       the scheduler term writing it
//
// The TTLs are the buckets' (the server's MaxAge, on the server's clock), with
// expiry markers, so a watch sees an expiry as a delete. Members that ask for other
// TTLs or replicas than the buckets have are refused; those that say nothing take
// the buckets'.
//
// # Membership
//
// A worker's Heartbeat writes its WorkerInfo (name, host, pid, start, slots,
// dedicated, the topologies it runs, its build's module version, an incarnation id)
// at once and every HeartbeatTTL/3: Create, then Update on its own last revision,
// so a second live worker of the same name is refused (ErrNameInUse) rather than
// beating over the first. A worker silent for a TTL (dead, paused, cut off) is
// removed by the server; when it beats again it finds its key gone and creates it
// anew (Rejoins counts it). A graceful stop deletes the key: gone at once. Workers
// lists the live workers; WatchWorkers streams Joined, Beat, Changed and Left.
// Joined closes at the first write: a worker takes no work before it holds its
// name. The heartbeat also says which generation of each topology the worker runs
// (Running: a move is over when every worker of the new generation says so) and
// which topologies it refuses and why (Refused: its build lacks one, or has another
// fingerprint); the scheduler places a topology only on workers that do not refuse
// it as submitted, and names the refusals when none is left.
//
// # Requests and answers
//
// Submit, Rebalance, Kill, Deactivate and Activate write the topology's Spec in
// Prefix-topologies (Create for a submit, else Update on its revision) and wait for
// the Record whose Spec field reaches the revision they wrote. Requests are KV
// entries rather than messages on a request subject: they hold the desired state,
// so they survive a scheduler's death and are read by the next one; a pass reads
// the whole state, so a notification lost or repeated changes nothing; and the
// record answering a request names it. A refused submit, or one no scheduler
// answered in time, is withdrawn (its spec marked killed) and a refused rebalance
// put back, so nothing is left pending;
// the refusal is the scheduler's placement error, kept in the record's Error for
// `gale cluster status` (Status).
//
// # The scheduler: a lease
//
// Every worker runs a Scheduler candidate. The one that creates the lease key
// (Create fails while it exists) is the scheduler; it renews the lease every
// LeaseTTL/3 with an Update on its revision, and stops writing if a renewal is
// refused or if, by its own clock, LeaseTTL has passed since the last renewal it
// sent. The others watch the key and try again as soon as it is gone (expired or
// released) and every LeaseTTL/2. A scheduler that stops gracefully deletes the
// lease, so another takes over at once; one that dies or is paused is replaced
// LeaseTTL after its last renewal.
//
// # Fencing
//
// A compare-and-set on the record's key is not enough: a scheduler paused past its
// lease (SIGSTOP, a GC pause, a slow network) and its successor can both read a
// record at revision r; if the successor has nothing to change there, the stale
// one's write on r would succeed, with a decision made on a stale view. So every
// write into Prefix-assignments is conditional on two things at once (the
// Nats-Expected-Last-Sequence and Nats-Expected-Last-Subject-Sequence headers, both
// checked by the stream leader under Raft): the key's revision, and the bucket's
// last sequence being the one the writer's term left it at. A term starts by
// writing the "_fence" key with its epoch, the lease revision it holds, by a
// compare-and-set on the fence and only if the fence holds an older epoch; every
// later write of the term chains on the sequence of the one before. A successor's
// fence moves the bucket, so each write of the stale term after it is refused
// (ErrFenced: the fence names the newer term), whatever revision it carries, and
// the stale term ends. Only terms write to this bucket, so nothing else moves it.
// Workers never trust a stale scheduler anyway: assignments carry a generation,
// and frames of an older one are dropped.
//
// # A pass
//
// The scheduler watches the workers and topologies buckets and passes after every
// membership change (a join, a leave or expiry, other slots; not a mere beat) and
// every request, a burst of changes making one pass. A pass takes the topologies in
// name order; for each it calls placement.Place with the live workers, their slots
// occupied (placement.Occupy) by the other topologies' assignments (the ones placed
// earlier in the pass included), the current assignment, and Want: the spec's for a
// submit or a rebalance (refused if it cannot be met), 0 otherwise (placed short if
// it must, filled later). It writes a record only when something in it changed: a
// new generation, an error, a flag. On a placement error it keeps the old
// assignment and records the error. A killed topology keeps its last assignment,
// marked killed, so its workers know what to stop; submitted again, it goes on
// from that generation. If the workers watch falls silent for a TTL while workers
// are live (its JetStream node went down and nats.go has not noticed yet), the
// watches are made again and the view rebuilt from them.
//
// # Detection time
//
// A worker lost at time d last beat at some b > d - HeartbeatTTL/3; the server
// removes its key at b + HeartbeatTTL plus its expiry check (up to a few hundred
// milliseconds), the scheduler sees the marker and passes (a millisecond or two in
// the tests). So its tasks are reassigned within HeartbeatTTL + expiry check + pass
// of its death: about 3.2 s with the defaults. If the scheduler's own worker dies,
// its successor is elected LeaseTTL after the last renewal, and its first pass
// sees the membership then: max(HeartbeatTTL, LeaseTTL) + pass. The tests measure
// these (go test -v ./cluster/ -run 'Reassigns|Takeover'): the lost worker's key
// expires 1.1-1.2 s after its last beat with a TTL of 1 s, and the reassignment is
// written 1-2 ms later; a paused scheduler's lease is taken over 1.0-1.3 s after
// its last renewal.
//
// # Mapping to the engine
//
// Placement names workers; engine.Assignment numbers hosts from 1. EngineAssignment
// gives worker w the host number of its index in the generation's (sorted) Workers
// plus one, the same on every worker of that generation. TasksOf lists a topology's
// tasks as engine.TaskIDs numbers them, ackers under component AckerComponent.
package cluster
