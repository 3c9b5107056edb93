package engine

import (
	"fmt"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gale-stream/gale/acker"
	"github.com/gale-stream/gale/internal/clock"
	"github.com/gale-stream/gale/internal/tupleinternal"
	"github.com/gale-stream/gale/topology"
	"github.com/gale-stream/gale/tuple"
)

// boltExec runs one bolt task (rich or basic). Its OutputCollector methods may be
// called from any goroutine.
type boltExec struct {
	e     *emitter
	rt    *Runtime
	bolt  topology.Bolt
	basic topology.BasicBolt
	// drainer is bolt as a topology.Drainer, or nil.
	drainer topology.Drainer
	// executing is true while the task goroutine is inside a batch (guarded by e.mu):
	// emits and acks from other goroutines then need no wake-up, the batch end flushes.
	executing bool
	wake      chan struct{}
	ep        *endpoint
	cleanup   func() error // the bolt's Cleanup, rich or basic
	// cur is the batch position of the input inside Execute, -1 between Execute calls;
	// an ack of that input during its Execute queues its process latency in procQ,
	// measured at that Execute's end, so an input costs one clock read. ends is that
	// clock per position. batch is the batch being executed (set under e.mu).
	cur        atomic.Int32
	procQ      []procMark
	ends       []int64
	batch      []*tuple.Tuple
	batchStart int64
	// held lists the tracked inputs not yet acked or failed (with lineage on); asked
	// says a sweep left roots for this task to answer for itself.
	held  []*tupleinternal.State
	asked atomic.Bool
	// blocked holds a copy of the held inputs while a send blocks with e.mu held.
	blocked struct {
		mu   sync.Mutex
		on   bool
		held []heldCopy
	}
	// collectors is a slab the basic collectors are cut from, one per Execute.
	collectors []basicCollector
	// ackTk and ackAt are the last monotonic reading of ackNow and the counter at
	// it (guarded by e.mu).
	ackTk, ackAt int64
}

// ackSpanTicks is how long, in counter ticks, ackNow extrapolates one monotonic
// reading with the cycle counter: 1 ms.
var ackSpanTicks = int64(1e6 / clock.NanosPerTick)

// ackNow is the runtime clock for the process latency of an input acked after its
// batch (e.mu held): a monotonic reading at most every millisecond, and the cycle
// counter from that reading in between, as executeBatch times the inputs within a
// batch. A bolt that acks a stored batch of thousands of inputs at once (word
// count's changelog count task) then pays one clock read for them rather than one
// each: time.Since was 4.7% of a cluster worker's CPU on this VM. A fake clock
// (tests) is read every time.
func (b *boltExec) ackNow() int64 {
	if !b.rt.realClock {
		return b.rt.nanotime()
	}
	tk := clock.Ticks()
	if d := tk - b.ackTk; b.ackTk != 0 && d >= 0 && d < ackSpanTicks {
		return b.ackAt + clock.Nanos(d)
	}
	now := b.rt.nanotime()
	b.ackTk, b.ackAt = clock.Ticks(), now
	return now
}

// procMark is an ack, during a batch, of an input of that batch: its process latency
// is resolved at the batch end, when the input's start is known. pos >= 0: acked
// during its own Execute, number pos, and timed at that Execute's end; else at.
type procMark struct {
	st  *tupleinternal.State
	pos int32
	at  int64
}

// Emit implements topology.OutputCollector.
func (b *boltExec) Emit(values tuple.Values, anchors ...*tuple.Tuple) error {
	_, err := b.emit(tuple.DefaultStream, -1, values, anchors, false)
	return err
}

// EmitTo implements topology.OutputCollector.
func (b *boltExec) EmitTo(stream string, values tuple.Values, anchors ...*tuple.Tuple) error {
	_, err := b.emit(stream, -1, values, anchors, false)
	return err
}

