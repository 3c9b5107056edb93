package orders

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/gale-stream/gale/server"
)

// Pipeline is the orders pipeline for gale serve (--pipeline orders) with
// DefaultOptions: PipelineWith(DefaultOptions()).
func Pipeline() server.Pipeline { return PipelineWith(DefaultOptions()) }

// PipelineWith is the orders pipeline for gale serve, built with o's settings
// (start from DefaultOptions). Each build takes the sink's database, counters,
// health and outage bound from the server's parts, the topology's MessageTimeout
// (the sink's waits stay under it), and holds half a join at least 1.5 × that
// timeout (Options.HoldFor: longer than its tree can live). Its counters are
// o.Counters if set, else new ones per build; the serve process exports them in
// /metrics (Counters.Collectors). The sink's tasks are pinned to the serve process
// on a cluster with an SQLite sink.
func PipelineWith(o Options) server.Pipeline {
	return server.Pipeline{
		Name:           "orders",
		Doc:            "retail order lines: parse, risk and stock checks joined, decision, invoice summary",
		Schema:         Schema,
		SinkComponents: []string{SinkID},
		Build: func(p server.Parts) (server.Built, error) {
			oo := o
			// A join half waits longer than its tree can live (Options.HoldFor).
			oo.HoldFor = max(oo.HoldFor, p.Config.MessageTimeout*3/2)
			oo.DB, oo.SinkCounters, oo.SinkHealth, oo.SinkGiveUpAfter = p.DB, p.SinkCounters, p.SinkHealth, p.SinkGiveUpAfter
			oo.MessageTimeout = p.Config.MessageTimeout
			if oo.Counters == nil {
				oo.Counters = &Counters{}
			}
			topo, err := Build(p.Spout, oo)
			if err != nil {
				return server.Built{}, err
			}
			return server.Built{Topology: topo, Collectors: oo.Counters.Collectors()}, nil
		},
	}
}

// Collectors export c in Prometheus metrics (gale_orders_*), read at scrape time.
// They count what this process's tasks did: on a cluster, those a worker runs
// count on that worker.
func (c *Counters) Collectors() []prometheus.Collector {
	counter := func(name, help string, v func() uint64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help}, func() float64 { return float64(v()) })
	}
	return []prometheus.Collector{
		counter("gale_orders_not_order_lines_total", "Inputs the parse bolt failed because they are not order lines (each try).", c.NotOrderLines.Load),
		counter("gale_orders_stock_applied_total", "Order lines the stock bolt applied to a stock level (once per event while its verdict is remembered).", c.StockApplied.Load),
		counter("gale_orders_stock_replayed_total", "Replayed order lines the stock bolt answered with the verdict it gave before, moving no stock.", c.StockReplayed.Load),
		counter("gale_orders_joined_total", "Decisions the decision bolt emitted: tries whose risk and stock halves both reached the join.", c.Joined.Load),
		counter("gale_orders_evicted_halves_total", "Join halves the decision bolt failed and dropped after HoldFor without their partner.", c.Evicted.Load),
		counter("gale_orders_unpaired_halves_total", "Join halves still held when their decision task stopped, dropped then.", c.Unpaired.Load),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "gale_orders_held_halves",
			Help: "Join halves the decision bolt holds now, waiting for their partner."},
			func() float64 { return float64(c.Held.Load()) }),
	}
}
