package metrics

import (
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/gale-stream/gale/engine"
	"github.com/gale-stream/gale/lineage"
)

// Source is what a Collector reads at each scrape.
type Source interface {
	Stats() engine.Stats
}

// LatencyBuckets are the upper bounds, in seconds, of the latency histograms exported
// to Prometheus: 1 µs to 60 s. gale's own histograms have 16 buckets per power of two;
// each is counted in the Prometheus bucket that holds its midpoint, so a count may sit
// one bucket off only for values within about 3% of a bound.
var LatencyBuckets = []float64{
	1e-6, 2.5e-6, 5e-6, 10e-6, 25e-6, 50e-6, 100e-6, 250e-6, 500e-6,
	1e-3, 2.5e-3, 5e-3, 10e-3, 25e-3, 50e-3, 100e-3, 250e-3, 500e-3,
	1, 2.5, 5, 10, 30, 60,
}

// Collector exports a running topology's counters as Prometheus metrics, per component
// and task, with Storm's definitions. Every value is read from engine.Stats at scrape
// time: counts are exact, never sampled.
type Collector struct {
	topo    string
	src     Source
	hist    *History // for capacity over the window; may be nil (then since start)
	started time.Time
	lin     *lineage.Recorder
	d       descs
}

type descs struct {
	emitted, transferred, timedOut, late, executed                         *prometheus.Desc
	spoutAcked, spoutFailed, boltAcked, boltFailed                         *prometheus.Desc
	execLat, procLat, completeLat                                          *prometheus.Desc
	capacity, pending, skipped, backpressure, queueDepth, errors, misuse   *prometheus.Desc
	ackerPending, ackerCompleted, ackerFailed, ackerExpired, ackerOrphans  *prometheus.Desc
	ackerUnmatched                                                         *prometheus.Desc
	lineageTrees, lineageEvicted, lineageTruncated, executeSeconds, uptime *prometheus.Desc
}

// NewCollector returns a Collector for the topology named topo. hist (optional) gives
// capacity over its window; lin (optional) adds the lineage recorder's counts.
func NewCollector(topo string, src Source, started time.Time, hist *History, lin *lineage.Recorder) *Collector {
	task := []string{"component", "task"}
	c := &Collector{topo: topo, src: src, hist: hist, started: started, lin: lin}
	cl := prometheus.Labels{"topology": topo}
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc("gale_"+name, help, labels, cl)
	}
	c.d = descs{
		emitted:     d("emitted_total", "Emit calls (Storm's Emitted).", task...),
		transferred: d("transferred_total", "Tuples sent to consumer tasks (Storm's Transferred).", task...),
		// Storm's Acked and Failed count trees for a spout and inputs for a bolt:
		// two names, so that a sum over components adds like to like.
		spoutAcked:     d("spout_acked_total", "Tuple trees completed (Storm's spout Acked).", task...),
		spoutFailed:    d("spout_failed_total", "Tuple trees failed explicitly (Storm's spout Failed; timeouts are in gale_spout_timed_out_total).", task...),
		boltAcked:      d("bolt_acked_total", "Inputs acked (Storm's bolt Acked).", task...),
		boltFailed:     d("bolt_failed_total", "Inputs failed (Storm's bolt Failed).", task...),
		timedOut:       d("spout_timed_out_total", "Spout trees failed because the message timeout passed.", task...),
		late:           d("spout_late_outcomes_total", "Acker outcomes that reached the spout after it had timed the tree out (late acks; ignored).", task...),
		executed:       d("bolt_executed_total", "Execute calls (Storm's Executed; ticks not counted).", task...),
		executeSeconds: d("bolt_execute_seconds_total", "Time inside Execute.", task...),
		execLat:        d("bolt_execute_latency_seconds", "Time inside Execute per input (Storm's execute latency).", task...),
		procLat:        d("bolt_process_latency_seconds", "From the start of Execute to the ack of that input (Storm's process latency).", task...),
		completeLat:    d("spout_complete_latency_seconds", "From the spout's emit to the tree's completion (Storm's complete latency).", task...),
		capacity:       d("bolt_capacity", "Executed × mean execute latency / window (Storm's capacity): the share of the window spent in Execute; near 1 means saturated.", task...),
		pending:        d("spout_pending_trees", "Spout trees in flight now.", task...),
		skipped:        d("spout_skipped_max_spout_seconds_total", "Time NextTuple was not called because max spout pending was reached (Storm's __skipped-max-spout-ms).", task...),
		backpressure:   d("backpressure_seconds_total", "Time blocked sending to a full queue.", task...),
		queueDepth:     d("bolt_queue_depth_tuples", "Tuples waiting in the task's input queue now.", task...),
		errors:         d("errors_total", "Errors reported (ReportError) and panics recovered.", task...),
		misuse:         d("misuse_total", "API misuse reported, by kind (double ack, anchoring to an acked tuple, ...).", "component", "kind"),
		ackerPending:   d("acker_pending_trees", "Trees the acker tasks are tracking now (their init has arrived)."),
		ackerUnmatched: d("acker_unmatched_entries", "Acker entries held now without an init: acks ahead of their init, or late acks for trees already ended (dropped later as orphans)."),
		ackerCompleted: d("acker_completed_total", "Trees the ackers saw complete."),
		ackerFailed:    d("acker_failed_total", "Trees the ackers saw fail."),
		ackerExpired:   d("acker_expired_total", "Acker entries with an init dropped after the message timeout."),
		ackerOrphans:   d("acker_orphans_total", "Acker entries without an init dropped: late or stray acks for trees already gone."),
		lineageTrees:   d("lineage_trees", "Trees whose lineage is kept now.", "kind"),
		lineageEvicted: d("lineage_evicted_total", "Trees dropped from the lineage store to stay within its bound."),
		lineageTruncated: d("lineage_truncated_nodes_total",
			"Tuples not recorded because their tree reached the lineage store's per-tree bound."),
		uptime: d("uptime_seconds", "Time since the topology started."),
	}
	return c
}

