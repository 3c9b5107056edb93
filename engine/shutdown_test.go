package engine

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gale-stream/gale/internal/leaktest"
	"github.com/gale-stream/gale/topology"
	"github.com/gale-stream/gale/tuple"
)

// Stats must answer while a task is blocked sending into a full queue.
func TestStatsDoNotBlockUnderBackpressure(t *testing.T) {
	rec := newRecorder()
	release := make(chan struct{})
	var once sync.Once
	defer once.Do(func() { close(release) }) // runs before cleanups, even on t.Fatal
	b := topology.NewBuilder()
	b.SetSpout("s", func() topology.Spout { return &listSpout{rec: rec, n: 100} }, 1).Output("id")
	b.SetBolt("slow", bolt(func(b *fnBolt, t *tuple.Tuple) { <-release; _ = b.out.Ack(t) }), 1).ShuffleGrouping("s")
	cfg := quietConfig()
	cfg.BatchSize, cfg.ReceiveQueue = 1, 1
	rt := start(t, mustBuild(t, b), cfg)
	// The spout has emitted more than the bolt's queue holds: it is blocked in a send.
	waitStat(t, rt, "the spout to fill the queue", func(s Stats) bool { return s.Components["s"].Emitted >= 3 })
	got := make(chan Stats, 1)
	go func() { got <- rt.Stats() }()
	select {
	case s := <-got:
		if s.Components["slow"].Executed != 0 {
			t.Fatalf("slow executed %d while held", s.Components["slow"].Executed)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Stats blocked behind a send under backpressure")
	}
	once.Do(func() { close(release) })
	rec.waitFor(t, "acks", func(a, f int) bool { return a == 100 })
	stop(t, rt)
}

// A task stuck in user code cannot hold Stop past its deadline (plus the grace).
func TestStopReturnsWhenUserCodeHangs(t *testing.T) {
	rec := newRecorder()
	release := make(chan struct{})
	var once sync.Once
	defer once.Do(func() { close(release) })
	entered := make(chan struct{}, 1)
	b := topology.NewBuilder()
	b.SetSpout("s", func() topology.Spout { return &listSpout{rec: rec, n: 1} }, 1).Output("id")
	b.SetBolt("stuck", bolt(func(b *fnBolt, t *tuple.Tuple) { entered <- struct{}{}; <-release }), 1).ShuffleGrouping("s")
	rt, err := Start(context.Background(), mustBuild(t, b), quietConfig())
	if err != nil {
		t.Fatal(err)
	}
	<-entered
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	err = rt.Stop(ctx)
	if !errors.Is(err, ErrShutdownTimeout) || !strings.Contains(err.Error(), "inside user code") {
		t.Fatalf("Stop = %v", err)
	}
	select {
	case <-rt.Done():
		t.Fatal("Done closed while a task is still in Execute")
	default:
	}
	once.Do(func() { close(release) }) // the task returns; everything winds down
	<-rt.Done()
	if s := rt.Stats().Components["s"]; s.Abandoned != 1 {
		t.Fatalf("abandoned %d, want 1", s.Abandoned)
	}
}

// Canceling Start's context stops at once; the trees it cut off are reported.
func TestStartContextCancelReportsAbandonedTrees(t *testing.T) {
	rec := newRecorder()
	held := make(chan *tuple.Tuple, 10)
	b := topology.NewBuilder()
	b.SetSpout("s", func() topology.Spout { return &listSpout{rec: rec, n: 10} }, 1).Output("id")
	b.SetBolt("hold", holdBolt(held, nil), 1).ShuffleGrouping("s")
	ctx, cancel := context.WithCancel(context.Background())
	rt, err := Start(ctx, mustBuild(t, b), quietConfig())
	if err != nil {
		t.Fatal(err)
	}
	for range 10 {
		<-held
	}
	cancel()
	<-rt.Done()
	err = rt.Stop(context.Background())
	if c := rt.Stats().Components["s"]; !errors.Is(err, ErrShutdownTimeout) || c.Abandoned != 10 || c.Pending != 0 {
		t.Fatalf("Stop = %v, abandoned %d", err, rt.Stats().Components["s"].Abandoned)
	}
	if a, f := rec.counts(); a+f != 0 {
		t.Fatalf("acks %d fails %d after a hard stop", a, f)
	}
}

// ResetTimeout refuses nil and tuples this task did not receive.
func TestResetTimeoutMisuse(t *testing.T) {
	rec := newRecorder()
	errs := make(chan error, 2)
	b := topology.NewBuilder()
	b.SetSpout("s", func() topology.Spout { return &listSpout{rec: rec, n: 1} }, 1).Output("id")
	b.SetBolt("a", bolt(func(b *fnBolt, t *tuple.Tuple) {
		errs <- b.out.ResetTimeout(nil)
		errs <- b.out.ResetTimeout(tuple.New(t.Source(), 0, t.Values()))
		_ = b.out.Ack(t)
	}), 1).ShuffleGrouping("s")
	rt := start(t, mustBuild(t, b), quietConfig())
	rec.waitFor(t, "ack", func(a, f int) bool { return a == 1 })
	stop(t, rt)
	for range 2 {
		if err := <-errs; !errors.Is(err, topology.ErrMisuse) {
			t.Fatalf("got %v", err)
		}
	}
	if n := rt.Stats().Components["a"].Misuse[MisuseForeignTask]; n != 1 {
		t.Fatalf("foreign-task misuse %d", n)
	}
}

// Every goroutine the runtime starts has an owner that stops it: after Done, the count
// is back where it was (ticks, ackers and async timers included).
func TestNoGoroutineLeak(t *testing.T) {
	before, _ := leaktest.Count()
	for range 3 {
		rec := newRecorder()
		b := topology.NewBuilder()
		b.SetSpout("s", func() topology.Spout { return &listSpout{rec: rec, n: 200} }, 2).Output("id")
		b.SetBolt("a", passOn, 3).ShuffleGrouping("s").Output("id").TickEvery(time.Millisecond)
		b.SetBolt("b", ackAll, 2).FieldsGrouping("a", "id")
		cfg := quietConfig()
		cfg.Ackers = 2
		rt, err := Start(context.Background(), mustBuild(t, b), cfg)
		if err != nil {
			t.Fatal(err)
		}
		rec.waitFor(t, "acks", func(a, f int) bool { return a == 400 })
		if err := rt.Stop(context.Background()); err != nil {
			t.Fatal(err)
		}
		<-rt.Done()
	}
	if after, stacks := leaktest.Settle(before); after > before {
		t.Fatalf("%d goroutines before, %d after:\n%s", before, after, stacks)
	}
}

// A spout stalled longer than the timeout (a slow NextTuple, a blocked send) must not
// expire the tree it emits right after: rotations are never caught up in a burst.
func TestStalledSpoutDoesNotExpireFreshTrees(t *testing.T) {
	rec := newRecorder()
	var calls atomic.Int32
	b := topology.NewBuilder()
	b.SetSpout("s", func() topology.Spout {
		return &listSpout{rec: rec, n: 1, onNext: func(topology.SpoutCollector) {
			if calls.Add(1) == 1 {
				time.Sleep(300 * time.Millisecond) // the stall, 3 timeouts: its length is the fault
			}
		}}
	}, 1).Output("id")
	// The fresh tree lives 10 ms: long enough for a burst of catch-up rotations
	// right after the stall to expire it.
	b.SetBolt("a", bolt(func(b *fnBolt, t *tuple.Tuple) { time.Sleep(10 * time.Millisecond); _ = b.out.Ack(t) }), 1).ShuffleGrouping("s")
	cfg := quietConfig()
	cfg.MessageTimeout = 100 * time.Millisecond
	rt := start(t, mustBuild(t, b), cfg)
	rec.waitFor(t, "outcome", func(a, f int) bool { return a+f == 1 })
	stop(t, rt)
	if a, f := rec.counts(); a != 1 || f != 0 {
		t.Fatalf("acks %d fails %d: a fresh tree was expired by catch-up rotations", a, f)
	}
}

// While Stop waits for a pending tree, the spout waits for outcomes instead of spinning.
func TestStoppingSpoutWaitsInsteadOfSpinning(t *testing.T) {
	rec := newRecorder()
	held := make(chan *tuple.Tuple, 1)
	b := topology.NewBuilder()
	b.SetSpout("s", func() topology.Spout { return &listSpout{rec: rec, n: 1} }, 1).Output("id")
	b.SetBolt("hold", holdBolt(held, nil), 1).ShuffleGrouping("s")
	rt, err := Start(context.Background(), mustBuild(t, b), quietConfig())
	if err != nil {
		t.Fatal(err)
	}
	<-held
	before := rt.spouts[0].loops.Load()
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if err := rt.Stop(ctx); !errors.Is(err, ErrShutdownTimeout) {
		t.Fatalf("Stop = %v", err)
	}
	<-rt.Done()
	// Waking: Stop's start, its deadline, and a few spurious signals at most.
	if n := rt.spouts[0].loops.Load() - before; n > 20 {
		t.Fatalf("the spout loop ran %d times while waiting for one tree", n)
	}
}
