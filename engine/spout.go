package engine

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"reflect"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gale-stream/gale/acker"
	"github.com/gale-stream/gale/lineage"
	"github.com/gale-stream/gale/topology"
	"github.com/gale-stream/gale/tuple"
)

// spoutExec runs one spout task. Its collector methods run on the task goroutine.
type spoutExec struct {
	e     *emitter
	rt    *Runtime
	spout topology.Spout
	ep    *endpoint
	// state is the trees in flight, their timeouts and max spout pending; only the
	// task goroutine touches it. pending publishes its count for Stats and Pending.
	state     *spoutState
	pending   atomic.Int64
	immediate []any // tracked emits acked at once (no ackers, or no consumers)
	outs1     []*tuple.Tuple
	outs      []acker.Outcome
	calls     []spoutCall // Ack and Fail calls to make, reused
	now       int64
	ended     []uint64  // failed roots to report to the held-list sweep
	bad       []treeEnd // trees failed or timed out, for the warning about their rate
	// timedOutIDs are message ids whose tree timed out and has not been acked since:
	// one that times out again is a replay that keeps timing out, warned about
	// whatever the rate (a bolt that never acks is slow to show otherwise).
	timedOutIDs map[any]struct{}
	// skip is the time max spout pending held NextTuple back: total, and since when
	// it does now, if on; Stats reads them under mu. (Not since == 0 for "not now":
	// a fake clock may read 0 when the spout fills up.)
	skip struct {
		mu           sync.Mutex
		total, since int64
		on           bool
	}
	abandoned atomic.Int64 // trees left with neither Ack nor Fail at exit
	// finite is the spout as a topology.FiniteSpout (nil if it is not one);
	// exhausted (task goroutine only) latches once it said so with no tree in
	// flight, and exhaustedPub publishes it for Stats.
	finite       topology.FiniteSpout
	exhausted    bool
	exhaustedPub atomic.Bool
	// activating is the spout as a topology.ActivatingSpout (nil if it is not
	// one); active (task goroutine only) is whether Activate was called and
	// Deactivate not yet.
	activating topology.ActivatingSpout
	active     bool
	loops      atomic.Int64 // loop iterations, for tests that the idle spout waits
}

// Emit implements topology.SpoutCollector.
func (s *spoutExec) Emit(values tuple.Values, msgID any) error {
	_, err := s.emit(tuple.DefaultStream, -1, values, msgID, false)
	return err
}

// EmitTo implements topology.SpoutCollector.
func (s *spoutExec) EmitTo(stream string, values tuple.Values, msgID any) error {
	_, err := s.emit(stream, -1, values, msgID, false)
	return err
}

// EmitTasks implements topology.SpoutTaskEmitter: EmitTo that returns the target tasks.
func (s *spoutExec) EmitTasks(stream string, values tuple.Values, msgID any) ([]int, error) {
	return s.emit(stream, -1, values, msgID, true)
}

// EmitDirect implements topology.SpoutCollector.
func (s *spoutExec) EmitDirect(task int, stream string, values tuple.Values, msgID any) error {
	if task < 0 {
		return s.e.refused(fmt.Errorf("%w: EmitDirect to task %d", topology.ErrDirect, task))
	}
	_, err := s.emit(stream, task, values, msgID, false)
	return err
}

// ReportError implements topology.SpoutCollector.
func (s *spoutExec) ReportError(err error) { s.e.reportError(err) }

// Pending implements topology.SpoutCollector.
func (s *spoutExec) Pending() int { return int(s.pending.Load()) }

