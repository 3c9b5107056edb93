package metrics

import (
	"time"

	"github.com/gale-stream/gale/engine"
)

// Latency summarises a latency histogram in milliseconds.
type Latency struct {
	Count uint64  `json:"count"`
	Mean  float64 `json:"mean"`
	P50   float64 `json:"p50"`
	P99   float64 `json:"p99"`
	Max   float64 `json:"max"`
}

func latencyOf(h *engine.Histogram) *Latency {
	if h == nil {
		return nil
	}
	return &Latency{Count: h.Count(), Mean: ms(h.Mean()), P50: ms(h.Quantile(0.5)), P99: ms(h.Quantile(0.99)), Max: ms(h.Max())}
}

func ms(d time.Duration) float64 { return float64(d) / 1e6 }

// Spout is a row of Storm's spout table for one window (or one task of it).
type Spout struct {
	ID              string   `json:"id"`
	Task            int      `json:"task,omitempty"`
	Tasks           int      `json:"tasks"`
	Emitted         uint64   `json:"emitted"`
	Transferred     uint64   `json:"transferred"`
	Acked           uint64   `json:"acked"`
	Failed          uint64   `json:"failed"`
	TimedOut        uint64   `json:"timed_out"`
	LateOutcomes    uint64   `json:"late_outcomes"`
	Pending         int      `json:"pending"`
	CompleteLatency *Latency `json:"complete_latency_ms"`
	SkippedMaxSpout float64  `json:"skipped_max_spout_ms"`
	Backpressure    float64  `json:"backpressure_ms"`
	Errors          uint64   `json:"errors"`
	LastError       string   `json:"last_error"`
	ByTask          []Spout  `json:"by_task,omitempty"`
}

// Bolt is a row of Storm's bolt table for one window (or one task of it).
type Bolt struct {
	ID             string   `json:"id"`
	Task           int      `json:"task,omitempty"`
	Tasks          int      `json:"tasks"`
	Emitted        uint64   `json:"emitted"`
	Transferred    uint64   `json:"transferred"`
	Executed       uint64   `json:"executed"`
	Acked          uint64   `json:"acked"`
	Failed         uint64   `json:"failed"`
	ExecuteLatency *Latency `json:"execute_latency_ms"`
	ProcessLatency *Latency `json:"process_latency_ms"`
	// Capacity is Storm's: executed × mean execute latency / window length, here the
	// time inside Execute over the window; a component shows its busiest task.
	Capacity     float64 `json:"capacity"`
	QueueDepth   int     `json:"queue_depth"`
	Backpressure float64 `json:"backpressure_ms"`
	Errors       uint64  `json:"errors"`
	LastError    string  `json:"last_error"`
	ByTask       []Bolt  `json:"by_task,omitempty"`
}

// Acker sums the acker tasks.
type Acker struct {
	Tasks     int    `json:"tasks"`
	Pending   int    `json:"pending"`
	Unmatched int    `json:"unmatched"` // entries without an init held now (late or early acks)
	Completed uint64 `json:"completed"`
	Failed    uint64 `json:"failed"`
	Expired   uint64 `json:"expired"`
	Orphans   uint64 `json:"orphans"`
}

// Table is Storm's topology page for one window: "10m" (the last 10 minutes, or since
// start if shorter) or "all" (since start). Counts are the window's; Pending and
// QueueDepth are now.
type Table struct {
	Window  string            `json:"window"`
	Seconds float64           `json:"seconds"`
	Spouts  []Spout           `json:"spouts"`
	Bolts   []Bolt            `json:"bolts"`
	Acker   Acker             `json:"acker"`
	Misuse  map[string]uint64 `json:"misuse"`
}

