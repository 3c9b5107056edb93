package server

import "github.com/gale-stream/gale/topology"

// WithTap returns o with a tap that sees the pipeline's topology before it starts
// (the tests of package server_test).
func WithTap(o Options, tap func(*topology.Topology)) Options {
	o.tap = tap
	return o
}
