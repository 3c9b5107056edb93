package engine

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/gale-stream/gale/internal/waitfor"
	"github.com/gale-stream/gale/lineage"
	"github.com/gale-stream/gale/topology"
	"github.com/gale-stream/gale/tuple"
)

func recorder0(t *testing.T) *lineage.Recorder {
	t.Helper()
	c := lineage.DefaultConfig()
	c.Sample = 0
	r, err := lineage.New(c)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func taskHolders(rec *lineage.Recorder, msg string) []lineage.Holder {
	tr, ok := rec.Lookup(msg)
	if !ok {
		return nil
	}
	var out []lineage.Holder
	for _, h := range tr.Holders {
		if !h.FromLineage {
			out = append(out, h)
		}
	}
	return out
}

// TestStuckExecuteNamesHolder: a bolt stuck inside Execute cannot answer for itself,
// yet the timed-out tree names it (found by review: it named nobody).
func TestStuckExecuteNamesHolder(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	rec := newRecorder()
	b := topology.NewBuilder()
	b.SetSpout("s", func() topology.Spout { return &listSpout{rec: rec, n: 1} }, 1).Output("id")
	b.SetBolt("stuck", bolt(func(b *fnBolt, in *tuple.Tuple) { <-release; _ = b.out.Ack(in) }), 1).ShuffleGrouping("s")
	cfg := quietConfig()
	cfg.MessageTimeout = 100 * time.Millisecond
	lin := recorder0(t)
	start(t, mustBuild(t, b), cfg, WithLineage(lin))
	waitfor.True(t, 10*time.Second, "the stuck task to be named", func() bool { return len(taskHolders(lin, "0")) == 1 })
	h := taskHolders(lin, "0")[0]
	if h.Component != "stuck" || h.Task != 2 || h.SourceComp != "s" || h.Since == 0 {
		t.Errorf("holder %+v", h)
	}
	tr, _ := lin.Lookup("0")
	if tr.Outcome != lineage.TimedOut {
		t.Errorf("outcome %s", tr.Outcome)
	}
}

// twoTreeJoin builds s -> join -> last: s emits messages 0 and 1, the second 150 ms
// after the first; join emits one tuple anchored to both, so that it is in two trees
// that time out 150 ms apart, and last (the bolt given) gets it.
func twoTreeJoin(last func() topology.Bolt) *topology.Builder {
	rec := newRecorder()
	b := topology.NewBuilder()
	b.SetSpout("s", func() topology.Spout {
		s := &listSpout{rec: rec, n: 2}
		var first time.Time
		s.onNext = func(topology.SpoutCollector) {
			if s.next == 1 && time.Since(first) < 150*time.Millisecond {
				s.n = 1 // hold message 1 back for 150 ms
			} else {
				s.n = 2
			}
			if s.next == 0 {
				first = time.Now()
			}
		}
		return s
	}, 1).Output("id")
	var mu sync.Mutex
	var held *tuple.Tuple
	b.SetBolt("join", bolt(func(b *fnBolt, in *tuple.Tuple) {
		mu.Lock()
		defer mu.Unlock()
		if held == nil {
			held = in
			return
		}
		_ = b.out.Emit(tuple.Values{1}, held, in)
		_ = b.out.Ack(held)
		_ = b.out.Ack(in)
	}), 1).Output("n").GlobalGrouping("s")
	b.SetBolt("last", last, 1).ShuffleGrouping("join")
	return b
}

// TestMultiRootTupleNamedForBothTrees: a tuple anchored to two trees that time out
// 150 ms apart is named as held for each (found by review: only the first).
func TestMultiRootTupleNamedForBothTrees(t *testing.T) {
	b := twoTreeJoin(bolt(func(*fnBolt, *tuple.Tuple) {})) // never acks
	cfg := quietConfig()
	cfg.MessageTimeout = 200 * time.Millisecond
	lin := recorder0(t)
	start(t, mustBuild(t, b), cfg, WithLineage(lin))
	for _, msg := range []string{"0", "1"} {
		waitfor.True(t, 10*time.Second, "a holder of tree "+msg, func() bool { return len(taskHolders(lin, msg)) == 1 })
		if h := taskHolders(lin, msg)[0]; h.Component != "last" || h.SourceComp != "join" {
			t.Errorf("tree %s: holder %+v", msg, h)
		}
	}
}

// heldLen counts a bolt task's held list.
func heldLen(rt *Runtime, comp string) int {
	n := 0
	for _, b := range rt.bolts {
		if b.e.comp.ID != comp {
			continue
		}
		b.e.mu.Lock()
		n += len(b.held)
		b.e.mu.Unlock()
	}
	return n
}

// TestHeldListLetsGoOfFailedTrees: tuples never acked by one bolt while another fails
// their trees are reported and let go (found by review: they stayed linked for good).
func TestHeldListLetsGoOfFailedTrees(t *testing.T) {
	rec := newRecorder()
	b := topology.NewBuilder()
	b.SetSpout("s", func() topology.Spout { return &listSpout{rec: rec, n: 200} }, 1).Output("id")
	b.SetBolt("failer", bolt(func(b *fnBolt, in *tuple.Tuple) { _ = b.out.Fail(in) }), 1).ShuffleGrouping("s")
	b.SetBolt("dropper", bolt(func(*fnBolt, *tuple.Tuple) {}), 1).ShuffleGrouping("s")
	lin := recorder0(t)
	rt := start(t, mustBuild(t, b), quietConfig(), WithLineage(lin))
	rec.waitFor(t, "200 fails", func(_, f int) bool { return f == 200 })
	// The fails can all be in before the dropper has run (its held list is empty then
	// too): wait for the dropper to have taken every input, then for it to report
	// tree 199 and let go of every tree.
	waitfor.True(t, 10*time.Second, "the dropper to execute 200 inputs", func() bool { return rt.Stats().Components["dropper"].Executed == 200 })
	waitfor.True(t, 10*time.Second, "the dropper to report tree 199", func() bool { return len(taskHolders(lin, "199")) == 1 })
	if hs := taskHolders(lin, "199"); hs[0].Component != "dropper" {
		t.Errorf("failed tree 199 holders %+v, want dropper", hs)
	}
	waitfor.True(t, 10*time.Second, "dropper's held list to empty", func() bool { return heldLen(rt, "dropper") == 0 })
}

// TestStallTimesAreLive: time held back by max spout pending and time blocked on a
// full queue show while the stall lasts, not only after it (found by review).
func TestStallTimesAreLive(t *testing.T) {
	release := make(chan struct{})
	rec := newRecorder()
	b := topology.NewBuilder()
	b.SetSpout("s", func() topology.Spout { return &listSpout{rec: rec, n: 1000} }, 1).Output("id")
	b.SetBolt("slow", bolt(func(b *fnBolt, in *tuple.Tuple) { <-release; _ = b.out.Ack(in) }), 1).ShuffleGrouping("s")
	cfg := quietConfig()
	cfg.MaxSpoutPending = 1
	cfg.MessageTimeout = time.Minute
	rt := start(t, mustBuild(t, b), cfg)
	// The stall lasts until release: its time must show meanwhile.
	waitfor.Until(t, 10*time.Second, func() error {
		if d := rt.Stats().Components["s"].SkippedMaxSpout; d < 200*time.Millisecond {
			return fmt.Errorf("at max spout pending, SkippedMaxSpout = %v, want it to pass 200ms before the stall ends", d)
		}
		return nil
	})
	close(release)

	block := make(chan struct{})
	defer close(block)
	b2 := topology.NewBuilder()
	b2.SetSpout("s", func() topology.Spout { return &listSpout{rec: newRecorder(), n: 1000, untracked: true} }, 1).Output("id")
	b2.SetBolt("blocked", bolt(func(*fnBolt, *tuple.Tuple) { <-block }), 1).ShuffleGrouping("s")
	cfg2 := quietConfig()
	cfg2.BatchSize, cfg2.ReceiveQueue = 1, 2
	rt2 := start(t, mustBuild(t, b2), cfg2)
	waitfor.Until(t, 10*time.Second, func() error {
		if d := rt2.Stats().Components["s"].Backpressure; d < 200*time.Millisecond {
			return fmt.Errorf("blocked on a full queue, Backpressure = %v, want it to pass 200ms before the block ends", d)
		}
		return nil
	})
}

// TestAsyncAckProcessLatency: an input acked by another goroutine while a later
// Execute of its batch still runs is timed at its ack, not at the end of that
// Execute. No fixed bound: the later Execute waits for the ack, then runs on for
// twice the time from Start to the ack (d), so an input timed at its ack shows at
// most d and one timed at the batch's end at least 2d, however loaded the machine.
func TestAsyncAckProcessLatency(t *testing.T) {
	rec := newRecorder()
	b := topology.NewBuilder()
	b.SetSpout("s", func() topology.Spout { return &listSpout{rec: rec, n: 2} }, 1).Output("id")
	var wg sync.WaitGroup
	defer wg.Wait()
	acked := make(chan struct{})
	var ackedAt time.Time
	var d time.Duration // from before Start to the async ack's return
	begin := time.Now()
	b.SetBolt("async", bolt(func(b *fnBolt, in *tuple.Tuple) {
		if in.Value(0).(int) == 0 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_ = b.out.Ack(in)
				ackedAt = time.Now()
				d = ackedAt.Sub(begin)
				close(acked)
			}()
			return
		}
		entered := time.Now()
		<-acked
		from := ackedAt
		if entered.After(from) {
			from = entered
		}
		// (an eighth more: the runtime times inputs with a calibrated cycle counter)
		// Wall time by nature: the latency measured is this Execute's length.
		for want := 2*d + d/8; time.Since(from) < want; {
			time.Sleep(want - time.Since(from))
		}
		_ = b.out.Ack(in)
	}), 1).ShuffleGrouping("s")
	cfg := quietConfig()
	cfg.BatchSize = 2
	rt := start(t, mustBuild(t, b), cfg)
	rec.waitFor(t, "2 acks", func(a, _ int) bool { return a == 2 })
	stop(t, rt)
	h := rt.Stats().Components["async"].ProcessLatency
	var lows []int64 // the lower bound of each value's bucket
	h.Buckets(func(lower, _ int64, count uint64) {
		for range count {
			lows = append(lows, lower)
		}
	})
	if h.Count() != 2 || len(lows) != 2 || time.Duration(lows[0]) > d || h.Max() < 2*d {
		t.Errorf("process latencies in buckets from %v (count %d, max %v); want one at most %v (timed at its ack) and one at least %v",
			lows, h.Count(), h.Max(), d, 2*d)
	}
}

