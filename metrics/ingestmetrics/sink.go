package ingestmetrics

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/gale-stream/gale/sink"
)

// RegisterSink adds the sink's metrics to reg: whether its database takes writes
// and how many outages it had (h), and its transactions, rows and retries (c).
func RegisterSink(reg prometheus.Registerer, h *sink.Health, c *sink.Counters) error {
	available := func() float64 {
		if h.State().Available {
			return 1
		}
		return 0
	}
	for _, m := range []prometheus.Collector{
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "gale_sink_available",
			Help: "1 while the sink's database takes writes, 0 during a sink outage (events wait, uncharged)."}, available),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "gale_sink_outages_total",
			Help: "Sink outages begun: the database failed as a whole (full, read-only, damaged, unreachable)."},
			func() float64 { return float64(h.Outages()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "gale_sink_retries_total",
			Help: "Transactions that wrote inputs held by a sink outage again."},
			func() float64 { return float64(c.Retries.Load()) }),
	} {
		if err := reg.Register(m); err != nil {
			return fmt.Errorf("ingestmetrics: registering the sink's metrics: %w", err)
		}
	}
	return registerSinkCounters(reg, c)
}

// registerSinkCounters adds the sink's transaction and row counts to reg.
func registerSinkCounters(reg prometheus.Registerer, c *sink.Counters) error {
	for _, m := range []struct {
		name, help string
		v          func() uint64
	}{
		{"gale_sink_batches_total", "Sink transactions committed.", c.Batches.Load},
		{"gale_sink_rows_total", "Rows inserted or updated by committed sink transactions.", c.Rows.Load},
		{"gale_sink_duplicate_rows_total", "Insert-once rows that changed nothing: their key was stored already (a replay or a repeated event id).", c.Duplicates.Load},
		{"gale_sink_stale_rows_total", "Versioned upserts not applied: the stored version was equal or newer.", c.Stale.Load},
		{"gale_sink_failed_transactions_total", "Sink transactions rolled back (batches, and inputs written alone after their batch was).", c.Failures.Load},
		{"gale_sink_rejected_inputs_total", "Inputs failed alone because their rows were refused or invalid.", c.Rejected.Load},
		{"gale_sink_dropped_inputs_total", "Inputs still buffered when the sink stopped: neither written, acked nor failed (replayed at the next start).", c.Dropped.Load},
	} {
		v := m.v
		if err := reg.Register(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: m.name, Help: m.help},
			func() float64 { return float64(v()) })); err != nil {
			return fmt.Errorf("ingestmetrics: registering the sink's metrics: %w", err)
		}
	}
	return nil
}
