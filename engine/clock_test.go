package engine

import (
	"context"
	"testing"
	"time"

	"github.com/gale-stream/gale/acker"
	"github.com/gale-stream/gale/clock"
	"github.com/gale-stream/gale/topology"
	"github.com/gale-stream/gale/transport"
	"github.com/gale-stream/gale/tuple"
)

// The tests here run the engine on a clock.Fake: time passes only when the test
// advances it, one rotation (MessageTimeout/4) at a time, after every task has
// armed its timers (BlockUntil). They never sleep; the only wall-clock bounds are the
// generous ones that turn a hang into a failure.

// fakeClock is a fake clock and the engine running on it.
type fakeClock struct {
	*clock.Fake
	t  *testing.T
	rt *Runtime
	// idle is the number of timers and tickers armed when every task waits: one
	// timer per spout task and per acker task (its rotation), the host's re-send
	// ticker, the flusher's ticker, and a ticker per bolt task with tick tuples.
	idle int
}

// startFake starts topo on a fake clock, with every message through the codec. At
// the test's end it stops the engine hard (Start's context): a fake clock that
// nobody advances never reaches Stop's deadline.
func startFake(t *testing.T, topo *topology.Topology, cfg topology.Config) *fakeClock {
	t.Helper()
	fake := clock.NewFake(time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC))
	ctx, cancel := context.WithCancel(context.Background())
	rt, err := Start(ctx, topo, cfg, WithSerialization(), WithClock(fake))
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		select {
		case <-rt.Done():
		case <-time.After(10 * time.Second):
			t.Error("tasks still running after a hard stop: a goroutine leak or a stuck task")
		}
	})
	f := &fakeClock{Fake: fake, t: t, rt: rt, idle: len(rt.spouts) + 1}
	if !cfg.DisableTimeouts {
		f.idle += len(rt.ackers)
	}
	if cfg.FlushInterval > 0 {
		f.idle++
	}
	for _, b := range rt.bolts {
		if b.e.comp.TickEvery > 0 {
			f.idle++
		}
	}
	return f
}

// settle waits until every task has armed its timers again: each one-shot timer
// (the spouts' and ackers') is re-armed only once its task has done what its firing
// called for, so what an Advance caused has happened when settle returns.
func (f *fakeClock) settle() {
	f.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := f.BlockUntil(ctx, f.idle); err != nil {
		f.t.Fatalf("waiting for %d timers armed (%d are): %v", f.idle, f.Waiters(), err)
	}
}

// rotate settles, advances the clock by one rotation, and settles again.
func (f *fakeClock) rotate() {
	f.t.Helper()
	f.settle()
	f.Advance(f.rt.cfg.MessageTimeout / rotationsPerTimeout)
	f.settle()
}

// receive takes n values from c, or fails the test if they do not come (a hang).
func receive[T any](t *testing.T, c <-chan T, n int) []T {
	t.Helper()
	var out []T
	for range n {
		select {
		case v := <-c:
			out = append(out, v)
		case <-time.After(10 * time.Second):
			t.Fatalf("received %d of %d", len(out), n)
		}
	}
	return out
}

// A tree nobody acks is failed as timed out at the rotation the package doc
// promises: not before one MessageTimeout of (fake) time has passed since its emit,
// and at 1.25 timeouts, the fifth rotation.
func TestFakeClockTimesOutAtTheRotationPromised(t *testing.T) {
	rec := newRecorder()
	held := make(chan *tuple.Tuple, 1)
	b := topology.NewBuilder()
	b.SetSpout("s", func() topology.Spout { return &listSpout{rec: rec, n: 1} }, 1).Output("id")
	b.SetBolt("b", holdBolt(held, nil), 1).ShuffleGrouping("s")
	cfg := quietConfig()
	cfg.MessageTimeout = 40 * time.Second
	f := startFake(t, mustBuild(t, b), cfg)
	receive(t, held, 1) // emitted at the fake clock's start
	emitted := f.Now()
	for i := 1; i <= rotationsPerTimeout+2; i++ {
		f.rotate()
		_, fails := rec.counts()
		waited := f.Since(emitted)
		switch {
		case waited <= cfg.MessageTimeout && fails != 0:
			t.Fatalf("timed out after %v, before the message timeout of %v", waited, cfg.MessageTimeout)
		case i == rotationsPerTimeout+1 && fails != 1:
			t.Fatalf("not timed out after %v (%d rotations); want it at 1.25 timeouts", waited, i)
		}
	}
	s := f.rt.Stats().Components["s"]
	if a, fails := rec.counts(); a != 0 || fails != 1 || s.TimedOut != 1 || s.Failed != 0 || s.Pending != 0 {
		t.Fatalf("acks %d fails %d; spout stats %+v", a, fails, s)
	}
}