// TestHeldListAfterStalls: inputs whose trees ended while they waited in the queue or
// ran for longer than two timeouts are reported and never listed (found by review:
// they stayed listed for good).
func TestHeldListAfterStalls(t *testing.T) {
	rec := newRecorder()
	ended := make(chan struct{}) // closed once every tree has timed out
	var once sync.Once
	end := func() { once.Do(func() { close(ended) }) }
	defer end()
	b := topology.NewBuilder()
	b.SetSpout("s", func() topology.Spout { return &listSpout{rec: rec, n: 20} }, 1).Output("id")
	b.SetBolt("slow", bolt(func(_ *fnBolt, in *tuple.Tuple) {
		if in.Value(0).(int) == 0 {
			waitOrFail(t, ended, "every tree to time out") // then returns without acking
		}
	}), 1).ShuffleGrouping("s")
	cfg := quietConfig()
	cfg.BatchSize, cfg.MessageTimeout = 1, 100*time.Millisecond
	lin := recorder0(t)
	rt := start(t, mustBuild(t, b), cfg, WithLineage(lin))
	rec.waitFor(t, "20 timeouts", func(_, f int) bool { return f == 20 })
	end() // input 0's Execute outlived its tree; the others waited in the queue
	waitfor.True(t, 10*time.Second, "every input executed", func() bool { return rt.Stats().Components["slow"].Executed == 20 })
	for _, msg := range []string{"0", "19"} {
		waitfor.True(t, 10*time.Second, "the holder of "+msg, func() bool { return len(taskHolders(lin, msg)) == 1 })
	}
	from := rt.sweeps.Load()
	waitfor.True(t, 10*time.Second, "three more sweeps", func() bool { return rt.sweeps.Load() >= from+3 })
	if n := heldLen(rt, "slow"); n != 0 {
		t.Errorf("held list has %d inputs, all of whose trees ended", n)
	}
}

