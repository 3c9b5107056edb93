package server_test

import (
	"os"
	"testing"

	"github.com/gale-stream/gale/pipelines/events"
	. "github.com/gale-stream/gale/server"
)

// The tests are package server_test: the pipelines they run (pipelines/events,
// pipelines/orders) import package server. Options that name no pipeline run
// the events pipeline, as gale serve's do.
func TestMain(m *testing.M) {
	DefaultPipeline = events.Pipeline()
	os.Exit(m.Run())
}
