package engine

import (
	"context"
	"fmt"
	"log/slog"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gale-stream/gale/internal/tupleinternal"
	"github.com/gale-stream/gale/lineage"
	"github.com/gale-stream/gale/tuple"
)

var sourceOf = tupleinternal.SourceOf.(func(*tupleinternal.State) (string, string, int))

// WithLineage records tuple trees in rec: every tuple of its sampled roots, the fail
// point of every failed tree, and the tuples tasks still hold when a tree fails or
// times out.
func WithLineage(rec *lineage.Recorder) Option {
	return func(r *Runtime) {
		r.lin = rec
	}
}

// Lineage returns the recorder given with WithLineage, or nil.
func (r *Runtime) Lineage() *lineage.Recorder { return r.lin }

// sampled reports whether root's whole tree is recorded: one comparison, no lock.
func (r *Runtime) sampled(root uint64) bool { return root != 0 && root < r.sampleBelow.Load() }

// unixNano converts a runtime clock reading to Unix nanoseconds.
func (r *Runtime) unixNano(t int64) int64 { return r.epochUnix + t }

// heldQuery collects the roots of trees that ended badly (failed or timed out), so
// that the tuples tasks still hold for them are reported and let go.
type heldQuery struct {
	mu    sync.Mutex
	fresh []uint64             // ended since the last sweep
	ended map[uint64]endedTree // ended roots, the newest maxEnded
	order []uint64             // ended, oldest first (for the bound)
	roots map[*boltExec][]uint64
	// any is set once a tree has ended: until then a batch's pending inputs are listed
	// without taking mu (a batching sink leaves every input pending at batch end).
	any atomic.Bool
}

// sweepEvery is how often ended trees are looked for in the tasks' held lists.
const sweepEvery = 50 * time.Millisecond

// maxEnded bounds the ended roots remembered (about 5 MB). An input in several trees is
// let go once all of them are known to have ended; one stuck while this many other
// trees ended stays listed (and reported) until it is acked or failed.
const maxEnded = 1 << 17

// endedTree is when a tree was heard to have ended, and the host whose spout
// rooted it (where its lineage is kept).
type endedTree struct {
	at   int64
	host int
}

// treesEnded queues roots whose trees failed or timed out (spout goroutine), here
// and, by message, on every other host.
func (r *Runtime) treesEnded(now int64, roots []uint64) {
	r.noteEnded(now, roots, r.assign.host())
	r.broadcastEnded(roots)
}

// endedOn returns the host whose spout rooted an ended tree, 0 if unknown.
func (r *Runtime) endedOn(root uint64) int {
	q := &r.held
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.ended[root].host
}