// TestMultiRootStuckNamedForBoth: an input of two trees stuck inside Execute is named
// for each tree as it times out (found by review: only for the first).
func TestMultiRootStuckNamedForBoth(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	b := twoTreeJoin(bolt(func(*fnBolt, *tuple.Tuple) { <-release }))
	cfg := quietConfig()
	cfg.MessageTimeout = 200 * time.Millisecond
	lin := recorder0(t)
	start(t, mustBuild(t, b), cfg, WithLineage(lin))
	for _, msg := range []string{"0", "1"} {
		waitfor.True(t, 10*time.Second, "the stuck holder of tree "+msg, func() bool { return len(taskHolders(lin, msg)) == 1 })
		if h := taskHolders(lin, msg)[0]; h.Component != "last" || h.Since == 0 {
			t.Errorf("tree %s: holder %+v", msg, h)
		}
	}
}

// TestStallTimesNeverShrink: two Stats calls never see backpressure or skipped time go
// down (found by review: a stall's end was dated before a Stats call in between).
func TestStallTimesNeverShrink(t *testing.T) {
	rec := newRecorder()
	b := topology.NewBuilder()
	b.SetSpout("s", func() topology.Spout {
		s := &listSpout{rec: rec, n: 1 << 30}
		return s
	}, 1).Output("id")
	// A slow bolt (the stalls under test): each Execute takes 200 µs of wall time.
	b.SetBolt("slow", bolt(func(b *fnBolt, in *tuple.Tuple) { time.Sleep(200 * time.Microsecond); _ = b.out.Ack(in) }), 1).ShuffleGrouping("s")
	cfg := quietConfig()
	cfg.BatchSize, cfg.ReceiveQueue, cfg.MaxSpoutPending = 1, 2, 3
	rt := start(t, mustBuild(t, b), cfg)
	var lastSkip, lastBP time.Duration
	for end := time.Now().Add(time.Second); time.Now().Before(end); {
		c := rt.Stats().Components["s"]
		if c.SkippedMaxSpout < lastSkip || c.Backpressure < lastBP {
			t.Fatalf("went back: skipped %v -> %v, backpressure %v -> %v", lastSkip, c.SkippedMaxSpout, lastBP, c.Backpressure)
		}
		lastSkip, lastBP = c.SkippedMaxSpout, c.Backpressure
	}
	if lastSkip == 0 {
		t.Error("no time at max spout pending was seen")
	}
}

