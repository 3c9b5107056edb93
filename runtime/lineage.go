package runtime

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/gale-stream/gale/internal/tupleinternal"
	"github.com/gale-stream/gale/lineage"
)

var sourceOf = tupleinternal.SourceOf.(func(*tupleinternal.State) (string, string, int))

// WithLineage records tuple trees in rec: every tuple of its sampled roots, the fail
// point of every failed tree, and the tuples tasks still hold when a tree fails or
// times out.
func WithLineage(rec *lineage.Recorder) Option {
	return func(r *Runtime) {
		r.lin = rec
		if rec != nil {
			r.sampleBelow = rec.Threshold()
		}
	}
}

// Lineage returns the recorder given with WithLineage, or nil.
func (r *Runtime) Lineage() *lineage.Recorder { return r.lin }

// sampled reports whether root's whole tree is recorded: one comparison, no lock.
func (r *Runtime) sampled(root uint64) bool { return root != 0 && root < r.sampleBelow }

// unixNano converts a runtime clock reading to Unix nanoseconds.
func (r *Runtime) unixNano(t int64) int64 { return r.epochUnix + t }

// heldQuery collects the roots of trees that ended badly (failed or timed out), so
// that the tuples tasks still hold for them are reported and let go.
type heldQuery struct {
	mu    sync.Mutex
	fresh []uint64           // ended since the last sweep
	ended map[uint64]int64   // recently ended roots -> when (runtime clock)
	order []uint64           // ended, oldest first (for pruning)
	asked map[*boltExec]bool // tasks that must answer for themselves (busy at a sweep)
	roots map[*boltExec][]uint64
}

// sweepEvery is how often ended trees are looked for in the tasks' held lists.
const sweepEvery = 50 * time.Millisecond

// treesEnded queues roots whose trees failed or timed out (spout goroutine).
func (r *Runtime) treesEnded(now int64, roots []uint64) {
	q := &r.held
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.ended == nil {
		q.ended = map[uint64]int64{}
	}
	for _, root := range roots {
		if _, dup := q.ended[root]; !dup {
			q.ended[root] = now
			q.order = append(q.order, root)
			q.fresh = append(q.fresh, root)
		}
	}
}

// sweep reports the held tuples of trees ended since the last sweep. A task whose
// mutex is free (idle, or inside Execute: a stuck Execute is what this is for) is
// scanned here; a busy one (flushing, or blocked in a send) answers at its next batch
// end or wake-up.
func (r *Runtime) sweep() {
	q := &r.held
	q.mu.Lock()
	fresh := q.fresh
	q.fresh = nil
	// Roots ended two message timeouts ago: every holder has been asked by now.
	now := r.nanotime()
	i := 0
	for i < len(q.order) && now-q.ended[q.order[i]] > 2*int64(r.cfg.MessageTimeout) {
		delete(q.ended, q.order[i])
		i++
	}
	q.order = q.order[i:]
	q.mu.Unlock()
	if len(fresh) == 0 {
		return
	}
	for _, b := range r.bolts {
		if b.e.mu.TryLock() {
			b.reportHeldLocked(fresh)
			b.e.mu.Unlock()
			continue
		}
		q.mu.Lock()
		if q.roots == nil {
			q.roots = map[*boltExec][]uint64{}
		}
		q.roots[b] = append(q.roots[b], fresh...)
		q.mu.Unlock()
		b.asked.Store(true)
		select {
		case b.wake <- struct{}{}:
		default:
		}
	}
}

// runSweeper sweeps until the topology's hard stop (its owner waits for it).
func (r *Runtime) runSweeper() {
	t := time.NewTicker(sweepEvery)
	defer t.Stop()
	for {
		select {
		case <-r.hard.Done():
			return
		case <-t.C:
			r.sweep()
		}
	}
}

// answerAskedLocked reports for the roots a sweep left to this task (e.mu held).
func (b *boltExec) answerAskedLocked() {
	if !b.asked.Load() {
		return
	}
	b.asked.Store(false)
	q := &b.rt.held
	q.mu.Lock()
	roots := q.roots[b]
	delete(q.roots, b)
	q.mu.Unlock()
	if len(roots) > 0 {
		b.reportHeldLocked(roots)
	}
}

