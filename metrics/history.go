package metrics

import (
	"context"
	"sync"
	"time"

	"github.com/gale-stream/gale/engine"
)

// Point is one chart sample: rates and latencies over the interval that ends at T.
type Point struct {
	T           int64              `json:"t"` // Unix milliseconds
	EmittedPerS float64            `json:"emitted_per_s"`
	AckedPerS   float64            `json:"acked_per_s"`
	FailedPerS  float64            `json:"failed_per_s"` // spout trees failed or timed out
	Complete    *PointLatency      `json:"complete_ms"`  // nil: no tree completed in the interval
	Capacity    map[string]float64 `json:"capacity"`     // per bolt: its busiest task
}

// PointLatency is the complete latency of the trees finished in one interval. An
// interval without any has none (not 0 ms, which would read as fast trees).
type PointLatency struct {
	P50 float64 `json:"p50"`
	P99 float64 `json:"p99"`
}

// HistoryConfig sets the sampling of a History.
type HistoryConfig struct {
	// Interval between chart points. Default 2 s.
	Interval time.Duration
	// Window is the "last N" window of the table and the span of the charts.
	// Default 10 min.
	Window time.Duration
	// BaseEvery is how often a full snapshot is kept as a possible window start (the
	// window is then between Window and Window+BaseEvery long). Default 30 s.
	BaseEvery time.Duration
}

func (c HistoryConfig) withDefaults() HistoryConfig {
	if c.Interval <= 0 {
		c.Interval = 2 * time.Second
	}
	if c.Window <= 0 {
		c.Window = 10 * time.Minute
	}
	if c.BaseEvery <= 0 {
		c.BaseEvery = 30 * time.Second
	}
	return c
}

type snapshot struct {
	at    time.Time
	stats engine.Stats
}

// History keeps what the windows and charts need: chart points for the last Window,
// and a few full snapshots (one per BaseEvery) as window starts. Observe is pure (the
// time comes in); Run calls it on a ticker. Safe for concurrent use.
type History struct {
	cfg   HistoryConfig
	mu    sync.Mutex
	start *snapshot  // the first observation
	bases []snapshot // window starts, oldest first
	last  *snapshot  // the previous observation (for rates)
	pts   []Point
}

// NewHistory returns an empty History.
func NewHistory(cfg HistoryConfig) *History { return &History{cfg: cfg.withDefaults()} }

// Config returns the effective configuration.
func (h *History) Config() HistoryConfig { return h.cfg }

// Observe adds a snapshot taken at now.
func (h *History) Observe(now time.Time, s engine.Stats) {
	h.mu.Lock()
	defer h.mu.Unlock()
	cur := snapshot{at: now, stats: s}
	if h.start == nil {
		h.start = &cur
	}
	if n := len(h.bases); n == 0 || now.Sub(h.bases[n-1].at) >= h.cfg.BaseEvery {
		h.bases = append(h.bases, cur)
	}
	// Keep one base at least Window old, and nothing older than that one.
	for len(h.bases) > 1 && now.Sub(h.bases[1].at) >= h.cfg.Window {
		h.bases = h.bases[1:]
	}
	if h.last != nil {
		if dt := now.Sub(h.last.at).Seconds(); dt > 0 {
			h.pts = append(h.pts, pointOf(now, dt, &h.last.stats, &s))
		}
	}
	cutoff := now.Add(-h.cfg.Window).UnixMilli()
	i := 0
	for i < len(h.pts) && h.pts[i].T < cutoff {
		i++
	}
	h.pts = h.pts[i:]
	h.last = &cur
}

func pointOf(now time.Time, dt float64, prev, cur *engine.Stats) Point {
	p := Point{T: now.UnixMilli(), Capacity: map[string]float64{}}
	var lat engine.Histogram
	for _, id := range cur.Order {
		c, b := cur.Components[id], prev.Components[id]
		if b == nil {
			continue
		}
		if c.Spout {
			p.EmittedPerS += float64(c.Emitted-b.Emitted) / dt
			p.AckedPerS += float64(c.Acked-b.Acked) / dt
			p.FailedPerS += float64(c.Failed+c.TimedOut-b.Failed-b.TimedOut) / dt
			if d := diffHist(c.CompleteLatency, b.CompleteLatency); d != nil {
				lat.Merge(d)
			}
			continue
		}
		capacity := 0.0
		for _, t := range c.ByTask {
			if bt := taskOf(b, t.Task); bt != nil {
				capacity = max(capacity, (t.ExecuteTime-bt.ExecuteTime).Seconds()/dt)
			}
		}
		p.Capacity[id] = capacity
	}
	if lat.Count() > 0 {
		p.Complete = &PointLatency{P50: ms(lat.Quantile(0.5)), P99: ms(lat.Quantile(0.99))}
	}
	return p
}

// Points returns the chart points, oldest first.
func (h *History) Points() []Point {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]Point(nil), h.pts...)
}

// Table returns Storm's table for cur (taken at now): window "all" counts since the
// first observation's start of the topology (base nil), "10m" (or the configured
// window) since the newest kept snapshot at least that old, or since start if the
// topology is younger.
func (h *History) Table(window string, now time.Time, started time.Time, cur engine.Stats) Table {
	h.mu.Lock()
	defer h.mu.Unlock()
	if window == "all" || len(h.bases) == 0 || now.Sub(h.bases[0].at) < h.cfg.Window {
		return tableOf(window, &cur, nil, now.Sub(started).Seconds())
	}
	b := h.bases[0]
	return tableOf(window, &cur, &b.stats, now.Sub(b.at).Seconds())
}

// Run observes src every Interval until ctx is done.
func (h *History) Run(ctx context.Context, src func() engine.Stats) { h.RunUntil(ctx, nil, src) }

// RunUntil observes src every Interval until ctx is done, or until done (a
// runtime's Done) is closed: then it observes a last time, for the final counts,
// and returns, so that the chart ends where the job did instead of drawing idle
// intervals after it. A nil done is never closed.
func (h *History) RunUntil(ctx context.Context, done <-chan struct{}, src func() engine.Stats) {
	t := time.NewTicker(h.cfg.Interval)
	defer t.Stop()
	h.Observe(time.Now(), src())
	for {
		select {
		case <-ctx.Done():
			return
		case <-done:
			h.Observe(time.Now(), src())
			return
		case now := <-t.C:
			h.Observe(now, src())
		}
	}
}