// TestBlockedInSendNamedAsHolder: a bolt whose Execute is blocked emitting into a full
// queue holds its mutex; the timed-out tree still names it, from the copy it left
// before blocking (found by review: it was never named), and the stuck bolt below.
func TestBlockedInSendNamedAsHolder(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	rec := newRecorder()
	b := topology.NewBuilder()
	b.SetSpout("s", func() topology.Spout { return &listSpout{rec: rec, n: 1} }, 1).Output("id")
	b.SetBolt("up", bolt(func(b *fnBolt, in *tuple.Tuple) {
		for i := range 100 {
			_ = b.out.Emit(tuple.Values{i}, in) // blocks once down's queue is full
		}
		_ = b.out.Ack(in)
	}), 1).Output("n").ShuffleGrouping("s")
	b.SetBolt("down", bolt(func(*fnBolt, *tuple.Tuple) { <-release }), 1).ShuffleGrouping("up")
	cfg := quietConfig()
	cfg.BatchSize, cfg.ReceiveQueue, cfg.MessageTimeout = 1, 2, 200*time.Millisecond
	lin := recorder0(t)
	start(t, mustBuild(t, b), cfg, WithLineage(lin))
	waitfor.True(t, 10*time.Second, "up and down named", func() bool {
		names := map[string]bool{}
		for _, h := range taskHolders(lin, "0") {
			names[h.Component] = true
		}
		return names["up"] && names["down"]
	})
}

// TestQueueDepthCountsTuples: a bolt's queue depth is in tuples, not batches. With
// batches of 3, a queue of 2 batches and the bolt stuck in its first input, 6 tuples
// wait (it said 2, the batches, before).
func TestQueueDepthCountsTuples(t *testing.T) {
	release := make(chan struct{})
	var once sync.Once
	free := func() { once.Do(func() { close(release) }) }
	defer free()
	rec := newRecorder()
	calls := 0
	b := topology.NewBuilder()
	b.SetSpout("s", func() topology.Spout {
		return &listSpout{rec: rec, onNext: func(out topology.SpoutCollector) {
			if calls < 4 { // 4 full batches, each sent as it fills
				calls++
				for i := range 3 {
					_ = out.Emit(tuple.Values{calls*10 + i}, nil)
				}
			}
		}}
	}, 1).Output("id")
	b.SetBolt("down", bolt(func(*fnBolt, *tuple.Tuple) { <-release }), 1).ShuffleGrouping("s")
	cfg := quietConfig()
	cfg.BatchSize, cfg.ReceiveQueue = 3, 6 // room for 2 batches
	rt := start(t, mustBuild(t, b), cfg)
	depth := func() int { return rt.Stats().Components["down"].QueueDepth }
	waitfor.True(t, 10*time.Second, "6 tuples queued", func() bool { return depth() == 6 })
	free()
	waitfor.True(t, 10*time.Second, "the queue emptied and every tuple executed", func() bool {
		c := rt.Stats().Components["down"]
		return c.QueueDepth == 0 && c.Executed == 12
	})
}
