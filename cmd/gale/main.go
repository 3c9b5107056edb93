// Command gale is gale's own binary: every gale command (package app) over the
// product's topologies and pipelines, and its demos (wordcount, ingest of the
// retail CSV files, orders, bench).
package main

import (
	"slices"

	"github.com/gale-stream/gale/app"
	"github.com/gale-stream/gale/internal/cli"
	"github.com/gale-stream/gale/pipelines/events"
	"github.com/gale-stream/gale/pipelines/orders"
	"github.com/gale-stream/gale/pipelines/wordcount"
)

func main() { app.Main(options()...) }

// options register what gale's own binary runs.
func options() []app.Option {
	wc := cli.WordcountExtras()
	opts := []app.Option{
		app.WithTopology("wordcount", wordcount.ClusterFactory,
			app.TopologyFlags(wc.Flags), app.TopologySetup(wc.Setup), app.TopologyArgs(wc.Normalize)),
		app.WithPipeline(events.Pipeline()),
		app.WithPipeline(orders.Pipeline()),
		app.WithDefaultPipeline("events"),
		app.WithCommand(cli.WordcountCmd),
		app.WithCommand(cli.IngestCmd),
		app.WithCommand(cli.OrdersCmd),
		app.WithCommand(cli.BenchCmd),
	}
	// The classes topology and pipeline files name (gale run, gale serve
	// --pipeline FILE.yaml): word count's and the orders parse bolt.
	for _, d := range slices.Concat(wordcount.Components(), orders.Components()) {
		opts = append(opts, app.WithComponent(d))
	}
	return opts
}
