package topology

import (
	"context"
	"errors"
	"log/slog"

	"github.com/gale-stream/gale/tuple"
)

// TaskContext tells a task where it runs. It is passed to Open and Prepare.
type TaskContext struct {
	Component   string // component id
	TaskID      int    // global task id (unique across the topology)
	TaskIndex   int    // 0-based index among the component's tasks
	Parallelism int    // number of tasks of the component
	// ComponentTasks returns the global task ids of a component, in order (for
	// EmitDirect); nil for an unknown component.
	ComponentTasks func(component string) []int
	// Logger carries component and task attributes.
	Logger *slog.Logger
	// Topology is the whole topology, read-only (Storm's TopologyContext: the
	// other components, their streams and groupings); nil outside the engine.
	Topology *Topology
	// Stopping is closed once a stop of the topology begins (Stop on any of its
	// hosts, or the end of Start's context), even while the task is inside Execute
	// (where no Drain can reach it); nil outside the engine.
	Stopping <-chan struct{}
}

// Spout is a source of tuples, as Storm's ISpout. Every method of one task runs on that
// task's own goroutine, so an implementation needs no locks for its own state.
type Spout interface {
	// Open is called once before any other method. ctx is the context given to
	// engine.Start: it lives as long as the topology, and its end is a hard stop.
	Open(ctx context.Context, tc TaskContext, out SpoutCollector) error
	// NextTuple emits zero or more tuples and returns at once; it must not block. It is
	// not called while the task has max spout pending trees in flight (the limit acts
	// between calls, as in Storm) or while the topology is shutting down.
	NextTuple()
	// Ack is called when the tuple tree rooted at an emit with this message id has
	// completed: every tuple of it was acked. Called between NextTuple calls.
	Ack(msgID any)
	// Fail is called when the tree failed: a bolt failed one of its tuples, or the
	// message timeout passed first. Called between NextTuple calls. The spout decides
	// whether to replay (emit again with the same message id). Never for a tree a stop
	// interrupted (the Open context cancelled, or Stop's deadline passed, even if a
	// bolt then failed it): such a tree gets neither Ack nor Fail, and is replayed by
	// whatever the spout reads at its next Open.
	Fail(msgID any)
	// Close is called once at shutdown, after every pending tree has been acked, failed
	// or timed out, or the shutdown deadline passed (or the Open context ended).
	Close() error
}

// TimeoutReason starts the reason a ReasonedSpout's FailReason gets when a tree's
// message timeout passed before it completed (the rest says after how long). Match
// it with strings.HasPrefix to tell a timeout from a bolt's failure.
const TimeoutReason = "message timeout"

// ReasonedSpout is a Spout that also wants to know why a tree failed. When a spout
// implements it, FailReason is called instead of Fail, with the reason the failing
// bolt gave (OutputCollector.FailWith, or the error a BasicBolt returned), "message
// timeout" when the timeout passed first, or "" when no reason was given.
type ReasonedSpout interface {
	Spout
	FailReason(msgID any, reason string)
}

// TimeoutResetSpout is a Spout that also wants to know when a bolt restarted the
// message timeout of one of its trees (OutputCollector.ResetTimeout): a spout whose
// source redelivers on its own timer extends that timer then (JetStream's
// InProgress), so a tree a bolt keeps alive is not redelivered under it. Called on
// the spout's goroutine, as Ack and Fail.
type TimeoutResetSpout interface {
	Spout
	TimeoutReset(msgID any)
}

// FiniteSpout is a Spout whose input ends: a file read to its end, a bounded
// batch. Storm has no such notion (a topology runs until it is killed); gale asks
// it so that a run over a bounded input can end by itself (gale run, engine's
// Runtime.Exhausted) once everything was processed.
//
// Exhausted reports that the spout has nothing more to emit, ever: every tuple it
// will emit was emitted, and it will replay nothing (every tree it emitted was
// acked, or it gave up on a failed one for good). The engine calls it on the
// task's goroutine, between NextTuple calls, only while the task has no tree in
// flight (so no Ack or Fail can follow); once it returns true the engine calls
// NextTuple no more, until the stop. A spout fed by something that may always
// send more (a log, a queue, a shell spout) does not implement it.
type FiniteSpout interface {
	Spout
	Exhausted() bool
}

// ActivatingSpout is a Spout that wants Storm's activate and deactivate calls.
// Activate is called once every host of the topology is up, before the first
// NextTuple; Deactivate once when a stop begins (NextTuple is called no more, while
// Ack and Fail still come for the trees that drain), and only after Activate. Both
// run on the task's goroutine. On a cluster, gale deactivate drains and stops the
// run (Deactivate, then Close) and gale activate starts a new one (Open, then
// Activate), so a spout sees each pair at most once per Open.
type ActivatingSpout interface {
	Spout
	Activate()
	Deactivate()
}

// SpoutCollector is how a spout emits. It is not safe for concurrent use: call it from
// Open, NextTuple, Ack and Fail only (as Storm's SpoutOutputCollector).
type SpoutCollector interface {
	// Emit emits values on the default stream. A non-nil msgID makes the tuple the root
	// of a tracked tuple tree: Ack or Fail will be called with msgID. A nil msgID emits
	// an untracked tuple with no callbacks. With no acker tasks, or when no task consumes
	// the stream, a tracked emit is acked at once (after NextTuple returns).
	Emit(values tuple.Values, msgID any) error
	// EmitTo is Emit on a named stream.
	EmitTo(stream string, values tuple.Values, msgID any) error
	// EmitDirect emits to one task of a component subscribed to stream with direct
	// grouping; the stream must be declared direct.
	EmitDirect(task int, stream string, values tuple.Values, msgID any) error
	// ReportError records an error for the component (logged and counted); it fails
	// nothing by itself.
	ReportError(err error)
	// Pending is the number of this task's trees in flight.
	Pending() int
}

