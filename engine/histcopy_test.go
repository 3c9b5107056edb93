package engine

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/gale-stream/gale/internal/waitfor"
	"github.com/gale-stream/gale/topology"
)

// TestStatsLatencyMatchesCounts: a spout's complete-latency histogram in Stats counts
// the same trees as its Acked, whether or not the task is busy when Stats asks. (It
// did not: histograms were copied only at a flush after a Stats call, so a Stats that
// found the task busy right after one that found it idle got the counters of now and
// the histogram of the previous call, and the UI's latency chart drew 0 ms while
// thousands of trees were acked.)
func TestStatsLatencyMatchesCounts(t *testing.T) {
	rec := newRecorder()
	var budget atomic.Int64
	sp := &listSpout{rec: rec, n: 1 << 30}
	sp.onNext = func(topology.SpoutCollector) {
		if int64(sp.next) >= budget.Load() {
			sp.n = sp.next // nothing to emit until the budget grows
		} else {
			sp.n = 1 << 30
		}
	}
	b := topology.NewBuilder()
	b.SetSpout("s", func() topology.Spout { return sp }, 1).Output("id")
	b.SetBolt("ack", ackAll, 1).ShuffleGrouping("s")
	rt := start(t, mustBuild(t, b), quietConfig())
	e := rt.spouts[0].e
	published := func(n uint64) func() bool {
		return func() bool {
			e.pubMu.Lock()
			defer e.pubMu.Unlock()
			return e.pub.acked == n
		}
	}
	check := func(when string, want uint64) {
		t.Helper()
		c := rt.Stats().Components["s"]
		if c.Acked != want || c.CompleteLatency.Count() != c.Acked {
			t.Errorf("%s: Acked %d (want %d), complete latency counts %d trees", when, c.Acked, want, c.CompleteLatency.Count())
		}
	}
	budget.Store(100)
	rec.waitFor(t, "100 acks", func(acks, _ int) bool { return acks == 100 })
	waitfor.True(t, 10*time.Second, "100 acks published", published(100))
	check("idle task", 100)

	budget.Store(200)
	rec.waitFor(t, "200 acks", func(acks, _ int) bool { return acks == 200 })
	waitfor.True(t, 10*time.Second, "200 acks published", published(200))
	e.mu.Lock() // the task is busy (emitting, or blocked in a send) when Stats asks
	c := rt.Stats().Components["s"]
	e.mu.Unlock()
	if c.Acked != 200 || c.CompleteLatency.Count() != 200 {
		t.Errorf("busy task: Acked %d, complete latency counts %d trees, want 200 and 200", c.Acked, c.CompleteLatency.Count())
	}
	check("idle again", 200)
}

// TestFinished: zero while the topology runs, set by the time Done is closed.
func TestFinished(t *testing.T) {
	b := topology.NewBuilder()
	b.SetSpout("s", func() topology.Spout { return &listSpout{rec: newRecorder(), n: 1} }, 1).Output("id")
	rt := start(t, mustBuild(t, b), quietConfig())
	if f := rt.Finished(); !f.IsZero() {
		t.Errorf("Finished = %v while running", f)
	}
	stop(t, rt)
	if f := rt.Finished(); f.Before(rt.Started()) {
		t.Errorf("Finished = %v after Done, started %v", f, rt.Started())
	}
}

// TestHistogramSyncTo: a copy kept up to date with syncTo equals the histogram after
// Record, Merge and Sub, whatever buckets they touched.
func TestHistogramSyncTo(t *testing.T) {
	var h, cp, other Histogram
	for _, ns := range []int64{3, 17, 1e6, 5e6, 5e6} {
		h.Record(ns)
	}
	h.syncTo(&cp)
	other.Record(2e9)
	other.Record(1e6)
	h.Merge(&other)
	h.Record(40)
	h.syncTo(&cp)
	if !sameHist(&cp, &h) {
		t.Fatalf("after Merge: copy %d values, histogram %d", cp.Count(), h.Count())
	}
	h.Sub(&other)
	h.syncTo(&cp)
	cp.dirty, h.dirty = [16]uint64{}, [16]uint64{}
	if !sameHist(&cp, &h) || cp.Count() != 6 || cp.Quantile(1) != h.Quantile(1) {
		t.Fatalf("after Sub: copy %d values, histogram %d", cp.Count(), h.Count())
	}
}

// A clone shares no buckets with its histogram: subtracting from the clone (as the
// metrics windows do) leaves the original whole.
func TestHistogramCloneIsIndependent(t *testing.T) {
	var h Histogram
	for _, v := range []int64{5, 300, 300, 70_000, 2_000_000} {
		h.Record(v)
	}
	p50 := h.Quantile(0.5)
	c := h.Clone()
	c.Sub(&h)
	if c.Count() != 0 || h.Count() != 5 || h.Quantile(0.5) != p50 {
		t.Fatalf("clone count %d, original count %d p50 %v", c.Count(), h.Count(), h.Quantile(0.5))
	}
	n := 0
	h.Buckets(func(_, _ int64, count uint64) { n += int(count) })
	if n != 5 {
		t.Fatalf("original buckets hold %d values after the clone's Sub, want 5", n)
	}
}

// sameHist reports whether two histograms hold the same values (their rows are
// pointers: == compares addresses).
func sameHist(a, b *Histogram) bool {
	if a.n != b.n || a.sum != b.sum || a.max != b.max {
		return false
	}
	for i := range histBuckets {
		if a.get(i) != b.get(i) {
			return false
		}
	}
	return true
}