// emit routes and sends values; with want it returns a copy of the target tasks
// (nil when the emit was refused).
func (s *spoutExec) emit(stream string, direct int, values tuple.Values, msgID any, want bool) ([]int, error) {
	e := s.e
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.stopped {
		return nil, fmt.Errorf("%w: spout %q task %d", topology.ErrStopped, e.comp.ID, e.task)
	}
	so, targets, err := e.targets(stream, direct, values)
	if err != nil {
		return nil, e.refused(err)
	}
	var out []int
	if want {
		out = append(make([]int, 0, len(targets)), targets...)
	}
	e.stats.emitted++
	tracked := msgID != nil && len(e.acks) > 0 && len(targets) > 0
	var root, xor uint64
	if tracked {
		root = nonzeroID()
	}
	// Make every copy first, so that the init is queued before any of them can be sent:
	// a send that fills a batch may block, and the init must not wait behind it.
	outs := s.outs1[:0]
	for _, task := range targets {
		t := e.tuples.New(so.src, int(e.task), values)
		st := stateOf(t)
		st.DstTask = int32(task)
		if tracked {
			edge := nonzeroID()
			st.Root0, st.Edge0 = root, edge
			xor ^= edge
		}
		outs = append(outs, t)
	}
	if tracked && s.rt.sampled(root) {
		s.lineageStart(root, msgID, stream, targets, outs)
	}
	if tracked {
		s.state.Emit(s.now, root, msgID)
		s.pending.Store(int64(s.state.Pending()))
		e.ackMsg(acker.Msg{Kind: acker.Init, Root: root, Val: xor, Task: e.task})
	}
	for i, t := range outs {
		e.enqueue(s.rt.hard, e.edge(targets[i]), t)
		outs[i] = nil
	}
	s.outs1 = outs[:0]
	if !tracked && msgID != nil {
		// As Storm: without ackers (or consumers) a tracked emit is complete at once.
		// Storm calls Ack inside emit; gale calls it after NextTuple returns, so the
		// spout is never re-entered.
		s.immediate = append(s.immediate, msgID)
	}
	return out, nil
}

func (s *spoutExec) ackImmediate() {
	for len(s.immediate) > 0 {
		ids := s.immediate
		s.immediate = nil
		s.e.mu.Lock()
		s.e.stats.acked += uint64(len(ids)) // Ack is called: count it (Storm shows 0)
		s.e.mu.Unlock()
		for _, id := range ids {
			s.call("Ack", func() { s.spout.Ack(id) })
		}
	}
}

// call runs user code, turning a panic into a reported error: the task goes on.
func (s *spoutExec) call(what string, fn func()) {
	defer func() {
		if p := recover(); p != nil {
			s.e.reportError(fmt.Errorf("spout %s panicked: %v", what, p), "stack", string(debug.Stack()))
		}
	}()
	fn()
}

// drainOutcomes applies the acker's outcomes: counters under one lock for the whole
// batch, then the spout's Ack and Fail calls (user code, which may emit) outside it.
func (s *spoutExec) drainOutcomes() {
	ep := s.ep
	ep.poll(false)
	ep.cmu.Lock()
	s.outs, ep.outcomes = ep.outcomes, s.outs[:0]
	ep.cmu.Unlock()
	if len(s.outs) == 0 {
		return
	}
	calls := s.calls[:0]
	// Checked once for the batch, after the outcomes were taken: a failure caused by
	// the stop (a bolt's write cut off by the cancelled context) reached the acker
	// after the stop began, so it is seen here as interrupted.
	if s.rt.interrupted() {
		s.state.Interrupt()
	}
	s.e.mu.Lock()
	for _, o := range s.outs {
		ev, _ := s.state.Outcome(s.now, o)
		switch ev.Kind {
		case spoutLate:
			s.e.stats.late++ // the spout already timed this tree out: ignored
		case spoutAbandoned:
			// The stop interrupted it: neither Fail nor a charge for the spout's
			// source; a restart replays it.
			s.abandoned.Add(1)
		case spoutAcked:
			s.e.stats.acked++
			s.e.stats.latency.Record(ev.Latency)
			calls = append(calls, spoutCall{msgID: ev.MsgID, ack: true})
			if len(s.timedOutIDs) > 0 {
				delete(s.timedOutIDs, idKey(ev.MsgID))
			}
			if s.rt.sampled(o.Root) {
				s.lineageEnd(ev, lineage.Completed)
			}
		case spoutFailed:
			s.e.stats.failed++
			calls = append(calls, spoutCall{msgID: ev.MsgID, reason: ev.Reason})
			s.bad = append(s.bad, treeEnd{reason: ev.Reason})
			if s.rt.lin != nil {
				s.lineageEnd(ev, lineage.Failed)
				s.ended = append(s.ended, o.Root)
			}
		case spoutRestarted:
			// The tree's clock restarted (newest bucket); complete latency still
			// counts from the emit. A spout that asks is told.
			if _, ok := s.spout.(topology.TimeoutResetSpout); ok {
				calls = append(calls, spoutCall{msgID: ev.MsgID, reset: true})
			}
		}
	}
	s.pending.Store(int64(s.state.Pending()))
	s.e.mu.Unlock()
	clear(s.outs)
	s.endedBadly()
	if len(s.ended) > 0 {
		s.rt.treesEnded(s.now, s.ended)
		s.ended = s.ended[:0]
	}
	s.deliver(calls)
}