// noteEnded queues roots whose trees failed or timed out on host.
func (r *Runtime) noteEnded(now int64, roots []uint64, host int) {
	q := &r.held
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.ended == nil {
		q.ended = map[uint64]endedTree{}
	}
	q.any.Store(true)
	for _, root := range roots {
		if _, dup := q.ended[root]; !dup {
			q.ended[root] = endedTree{now, host}
			q.order = append(q.order, root)
			q.fresh = append(q.fresh, root)
		}
	}
	if n := len(q.order) - maxEnded; n > 0 {
		for _, root := range q.order[:n] {
			delete(q.ended, root)
		}
		q.order = append([]uint64(nil), q.order[n:]...)
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
	q.mu.Unlock()
	if len(fresh) == 0 {
		return
	}
	for _, b := range r.bolts {
		if tryLock(&b.e.mu) {
			b.reportHeldLocked(fresh)
			b.e.mu.Unlock()
			continue
		}
		// Busy: blocked in a send (it left a copy of its held inputs), or its mutex
		// taken by another goroutine now and then. It also answers for itself later.
		b.reportBlocked(fresh)
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

// tryLock takes mu if it is free now or within a few yields (a collector used from
// other goroutines holds it briefly and often).
func tryLock(mu *sync.Mutex) bool {
	for range 10 {
		if mu.TryLock() {
			return true
		}
		runtime.Gosched()
	}
	return false
}

// heldCopy is a held input as copied before a send blocks (the task's mutex stays held).
type heldCopy struct {
	roots  []uint64
	node   uint64
	comp   string
	stream string
	src    int
	since  int64
}

// copyHeld is the emitter's beforeBlock for a bolt task with lineage (e.mu held).
func (b *boltExec) copyHeld(blocking bool) {
	var cp []heldCopy
	if blocking {
		add := func(st *tupleinternal.State, since int64) {
			c := heldCopy{node: st.LineageID(), since: since}
			st.Edges(func(root, _ uint64) { c.roots = append(c.roots, root) })
			c.comp, c.stream, c.src = sourceOf(st)
			cp = append(cp, c)
		}
		for _, st := range b.held {
			add(st, st.ExecStart)
		}
		for _, t := range b.batch {
			if st := stateOf(t); st.Root0 != 0 && st.Status == tupleinternal.Pending && st.Held == tupleinternal.NotHeld {
				add(st, b.batchStart)
			}
		}
	}
	b.blocked.mu.Lock()
	b.blocked.held, b.blocked.on = cp, blocking
	b.blocked.mu.Unlock()
}

// reportBlocked reports, for a task blocked in a send, the held inputs it copied.
func (b *boltExec) reportBlocked(roots []uint64) {
	b.blocked.mu.Lock()
	defer b.blocked.mu.Unlock()
	if !b.blocked.on {
		return
	}
	want := make(map[uint64]bool, len(roots))
	for _, r := range roots {
		want[r] = true
	}
	rt := b.rt
	now := rt.unixNano(rt.nanotime())
	for _, c := range b.blocked.held {
		for _, root := range c.roots {
			if want[root] {
				rt.hold(root, lineage.Holder{Node: c.node, Component: b.e.comp.ID, Task: int(b.e.task),
					Since: rt.unixNano(c.since), SourceComp: c.comp, SourceTask: c.src, Stream: c.stream, FoundAt: now})
			}
		}
	}
}

// runSweeper sweeps, and sends the lineage records of trees rooted on other hosts,
// until the topology's hard stop (its owner waits for it).
func (r *Runtime) runSweeper() {
	t := time.NewTicker(sweepEvery)
	defer t.Stop()
	for {
		select {
		case <-r.hard.Done():
			r.flushForward() // the last acks of a drained run; peers may have left
			return
		case <-t.C:
			r.sweep()
			r.checkTrees() // once the tasks holding trees just timed out were asked
			r.flushForward()
			r.sweeps.Add(1)
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

// reportHeldLocked reports the inputs this task holds for the given ended trees: those
// pending after their batch (the held list), and those of the batch being executed
// (a stuck Execute among them). A listed input is let go once every tree it is in has
// ended (e.mu held). A report names the tuple by its lineage id, so the recorder keeps
// one entry however often the same tuple is reported for a tree.
func (b *boltExec) reportHeldLocked(roots []uint64) {
	want := make(map[uint64]bool, len(roots))
	for _, r := range roots {
		want[r] = true
	}
	in := func(root uint64) bool { return want[root] }
	for i := 0; i < len(b.held); {
		st := b.held[i]
		if b.reportLocked(st, st.ExecStart, in) && b.rt.allEnded(st) {
			b.releaseLocked(st) // moves the last one to i: look at i again
			continue
		}
		i++
	}
	// The batch being executed: its inputs' ExecStart is set at its end, so they
	// report the batch's start.
	for _, t := range b.batch {
		if st := stateOf(t); st.Root0 != 0 && st.Status == tupleinternal.Pending && st.Held == tupleinternal.NotHeld {
			b.reportLocked(st, b.batchStart, in)
		}
	}
}

// reportLocked reports st as held by this task for each of its trees that match, and
// says whether any did (e.mu held).
func (b *boltExec) reportLocked(st *tupleinternal.State, since int64, match func(uint64) bool) bool {
	rt := b.rt
	any := false
	var comp, stream string
	var srcTask int
	st.Edges(func(root, _ uint64) {
		if !match(root) {
			return
		}
		if !any {
			any = true
			comp, stream, srcTask = sourceOf(st)
		}
		rt.hold(root, lineage.Holder{
			Node: st.LineageID(), Component: b.e.comp.ID, Task: int(b.e.task),
			Since: rt.unixNano(since), SourceComp: comp, SourceTask: srcTask,
			Stream: stream, FoundAt: rt.unixNano(rt.nanotime()),
		})
	})
	return any
}

// holdPendingLocked lists the inputs of a finished batch that are still pending
// (e.mu held). Trees that ended while the input waited in the queue or ran get it
// reported now; an input whose trees have all ended is not listed: nobody will ask
// for it again.
func (b *boltExec) holdPendingLocked(batch []*tuple.Tuple) {
	ended := b.rt.isEnded
	for _, t := range batch {
		st := stateOf(t)
		if st.Root0 == 0 || st.Status != tupleinternal.Pending {
			continue
		}
		if b.rt.held.any.Load() {
			b.reportLocked(st, st.ExecStart, ended)
			if b.rt.allEnded(st) {
				continue
			}
		}
		st.Held = tupleinternal.HeldListed
		st.HeldIdx = int32(len(b.held))
		b.held = append(b.held, st)
	}
}

// isEnded reports whether root's tree failed or timed out (among the newest maxEnded).
func (r *Runtime) isEnded(root uint64) bool {
	q := &r.held
	q.mu.Lock()
	defer q.mu.Unlock()
	_, ok := q.ended[root]
	return ok
}

// allEnded reports whether every tree of the tuple has failed or timed out.
func (r *Runtime) allEnded(st *tupleinternal.State) bool {
	all := true
	st.Edges(func(root, _ uint64) { all = all && r.isEnded(root) })
	return all
}

// releaseLocked takes an input off the held list, moving the last one into its place
// (e.mu held).
func (b *boltExec) releaseLocked(st *tupleinternal.State) {
	listed := st.Held == tupleinternal.HeldListed
	st.Held = tupleinternal.NotHeld
	if !listed {
		return
	}
	i, last := st.HeldIdx, len(b.held)-1
	if int(i) != last {
		b.held[i] = b.held[last]
		b.held[i].HeldIdx = i
	}
	b.held[last] = nil
	b.held = b.held[:last]
	if cap(b.held) > 1024 && len(b.held) < cap(b.held)/8 {
		b.held = append([]*tupleinternal.State(nil), b.held...) // shrink after a burst
	}
}

// anySampled reports whether any tree of the tuple is sampled (no call for the common
// one-root tuple: it runs for every anchor and every ack).
func (r *Runtime) anySampled(st *tupleinternal.State) bool {
	below := r.sampleBelow.Load()
	if st.Root0 != 0 && st.Root0 < below {
		return true
	}
	if st.More == nil {
		return false
	}
	for _, e := range *st.More {
		if e.Root < below {
			return true
		}
	}
	return false
}

// nodeID is the tuple's lineage id if one of its trees is sampled, else 0.
func (r *Runtime) nodeID(st *tupleinternal.State) uint64 {
	if r.anySampled(st) {
		return st.LineageID()
	}
	return 0
}

// lineageEmitLocked records a bolt's emit of a tuple in sampled trees (e.mu held).
func (b *boltExec) lineageEmitLocked(st *tupleinternal.State, stream string, parents []uint64) {
	rt := b.rt
	toComp := ""
	if c := rt.componentOf(int(st.DstTask)); c != nil {
		toComp = c.ID
	}
	n := lineage.Node{
		ID: st.LineageID(), Parents: parents, Component: b.e.comp.ID, Task: int(b.e.task),
		Stream: stream, ToComponent: toComp, ToTask: int(st.DstTask),
		EmittedAt: rt.unixNano(rt.nanotime()),
	}
	debug := b.e.log.Enabled(context.Background(), slog.LevelDebug)
	st.Edges(func(root, _ uint64) {
		if rt.sampled(root) {
			rt.linEmit(root, n)
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
	node := rt.nodeID(st)
	if node == 0 && !failed {
		return
	}
	at := rt.unixNano(rt.nanotime())
	task := int(b.e.task)
	debug := b.e.log.Enabled(context.Background(), slog.LevelDebug)
	st.Edges(func(root, _ uint64) {
		if node != 0 && rt.sampled(root) {
			rt.linDone(linDone{At: at, Root: root, Node: node, Task: task, Failed: failed, Reason: reason})
			if debug && !failed {
				b.e.log.Debug("tuple acked", "root", rootAttr(root), "tuple", rootAttr(node))
			}
		}
		if failed {
			comp, stream, srcTask := sourceOf(st)
			rt.linFail(root, lineage.FailPoint{Node: node, Component: b.e.comp.ID, Task: task,
				SourceComp: comp, SourceTask: srcTask, Stream: stream, At: at, Reason: reason})
			if debug {
				attrs := []any{"root", rootAttr(root), "from", comp, "from_task", srcTask, "reason", reason}
				if node != 0 {
					attrs = append(attrs, "tuple", rootAttr(node))
				}
				b.e.log.Debug("tuple failed", attrs...)
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