// window returns cur minus base (counters and histograms), for a window of the given
// length. base may be nil (since start).
func tableOf(name string, cur, base *engine.Stats, seconds float64) Table {
	t := Table{Window: name, Seconds: seconds, Misuse: map[string]uint64{}}
	for _, id := range cur.Order {
		c := cur.Components[id]
		var b *engine.ComponentStats
		if base != nil {
			b = base.Components[id]
		}
		for k, v := range c.Misuse {
			if d := v - baseMisuse(b, k); d > 0 {
				t.Misuse[k] += d
			}
		}
		if c.Spout {
			row := spoutRow(c, b)
			for _, tc := range c.ByTask {
				row.ByTask = append(row.ByTask, spoutRow(tc, taskOf(b, tc.Task)))
			}
			t.Spouts = append(t.Spouts, row)
			continue
		}
		row := boltRow(c, b, seconds)
		for _, tc := range c.ByTask {
			tr := boltRow(tc, taskOf(b, tc.Task), seconds)
			row.Capacity = max(row.Capacity, tr.Capacity)
			row.ByTask = append(row.ByTask, tr)
		}
		t.Bolts = append(t.Bolts, row)
	}
	a := cur.Acker
	t.Acker = Acker{Tasks: a.Tasks, Pending: a.Pending, Unmatched: a.Unmatched, Completed: a.Completed, Failed: a.Failed, Expired: a.Expired, Orphans: a.Orphans}
	if base != nil {
		t.Acker.Completed -= base.Acker.Completed
		t.Acker.Failed -= base.Acker.Failed
		t.Acker.Expired -= base.Acker.Expired
		t.Acker.Orphans -= base.Acker.Orphans
	}
	return t
}

func baseMisuse(b *engine.ComponentStats, k string) uint64 {
	if b == nil {
		return 0
	}
	return b.Misuse[k]
}

func taskOf(b *engine.ComponentStats, task int) *engine.ComponentStats {
	if b == nil {
		return nil
	}
	for _, t := range b.ByTask {
		if t.Task == task {
			return t
		}
	}
	return nil
}

// diffHist returns cur minus base as a new histogram (nil if cur is nil).
func diffHist(cur, base *engine.Histogram) *engine.Histogram {
	if cur == nil {
		return nil
	}
	h := cur.Clone()
	if base != nil {
		h.Sub(base)
	}
	return h
}

func spoutRow(c, b *engine.ComponentStats) Spout {
	if b == nil {
		b = &engine.ComponentStats{}
	}
	return Spout{
		ID: c.ID, Task: c.Task, Tasks: c.Tasks,
		Emitted: c.Emitted - b.Emitted, Transferred: c.Transferred - b.Transferred,
		Acked: c.Acked - b.Acked, Failed: c.Failed - b.Failed, TimedOut: c.TimedOut - b.TimedOut,
		LateOutcomes: c.LateOutcomes - b.LateOutcomes, Pending: c.Pending,
		CompleteLatency: latencyOf(diffHist(c.CompleteLatency, b.CompleteLatency)),
		SkippedMaxSpout: ms(c.SkippedMaxSpout - b.SkippedMaxSpout),
		Backpressure:    ms(c.Backpressure - b.Backpressure),
		Errors:          c.Errors - b.Errors, LastError: c.LastError,
	}
}

func boltRow(c, b *engine.ComponentStats, seconds float64) Bolt {
	if b == nil {
		b = &engine.ComponentStats{}
	}
	r := Bolt{
		ID: c.ID, Task: c.Task, Tasks: c.Tasks,
		Emitted: c.Emitted - b.Emitted, Transferred: c.Transferred - b.Transferred,
		Executed: c.Executed - b.Executed, Acked: c.Acked - b.Acked, Failed: c.Failed - b.Failed,
		ExecuteLatency: latencyOf(diffHist(c.ExecuteLatency, b.ExecuteLatency)),
		ProcessLatency: latencyOf(diffHist(c.ProcessLatency, b.ProcessLatency)),
		QueueDepth:     c.QueueDepth,
		Backpressure:   ms(c.Backpressure - b.Backpressure),
		Errors:         c.Errors - b.Errors, LastError: c.LastError,
	}
	if seconds > 0 && c.Task != 0 {
		r.Capacity = (c.ExecuteTime - b.ExecuteTime).Seconds() / seconds
	}
	return r
}
