package app_test

import (
	"context"
	"fmt"
	"io"

	"github.com/gale-stream/gale/app"
	"github.com/gale-stream/gale/cluster"
	"github.com/gale-stream/gale/topology"
)

// A program registers its topology by name; its main then calls Main (here Run,
// to show what a registration error does).
func Example() {
	factory := func(ctx context.Context, env cluster.Env) (*cluster.Deployment, error) {
		b := topology.NewBuilder()
		// ... b.SetSpout, b.SetBolt
		t, err := b.Build()
		return &cluster.Deployment{Topology: t, Config: topology.DefaultConfig()}, err
	}
	a := app.New(app.WithName("mytool"), app.WithTopology("lengths", factory))
	fmt.Println(a.Err(), a.Topologies())

	bad := app.New(app.WithTopology("lengths", factory), app.WithTopology("lengths", factory))
	fmt.Println(bad.Run(context.Background(), []string{"version"}, io.Discard, io.Discard))
	fmt.Println(bad.Err())
	// Output:
	// <nil> [lengths]
	// 2
	// gale: registration: cluster: bad configuration: topology "lengths" registered twice
}
