// Package transporttest is the conformance suite of gale's transports, and a
// transport that breaks another on purpose (Faulty) to run it on.
//
// # The suite
//
// TestTransport runs a set of subtests, in the manner of watermill's
// tests.TestPubSub, on transports a Constructor makes (a new one per subtest; the
// subtests run in parallel). Each reads the transport's Features and checks every
// promise made, and tolerates what is not promised:
//
//   - EveryKind: a message of every Kind, every field set, arrives intact (tuples
//     compared by stream, fields, source and destination task, values, roots and edge
//     ids, not by pointer); Serializing: nothing is shared with the sender.
//   - TuplesCount: Inbox.Tuples counts waiting tuples (Lossless, NoDuplicates).
//   - UnknownEndpoint: Send fails wrapping ErrUnknownEndpoint, counted in Stats
//     with LastError set. RegisterTwice: an endpoint has one Inbox.
//   - Ordered, NoDuplicates, Lossless: a burst on two links, each lane checked for
//     the promise (skipped when not promised).
//   - ControlNotBehindData: with a thousand batches waiting untaken, a control
//     message is handed out by TakeControl, and the data is still there
//     (STORM-3637).
//   - FanIn (eight producers, one slow consumer) and FanOut (one producer, eight
//     consumers, one executing nothing until the others have all their input):
//     flows driven by package flow as the engine drives them (credit, a probe every
//     tick while blocked, End re-sent until acknowledged, Dedupe on every link) all
//     end; no consumer holds more of an edge than its window, one batch and what
//     was in flight; no tuple is executed twice; Lossless: every tuple arrives.
//   - LossWhereAllowed: when not Lossless, flows with one-tuple windows still end.
//   - Shutdown: after Close, Send fails wrapping ErrClosed (counted) and Register
//     fails.
//
// Every wait is on an Inbox's Signal, bounded by Timeout, and a wait that runs out
// fails naming what was stuck and the state of every flow. Every goroutine the suite
// starts is stopped before its subtest returns. On a transport that is not Lossless
// the suite re-sends what it must see (every 2 ms); the flows rely on the
// protocol's own probes and re-sends.
//
// # Running it on a new transport
//
// A transport (NATS, say) declares its Features honestly and runs the suite from a
// test of its own package:
//
//	func TestNATS(t *testing.T) {
//		transporttest.TestTransport(t, "nats", func(t *testing.T) transport.Transport {
//			return newTestNATS(t) // a transport on a test server, its own subject prefix
//		})
//		transporttest.TestTransport(t, "nats-lossy", func(t *testing.T) transport.Transport {
//			return transporttest.NewFaulty(newTestNATS(t), transporttest.Drop(0.01))
//		})
//	}
//
// A transport whose endpoints live in several processes registers all of the suite's
// endpoints (tasks 1 to 3, 5, 101 to 108, hosts -1 to -3) in the one transport under
// test; its Serializing encoding must know the suite's streams: build it from
// Topology (codec.NewStreams(transporttest.Topology())).
//
// # Faulty
//
// NewFaulty wraps a transport and serialises (Serialize, with a clone function such
// as codec.Clone), drops (Drop), duplicates (Duplicate) and reorders (Reorder) a
// fraction of the messages, from a seeded generator (Seed). Its Features are the
// inner transport's less what it breaks. The suite runs on it to show that the
// protocol survives everything the contract allows a transport to do.
package transporttest
