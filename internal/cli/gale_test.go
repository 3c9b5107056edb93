package cli

import (
	"context"
	"io"
	"os"
	"slices"

	"github.com/spf13/cobra"

	"github.com/gale-stream/gale/builtin"
	"github.com/gale-stream/gale/cluster"
	"github.com/gale-stream/gale/multilang"
	"github.com/gale-stream/gale/pipelines/events"
	"github.com/gale-stream/gale/pipelines/orders"
	"github.com/gale-stream/gale/pipelines/wordcount"
	"github.com/gale-stream/gale/server"
)

// galeApp is gale's own binary as cmd/gale registers it through package app
// (cmd/gale's TestGaleRegistersItsBuiltins checks the same lists there): this
// package's tests run it in their own process and as the gale child processes
// they start.
func galeApp() *App {
	a := &App{Name: "gale", Extras: map[string]TopologyExtras{"wordcount": WordcountExtras()},
		DefaultPipeline: "events", Commands: []func() *cobra.Command{WordcountCmd, IngestCmd, OrdersCmd, BenchCmd}}
	if err := a.Topologies.Register("wordcount", wordcount.ClusterFactory); err != nil {
		panic(err)
	}
	for _, p := range []server.Pipeline{events.Pipeline(), orders.Pipeline()} {
		if err := a.Pipelines.Register(p); err != nil {
			panic(err)
		}
	}
	for _, d := range slices.Concat(multilang.Components(), builtin.Components(), wordcount.Components(), orders.Components()) {
		if err := a.Components.Register(d); err != nil {
			panic(err)
		}
	}
	if errs := a.RegisterPipelineWorkers(); len(errs) > 0 {
		panic(errs[0])
	}
	return a
}

// run executes gale's command line and returns the exit status.
func run(args []string) int { return runWith(args, os.Stdout, os.Stderr) }

// runWith is run writing to stdout and stderr.
func runWith(args []string, stdout, stderr io.Writer) int {
	return galeApp().Run(context.Background(), args, stdout, stderr)
}

// newRoot is gale's command tree.
func newRoot() *cobra.Command { return galeApp().newRoot() }

// registry is gale's registry of topologies.
func registry() *cluster.Registry { return &galeApp().Topologies }
