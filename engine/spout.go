package engine

import (
	"context"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gale-stream/gale/acker"
	"github.com/gale-stream/gale/lineage"
	"github.com/gale-stream/gale/topology"
	"github.com/gale-stream/gale/tuple"
)

// pendingEntry is a spout tree in flight.
type pendingEntry struct {
	msgID any
	start int64
}

// pendingMap is the spout's trees in flight in rotating buckets (Storm's RotatingMap):
// an entry expires between (n-1) and n rotations after its last put.
type pendingMap struct {
	buckets []map[uint64]pendingEntry
	n       atomic.Int64 // read by Stats from other goroutines
}

func newPendingMap(n int) *pendingMap {
	p := &pendingMap{buckets: make([]map[uint64]pendingEntry, n)}
	for i := range p.buckets {
		p.buckets[i] = map[uint64]pendingEntry{}
	}
	return p
}

func (p *pendingMap) put(root uint64, e pendingEntry) {
	p.buckets[0][root] = e
	p.n.Add(1)
}

func (p *pendingMap) remove(root uint64) (pendingEntry, bool) {
	for _, b := range p.buckets {
		if e, ok := b[root]; ok {
			delete(b, root)
			p.n.Add(-1)
			return e, true
		}
	}
	return pendingEntry{}, false
}

// rotate drops the oldest bucket and returns its entries (timed out).
func (p *pendingMap) rotate() map[uint64]pendingEntry {
	last := len(p.buckets) - 1
	old := p.buckets[last]
	copy(p.buckets[1:], p.buckets[:last])
	p.buckets[0] = map[uint64]pendingEntry{}
	p.n.Add(-int64(len(old)))
	return old
}

// spoutExec runs one spout task. Its collector methods run on the task goroutine.
type spoutExec struct {
	e         *emitter
	rt        *Runtime
	spout     topology.Spout
	ep        *endpoint
	pending   *pendingMap
	immediate []any // tracked emits acked at once (no ackers, or no consumers)
	outs1     []*tuple.Tuple
	outs      []acker.Outcome
	calls     []spoutCall // Ack and Fail calls to make, reused
	now       int64
	// timeoutReason is the FailReason of a tree whose message timeout passed.
	timeoutReason string
	ended         []uint64 // failed roots to report to the held-list sweep
	// skip is the time max spout pending held NextTuple back: total, and since when
	// it does now (0: not now); Stats reads both under mu.
	skip struct {
		mu           sync.Mutex
		total, since int64
	}
	abandoned atomic.Int64 // trees left with neither Ack nor Fail at exit
	loops     atomic.Int64 // loop iterations, for tests that the idle spout waits
}

// Emit implements topology.SpoutCollector.
func (s *spoutExec) Emit(values tuple.Values, msgID any) error {
	return s.emit(tuple.DefaultStream, -1, values, msgID)
}

// EmitTo implements topology.SpoutCollector.
func (s *spoutExec) EmitTo(stream string, values tuple.Values, msgID any) error {
	return s.emit(stream, -1, values, msgID)
}

// EmitDirect implements topology.SpoutCollector.
func (s *spoutExec) EmitDirect(task int, stream string, values tuple.Values, msgID any) error {
	if task < 0 {
		return fmt.Errorf("%w: EmitDirect to task %d", topology.ErrDirect, task)
	}
	return s.emit(stream, task, values, msgID)
}

// ReportError implements topology.SpoutCollector.
func (s *spoutExec) ReportError(err error) { s.e.reportError(err) }

// Pending implements topology.SpoutCollector.
func (s *spoutExec) Pending() int { return int(s.pending.n.Load()) }

