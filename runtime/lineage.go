package runtime

import (
	"context"
	"fmt"
	"log/slog"
	"sync"

	"github.com/gale-stream/gale/internal/tupleinternal"
	"github.com/gale-stream/gale/lineage"
)

var sourceOf = tupleinternal.SourceOf.(func(*tupleinternal.State) (string, string, int))

// WithLineage records tuple trees in rec: every tuple of its sampled roots, the fail
// point of every failed tree, and the tuples still held when a tree times out.
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

// heldQuery is the set of roots that timed out recently: each bolt task reports the
// tuples of these trees that it still holds, then forgets them.
type heldQuery struct {
	mu    sync.Mutex
	roots map[uint64]int64 // root -> when it timed out (runtime clock)
}

// askHolders adds timed-out roots to the query and wakes every bolt task to answer.
func (r *Runtime) askHolders(now int64, roots []uint64) {
	q := &r.held
	q.mu.Lock()
	if q.roots == nil {
		q.roots = map[uint64]int64{}
	}
	// Roots asked two message timeouts ago have been answered by every live task.
	for root, at := range q.roots {
		if now-at > 2*int64(r.cfg.MessageTimeout) {
			delete(q.roots, root)
		}
	}
	for _, root := range roots {
		q.roots[root] = now
	}
	q.mu.Unlock()
	r.heldGen.Add(1)
	for _, b := range r.bolts {
		select {
		case b.wake <- struct{}{}:
		default:
		}
	}
}

// holdLocked links a tracked input into the task's held list (e.mu held).
func (b *boltExec) holdLocked(st *tupleinternal.State) {
	st.Held = true
	st.HeldPrev, st.HeldNext = nil, b.held
	if b.held != nil {
		b.held.HeldPrev = st
	}
	b.held = st
}

// releaseLocked unlinks an input from the held list (e.mu held).
func (b *boltExec) releaseLocked(st *tupleinternal.State) {
	if !st.Held {
		return
	}
	st.Held = false
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

// answerHoldersLocked reports the held inputs of timed-out trees, once per query
// generation (e.mu held). They are unlinked: their trees are over.
func (b *boltExec) answerHoldersLocked() {
	rt := b.rt
	gen := rt.heldGen.Load()
	if gen == b.heldSeen || b.held == nil {
		b.heldSeen = gen
		return
	}
	b.heldSeen = gen
	rt.held.mu.Lock()
	roots := make(map[uint64]int64, len(rt.held.roots))
	for k, v := range rt.held.roots {
		roots[k] = v
	}
	rt.held.mu.Unlock()
	now := rt.unixNano(rt.nanotime())
	for st := b.held; st != nil; {
		next := st.HeldNext
		found := false
		st.Edges(func(root, _ uint64) {
			if _, ok := roots[root]; ok {
				found = true
				comp, stream, srcTask := sourceOf(st)
				rt.lin.Hold(root, lineage.Holder{
					Node: st.LineageID, Component: b.e.comp.ID, Task: int(b.e.task),
					Since: rt.unixNano(st.ExecStart), SourceComp: comp, SourceTask: srcTask,
					Stream: stream, FoundAt: now,
				})
			}
		})
		if found {
			b.releaseLocked(st)
		}
		st = next
	}
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
	debug := !failed && b.e.log.Enabled(context.Background(), slog.LevelDebug)
	st.Edges(func(root, _ uint64) {
		if st.LineageID != 0 && rt.sampled(root) {
			rt.lin.Done(at, root, st.LineageID, task, failed, reason)
			if debug {
				b.e.log.Debug("tuple acked", "root", rootAttr(root), "tuple", rootAttr(st.LineageID))
			}
		}
		if failed {
			comp, stream, srcTask := sourceOf(st)
			rt.lin.Fail(root, lineage.FailPoint{Node: st.LineageID, Component: b.e.comp.ID, Task: task,
				SourceComp: comp, SourceTask: srcTask, Stream: stream, At: at, Reason: reason})
		}
	})
	if failed && b.e.log.Enabled(context.Background(), slog.LevelDebug) {
		st.Edges(func(root, _ uint64) {
			b.e.log.Debug("tuple failed", "root", rootAttr(root), "reason", reason)
		})
	}
}

// rootAttr formats a root id as in the UI and the lineage API: 16 hex digits.
func rootAttr(root uint64) string { return fmt.Sprintf("%016x", root) }
