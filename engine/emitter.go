package engine

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"
	"unsafe"

	"github.com/gale-stream/gale/acker"
	"github.com/gale-stream/gale/codec"
	"github.com/gale-stream/gale/internal/tupleinternal"
	"github.com/gale-stream/gale/topology"
	"github.com/gale-stream/gale/transport"
	"github.com/gale-stream/gale/tuple"
)

// stateOf is a tuple's tracking state: the field at tupleinternal.StateOffset (an add,
// inlined; a call through tupleinternal.StateOf cost 3% of word count's time).
func stateOf(t *tuple.Tuple) *tupleinternal.State {
	return (*tupleinternal.State)(unsafe.Add(unsafe.Pointer(t), tupleinternal.StateOffset))
}

// The offset is read once at init: check it against the tuple package's own accessor.
func init() {
	t := tuple.New(tuple.TickSource, 0, nil)
	if stateOf(t) != tupleinternal.StateOf.(func(*tuple.Tuple) *tupleinternal.State)(t) {
		panic("runtime: tuple state offset mismatch")
	}
}

// emitter is the outbound half of a task: routing, batching of tuples per target task,
// batching and coalescing of acker messages per acker task, and the task's counters.
// mu guards all of it, because a bolt's collector may be called from other goroutines.
type emitter struct {
	_       [64]byte // keep mu and the counters off other tasks' cache lines
	mu      sync.Mutex
	rt      *Runtime
	task    int32
	comp    *topology.Component
	ep      *endpoint
	streams map[string]*streamOut
	// edges holds the edges this task has sent on, made at the first tuple for a
	// target (the map is the slow path: a route keeps its own small index); dirty
	// lists the edges with a batch being filled.
	edges map[int]*outEdge
	// tuples makes the tuples this task emits, a block at a time.
	tuples tuple.Slab
	ecache [32]*outEdge
	dirty  []*outEdge
	// acks[i] is the buffer of messages for acker task i.
	acks    [][]acker.Msg
	scratch []int
	encBuf  []byte // WithSerialization: the values encoded at emit, to check them
	stats   taskStats
	stopped bool
	log     *slog.Logger
	// pub is a copy of stats made at every flush, so that Stats never waits for mu,
	// which a send blocked by backpressure can hold for long.
	pubMu sync.Mutex
	pub   taskStats
	// beforeBlock, if set, is called (mu held) with true before a send blocks and with
	// false after it: a bolt task with lineage on leaves a copy of its held inputs
	// readable without mu meanwhile.
	beforeBlock func(blocking bool)
	// bp is the backpressure time: total blocked, and when a send still blocked began
	// (0: none). Its own mutex: e.mu is held during the blocked send.
	bp struct {
		mu           sync.Mutex
		total, since int64
	}
	_ [64]byte
}

func newEmitter(rt *Runtime, ep *endpoint, comp *topology.Component, log *slog.Logger) (*emitter, error) {
	e := &emitter{
		rt: rt, task: int32(ep.task), comp: comp, log: log, ep: ep,
		streams: map[string]*streamOut{},
		edges:   map[int]*outEdge{},
		acks:    make([][]acker.Msg, len(rt.ackerTasks)),
	}
	e.stats.misuse = map[string]uint64{}
	for id, st := range comp.Streams {
		so := &streamOut{src: st.Source, direct: st.Direct}
		for _, cons := range rt.topo.Consumers(comp.ID, id) {
			targets := rt.tasksOf[cons.Bolt.ID] // shared by every producer: never modified
			if cons.Input.Grouping.Kind == topology.DirectKind {
				if so.directComps == nil {
					so.directComps = map[string]bool{}
				}
				so.directComps[cons.Bolt.ID] = true
				continue
			}
			r := &route{kind: cons.Input.Grouping.Kind, targets: targets, consumer: cons.Bolt.ID, rr: uint32(nonzeroID())}
			if cons.Input.Grouping.Kind == topology.GlobalKind {
				r.targets = targets[:1]
			}
			if cons.Input.Grouping.Kind == topology.LocalOrShuffleKind {
				r.local = rt.hostedOf(cons.Bolt.ID)
			}
			for _, f := range cons.Input.Grouping.Fields {
				r.fieldIdx = append(r.fieldIdx, st.Source.Fields.Index(f))
			}
			r.fieldNames = cons.Input.Grouping.Fields
			if cons.Input.Grouping.Kind == topology.CustomKind {
				r.custom = cons.Input.Grouping.Custom()
				if err := r.custom.Prepare(st.Source, append([]int(nil), targets...)); err != nil {
					return nil, fmt.Errorf("custom grouping %s/%s -> %s: %w", comp.ID, id, cons.Bolt.ID, err)
				}
			}
			so.routes = append(so.routes, r)
		}
		e.streams[id] = so
	}
	return e, nil
}

