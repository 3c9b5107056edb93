// Package topology is gale's public API for building a topology: spouts and bolts,
// their output streams, how each bolt subscribes to streams (groupings), and the
// configuration. It follows Apache Storm's model and keeps its semantics unless a
// docstring says otherwise.
//
// # The model
//
// A spout is a source: NextTuple emits tuples. A bolt processes tuples: Execute
// receives one input at a time and may emit new tuples. Each spout and bolt runs as a
// number of tasks (its parallelism); a factory builds each task's own instance, and
// every callback of a task runs on that task's goroutine, so user code needs no locks.
// Components emit on named streams whose fields are declared on the builder (the
// default stream is "default"). A grouping decides which task of a subscribing bolt
// receives each tuple: shuffle, fields (hash of named fields), all, global, direct,
// local-or-shuffle, none, or custom.
//
// A component embeds BaseSpout, BaseBolt or BaseBasicBolt (Storm's BaseRichSpout,
// BaseRichBolt and BaseBasicBolt) for the methods it leaves empty; Example_wordCount
// is a whole topology built so, and docs/topologies.md quotes it.
//
// # Reliable processing
//
// A spout emit with a message id roots a tuple tree. A bolt that emits with anchors
// adds the new tuple to every tree of every anchor; it must then ack or fail each
// input. When every tuple of a tree has been acked the spout's Ack(msgID) is called;
// when any is failed, or the message timeout passes first, Fail(msgID) is called and
// the spout decides whether to replay. Acker tasks track each tree with one 64-bit XOR
// of random edge ids (package acker). This gives at-least-once processing: a tree's
// tuples may be processed again after a replay, so sinks must make their effects
// idempotent (by event id, or by key and version) for an exactly-once result.
//
//	what you do                  what gale does
//	Emit(values, msgID)          tracked root: Ack or Fail later (nil msgID: untracked)
//	Emit(values, anchors...)     child joins every tree of every anchor (none: untracked)
//	Ack(input)                   the input's part of its trees is done
//	Fail(input)                  its trees fail now; the spout's Fail follows at once
//	ResetTimeout(input)          its trees' timeout clocks restart (acker and spout; a
//	                             TimeoutResetSpout is told)
//	MaxSpoutPending              no NextTuple call while that many trees are in flight
//	MessageTimeout               an unfinished tree fails between 1 and 1.25 timeouts
//
// # Stopping
//
// Two contexts govern a running topology. The one given to engine.Start is passed
// to every Open and Prepare, lives as long as the topology, and its end is a hard
// stop. The one given to runtime.Stop bounds a graceful stop: NextTuple calls stop,
// Drainer bolts write what they hold, and pending trees are waited for until its
// deadline. Either way a tree the stop cuts off is abandoned: the spout gets neither
// Ack nor Fail for it, so a stop never counts as the tree's failure.
//
// # Beyond Storm
//
// The bolt collector is safe for concurrent use (Storm's is not: STORM-2231), so async
// bolts may ack from their own goroutines. Misuse is reported, never silently absorbed:
// a double ack or fail, an ack after a fail, anchoring to a finished tuple (R3) or
// acking in a task that did not receive the tuple is ignored for the tree, counted,
// logged (at most once per component and kind per 10 s) and returned as ErrMisuse. A panic in a bolt fails the input and is
// reported; the task goes on. Cycles, which can deadlock under backpressure
// (STORM-3637), and timeouts disabled together with max spout pending (STORM-3514)
// are refused when the topology is built and configured.
package topology
