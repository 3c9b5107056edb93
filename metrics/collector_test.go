package metrics_test

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/gale-stream/gale/engine"
	"github.com/gale-stream/gale/internal/testtopo"
	"github.com/gale-stream/gale/lineage"
	"github.com/gale-stream/gale/metrics"
	"github.com/gale-stream/gale/topology"
)

// run runs c to the end (every root acked or failed) and stops the topology.
func run(t *testing.T, c *testtopo.Counted, cfg topology.Config, opts ...engine.Option) *engine.Runtime {
	t.Helper()
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	rt, err := c.Start(cfg, opts...)
	if err != nil {
		t.Fatal(err)
	}
	if err := rt.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	return rt
}

// scrape gathers the collector's metrics and sums each family by component.
func scrape(t *testing.T, col prometheus.Collector) map[string]map[string]float64 {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(col)
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]map[string]float64{}
	for _, f := range fams {
		m := map[string]float64{}
		for _, x := range f.GetMetric() {
			comp := label(x, "component")
			if k := label(x, "kind"); k != "" {
				comp += "/" + k
			}
			switch f.GetType() {
			case dto.MetricType_COUNTER:
				m[comp] += x.GetCounter().GetValue()
			case dto.MetricType_GAUGE:
				m[comp] += x.GetGauge().GetValue()
			case dto.MetricType_HISTOGRAM:
				m[comp] += float64(x.GetHistogram().GetSampleCount())
				// The +Inf bucket is implicit: the last bucket holds every sample
				// below 60 s, which all of these are.
				bs := x.GetHistogram().GetBucket()
				m[comp+"/le60"] += float64(bs[len(bs)-1].GetCumulativeCount())
			}
		}
		out[f.GetName()] = m
	}
	return out
}

func label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// TestCollectorExactCounts: 1,000 roots, fan-out 3, 5% failed by the first bolt. Every
// Storm counter is exact, per component, summed over tasks.
func TestCollectorExactCounts(t *testing.T) {
	c := &testtopo.Counted{Roots: 1000, Fanout: 3, FailEvery: 20, SinkTasks: 2, DropAck: -1}
	rec, err := lineage.New(lineage.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	rt := run(t, c, topology.DefaultConfig(), engine.WithLineage(rec))
	got := scrape(t, metrics.NewCollector("counted", rt, rt.Started(), nil, rec))

	want := map[string]map[string]float64{
		"gale_emitted_total":                  {"src": 1000, "fan": 2850, "sink": 0},
		"gale_transferred_total":              {"src": 1000, "fan": 2850, "sink": 0},
		"gale_spout_acked_total":              {"src": 950},
		"gale_spout_failed_total":             {"src": 50},
		"gale_bolt_acked_total":               {"fan": 950, "sink": 2850},
		"gale_bolt_failed_total":              {"fan": 50, "sink": 0},
		"gale_spout_timed_out_total":          {"src": 0},
		"gale_spout_pending_trees":            {"src": 0},
		"gale_bolt_executed_total":            {"fan": 1000, "sink": 2850},
		"gale_bolt_execute_latency_seconds":   {"fan": 1000, "fan/le60": 1000, "sink": 2850, "sink/le60": 2850},
		"gale_bolt_process_latency_seconds":   {"fan": 1000, "fan/le60": 1000, "sink": 2850, "sink/le60": 2850},
		"gale_spout_complete_latency_seconds": {"src": 950, "src/le60": 950},
		"gale_acker_completed_total":          {"": 950},
		"gale_acker_failed_total":             {"": 50},
		"gale_acker_pending_trees":            {"": 0},
		"gale_bolt_queue_depth_tuples":        {"fan": 0, "sink": 0},
		"gale_errors_total":                   {"src": 0, "fan": 0, "sink": 0},
		"gale_lineage_trees":                  {"/failed_or_timed_out": 50, "/sampled": float64(rec.Stats().Sampled)},
	}
	for name, comps := range want {
		for comp, v := range comps {
			if g, ok := got[name][comp]; !ok || g != v {
				t.Errorf("%s{%s} = %v (present %v), want %v", name, comp, g, ok, v)
			}
		}
	}
	// Every kind is exported, at 0 here.
	if m := got["gale_misuse_total"]; len(m) != 3*len(engine.MisuseKinds) || m["fan/double-ack"] != 0 {
		t.Errorf("misuse series %v, want each kind at 0 for each of 3 components", m)
	}
	// Per task: the sink's two tasks split its inputs (shuffle) and sum to 2850.
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(metrics.NewCollector("counted", rt, rt.Started(), nil, nil))
	fams, _ := reg.Gather()
	tasks := map[string]float64{}
	for _, f := range fams {
		if f.GetName() != "gale_bolt_executed_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			if label(m, "component") == "sink" {
				tasks[label(m, "task")] = m.GetCounter().GetValue()
			}
		}
	}
	if len(tasks) != 2 || tasks["3"]+tasks["4"] != 2850 || tasks["3"] == 0 || tasks["4"] == 0 {
		t.Errorf("sink executed per task = %v, want tasks 3 and 4, both > 0, summing to 2850", tasks)
	}
}

// TestCollectorTimeoutsApart: a tree whose ack is dropped counts as timed out, not failed.
func TestCollectorTimeoutsApart(t *testing.T) {
	c := &testtopo.Counted{Roots: 200, Fanout: 2, SinkTasks: 1, DropAck: 7}
	cfg := topology.DefaultConfig()
	cfg.MessageTimeout = 200 * time.Millisecond
	rt := run(t, c, cfg)
	got := scrape(t, metrics.NewCollector("counted", rt, rt.Started(), nil, nil))
	for name, v := range map[string]float64{
		"gale_spout_acked_total": 199, "gale_spout_failed_total": 0, "gale_spout_timed_out_total": 1,
	} {
		if got[name]["src"] != v {
			t.Errorf("%s{src} = %v, want %v", name, got[name]["src"], v)
		}
	}
	// The sink executed every input but acked all but the two of root 7.
	if got["gale_bolt_executed_total"]["sink"] != 400 || got["gale_bolt_acked_total"]["sink"] != 398 {
		t.Errorf("sink executed %v acked %v, want 400 and 398", got["gale_bolt_executed_total"]["sink"], got["gale_bolt_acked_total"]["sink"])
	}
}