// targets resolves where values on stream go (mu held). direct < 0 means a plain emit.
func (e *emitter) targets(stream string, direct int, values tuple.Values) (*streamOut, []int, error) {
	so := e.streams[stream]
	if so == nil {
		return nil, nil, fmt.Errorf("%w: %q emits on stream %q, which it does not declare", topology.ErrUnknownStream, e.comp.ID, stream)
	}
	if len(values) != so.src.Fields.Len() {
		return nil, nil, fmt.Errorf("%w: stream %q of %q declares %d fields %v, emit has %d values",
			topology.ErrFieldCount, stream, e.comp.ID, so.src.Fields.Len(), so.src.Fields, len(values))
	}
	if e.rt.serialize {
		// Every value must cross the codec: refuse the emit now, naming the field and
		// the type, rather than lose the batch when it is sent.
		var err error
		if e.encBuf, err = codec.AppendValues(e.encBuf[:0], values, so.src.Fields); err != nil {
			return nil, nil, fmt.Errorf("%q emits on stream %q: %w", e.comp.ID, stream, err)
		}
	}
	dst := e.scratch[:0]
	if direct >= 0 {
		if !so.direct {
			return nil, nil, fmt.Errorf("%w: EmitDirect on stream %q of %q, which is not declared direct", topology.ErrDirect, stream, e.comp.ID)
		}
		if c := e.rt.componentOf(direct); c == nil || !so.directComps[c.ID] {
			return nil, nil, fmt.Errorf("%w: EmitDirect to task %d, which does not consume direct stream %q of %q", topology.ErrDirect, direct, stream, e.comp.ID)
		}
		return so, append(dst, direct), nil
	}
	if so.direct {
		return nil, nil, fmt.Errorf("%w: stream %q of %q is direct: use EmitDirect", topology.ErrDirect, stream, e.comp.ID)
	}
	var err error
	for _, r := range so.routes {
		if dst, err = r.choose(values, dst); err != nil {
			return nil, nil, err
		}
	}
	e.scratch = dst
	return so, dst, nil
}

// edge returns the edge to task, made at its first tuple (mu held). A small
// direct-mapped cache in front of the map serves a task with few targets (word count:
// a map lookup per tuple was 1.3% of its time) in a fixed 256 bytes per task.
func (e *emitter) edge(task int) *outEdge {
	c := &e.ecache[task&(len(e.ecache)-1)]
	if o := *c; o != nil && o.to == task {
		return o
	}
	o := e.edges[task]
	if o == nil {
		o = e.ep.edgeTo(task)
		e.edges[task] = o
	}
	*c = o
	return o
}

// enqueue adds t to the batch of edge o, sending the batch when full (mu held).
func (e *emitter) enqueue(ctx context.Context, o *outEdge, t *tuple.Tuple) {
	if o.batch == nil {
		o.batch = make([]*tuple.Tuple, 0, e.rt.cfg.BatchSize)
	}
	if !o.dirty {
		o.dirty = true
		e.dirty = append(e.dirty, o)
	}
	o.batch = append(o.batch, t)
	e.stats.transferred++
	if len(o.batch) >= e.rt.cfg.BatchSize {
		// Acker messages first: a spout's init must not wait behind a send that may
		// block, or a reset or ack from downstream could reach the acker long before it.
		e.flushAcks()
		e.publish() // the send may block for long: let Stats see the counts so far
		e.send(ctx, o)
	}
}

