// Package lineage records tuple trees so that an operator can see what happened to a
// message: every tuple of a tree (which task emitted it, to which task, when, anchored
// to which parents, and who acked or failed it), and for a stuck tree the tuples still
// pending with the task holding each and for how long.
//
// Storm shows counts and leaves the rest to grepping worker logs for message ids
// (seed 000 §4.2); its event logger samples emits but not acks. gale records:
//
//   - the whole tree of a sample of roots (Config.Sample, default 1%). The decision is
//     root < threshold on the random 64-bit root id, so every task agrees on it with
//     no coordination and an unsampled tuple costs one comparison;
//   - for every tree that fails, the fail point (task, input, reason), whether sampled
//     or not;
//   - for every tree that times out, the tuples that tasks still hold (received but
//     neither acked nor failed), reported by the holding tasks themselves.
//
// Memory is bounded: at most MaxTrees sampled trees and MaxTrees failed or timed-out
// trees are kept (oldest dropped first), each with at most MaxNodes tuples, message ids
// and reasons cut to MaxIDBytes and MaxReasonBytes. Reports about trees no longer kept
// are dropped, so they cannot push kept trees out.
//
// The Recorder is a passive store in the etcd-io/raft style: times come in as
// arguments, it reads no clock and starts no goroutine. The runtime feeds it
// (engine.WithLineage) and the ui package reads it.
package lineage