// spoutCall is one Ack or Fail to deliver to the spout.
type spoutCall struct {
	msgID  any
	ack    bool
	reset  bool // TimeoutReset, not Fail
	reason string
}

func (s *spoutExec) deliver(calls []spoutCall) {
	for _, c := range calls {
		if c.ack {
			s.call("Ack", func() { s.spout.Ack(c.msgID) })
		} else if c.reset {
			s.call("TimeoutReset", func() { s.spout.(topology.TimeoutResetSpout).TimeoutReset(c.msgID) })
		} else {
			if rs, ok := s.spout.(topology.ReasonedSpout); ok {
				s.call("Fail", func() { rs.FailReason(c.msgID, c.reason) })
			} else {
				s.call("Fail", func() { s.spout.Fail(c.msgID) })
			}
		}
	}
	clear(calls)
	s.calls = calls[:0]
}

// abandon gives up the trees in flight at a hard stop or an expired drain: they are
// counted as Abandoned (and no longer as Pending) and get neither Ack nor Fail.
func (s *spoutExec) abandon() {
	n := s.state.Abandon()
	s.pending.Store(0)
	s.abandoned.Add(int64(n))
}

// tick performs the rotation due at s.now, failing as timed out the trees of the
// bucket that rotates out (in emit order). Once a stop has cut work off, nothing
// times out: the trees left are abandoned at exit.
func (s *spoutExec) tick() {
	if s.rt.interrupted() {
		s.state.Interrupt()
	}
	expired := s.state.Tick(s.now)
	if len(expired) == 0 {
		return
	}
	s.pending.Store(int64(s.state.Pending()))
	calls := s.calls[:0]
	for _, ev := range expired {
		calls = append(calls, spoutCall{msgID: ev.MsgID, reason: ev.Reason})
		s.bad = append(s.bad, treeEnd{reason: ev.Reason, timedOut: true, again: s.timedOutAgain(ev.MsgID)})
		if s.rt.lin != nil {
			s.lineageEnd(ev, lineage.TimedOut)
			s.ended = append(s.ended, ev.Root)
		}
	}
	if len(s.ended) > 0 {
		s.rt.treesEnded(s.now, s.ended)
		s.ended = s.ended[:0]
	}
	s.e.mu.Lock()
	s.e.stats.timedOut += uint64(len(expired))
	s.e.mu.Unlock()
	s.endedBadly()
	s.deliver(calls)
}

// maxTimedOutIDs bounds the message ids a spout task remembers as timed out; past
// it they are forgotten and remembered afresh.
const maxTimedOutIDs = 4096

// timedOutAgain remembers that msgID's tree timed out and says whether it had
// already, with no ack in between.
func (s *spoutExec) timedOutAgain(msgID any) bool {
	k := idKey(msgID)
	if k == nil {
		return false
	}
	if _, ok := s.timedOutIDs[k]; ok {
		return true
	}
	if s.timedOutIDs == nil || len(s.timedOutIDs) >= maxTimedOutIDs {
		s.timedOutIDs = map[any]struct{}{}
	}
	s.timedOutIDs[k] = struct{}{}
	return false
}

// printedID keys a message id that cannot be a map key (a slice, a map, a struct
// holding one) by its printed value; as its own type it meets no other id.
type printedID struct{ s string }

