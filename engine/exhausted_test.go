package engine

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gale-stream/gale/internal/waitfor"
	"github.com/gale-stream/gale/topology"
	"github.com/gale-stream/gale/tuple"
)

// finiteSpout emits ids base..base+n-1 (base = task index * n) as tracked tuples,
// replays a failed one, and implements topology.FiniteSpout eagerly: it says it is
// exhausted as soon as it has nothing left to emit, even with trees in flight, so
// that the engine's own gate (no tree in flight) is what the tests see.
type finiteSpout struct {
	n, next, base int
	again         []any
	out           topology.SpoutCollector
	acked, failed *atomic.Int64
	// askedPending counts Exhausted calls made while the task had trees in flight
	// (the engine must never make one).
	askedPending *atomic.Int64
	asked        *atomic.Int64
}

func (s *finiteSpout) Open(_ context.Context, tc topology.TaskContext, out topology.SpoutCollector) error {
	s.out, s.base = out, tc.TaskIndex*s.n
	return nil
}

func (s *finiteSpout) NextTuple() {
	if len(s.again) > 0 {
		id := s.again[0]
		s.again = s.again[1:]
		_ = s.out.Emit(tuple.Values{id}, id)
		return
	}
	if s.next < s.n {
		id := s.base + s.next
		s.next++
		_ = s.out.Emit(tuple.Values{id}, id)
	}
}

func (s *finiteSpout) Ack(any) { s.acked.Add(1) }
func (s *finiteSpout) Fail(id any) {
	s.failed.Add(1)
	s.again = append(s.again, id)
}
func (s *finiteSpout) Close() error { return nil }

func (s *finiteSpout) Exhausted() bool {
	s.asked.Add(1)
	if s.out.Pending() != 0 {
		s.askedPending.Add(1)
	}
	return s.next >= s.n && len(s.again) == 0
}

type finiteCounts struct{ acked, failed, asked, askedPending atomic.Int64 }

func (c *finiteCounts) spout(n int) func() topology.Spout {
	return func() topology.Spout {
		return &finiteSpout{n: n, acked: &c.acked, failed: &c.failed, asked: &c.asked, askedPending: &c.askedPending}
	}
}

func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// Exhausted closes only once every tree of every spout task completed, replays of
// failed trees included: at that moment every id was acked exactly once and every
// first failure was replayed; the spout was never asked with a tree in flight; and
// Stats shows both tasks exhausted with nothing pending.
func TestExhaustedAfterEveryTree(t *testing.T) {
	const n = 300
	var c finiteCounts
	var firstTry sync.Map // ids whose first attempt was failed
	failsWanted := 0
	for id := range 2 * n {
		if id%3 == 0 {
			failsWanted++
		}
	}
	b := topology.NewBuilder()
	b.SetSpout("s", c.spout(n), 2).Output("id")
	b.SetBolt("a", passOn, 2).ShuffleGrouping("s").Output("id")
	b.SetBolt("b", bolt(func(b *fnBolt, in *tuple.Tuple) {
		id := in.Value(0).(int)
		if _, again := firstTry.LoadOrStore(id, true); !again && id%3 == 0 {
			_ = b.out.Fail(in)
			return
		}
		_ = b.out.Ack(in)
	}), 2).FieldsGrouping("a", "id")
	cfg := quietConfig()
	cfg.Ackers = 2
	cfg.MaxSpoutPending = 50
	rt := start(t, mustBuild(t, b), cfg)
	select {
	case <-rt.Exhausted():
	case <-time.After(30 * time.Second): // a hang, not a slow machine
		t.Fatalf("Exhausted never closed: acked %d, failed %d", c.acked.Load(), c.failed.Load())
	}
	if a, f := c.acked.Load(), c.failed.Load(); a != 2*n || f != int64(failsWanted) {
		t.Fatalf("at Exhausted: %d acked, %d failed; want %d and %d", a, f, 2*n, failsWanted)
	}
	if p := c.askedPending.Load(); p != 0 || c.asked.Load() == 0 {
		t.Fatalf("Exhausted asked %d times, %d of them with trees in flight", c.asked.Load(), p)
	}
	s := rt.Stats().Components["s"]
	if s.Exhausted != 2 || s.Pending != 0 || s.Acked != 2*n || s.Failed != uint64(failsWanted) {
		t.Fatalf("spout stats: exhausted %d, pending %d, acked %d, failed %d", s.Exhausted, s.Pending, s.Acked, s.Failed)
	}
	stop(t, rt)
	if s := rt.Stats().Components["s"]; s.Emitted != uint64(2*n+failsWanted) {
		t.Fatalf("emitted %d after Exhausted, want %d: NextTuple called after the spout was exhausted?", s.Emitted, 2*n+failsWanted)
	}
}

