package metrics

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/gale-stream/gale/engine"
)

// stats builds a snapshot of one spout and one bolt task with the given counts.
func stats(emitted, acked, failed, timedOut, executed uint64, execTime time.Duration) engine.Stats {
	lat := &engine.Histogram{}
	for range acked {
		lat.Record(int64(time.Millisecond))
	}
	sp := &engine.ComponentStats{ID: "src", Spout: true, Tasks: 1, Task: 1, Emitted: emitted, Transferred: emitted,
		Acked: acked, Failed: failed, TimedOut: timedOut, CompleteLatency: lat, Misuse: map[string]uint64{}}
	bt := &engine.ComponentStats{ID: "b", Tasks: 1, Task: 2, Executed: executed, Acked: executed, ExecuteTime: execTime,
		Misuse: map[string]uint64{"double-ack": 1}}
	spc, btc := *sp, *bt
	spc.Task, btc.Task = 0, 0
	spc.ByTask, btc.ByTask = []*engine.ComponentStats{sp}, []*engine.ComponentStats{bt}
	return engine.Stats{Order: []string{"src", "b"}, Components: map[string]*engine.ComponentStats{"src": &spc, "b": &btc}}
}

func TestHistoryPointsAndWindows(t *testing.T) {
	h := NewHistory(HistoryConfig{Interval: 2 * time.Second, Window: 10 * time.Second, BaseEvery: 4 * time.Second})
	start := time.Unix(1_000_000, 0)
	// Every 2 s: 100 more emitted and acked, 10 failed, 1 timed out; the bolt spends
	// 1 s of every 2 in Execute (capacity 0.5).
	for i := 0; i <= 10; i++ {
		n := uint64(i)
		h.Observe(start.Add(time.Duration(2*i)*time.Second), stats(100*n, 100*n, 10*n, n, 100*n, time.Duration(i)*time.Second))
	}
	pts := h.Points()
	// 10 intervals, of which those ending within the last 10 s are kept: t = 10..20 s.
	if len(pts) != 6 {
		t.Fatalf("%d points, want 6", len(pts))
	}
	p := pts[len(pts)-1]
	if p.EmittedPerS != 50 || p.AckedPerS != 50 || p.FailedPerS != 5.5 || p.Capacity["b"] != 0.5 {
		t.Errorf("last point %+v", p)
	}
	if p.Complete == nil || p.Complete.P50 < 0.97 || p.Complete.P50 > 1.03 {
		t.Errorf("complete p50 = %v ms, want about 1", p.Complete.P50)
	}
	now := start.Add(20 * time.Second)
	cur := stats(1000, 1000, 100, 10, 1000, 10*time.Second)
	all := h.Table("all", now, start, cur)
	if all.Spouts[0].Acked != 1000 || all.Seconds != 20 || all.Bolts[0].Capacity != 0.5 || all.Misuse["double-ack"] != 1 {
		t.Errorf("all = %+v", all)
	}
	// The window starts at the newest kept base at least 10 s old: t = 8 s (bases
	// every 4 s), so 12 s of counts: 600 acked.
	w := h.Table("10m", now, start, cur)
	if w.Seconds != 12 || w.Spouts[0].Acked != 600 || w.Spouts[0].Failed != 60 || w.Spouts[0].TimedOut != 6 ||
		w.Spouts[0].CompleteLatency.Count != 600 || w.Bolts[0].Executed != 600 || w.Bolts[0].Capacity != 0.5 ||
		len(w.Misuse) != 0 {
		t.Errorf("window = %+v (spout %+v, bolt %+v)", w, w.Spouts[0], w.Bolts[0])
	}
	// Younger than the window: counts since start.
	h2 := NewHistory(HistoryConfig{Window: time.Minute})
	h2.Observe(start, stats(0, 0, 0, 0, 0, 0))
	if y := h2.Table("10m", start.Add(5*time.Second), start, cur); y.Spouts[0].Acked != 1000 || y.Seconds != 5 {
		t.Errorf("young window = %+v", y)
	}
}

// TestHistoryIdleIntervalHasNoLatency: an interval in which no tree completed has no
// complete latency (null in JSON, a gap in the chart), not 0 ms.
func TestHistoryIdleIntervalHasNoLatency(t *testing.T) {
	h := NewHistory(HistoryConfig{Interval: 2 * time.Second})
	start := time.Unix(1_000_000, 0)
	for i, acked := range []uint64{0, 100, 100} {
		h.Observe(start.Add(time.Duration(2*i)*time.Second), stats(acked, acked, 0, 0, acked, 0))
	}
	pts := h.Points()
	if len(pts) != 2 || pts[0].Complete == nil || pts[0].Complete.P50 < 0.97 || pts[0].Complete.P50 > 1.03 || pts[0].AckedPerS != 50 {
		t.Fatalf("points %+v, want a first one with p50 1 ms", pts)
	}
	if pts[1].Complete != nil || pts[1].AckedPerS != 0 {
		t.Errorf("idle point %+v, want no latency", pts[1])
	}
	b, _ := json.Marshal(pts[1])
	if !strings.Contains(string(b), `"complete_ms":null`) {
		t.Errorf("idle point in JSON: %s", b)
	}
}

// TestHistoryRunUntilDone: RunUntil observes once more when done closes, then
// returns; the chart ends where the job did.
func TestHistoryRunUntilDone(t *testing.T) {
	h := NewHistory(HistoryConfig{Interval: time.Hour})
	done := make(chan struct{})
	calls := make(chan int, 2)
	n := 0
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		h.RunUntil(context.Background(), done, func() engine.Stats {
			n++
			calls <- n
			return stats(uint64(n)*10, uint64(n)*10, 0, 0, 0, 0)
		})
	}()
	<-calls // the first observation, at the start
	close(done)
	<-finished
	if n != 2 {
		t.Errorf("%d observations, want 2 (start and done)", n)
	}
}