// trySend sends o's batch if the edge has credit now, and reports whether it did
// (mu held).
func (e *emitter) trySend(o *outEdge) bool {
	ep := e.ep
	ep.cmu.Lock()
	if !o.flow.CanSend() {
		ep.cmu.Unlock()
		return false
	}
	b := o.batch
	pos := o.flow.Sent(len(b))
	o.seq++
	seq := o.seq
	ep.cmu.Unlock()
	o.batch = nil
	e.rt.send(&transport.Message{Kind: transport.KindTuples, From: int(e.task), To: o.to, Seq: seq, Pos: pos, Tuples: b})
	return true
}

// send sends o's batch, waiting for credit while the edge has none (mu held). The
// edge stays in the dirty list; flush clears it.
func (e *emitter) send(ctx context.Context, o *outEdge) {
	if len(o.batch) == 0 || e.trySend(o) {
		return
	}
	// No credit: the time waiting here is backpressure (Stats adds the time of a
	// send still waiting).
	if e.beforeBlock != nil {
		e.beforeBlock(true) // mu stays held while waiting: leave what it guards readable
		defer e.beforeBlock(false)
	}
	start := e.rt.nanotime()
	e.bp.mu.Lock()
	e.bp.since = start
	e.bp.mu.Unlock()
	ok := e.waitCredit(ctx, o)
	e.bp.mu.Lock()
	e.bp.total += e.rt.nanotime() - start // read under mu: Stats never sees the total shrink
	e.bp.since = 0
	e.bp.mu.Unlock()
	if !ok {
		// A hard stop, or a consumer that granted nothing for a message timeout,
		// ended the wait: the batch is dropped, and its trees (if any) time out.
		e.stats.dropped += uint64(len(o.batch))
		o.batch = nil
	}
}

// waitCredit waits until o's batch has gone out, taking the task's control messages
// meanwhile (a grant among them) and probing the consumer every resend interval (a
// grant may have been lost). It gives up when ctx ends.
//
// It also gives up after two message timeouts (unless timeouts are off): by then
// the batch's trees have timed out at their spouts (between 1 and 1.25 timeouts
// after their emit), and they are named as held here meanwhile; a consumer that
// grants nothing for that long is dead or stuck. The edge is then marked stalled: its next batches
// are dropped at once (probing still) until a grant comes, so a task never stops
// for good behind a dead host, and its spout goes on timing trees out and failing
// them.
func (e *emitter) waitCredit(ctx context.Context, o *outEdge) bool {
	ep := e.ep
	rt := e.rt
	ep.cmu.Lock()
	stalled := o.stalled
	ep.cmu.Unlock()
	if stalled {
		e.probe(o)
		return false
	}
	every := rt.resendEvery()
	probe := rt.clock.NewTimer(every)
	defer probe.Stop()
	var giveUp <-chan time.Time
	if !rt.cfg.DisableTimeouts {
		gt := rt.clock.NewTimer(2 * rt.cfg.MessageTimeout)
		defer gt.Stop()
		giveUp = gt.C()
	}
	for {
		ep.poll(false)
		if e.trySend(o) {
			return true
		}
		select {
		case <-ep.inbox.Signal():
		case <-ep.credited:
		case <-probe.C():
			e.probe(o)
			probe.Reset(every)
		case <-giveUp:
			ep.cmu.Lock()
			o.stalled = true
			ep.cmu.Unlock()
			e.log.Warn("no credit for two message timeouts: the consumer's host is dead or stuck; dropping this edge's batches until it grants again",
				"to_task", o.to, "waited", 2*rt.cfg.MessageTimeout)
			return false
		case <-ctx.Done():
			return false
		}
	}
}