// Max spout pending with a bolt that never acks: the spout emits exactly the limit,
// then nothing until the message timeout fails those trees, then the limit again.
// The time NextTuple was held back is exactly the fake time that passed.
func TestFakeClockMaxSpoutPendingRefillsAfterTimeouts(t *testing.T) {
	const limit = 3
	rec := newRecorder()
	held := make(chan *tuple.Tuple, 2*limit+1)
	b := topology.NewBuilder()
	b.SetSpout("s", func() topology.Spout { return &listSpout{rec: rec, n: 1000} }, 1).Output("id")
	b.SetBolt("b", holdBolt(held, nil), 1).ShuffleGrouping("s")
	cfg := quietConfig()
	cfg.MessageTimeout = 8 * time.Second
	cfg.MaxSpoutPending = limit
	f := startFake(t, mustBuild(t, b), cfg)
	receive(t, held, limit)
	check := func(when string, fails int, emitted uint64) {
		t.Helper()
		s := f.rt.Stats().Components["s"]
		if _, f := rec.counts(); f != fails || s.Emitted != emitted || s.Pending != limit || s.TimedOut != uint64(fails) {
			t.Fatalf("%s: fails %d (want %d), spout stats %+v (want %d emitted, %d pending)", when, f, fails, s, emitted, limit)
		}
	}
	for i := 1; i <= rotationsPerTimeout; i++ {
		f.rotate()
		check("before the timeout", 0, limit)
	}
	f.rotate() // 1.25 timeouts: the three time out, and three more go
	receive(t, held, limit)
	check("after the timeout", limit, 2*limit)
	if len(held) != 0 {
		t.Fatalf("%d tuples more than the limit reached the bolt", len(held))
	}
	want := cfg.MessageTimeout * (rotationsPerTimeout + 1) / rotationsPerTimeout
	if got := f.rt.Stats().Components["s"].SkippedMaxSpout; got != want {
		t.Fatalf("SkippedMaxSpout %v, want %v (the fake time the spout was full)", got, want)
	}
}

// The acker drops an entry without an init (a stray ack) as an orphan after its
// rotations (ackerBuckets), driven by the fake clock, and not one rotation before.
func TestFakeClockAckerDropsOrphanAfterItsRotations(t *testing.T) {
	b := topology.NewBuilder()
	b.SetSpout("s", func() topology.Spout { return &listSpout{rec: newRecorder()} }, 1).Output("id")
	b.SetBolt("b", ackAll, 1).ShuffleGrouping("s")
	cfg := quietConfig()
	cfg.MessageTimeout = 4 * time.Second
	f := startFake(t, mustBuild(t, b), cfg)
	// An ack for a tree the acker never heard of, as from the bolt's task.
	rt := f.rt
	rt.send(&transport.Message{Kind: transport.KindAcks, From: rt.Tasks("b")[0], To: rt.AckerTasks()[0], Seq: 1,
		Acks: []acker.Msg{{Kind: acker.Ack, Root: 0x5eed, Val: 0xfeed}}})
	waitStat(t, rt, "the stray ack held", func(s Stats) bool { return s.Acker.Unmatched == 1 })
	for i := 1; i <= ackerBuckets; i++ {
		f.rotate()
		a := rt.Stats().Acker
		if i < ackerBuckets && (a.Orphans != 0 || a.Unmatched != 1) {
			t.Fatalf("after %d rotations: acker %+v; want the entry held until rotation %d", i, a, ackerBuckets)
		}
		if i == ackerBuckets && (a.Orphans != 1 || a.Unmatched != 0) {
			t.Fatalf("after %d rotations: acker %+v; want 1 orphan", i, a)
		}
	}
}