// Describe implements prometheus.Collector. It sends nothing: the collector is
// unchecked, because its label values (components, tasks) come from the topology.
func (c *Collector) Describe(chan<- *prometheus.Desc) {}

// Collect implements prometheus.Collector.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	now := time.Now()
	s := c.src.Stats()
	counter := func(d *prometheus.Desc, v float64, l ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v, l...)
	}
	gauge := func(d *prometheus.Desc, v float64, l ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, l...)
	}
	var capacity map[int]float64
	if c.hist != nil {
		t := c.hist.Table("10m", now, c.started, s)
		capacity = map[int]float64{}
		for _, b := range t.Bolts {
			for _, tb := range b.ByTask {
				capacity[tb.Task] = tb.Capacity
			}
		}
	}
	for _, id := range s.Order {
		comp := s.Components[id]
		for _, kind := range engine.MisuseKinds { // every kind, 0 included
			counter(c.d.misuse, float64(comp.Misuse[kind]), id, kind)
		}
		for _, t := range comp.ByTask {
			l := []string{id, strconv.Itoa(t.Task)}
			counter(c.d.emitted, float64(t.Emitted), l...)
			counter(c.d.transferred, float64(t.Transferred), l...)
			counter(c.d.backpressure, t.Backpressure.Seconds(), l...)
			counter(c.d.errors, float64(t.Errors), l...)
			if comp.Spout {
				counter(c.d.spoutAcked, float64(t.Acked), l...)
				counter(c.d.spoutFailed, float64(t.Failed), l...)
				counter(c.d.timedOut, float64(t.TimedOut), l...)
				counter(c.d.late, float64(t.LateOutcomes), l...)
				gauge(c.d.pending, float64(t.Pending), l...)
				counter(c.d.skipped, t.SkippedMaxSpout.Seconds(), l...)
				histogram(ch, c.d.completeLat, t.CompleteLatency, l)
				continue
			}
			counter(c.d.boltAcked, float64(t.Acked), l...)
			counter(c.d.boltFailed, float64(t.Failed), l...)
			counter(c.d.executed, float64(t.Executed), l...)
			counter(c.d.executeSeconds, t.ExecuteTime.Seconds(), l...)
			gauge(c.d.queueDepth, float64(t.QueueDepth), l...)
			histogram(ch, c.d.execLat, t.ExecuteLatency, l)
			histogram(ch, c.d.procLat, t.ProcessLatency, l)
			capa, ok := capacity[t.Task]
			if !ok {
				if up := now.Sub(c.started).Seconds(); up > 0 {
					capa = t.ExecuteTime.Seconds() / up
				}
			}
			gauge(c.d.capacity, capa, l...)
		}
	}
	a := s.Acker
	gauge(c.d.ackerPending, float64(a.Pending))
	gauge(c.d.ackerUnmatched, float64(a.Unmatched))
	counter(c.d.ackerCompleted, float64(a.Completed))
	counter(c.d.ackerFailed, float64(a.Failed))
	counter(c.d.ackerExpired, float64(a.Expired))
	counter(c.d.ackerOrphans, float64(a.Orphans))
	if c.lin != nil {
		ls := c.lin.Stats()
		gauge(c.d.lineageTrees, float64(ls.Sampled), "sampled")
		gauge(c.d.lineageTrees, float64(ls.Failures), "failed_or_timed_out")
		counter(c.d.lineageEvicted, float64(ls.Evicted))
		counter(c.d.lineageTruncated, float64(ls.Truncated))
	}
	gauge(c.d.uptime, now.Sub(c.started).Seconds())
}

// histogram exports h (nanoseconds) as a Prometheus histogram in seconds.
func histogram(ch chan<- prometheus.Metric, d *prometheus.Desc, h *engine.Histogram, labels []string) {
	if h == nil {
		return
	}
	counts := make([]uint64, len(LatencyBuckets))
	h.Buckets(func(lower, upper int64, n uint64) {
		mid := float64(lower+upper) / 2e9
		for i, b := range LatencyBuckets {
			if mid <= b {
				counts[i] += n
				break
			}
		}
	})
	buckets := make(map[float64]uint64, len(LatencyBuckets))
	var cum uint64
	for i, b := range LatencyBuckets {
		cum += counts[i]
		buckets[b] = cum
	}
	ch <- prometheus.MustNewConstHistogram(d, h.Count(), h.Sum().Seconds(), buckets, labels...)
}