// idKey is the map key of a message id: the id itself, or its printed value.
func idKey(id any) any {
	switch id.(type) {
	case nil:
		return nil
	case string, int, int64, uint64, int32, uint32:
		return id
	}
	if reflect.ValueOf(id).Comparable() {
		return id
	}
	return printedID{fmt.Sprintf("%T %v", id, id)}
}

// endedBadly counts the trees just failed or timed out for the warning about their
// rate.
func (s *spoutExec) endedBadly() {
	if len(s.bad) > 0 {
		s.rt.treesEndedBadly(s.e.comp.ID, s.now, s.bad)
		clear(s.bad)
		s.bad = s.bad[:0]
	}
}

func (s *spoutExec) run() {
	rt := s.rt
	cfg := rt.cfg
	// Armed only while the task waits, so that a test's fake clock counts it among
	// its waiters exactly when the task is idle.
	timer := rt.clock.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	backoff := time.Duration(0)
	// Not a tuple before every host of the topology is up (Storm activates a
	// topology once its workers run): a tuple for a task not registered yet would be
	// refused, and its tree would wait out the message timeout.
	select {
	case <-rt.ready:
		if s.activating != nil && !rt.stopping.Load() && rt.hard.Err() == nil {
			s.active = true
			s.call("Activate", s.activating.Activate)
		}
	case <-rt.stopCh:
	case <-rt.hard.Done():
	}
loop:
	for {
		s.loops.Add(1)
		s.now = rt.nanotime()
		s.drainOutcomes()
		if s.now >= s.state.NextDeadline() {
			// One rotation at a time, never a catch-up (see spoutState): a stall can
			// only make a timeout late, never early.
			s.tick()
		}
		s.ackImmediate()
		if rt.hard.Err() != nil || rt.start.Err() != nil {
			s.abandon()
			break
		}
		stopping := rt.stopping.Load()
		// (Start's context read again: its end sets stopping a moment before the
		// hard stop, and a hard stop deactivates nothing.)
		if stopping && s.active && rt.start.Err() == nil && rt.hard.Err() == nil {
			s.active = false
			s.call("Deactivate", s.activating.Deactivate)
		}
		emitted := false
		if s.skip.on && !s.state.Full() { // (only this goroutine writes on)
			s.endSkip()
		}
		if s.finite != nil && !s.exhausted && s.state.Pending() == 0 && len(s.immediate) == 0 {
			s.checkExhausted()
		}
		if !stopping && !s.exhausted {
			for range cfg.BatchSize {
				if s.state.Full() {
					if !s.skip.on {
						s.skip.mu.Lock()
						s.skip.since, s.skip.on = s.now, true
						s.skip.mu.Unlock()
					}
					break
				}
				before := s.e.stats.emitted // written only by this goroutine
				s.now = rt.nanotime()       // a tree's clock starts at its emit
				s.call("NextTuple", s.spout.NextTuple)
				s.ackImmediate()
				if s.e.stats.emitted == before {
					break
				}
				emitted = true
			}
		}
		s.e.mu.Lock()
		s.e.flush(rt.hard)
		s.e.mu.Unlock()
		if stopping {
			if s.state.Pending() == 0 {
				break
			}
			select {
			case <-rt.drainExpired:
				s.abandon()
				break loop
			default:
			}
		}
		if emitted {
			backoff = 0
			continue
		}
		// Idle: wait for outcomes, the next rotation, or (if NextTuple may be called) a
		// short progressive backoff, as Storm's spout wait strategy.
		now := rt.nanotime()
		deadline := now + int64(time.Hour)
		if d := s.state.NextDeadline(); d != math.MaxInt64 {
			deadline = d
		}
		if !stopping && !s.exhausted && !s.state.Full() {
			backoff = min(max(2*backoff, 50*time.Microsecond), time.Millisecond)
			deadline = min(deadline, now+int64(backoff))
		}
		if deadline <= now || !rt.arm(timer, now, deadline) {
			continue // a rotation is due, or the clock moved while arming
		}
		stopCh := rt.stopCh
		if stopping {
			stopCh = nil // already seen: waiting on a closed channel would spin
		}
		select {
		case <-s.ep.inbox.Signal():
		case <-timer.C():
		case <-stopCh:
		case <-rt.drainExpired:
		case <-rt.hard.Done():
		}
		timer.Stop()
	}
	s.endSkip()
	s.e.mu.Lock()
	s.e.flush(rt.hard)
	s.e.stopped = true
	s.e.publish() // the counts are final
	s.e.mu.Unlock()
	s.call("Close", func() {
		if err := s.spout.Close(); err != nil {
			s.e.reportError(fmt.Errorf("spout Close: %w", err))
		}
	})
}