// probe asks o's consumer for credit, telling it the edge's position.
func (e *emitter) probe(o *outEdge) {
	e.ep.cmu.Lock()
	pos := o.flow.Pos()
	e.ep.cmu.Unlock()
	e.rt.send(&transport.Message{Kind: transport.KindProbe, From: int(e.task), To: o.to, Pos: pos})
}

// ackMsg queues an acker message, coalescing consecutive acks of the same tree: a bolt
// acking a line's words back to back sends one message for them (mu held).
func (e *emitter) ackMsg(m acker.Msg) {
	if len(e.acks) == 0 {
		return
	}
	i := int(m.Root % uint64(len(e.acks)))
	buf := e.acks[i]
	if m.Kind == acker.Ack && len(buf) > 0 {
		last := &buf[len(buf)-1]
		if last.Kind == acker.Ack && last.Root == m.Root {
			last.Val ^= m.Val
			return
		}
	}
	if buf == nil {
		buf = getAcks() // from the pool: a buffer is held only while messages wait
	}
	e.acks[i] = append(buf, m)
}

// flush sends the queued acker messages, then every partial batch, waiting for
// credit where an edge has none (mu held). Acker messages go first because data
// sends may wait.
func (e *emitter) flush(ctx context.Context) {
	e.flushAcks()
	for _, o := range e.dirty {
		e.send(ctx, o)
		o.dirty = false
	}
	clear(e.dirty)
	e.dirty = e.dirty[:0]
	e.publish()
}

// flushHeld is the timed flush, from the runtime's flusher goroutine: if the task is
// not using its emitter now, it sends the queued acker messages and every partial
// batch whose edge has credit, and probes the consumers of those that have none (a
// grant may have been lost). It never waits: a task holding mu (emitting, or
// waiting for credit) flushes by itself.
func (e *emitter) flushHeld() {
	if !e.mu.TryLock() {
		return
	}
	defer e.mu.Unlock()
	if e.stopped {
		return // flushed for the last time at its exit
	}
	sent := false
	for _, buf := range e.acks {
		if len(buf) > 0 {
			sent = true
			break
		}
	}
	e.flushAcks()
	kept := e.dirty[:0]
	for _, o := range e.dirty {
		if len(o.batch) > 0 && !e.trySend(o) {
			e.probe(o)
			kept = append(kept, o)
			continue
		}
		o.dirty = false
		sent = true
	}
	clear(e.dirty[len(kept):])
	e.dirty = kept
	if sent {
		e.publish()
	}
}

// publish copies the counters for Stats (mu held). The histograms' copies are
// brought up to date with them at every publish, by copying only the buckets changed
// since the last one: a histogram may never lag the counts it belongs to, or the
// latency of an interval would be computed from another interval's trees.
func (e *emitter) publish() {
	e.pubMu.Lock()
	defer e.pubMu.Unlock()
	misuse := e.pub.misuse
	hists := [3]*Histogram{e.pub.latency, e.pub.execLat, e.pub.procLat}
	e.pub = e.stats
	e.pub.misuse = misuse
	if len(e.stats.misuse) > 0 {
		if misuse == nil {
			misuse = map[string]uint64{}
			e.pub.misuse = misuse
		}
		for k, v := range e.stats.misuse {
			misuse[k] = v
		}
	}
	for i, src := range [3]*Histogram{e.stats.latency, e.stats.execLat, e.stats.procLat} {
		dst := hists[i]
		if src != nil {
			if dst == nil {
				dst = &Histogram{}
			}
			src.syncTo(dst)
		}
		hists[i] = dst
	}
	e.pub.latency, e.pub.execLat, e.pub.procLat = hists[0], hists[1], hists[2]
}