// EmitTasks implements topology.TaskEmitter: EmitTo that returns the target tasks.
func (b *boltExec) EmitTasks(stream string, values tuple.Values, anchors ...*tuple.Tuple) ([]int, error) {
	return b.emit(stream, -1, values, anchors, true)
}

// EmitDirect implements topology.OutputCollector.
func (b *boltExec) EmitDirect(task int, stream string, values tuple.Values, anchors ...*tuple.Tuple) error {
	if task < 0 {
		return b.e.refused(fmt.Errorf("%w: EmitDirect to task %d", topology.ErrDirect, task))
	}
	_, err := b.emit(stream, task, values, anchors, false)
	return err
}

// ReportError implements topology.OutputCollector.
func (b *boltExec) ReportError(err error) { b.e.reportError(err) }

// emit routes and sends values; with want it returns a copy of the target tasks
// (nil when the emit was refused).
func (b *boltExec) emit(stream string, direct int, values tuple.Values, anchors []*tuple.Tuple, want bool) ([]int, error) {
	e := b.e
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.stopped {
		var a *tuple.Tuple
		if len(anchors) > 0 {
			a = anchors[0]
		}
		return nil, fmt.Errorf("%w: %w", topology.ErrStopped, e.misuse(MisuseEmitAfterStop, a))
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
	var misuseErr error
	lin := b.rt.lin != nil
	for _, task := range targets {
		t := e.tuples.New(so.src, int(e.task), values)
		st := stateOf(t)
		st.DstTask = int32(task)
		var parents []uint64
		for _, a := range anchors {
			if a == nil {
				// The caller meant to anchor: emitting untracked would be a silent opt-out.
				if misuseErr == nil {
					misuseErr = e.misuse(MisuseNilTuple, nil)
				}
				continue
			}
			as := stateOf(a)
			// A tuple's state belongs to the task that received it and is guarded by
			// that task's mu (held here), so anchoring is only allowed there.
			if as.DstTask != e.task {
				if misuseErr == nil {
					misuseErr = e.misuse(MisuseForeignTask, a)
				}
				continue
			}
			if as.Status != tupleinternal.Pending {
				if misuseErr == nil {
					misuseErr = e.misuse(MisuseAnchorAfterAck, a)
				}
				continue
			}
			if as.Root0 == 0 {
				continue // an untracked anchor adds nothing to any tree
			}
			edge := nonzeroID()
			as.AckVal ^= edge
			addEdge(st, as.Root0, edge)
			for _, m := range as.Extra() {
				addEdge(st, m.Root, edge)
			}
			if lin && b.rt.anySampled(as) {
				parents = append(parents, as.LineageID())
			}
		}
		if parents != nil {
			b.lineageEmitLocked(st, stream, parents)
		}
		e.enqueue(b.rt.hard, e.edge(task), t)
	}
	b.wakeLocked()
	return out, misuseErr
}

// addEdge records that the child joined root's tree through edge (Storm's putXor).
func addEdge(st *tupleinternal.State, root, edge uint64) {
	switch {
	case st.Root0 == 0:
		st.Root0, st.Edge0 = root, edge
	case st.Root0 == root:
		st.Edge0 ^= edge
	default:
		more := st.Extra()
		for i := range more {
			if more[i].Root == root {
				more[i].Edge ^= edge
				return
			}
		}
		if st.More == nil {
			st.More = new([]tupleinternal.Edge)
		}
		*st.More = append(*st.More, tupleinternal.Edge{Root: root, Edge: edge})
	}
}

// wakeLocked makes sure work queued from outside a batch is flushed (e.mu held).
func (b *boltExec) wakeLocked() {
	if !b.executing {
		select {
		case b.wake <- struct{}{}:
		default:
		}
	}
}

// Ack implements topology.OutputCollector.
func (b *boltExec) Ack(t *tuple.Tuple) error { return b.finish(t, tupleinternal.Acked, "") }

// Fail implements topology.OutputCollector.
func (b *boltExec) Fail(t *tuple.Tuple) error { return b.finish(t, tupleinternal.Failed, "") }

// FailWith implements topology.OutputCollector.
func (b *boltExec) FailWith(t *tuple.Tuple, reason error) error {
	r := ""
	if reason != nil {
		r = reason.Error()
	}
	return b.finish(t, tupleinternal.Failed, r)
}

// received returns the state of an input this task received and may still act on, or
// the misuse error: nil tuple, task stopped, or a tuple delivered elsewhere (mu held).
func (b *boltExec) received(t *tuple.Tuple) (*tupleinternal.State, error) {
	e := b.e
	if t == nil {
		return nil, e.misuse(MisuseNilTuple, nil)
	}
	if e.stopped {
		return nil, e.misuse(MisuseEmitAfterStop, t)
	}
	st := stateOf(t)
	if st.DstTask != e.task {
		return nil, e.misuse(MisuseForeignTask, t)
	}
	return st, nil
}

func (b *boltExec) finish(t *tuple.Tuple, to uint8, reason string) error {
	return b.finishAt(t, to, reason, -1)
}

// finishAt is finish by the runtime itself at the end of Execute number own of the
// batch (a BasicBolt's ack, or the fail after an error or panic), or -1.
func (b *boltExec) finishAt(t *tuple.Tuple, to uint8, reason string, own int32) error {
	e := b.e
	e.mu.Lock()
	defer e.mu.Unlock()
	st, err := b.received(t)
	if err != nil {
		return err
	}
	if from := st.Status; from != tupleinternal.Pending {
		switch {
		case from == tupleinternal.Acked && to == tupleinternal.Acked:
			return e.misuse(MisuseDoubleAck, t)
		case from == tupleinternal.Failed && to == tupleinternal.Failed:
			return e.misuse(MisuseDoubleFail, t)
		case to == tupleinternal.Acked:
			return e.misuse(MisuseAckAfterFail, t)
		default:
			return e.misuse(MisuseFailAfterAck, t)
		}
	}
	if t.IsTick() {
		st.Status = to // a tick is no input: acking it does nothing and is not counted
		return nil
	}
	b.finishLocked(st, to, reason, own)
	return nil
}

// finishLocked acks or fails a pending input this task received (e.mu held). own is
// as for finishAt.
func (b *boltExec) finishLocked(st *tupleinternal.State, to uint8, reason string, own int32) {
	e := b.e
	st.Status = to
	if st.Held != tupleinternal.NotHeld {
		b.releaseLocked(st)
	}
	// (a held input is one still pending after its batch: most are acked during
	// their own Execute and never held)
	if e.stats.procLat != nil {
		// ExecStart is set (under e.mu) at the end of the input's batch; 0 means the
		// input is of the batch being executed.
		switch pos := b.cur.Load(); {
		case own >= 0:
			b.procQ = append(b.procQ, procMark{st: st, pos: own})
		case st.ExecStart != 0:
			e.stats.procLat.Record(max(b.ackNow()-st.ExecStart, 0))
		case b.executing && pos >= 0 && stateOf(b.batch[pos]) == st:
			// Acked during its own Execute: timed at that Execute's end, one clock
			// read for both latencies.
			b.procQ = append(b.procQ, procMark{st: st, pos: pos})
		default:
			b.procQ = append(b.procQ, procMark{st: st, pos: -1, at: b.rt.nanotime()})
		}
	}
	if b.rt.lin != nil {
		b.lineageFinishLocked(st, to == tupleinternal.Failed, reason)
	}
	v := st.AckVal
	if to == tupleinternal.Acked {
		e.stats.acked++
		if st.Root0 != 0 {
			e.ackMsg(acker.Msg{Kind: acker.Ack, Root: st.Root0, Val: st.Edge0 ^ v})
			for _, m := range st.Extra() {
				e.ackMsg(acker.Msg{Kind: acker.Ack, Root: m.Root, Val: m.Edge ^ v})
			}
		}
	} else {
		e.stats.failed++
		if st.Root0 != 0 {
			e.ackMsg(acker.Msg{Kind: acker.Fail, Root: st.Root0, Reason: reason})
			for _, m := range st.Extra() {
				e.ackMsg(acker.Msg{Kind: acker.Fail, Root: m.Root, Reason: reason})
			}
		}
	}
	b.wakeLocked()
}

// failPending fails t if it is still pending (after a panic in Execute number own).
func (b *boltExec) failPending(t *tuple.Tuple, reason string, own int32) {
	e := b.e
	e.mu.Lock()
	defer e.mu.Unlock()
	if st := stateOf(t); !e.stopped && st.DstTask == e.task && st.Status == tupleinternal.Pending && !t.IsTick() {
		b.finishLocked(st, tupleinternal.Failed, reason, own)
	}
}

// ResetTimeout implements topology.OutputCollector.
func (b *boltExec) ResetTimeout(t *tuple.Tuple) error {
	e := b.e
	e.mu.Lock()
	defer e.mu.Unlock()
	st, err := b.received(t)
	if err != nil {
		return err
	}
	if st.Status != tupleinternal.Pending {
		return e.misuse(MisuseResetAfterDone, t)
	}
	if st.Root0 != 0 {
		e.ackMsg(acker.Msg{Kind: acker.Reset, Root: st.Root0})
		for _, m := range st.Extra() {
			e.ackMsg(acker.Msg{Kind: acker.Reset, Root: m.Root})
		}
	}
	b.wakeLocked()
	return nil
}

// execute runs user code for one input, number pos of its batch (-1 when not timed).
// A panic is reported and fails the input if it is still pending; the task goes on.
func (b *boltExec) execute(t *tuple.Tuple, pos int32) {
	defer func() {
		if p := recover(); p != nil {
			err := fmt.Errorf("bolt %q task %d panicked on %v: %v", b.e.comp.ID, b.e.task, t, p)
			b.e.reportError(err, "stack", string(debug.Stack()))
			b.failPending(t, err.Error(), pos)
		}
	}()
	if b.basic == nil {
		b.bolt.Execute(t)
		return
	}
	bc := b.collector(t)
	err := func() error {
		defer bc.done.Store(true) // before the auto-ack, and also when Execute panics
		return b.basic.Execute(t, bc)
	}()
	if err != nil {
		b.rt.warn(b.e.log, b.e.comp.ID, warnBoltError, "err", err)
		_ = b.finishAt(t, tupleinternal.Failed, fmt.Errorf("bolt %q: %w", b.e.comp.ID, err).Error(), pos)
		return
	}
	_ = b.finishAt(t, tupleinternal.Acked, "", pos)
}

func (b *boltExec) run() {
	rt := b.rt
	var ticks <-chan time.Time
	if every := b.e.comp.TickEvery; every > 0 {
		tk := rt.clock.NewTicker(every)
		defer tk.Stop()
		ticks = tk.C()
	}
	// Once Stop has begun (Storm's deactivate), a Drainer is told to write what it
	// holds each time its queue runs empty: the trees Stop waits for can then end
	// without waiting out a batch's size or delay.
	stopCh, stopping := rt.stopCh, false
	if b.drainer == nil {
		stopCh = nil
	}
	for {
		select {
		case <-stopCh:
			stopCh, stopping = nil, true
			b.drainIfIdle()
		case now := <-ticks:
			t := tuple.New(tuple.TickSource, -1, tuple.Values{now})
			stateOf(t).DstTask = b.e.task
			b.executeBatch([]*tuple.Tuple{t}, true)
		case <-b.ep.inbox.Signal():
			b.executeTaken(stopping)
		case <-b.ep.endSeen:
			// Every producer has ended its edge: what they sent before is here. It is
			// executed, then the last inputs held are written before Cleanup, unless
			// the stop already cut work off.
			b.executeTaken(stopping)
			if b.drainer != nil {
				b.drainIfIdle()
			}
			b.stop()
			return
		case <-b.wake:
			b.e.mu.Lock()
			if rt.lin != nil {
				b.answerAskedLocked()
			}
			b.e.flush(rt.hard)
			b.e.mu.Unlock()
		case <-rt.hard.Done():
			b.stop()
			return
		}
	}
}

// executeTaken takes the waiting messages and executes every batch taken, granting
// credit to its producer as each is done.
func (b *boltExec) executeTaken(stopping bool) {
	ep := b.ep
	ep.poll(true)
	for m := ep.takeBatch(); m != nil; m = ep.takeBatch() {
		// Out of the queue once taken for execution (as Storm's receive queue):
		// the grant goes before Execute, which may take long.
		ep.consumed(m)
		b.executeBatch(m.Tuples, false)
		if stopping {
			b.drainIfIdle()
		}
		if b.rt.hard.Err() != nil {
			return
		}
	}
}

// executeBatch runs Execute for each tuple, then flushes what they emitted and acked.
// Ticks are counted apart from executed inputs.
func (b *boltExec) executeBatch(batch []*tuple.Tuple, ticks bool) {
	e := b.e
	start := b.rt.nanotime()
	e.mu.Lock()
	b.executing = true
	b.batch, b.batchStart = batch, start
	e.mu.Unlock()
	t0 := start
	ends := b.ends[:0]
	if e.stats.procLat != nil || b.rt.lin != nil {
		// Per-input times, from the cycle counter anchored at the batch's start: a
		// counter read and a position store per input. Nothing is written into the
		// tuples here: a store to a line another core wrote, followed by the fence of
		// the atomic store, stalled each input (5% of word count).
		tk0 := clock.Ticks()
		rich := b.basic == nil // a BasicBolt's inputs are acked by execute itself
		for i, t := range batch {
			if rich {
				b.cur.Store(int32(i))
			}
			b.execute(t, int32(i))
			ends = append(ends, clock.Ticks())
		}
		if rich {
			b.cur.Store(-1)
		}
		// The batch's span comes from the monotonic clock; counter times are kept
		// within it, so a counter that is off (unsynchronised CPUs, a bad calibration)
		// can skew latencies inside a batch but never capacity or absolute times.
		t0 = b.rt.nanotime()
		prev := start
		for i, tk := range ends {
			ends[i] = min(max(start+clock.Nanos(tk-tk0), prev), t0)
			prev = ends[i]
		}
	} else {
		for _, t := range batch {
			b.execute(t, -1)
		}
		t0 = b.rt.nanotime()
	}
	b.ends = ends
	d := t0 - start
	e.mu.Lock()
	b.executing = false
	if ticks {
		e.stats.ticks += uint64(len(batch))
	} else {
		e.stats.executed += uint64(len(batch))
		e.stats.executeNanos += d
		if h := e.stats.execLat; h != nil {
			prev := start
			for _, end := range ends {
				h.Record(end - prev)
				prev = end
			}
		}
	}
	if len(ends) == len(batch) {
		prev := start
		for i, t := range batch {
			stateOf(t).ExecStart = max(prev, 1) // 1: set, even at the epoch's first ns
			prev = ends[i]
		}
	}
	if h := e.stats.procLat; h != nil {
		for _, m := range b.procQ {
			if m.pos >= 0 {
				h.Record(ends[m.pos] - m.st.ExecStart)
			} else {
				h.Record(m.at - m.st.ExecStart)
			}
		}
		clear(b.procQ)
		b.procQ = b.procQ[:0]
	}
	if b.rt.lin != nil {
		if !ticks {
			b.holdPendingLocked(batch)
		}
		b.answerAskedLocked()
	}
	b.batch = nil
	e.flush(b.rt.hard)
	e.mu.Unlock()
}

// drainIfIdle calls the Drainer when the task's queue is empty, then sends what it
// emitted and acked. Not once the stop has cut work off (Start's context done, or
// Stop's deadline passed): writes would only be cut off in turn, and the trees are
// abandoned already.
func (b *boltExec) drainIfIdle() {
	if b.ep.queueDepth() > 0 || b.rt.interrupted() {
		return
	}
	e := b.e
	e.mu.Lock()
	b.executing = true // acks from Drain need no wake-up: flushed below
	e.mu.Unlock()
	if err := callErr(func() error { b.drainer.Drain(); return nil }); err != nil {
		e.reportError(fmt.Errorf("bolt %q task %d: Drain: %w", e.comp.ID, e.task, err))
	}
	e.mu.Lock()
	b.executing = false
	e.flush(b.rt.hard)
	e.mu.Unlock()
}

func (b *boltExec) stop() {
	e := b.e
	e.mu.Lock()
	e.flush(b.rt.hard)
	e.stopped = true
	e.publish() // the counts are final
	e.mu.Unlock()
	if err := callErr(b.cleanup); err != nil {
		e.reportError(fmt.Errorf("bolt Cleanup: %w", err))
	}
}

// collector returns a fresh basic collector for input t. Collectors are cut from a
// slab and never reused, so a kept one stays marked done; the slab costs one
// allocation per collectorSlab inputs instead of one per input.
func (b *boltExec) collector(t *tuple.Tuple) *basicCollector {
	if len(b.collectors) == 0 {
		b.collectors = make([]basicCollector, collectorSlab)
	}
	c := &b.collectors[0]
	b.collectors = b.collectors[1:]
	c.b, c.in = b, t
	return c
}

// collectorSlab is how many basic collectors one allocation makes: 21 of 24 bytes
// stay under 512 bytes, above which Go adds a header to an allocation with pointers.
const collectorSlab = 21

// basicCollector anchors every emit to its input (Storm's BasicOutputCollector). Each
// Execute gets its own, so a collector kept past its Execute can never anchor to a
// later input; using it once Execute has returned is refused as misuse (basic-outside)
// instead of emitting untracked or into a wrong tree.
type basicCollector struct {
	b    *boltExec
	in   *tuple.Tuple
	done atomic.Bool
}

// live returns the input to anchor to, or a misuse error once Execute has returned.
func (c *basicCollector) live() ([1]*tuple.Tuple, error) {
	if c.done.Load() {
		e := c.b.e
		e.mu.Lock()
		defer e.mu.Unlock()
		return [1]*tuple.Tuple{}, e.misuse(MisuseBasicOutside, c.in)
	}
	return [1]*tuple.Tuple{c.in}, nil
}

func (c *basicCollector) Emit(values tuple.Values) error {
	cur, err := c.live()
	if err != nil {
		return err
	}
	_, err = c.b.emit(tuple.DefaultStream, -1, values, cur[:], false)
	return err
}

func (c *basicCollector) EmitTo(stream string, values tuple.Values) error {
	cur, err := c.live()
	if err != nil {
		return err
	}
	_, err = c.b.emit(stream, -1, values, cur[:], false)
	return err
}

func (c *basicCollector) EmitDirect(task int, stream string, values tuple.Values) error {
	cur, err := c.live()
	if err != nil {
		return err
	}
	if task < 0 {
		return c.b.e.refused(fmt.Errorf("%w: EmitDirect to task %d", topology.ErrDirect, task))
	}
	_, err = c.b.emit(stream, task, values, cur[:], false)
	return err
}

func (c *basicCollector) ResetTimeout() error {
	if _, err := c.live(); err != nil {
		return err
	}
	return c.b.ResetTimeout(c.in)
}

func (c *basicCollector) ReportError(err error) { c.b.e.reportError(err) }