// A spout that has emitted everything but has trees in flight is not exhausted,
// however often the task loops; a failed one is replayed; Exhausted closes only
// once the last tree is acked.
func TestExhaustedWaitsForHeldTrees(t *testing.T) {
	var c finiteCounts
	held := make(chan *tuple.Tuple, 3)
	outs := make(chan topology.OutputCollector, 3)
	b := topology.NewBuilder()
	b.SetSpout("s", c.spout(3), 1).Output("id")
	b.SetBolt("h", holdBolt(held, outs), 1).ShuffleGrouping("s")
	cfg := quietConfig()
	cfg.Ackers = 1
	rt := start(t, mustBuild(t, b), cfg)
	var ins []*tuple.Tuple
	var out topology.OutputCollector
	for range 3 {
		out = <-outs
		ins = append(ins, <-held)
	}
	// The spout has emitted all 3; its task keeps looping (idle) with 3 in flight.
	sp := rt.spouts[0]
	l0 := sp.loops.Load()
	waitfor.True(t, 20*time.Second, "the spout task to loop", func() bool { return sp.loops.Load() > l0+3 })
	if isClosed(rt.Exhausted()) {
		t.Fatal("Exhausted closed with 3 trees in flight")
	}
	// Fail one: it is replayed, and held again.
	_ = out.Fail(ins[1])
	replay := <-held
	<-outs
	_ = out.Ack(ins[0])
	_ = out.Ack(ins[2])
	waitStat(t, rt, "two acks", func(s Stats) bool { return s.Components["s"].Acked == 2 })
	l0 = sp.loops.Load()
	waitfor.True(t, 20*time.Second, "the spout task to loop", func() bool { return sp.loops.Load() > l0+3 })
	if isClosed(rt.Exhausted()) {
		t.Fatal("Exhausted closed with the replay in flight")
	}
	_ = out.Ack(replay)
	select {
	case <-rt.Exhausted():
	case <-time.After(20 * time.Second):
		t.Fatal("Exhausted never closed after the last ack")
	}
	if a, f := c.acked.Load(), c.failed.Load(); a != 3 || f != 1 {
		t.Fatalf("%d acked, %d failed; want 3 and 1", a, f)
	}
	if p := c.askedPending.Load(); p != 0 {
		t.Fatalf("Exhausted asked %d times with trees in flight", p)
	}
}

// A topology with a spout that is no FiniteSpout is never exhausted, even once its
// other, finite spout is and every tree of both completed.
func TestExhaustedNotWithoutFiniteSpouts(t *testing.T) {
	var c finiteCounts
	rec := newRecorder()
	b := topology.NewBuilder()
	b.SetSpout("finite", c.spout(20), 1).Output("id")
	b.SetSpout("list", func() topology.Spout { return &listSpout{rec: rec, n: 20} }, 1).Output("id")
	b.SetBolt("a", ackAll, 1).ShuffleGrouping("finite").ShuffleGrouping("list")
	cfg := quietConfig()
	cfg.Ackers = 1
	rt := start(t, mustBuild(t, b), cfg)
	rec.waitFor(t, "the list spout's acks", func(a, f int) bool { return a == 20 })
	waitStat(t, rt, "the finite spout exhausted", func(s Stats) bool { return s.Components["finite"].Exhausted == 1 })
	if isClosed(rt.Exhausted()) {
		t.Fatal("Exhausted closed though spout list is no FiniteSpout")
	}
	stop(t, rt)
	if isClosed(rt.Exhausted()) {
		t.Fatal("Exhausted closed by the stop")
	}
	if s := rt.Stats().Components["list"]; s.Exhausted != 0 {
		t.Fatalf("list spout counted exhausted: %d", s.Exhausted)
	}
}