// Bolt processes tuples, as Storm's IRichBolt. Execute runs on the task's own goroutine;
// the bolt must ack or fail every input it receives, now or later.
type Bolt interface {
	// Prepare is called once before any Execute. ctx is the context given to
	// engine.Start: use it for the bolt's own I/O. When it ends the topology stops at
	// once; whatever the bolt then acks or fails is not delivered to the spouts as a
	// failure (see Spout.Fail).
	Prepare(ctx context.Context, tc TaskContext, out OutputCollector) error
	// Execute processes one input. A panic is recovered: it is reported, the input is
	// failed if it was not yet acked or failed, and the task goes on.
	Execute(input *tuple.Tuple)
	Cleanup() error
}

// OutputCollector is how a bolt emits, acks and fails. Unlike Storm's (STORM-2231), it
// is safe for concurrent use: acks may come from other goroutines (async bolts).
//
// Anchors put the emitted tuple in every tuple tree of every anchor: the trees complete
// only after it is acked too. No anchors emits an untracked tuple (its failure replays
// nothing, as Storm). Anchoring to a tuple that was already acked or failed is misuse:
// that anchor is ignored (the tree stays correct), counted and logged, and the emit
// returns an error wrapping ErrMisuse.
type OutputCollector interface {
	Emit(values tuple.Values, anchors ...*tuple.Tuple) error
	EmitTo(stream string, values tuple.Values, anchors ...*tuple.Tuple) error
	EmitDirect(task int, stream string, values tuple.Values, anchors ...*tuple.Tuple) error
	// Ack marks the input done. Acking twice, after Fail, or in a task that did not
	// receive the tuple is misuse: ignored, counted, logged, and the error wraps ErrMisuse.
	Ack(input *tuple.Tuple) error
	// Fail fails every tree the input belongs to at once (the spout's Fail follows
	// without waiting for the timeout). Misuse as for Ack.
	Fail(input *tuple.Tuple) error
	// FailWith is Fail with the reason, passed to a ReasonedSpout (dead letters keep
	// it). Only the first reason of a tree reaches the spout.
	FailWith(input *tuple.Tuple, reason error) error
	// ResetTimeout restarts the message timeout of every tree the input belongs to, in
	// the acker and in the spout (STORM-1549). Use it sparingly for slow inputs.
	ResetTimeout(input *tuple.Tuple) error
	ReportError(err error)
}

// Drainer is a Bolt that holds inputs across Execute calls (a batching
// sink). During a stop the runtime calls Drain on the task's goroutine when
// the task's input queue is empty, so held inputs are written and acked.
type Drainer interface{ Drain() }

// BasicBolt is the auto-acking form, as Storm's IBasicBolt: every emit is anchored to
// the input, the input is acked when Execute returns nil and failed when it returns an
// error. A panic fails the input and is reported; the task goes on (Storm would kill
// the worker). Keep Execute synchronous: the input is acked when it returns.
type BasicBolt interface {
	Prepare(ctx context.Context, tc TaskContext) error
	Execute(input *tuple.Tuple, out BasicCollector) error
	Cleanup() error
}

// BasicCollector emits anchored to the current input. It is valid only during the
// Execute call it was passed to.
type BasicCollector interface {
	Emit(values tuple.Values) error
	EmitTo(stream string, values tuple.Values) error
	EmitDirect(task int, stream string, values tuple.Values) error
	ResetTimeout() error
	ReportError(err error)
}

// Errors returned by collectors; match them with errors.Is.
var (
	// ErrMisuse marks API misuse that was ignored: double ack or fail, ack after fail,
	// anchoring to a finished tuple, acking in a task that did not receive the tuple.
	ErrMisuse = errors.New("gale: misuse")
	// ErrUnknownStream: the component did not declare the stream.
	ErrUnknownStream = errors.New("gale: undeclared stream")
	// ErrDirect: a direct stream needs EmitDirect, and EmitDirect needs a direct
	// stream and a task that consumes it.
	ErrDirect = errors.New("gale: direct emit mismatch")
	// ErrFieldCount: the values do not match the stream's declared fields.
	ErrFieldCount = errors.New("gale: values do not match declared fields")
	// ErrStopped: the task has shut down; nothing was emitted.
	ErrStopped = errors.New("gale: task stopped")
)

// TaskEmitter is implemented by the engine's OutputCollector: EmitTasks is EmitTo that
// also returns the tasks the tuple was sent to, one per copy, in routing order (a
// shell bolt's subprocess asks for them: Storm's multilang task ids). Nil with an
// error when the emit was refused.
type TaskEmitter interface {
	EmitTasks(stream string, values tuple.Values, anchors ...*tuple.Tuple) ([]int, error)
}

// SpoutTaskEmitter is TaskEmitter for the engine's SpoutCollector.
type SpoutTaskEmitter interface {
	EmitTasks(stream string, values tuple.Values, msgID any) ([]int, error)
}