func (s *spoutExec) emit(stream string, direct int, values tuple.Values, msgID any) error {
	e := s.e
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.stopped {
		return fmt.Errorf("%w: spout %q task %d", topology.ErrStopped, e.comp.ID, e.task)
	}
	so, targets, err := e.targets(stream, direct, values)
	if err != nil {
		return err
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
		t := tuple.New(so.src, int(e.task), values)
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
		s.pending.put(root, pendingEntry{msgID: msgID, start: s.now})
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
	return nil
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
	interrupted := s.rt.interrupted()
	s.e.mu.Lock()
	for _, o := range s.outs {
		ent, ok := s.pending.remove(o.Root)
		switch {
		case !ok:
			s.e.stats.late++ // the spout already timed this tree out: ignored
		case o.Result == acker.Failed && interrupted:
			// The stop interrupted it: neither Fail nor a charge for the spout's
			// source; a restart replays it.
			s.abandoned.Add(1)
		case o.Result == acker.Completed:
			s.e.stats.acked++
			s.e.stats.latency.Record(s.now - ent.start)
			calls = append(calls, spoutCall{msgID: ent.msgID, ack: true})
			if s.rt.sampled(o.Root) {
				s.lineageEnd(o.Root, ent, lineage.Completed, "")
			}
		case o.Result == acker.Failed:
			s.e.stats.failed++
			calls = append(calls, spoutCall{msgID: ent.msgID, reason: o.Reason})
			if s.rt.lin != nil {
				s.lineageEnd(o.Root, ent, lineage.Failed, o.Reason)
				s.ended = append(s.ended, o.Root)
			}
		case o.Result == acker.Restarted:
			// The clock restarts (newest bucket); complete latency still counts from the emit.
			s.pending.put(o.Root, ent)
		}
	}
	s.e.mu.Unlock()
	clear(s.outs)
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
	reason string
}

func (s *spoutExec) deliver(calls []spoutCall) {
	for _, c := range calls {
		if c.ack {
			s.call("Ack", func() { s.spout.Ack(c.msgID) })
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
	n := s.pending.n.Load()
	for i := range s.pending.buckets {
		s.pending.buckets[i] = map[uint64]pendingEntry{}
	}
	s.pending.n.Store(0)
	s.abandoned.Add(n)
}

// expire fails, as timed out, the trees of the bucket that rotates out. Once a stop
// has cut work off, nothing times out: the trees left are abandoned at exit.
func (s *spoutExec) expire() {
	if s.rt.interrupted() {
		return
	}
	expired := s.pending.rotate()
	if len(expired) == 0 {
		return
	}
	calls := s.calls[:0]
	var roots []uint64
	for root, ent := range expired {
		calls = append(calls, spoutCall{msgID: ent.msgID, reason: s.timeoutReason})
		if s.rt.lin != nil {
			s.lineageEnd(root, ent, lineage.TimedOut, s.timeoutReason)
			roots = append(roots, root)
		}
	}
	if roots != nil {
		s.rt.treesEnded(s.now, roots)
	}
	s.e.mu.Lock()
	s.e.stats.timedOut += uint64(len(expired))
	s.e.mu.Unlock()
	s.deliver(calls)
}

// full reports whether max spout pending stops NextTuple calls.
func (s *spoutExec) full() bool {
	cfg := s.rt.cfg
	return cfg.MaxSpoutPending > 0 && cfg.Ackers > 0 && int(s.pending.n.Load()) >= cfg.MaxSpoutPending
}

func (s *spoutExec) run() {
	rt := s.rt
	cfg := rt.cfg
	timeouts := !cfg.DisableTimeouts && cfg.Ackers > 0
	rotateEvery := int64(cfg.MessageTimeout / rotationsPerTimeout)
	s.now = rt.nanotime()
	nextRotate := s.now + rotateEvery
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	backoff := time.Duration(0)
loop:
	for {
		s.loops.Add(1)
		s.now = rt.nanotime()
		s.drainOutcomes()
		if timeouts && s.now >= nextRotate {
			// One rotation at a time, never a catch-up: after the task was stalled (a
			// slow NextTuple, a send blocked by backpressure) several rotations in a row
			// would expire trees emitted a moment ago. A stall can only make a timeout
			// late, never early.
			s.expire()
			nextRotate = s.now + rotateEvery
		}
		s.ackImmediate()
		if rt.hard.Err() != nil || rt.start.Err() != nil {
			s.abandon()
			break
		}
		stopping := rt.stopping.Load()
		emitted := false
		if s.skip.since != 0 && !s.full() { // (only this goroutine writes since)
			s.endSkip()
		}
		if !stopping {
			for range cfg.BatchSize {
				if s.full() {
					if s.skip.since == 0 {
						s.skip.mu.Lock()
						s.skip.since = s.now
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
			if s.pending.n.Load() == 0 {
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
		wait := time.Hour
		if timeouts {
			wait = time.Duration(nextRotate - s.now)
		}
		if !stopping && !s.full() {
			backoff = min(max(2*backoff, 50*time.Microsecond), time.Millisecond)
			wait = min(wait, backoff)
		}
		stopCh := rt.stopCh
		if stopping {
			stopCh = nil // already seen: waiting on a closed channel would spin
		}
		timer.Reset(max(wait, 0))
		select {
		case <-s.ep.inbox.Signal():
		case <-timer.C:
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

// endSkip closes a stall at max spout pending. The clock is read under the mutex, as
// Stats reads it, so that the time Stats shows never shrinks.
func (s *spoutExec) endSkip() {
	s.skip.mu.Lock()
	defer s.skip.mu.Unlock()
	if s.skip.since != 0 {
		s.skip.total += max(s.rt.nanotime()-s.skip.since, 0)
		s.skip.since = 0
	}
}

// rotationsPerTimeout: the pending map rotates every MessageTimeout/4 and has 5
// buckets, so a tree times out between 1 and 1.25 message timeouts after its emit.
const rotationsPerTimeout = 4

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
func (s *spoutExec) lineageEnd(root uint64, ent pendingEntry, o lineage.Outcome, reason string) {
	rt := s.rt
	msg := msgString(ent.msgID)
	rt.lin.End(rt.unixNano(s.now), root, msg, s.e.comp.ID, int(s.e.task), rt.unixNano(ent.start), o, reason)
	if s.e.log.Enabled(context.Background(), slog.LevelDebug) {
		s.e.log.Debug("tree "+string(o), "root", rootAttr(root), "msg_id", msg, "reason", reason)
	}
}
