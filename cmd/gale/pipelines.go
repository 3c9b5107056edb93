package main

import (
	"github.com/gale-stream/gale/pipelines/events"
	"github.com/gale-stream/gale/pipelines/orders"
	"github.com/gale-stream/gale/server"
)

// servePipelines are the pipelines compiled into this binary: what gale serve
// --pipeline and gale sink rebuild --pipeline choose from, and what gale worker
// builds when a gale serve --nats submits one.
var servePipelines server.Pipelines

func init() {
	for _, p := range []server.Pipeline{events.Pipeline(), orders.Pipeline()} {
		if err := servePipelines.Register(p); err != nil {
			panic(err)
		}
	}
	// gale serve's default, also for a server.Options that names none.
	server.DefaultPipeline = events.Pipeline()
}