// flushAcks sends the queued acker messages; the control lane never waits (mu
// held). A sent buffer belongs to the transport: the next one is new.
func (e *emitter) flushAcks() {
	for i, buf := range e.acks {
		if len(buf) > 0 {
			to := e.rt.ackerTasks[i]
			e.ep.cmu.Lock()
			seq := e.ep.nextSeq(to)
			e.ep.cmu.Unlock()
			e.rt.send(&transport.Message{Kind: transport.KindAcks, From: int(e.task), To: to, Seq: seq, Acks: buf})
			e.acks[i] = nil
		}
	}
}

// misuse counts one misuse and warns about it, at most once per component and kind
// per warnEvery (mu held).
func (e *emitter) misuse(kind string, t *tuple.Tuple) error {
	e.stats.misuse[kind]++
	e.publish()
	root, stream := uint64(0), ""
	if t != nil {
		root, stream = t.Root(), t.SourceStream()
	}
	err := fmt.Errorf("%w: %s in %q task %d (stream %q, root %016x)", topology.ErrMisuse, kind, e.comp.ID, e.task, stream, root)
	e.rt.warn(e.log, e.comp.ID, kind, "err", err, "stream", stream, "root", fmt.Sprintf("%016x", root))
	return err
}

// refused warns about an emit refused with err (unknown stream, values not matching
// the declared fields, a direct emit mismatch, a value the codec cannot encode), at
// most once per component per warnEvery, and returns err.
func (e *emitter) refused(err error) error {
	e.rt.warn(e.log, e.comp.ID, warnRefusedEmit, "err", err)
	return err
}

// reportError counts an error and logs it; past the first 10 of a task only every
// 1000th is logged, so a bolt that fails every tuple cannot flood the log.
func (e *emitter) reportError(err error, attrs ...any) {
	e.mu.Lock()
	e.stats.errors++
	n := e.stats.errors
	e.stats.lastError = err.Error()
	e.publish()
	e.mu.Unlock()
	if n <= 10 || n%1000 == 0 {
		e.log.Error("reported error", append([]any{"err", err, "errors_so_far", n}, attrs...)...)
	}
}

// taskEntry returns an empty per-task stats entry for this task.
func (e *emitter) taskEntry() *ComponentStats {
	return &ComponentStats{ID: e.comp.ID, Spout: e.comp.IsSpout(), Tasks: 1, Task: int(e.task), Misuse: map[string]uint64{}}
}

// snapshot adds this task's counters and histograms, as of its last flush, to cs.
func (e *emitter) snapshot(cs *ComponentStats) {
	// An idle task would never flush again: publish for it, unless the task holds mu
	// (busy, or blocked in a send), in which case its next flush publishes.
	if e.mu.TryLock() {
		e.publish()
		e.mu.Unlock()
	}
	e.pubMu.Lock()
	defer e.pubMu.Unlock()
	s := &e.pub
	cs.Emitted += s.emitted
	cs.Transferred += s.transferred
	cs.Acked += s.acked
	cs.Failed += s.failed
	cs.TimedOut += s.timedOut
	cs.LateOutcomes += s.late
	cs.Executed += s.executed
	cs.Ticks += s.ticks
	cs.ExecuteTime += time.Duration(s.executeNanos)
	cs.Errors += s.errors
	cs.Dropped += s.dropped
	e.bp.mu.Lock()
	bp := e.bp.total
	if e.bp.since != 0 {
		bp += max(e.rt.nanotime()-e.bp.since, 0)
	}
	e.bp.mu.Unlock()
	cs.Backpressure += time.Duration(bp)
	if s.lastError != "" {
		cs.LastError = s.lastError
	}
	for k, v := range s.misuse {
		cs.Misuse[k] += v
	}
	mergeHist(&cs.CompleteLatency, s.latency)
	mergeHist(&cs.ExecuteLatency, s.execLat)
	mergeHist(&cs.ProcessLatency, s.procLat)
}

func mergeHist(dst **Histogram, src *Histogram) {
	if src == nil {
		return
	}
	if *dst == nil {
		*dst = &Histogram{}
	}
	(*dst).Merge(src)
}
