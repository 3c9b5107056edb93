// Package acker is the tuple-tree ledger: Storm's XOR acker as a pure state machine.
//
// Every tracked spout tuple roots a tuple tree named by a random 64-bit root id. Each
// tuple in the tree is joined to it by a random 64-bit edge id. The ledger keeps, per
// tree, one 64-bit value: the XOR of every edge id it has been told about. An edge is
// XORed in twice (once when the tuple is created, carried by the parent's ack or by the
// spout's init, and once when the tuple itself is acked), so the value is 0 exactly when
// every tuple of the tree has been acked; a false zero before that has probability 2^-64
// per message.
//
// Messages (Msg) arrive in any order: an ack or a fail may reach the ledger before the
// tree's init (R4 in the Storm reference), so a tree is reported only once its init,
// which names the spout task, has arrived. A fail fails the tree at once.
//
// Timeouts use rotating buckets, as Storm's RotatingMap: Rotate drops the oldest bucket;
// no per-tree timer exists. The spout owns the message timeout (it rotates its own
// pending map); the ledger's buckets only reclaim entries the spout has already given
// up on, and entries that never saw an init (orphans: late acks after a timeout, acks
// of trees whose init was lost). Both are counted.
//
// The ledger has no goroutines, reads no clock and does no I/O (the style of
// etcd-io/raft): time comes in as an argument in nanoseconds on any monotonic scale,
// and what to tell the spout comes back as an Outcome. The runtime wraps it in an acker
// task.
//
// Memory: one Go map entry per pending tree: an 8-byte key and a 16-byte value (XOR,
// start time in milliseconds, spout task and two flags), plus the map's control bytes
// and free slots; BenchmarkPendingTreeBytes measures the total per tree.
package acker
