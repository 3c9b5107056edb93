// Command wordlen is a gale binary of a user's own: every gale command (nats,
// worker, submit, serve, cluster status, components...) over one topology, one
// serve pipeline and the spout and bolt classes they are made of. See README.md.
package main

import (
	"github.com/spf13/pflag"

	"github.com/gale-stream/gale/app"
)

func main() { app.Main(options()...) }

// options are what wordlen registers (a test checks that New takes them).
func options() []app.Option {
	opts := []app.Option{
		app.WithName("wordlen"),
		app.WithTopology(TopologyName, factory,
			app.TopologyFlags(func() *pflag.FlagSet { return topologyFlags(&topoArgs{}) }),
			app.TopologyArgs(normalizeArgs)),
		app.WithPipeline(pipeline()),
		app.WithDefaultPipeline(PipelineName),
	}
	for _, d := range declarations() {
		opts = append(opts, app.WithComponent(d))
	}
	return opts
}
