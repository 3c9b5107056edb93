// Package transport moves tuples and acker messages between tasks.
//
// The runtime talks to tasks only through a Transport, so that a later transport can
// place tasks in other processes (over NATS) without touching the acker ledger, the
// runtime's executors or the user API. Two lanes exist per task:
//
//   - tuples: a bounded queue of batches; a full queue blocks the sender
//     (backpressure), so data can never outrun a slow consumer;
//   - control: acker messages (to acker tasks) and outcomes (to spout tasks); this lane
//     never blocks a sender, so acks can never deadlock behind data (STORM-3637,
//     STORM-3314). Its size is bounded by the tuples in flight, which the data lane and
//     max spout pending bound.
//
// A transport may lose messages (a remote one will, when a process dies): reliability
// comes from the acker, whose trees then time out and are replayed.
package transport

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/gale-stream/gale/acker"
	"github.com/gale-stream/gale/tuple"
)

// Transport delivers batches to tasks by global task id.
type Transport interface {
	// Register creates the receiving end of a task with room for capacity batches of
	// tuples. Every task is registered before anything is sent.
	Register(task, capacity int) (Inbox, error)
	// SendTuples delivers a batch of tuples to a task, blocking while its queue is full,
	// until ctx is done (then it returns ctx's error). The batch belongs to the
	// transport afterwards.
	SendTuples(ctx context.Context, task int, batch []*tuple.Tuple) error
	// TrySendTuples delivers the batch only if the task's queue has room now, and
	// reports whether it did; the runtime measures backpressure as the time spent in
	// SendTuples after a refused TrySendTuples.
	TrySendTuples(task int, batch []*tuple.Tuple) bool
	// SendAcks delivers acker messages to an acker task. It never blocks.
	SendAcks(task int, msgs []acker.Msg) error
	// SendOutcomes delivers tree outcomes to a spout task. It never blocks.
	SendOutcomes(task int, outs []acker.Outcome) error
	// CloseTuples says no more tuples will be sent to task: its Tuples channel closes
	// once drained.
	CloseTuples(task int)
	// Local reports whether task runs in this process (for local-or-shuffle grouping).
	Local(task int) bool
}

// Inbox is the receiving end of one task.
type Inbox interface {
	// Tuples yields batches of tuples; it is closed after CloseTuples.
	Tuples() <-chan []*tuple.Tuple
	// Signal receives a value when control messages may be waiting.
	Signal() <-chan struct{}
	// TakeAcks returns the waiting acker messages and keeps dst's storage for the
	// next ones (pass back the slice the previous call returned: no allocation).
	TakeAcks(dst []acker.Msg) []acker.Msg
	// TakeOutcomes is TakeAcks for outcomes.
	TakeOutcomes(dst []acker.Outcome) []acker.Outcome
}

// ErrUnknownTask is returned for a task id that was never registered.
var ErrUnknownTask = errors.New("transport: unknown task")

// Local is the in-process transport: Go channels for tuples, mutex-guarded slices for
// control. Its zero value is ready to use.
type Local struct {
	mu    sync.RWMutex
	tasks map[int]*localInbox
}

// NewLocal returns an in-process transport.
func NewLocal() *Local { return &Local{tasks: map[int]*localInbox{}} }

type localInbox struct {
	tuples   chan []*tuple.Tuple
	signal   chan struct{}
	mu       sync.Mutex
	acks     []acker.Msg
	outcomes []acker.Outcome
	closed   sync.Once
}

// Register implements Transport.
func (l *Local) Register(task, capacity int) (Inbox, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.tasks == nil {
		l.tasks = map[int]*localInbox{}
	}
	if l.tasks[task] != nil {
		return nil, fmt.Errorf("transport: task %d registered twice", task)
	}
	in := &localInbox{tuples: make(chan []*tuple.Tuple, max(capacity, 1)), signal: make(chan struct{}, 1)}
	l.tasks[task] = in
	return in, nil
}

func (l *Local) inbox(task int) (*localInbox, error) {
	l.mu.RLock()
	in := l.tasks[task]
	l.mu.RUnlock()
	if in == nil {
		return nil, fmt.Errorf("%w %d", ErrUnknownTask, task)
	}
	return in, nil
}

// SendTuples implements Transport.
func (l *Local) SendTuples(ctx context.Context, task int, batch []*tuple.Tuple) error {
	in, err := l.inbox(task)
	if err != nil {
		return err
	}
	select {
	case in.tuples <- batch:
		return nil
	default:
	}
	select {
	case in.tuples <- batch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// TrySendTuples implements Transport.
func (l *Local) TrySendTuples(task int, batch []*tuple.Tuple) bool {
	in, err := l.inbox(task)
	if err != nil {
		return false // SendTuples reports the unknown task
	}
	select {
	case in.tuples <- batch:
		return true
	default:
		return false
	}
}

// SendAcks implements Transport.
func (l *Local) SendAcks(task int, msgs []acker.Msg) error {
	in, err := l.inbox(task)
	if err != nil {
		return err
	}
	in.mu.Lock()
	in.acks = append(in.acks, msgs...)
	in.mu.Unlock()
	in.wake()
	return nil
}

// SendOutcomes implements Transport.
func (l *Local) SendOutcomes(task int, outs []acker.Outcome) error {
	in, err := l.inbox(task)
	if err != nil {
		return err
	}
	in.mu.Lock()
	in.outcomes = append(in.outcomes, outs...)
	in.mu.Unlock()
	in.wake()
	return nil
}

// CloseTuples implements Transport.
func (l *Local) CloseTuples(task int) {
	if in, err := l.inbox(task); err == nil {
		in.closed.Do(func() { close(in.tuples) })
	}
}

// Local implements Transport: every task of a Local transport is local.
func (l *Local) Local(task int) bool { return true }

func (in *localInbox) wake() {
	select {
	case in.signal <- struct{}{}:
	default:
	}
}

func (in *localInbox) Tuples() <-chan []*tuple.Tuple { return in.tuples }
func (in *localInbox) Signal() <-chan struct{}       { return in.signal }

func (in *localInbox) TakeAcks(dst []acker.Msg) []acker.Msg {
	in.mu.Lock()
	got := in.acks
	in.acks = dst[:0]
	in.mu.Unlock()
	return got
}

func (in *localInbox) TakeOutcomes(dst []acker.Outcome) []acker.Outcome {
	in.mu.Lock()
	got := in.outcomes
	in.outcomes = dst[:0]
	in.mu.Unlock()
	return got
}