// checkExhausted asks a FiniteSpout, with no tree of the task in flight, whether
// its input is done; once it is, the task latches it (NextTuple is called no more)
// and tells the runtime (Runtime.Exhausted).
func (s *spoutExec) checkExhausted() {
	done := false
	s.call("Exhausted", func() { done = s.finite.Exhausted() })
	if !done {
		return
	}
	s.exhausted = true
	s.exhaustedPub.Store(true)
	s.rt.spoutExhausted()
}

// endSkip closes a stall at max spout pending. The clock is read under the mutex, as
// Stats reads it, so that the time Stats shows never shrinks.
func (s *spoutExec) endSkip() {
	s.skip.mu.Lock()
	defer s.skip.mu.Unlock()
	if s.skip.on {
		s.skip.total += max(s.rt.nanotime()-s.skip.since, 0)
		s.skip.since, s.skip.on = 0, false
	}
}

// rotationsPerTimeout: a spout task's trees in flight (spoutState) rotate every
// MessageTimeout/4 through 5 buckets, so a tree times out between 1 and 1.25 message
// timeouts after its emit.
const rotationsPerTimeout = 4

// spoutConfig is what the spout tasks' spoutState takes from the configuration:
// without ackers nothing is tracked, so nothing times out and nothing is pending.
func (r *Runtime) spoutConfig() spoutConfig {
	tracked := r.cfg.Ackers > 0
	c := spoutConfig{MessageTimeout: r.cfg.MessageTimeout, Timeouts: tracked && !r.cfg.DisableTimeouts}
	if tracked {
		c.MaxPending = r.cfg.MaxSpoutPending
	}
	return c
}

// lineageStart records a sampled root and its first tuples (e.mu held).
func (s *spoutExec) lineageStart(root uint64, msgID any, stream string, targets []int, outs []*tuple.Tuple) {
	rt := s.rt
	at := rt.unixNano(s.now)
	nodes := make([]lineage.Node, len(outs))
	for i, t := range outs {
		st := stateOf(t)
		to := ""
		if c := rt.componentOf(targets[i]); c != nil {
			to = c.ID
		}
		nodes[i] = lineage.Node{ID: st.LineageID(), Component: s.e.comp.ID, Task: int(s.e.task), Stream: stream,
			ToComponent: to, ToTask: targets[i], EmittedAt: at}
	}
	msg := msgString(msgID)
	rt.lin.Start(at, root, msg, s.e.comp.ID, int(s.e.task), nodes)
	if s.e.log.Enabled(context.Background(), slog.LevelDebug) {
		s.e.log.Debug("tree started (sampled)", "root", rootAttr(root), "msg_id", msg, "tuples", len(nodes))
	}
}

// lineageEnd records how a tree ended and logs a failed or timed-out one with its root
// id, so that a grep for the root finds it.
func (s *spoutExec) lineageEnd(ev spoutEvent, o lineage.Outcome) {
	rt := s.rt
	msg := msgString(ev.MsgID)
	rt.lin.End(rt.unixNano(s.now), ev.Root, msg, s.e.comp.ID, int(s.e.task), rt.unixNano(ev.Start), o, ev.Reason)
	if s.e.log.Enabled(context.Background(), slog.LevelDebug) {
		s.e.log.Debug("tree "+string(o), "root", rootAttr(ev.Root), "msg_id", msg, "reason", ev.Reason)
	}
}