// reportHeldLocked reports the held inputs of the given ended trees, and lets go of an
// input once every tree it belongs to has ended (e.mu held).
func (b *boltExec) reportHeldLocked(roots []uint64) {
	if b.held == nil {
		return
	}
	rt := b.rt
	want := make(map[uint64]bool, len(roots))
	for _, r := range roots {
		want[r] = true
	}
	q := &rt.held
	now := rt.unixNano(rt.nanotime())
	for st := b.held; st != nil; {
		next := st.HeldNext
		found := false
		st.Edges(func(root, _ uint64) { found = found || want[root] })
		if found {
			// An input of the batch being executed has its start in flux on the task
			// goroutine: use the batch's start for it.
			since := b.batchStart
			if st.Held == tupleinternal.HeldOld {
				since = st.ExecStart
			}
			comp, stream, srcTask := sourceOf(st)
			allEnded := true
			q.mu.Lock()
			st.Edges(func(root, _ uint64) {
				if want[root] {
					rt.lin.Hold(root, lineage.Holder{
						Node: st.LineageID, Component: b.e.comp.ID, Task: int(b.e.task),
						Since: rt.unixNano(since), SourceComp: comp, SourceTask: srcTask,
						Stream: stream, FoundAt: now,
					})
				}
				if _, ok := q.ended[root]; !ok {
					allEnded = false
				}
			})
			q.mu.Unlock()
			if allEnded {
				b.releaseLocked(st)
			}
		}
		st = next
	}
}

// holdLocked links a tracked input of the batch starting now (e.mu held).
func (b *boltExec) holdLocked(st *tupleinternal.State) {
	st.Held = tupleinternal.HeldCurrent
	st.HeldPrev, st.HeldNext = nil, b.held
	if b.held != nil {
		b.held.HeldPrev = st
	}
	b.held = st
}

// releaseLocked unlinks an input from the held list (e.mu held).
func (b *boltExec) releaseLocked(st *tupleinternal.State) {
	if st.Held == tupleinternal.NotHeld {
		return
	}
	st.Held = tupleinternal.NotHeld
	if st.HeldPrev != nil {
		st.HeldPrev.HeldNext = st.HeldNext
	} else {
		b.held = st.HeldNext
	}
	if st.HeldNext != nil {
		st.HeldNext.HeldPrev = st.HeldPrev
	}
	st.HeldPrev, st.HeldNext = nil, nil
}

// lineageEmitLocked records a bolt's emit of a tuple in sampled trees (e.mu held).
func (b *boltExec) lineageEmitLocked(st *tupleinternal.State, stream string, parents []uint64) {
	rt := b.rt
	toComp := ""
	if c := rt.componentOf(int(st.DstTask)); c != nil {
		toComp = c.ID
	}
	n := lineage.Node{
		ID: st.LineageID, Parents: parents, Component: b.e.comp.ID, Task: int(b.e.task),
		Stream: stream, ToComponent: toComp, ToTask: int(st.DstTask),
		EmittedAt: rt.unixNano(rt.nanotime()),
	}
	debug := b.e.log.Enabled(context.Background(), slog.LevelDebug)
	st.Edges(func(root, _ uint64) {
		if rt.sampled(root) {
			rt.lin.Emit(root, n)
			if debug {
				b.e.log.Debug("tuple emitted", "root", rootAttr(root), "tuple", rootAttr(n.ID),
					"to", n.ToComponent, "to_task", n.ToTask, "stream", stream)
			}
		}
	})
}

// lineageFinishLocked records an ack or fail (e.mu held): for sampled trees the node,
// and for every failed tree the fail point.
func (b *boltExec) lineageFinishLocked(st *tupleinternal.State, failed bool, reason string) {
	rt := b.rt
	if st.LineageID == 0 && !failed {
		return
	}
	at := rt.unixNano(rt.nanotime())
	task := int(b.e.task)
	debug := b.e.log.Enabled(context.Background(), slog.LevelDebug)
	st.Edges(func(root, _ uint64) {
		if st.LineageID != 0 && rt.sampled(root) {
			rt.lin.Done(at, root, st.LineageID, task, failed, reason)
			if debug && !failed {
				b.e.log.Debug("tuple acked", "root", rootAttr(root), "tuple", rootAttr(st.LineageID))
			}
		}
		if failed {
			comp, stream, srcTask := sourceOf(st)
			rt.lin.Fail(root, lineage.FailPoint{Node: st.LineageID, Component: b.e.comp.ID, Task: task,
				SourceComp: comp, SourceTask: srcTask, Stream: stream, At: at, Reason: reason})
			if debug {
				b.e.log.Debug("tuple failed", "root", rootAttr(root), "tuple", rootAttr(st.LineageID),
					"from", comp, "from_task", srcTask, "reason", reason)
			}
		}
	})
}

// rootAttr formats a root or tuple id as in the UI and the lineage API: 16 hex digits.
func rootAttr(id uint64) string { return fmt.Sprintf("%016x", id) }

// msgString formats a spout's message id for the lineage store and logs, without fmt
// for the common kinds.
func msgString(id any) string {
	switch v := id.(type) {
	case string:
		return v
	case int:
		return strconv.Itoa(v)
	case int64:
		return strconv.FormatInt(v, 10)
	case uint64:
		return strconv.FormatUint(v, 10)
	case fmt.Stringer:
		return v.String()
	}
	return fmt.Sprint(id)
}
