package server_test

import (
	"context"

	"github.com/gale-stream/gale/pipelines/events"
	. "github.com/gale-stream/gale/server"
)

// The tests are package server_test: the pipelines they run (pipelines/events,
// pipelines/orders) import package server.

// start is Start with the events pipeline when o names none, as gale serve's
// default.
func start(ctx context.Context, o Options) (*Server, error) {
	if o.Pipeline.Name == "" && o.Pipeline.Build == nil {
		o.Pipeline = events.Pipeline()
	}
	return Start(ctx, o)
}
