package server_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gale-stream/gale/flux"
	. "github.com/gale-stream/gale/server"
)

// TestFilePipelineRefusesAColumnNotInTheInput: a gale.sink.Table column that no
// field of the bolt's input carries is refused when the file is read, at the
// columns value; it was accepted, and every event was then refused by the sink
// at runtime and retried.
func TestFilePipelineRefusesAColumnNotInTheInput(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "p.yaml")
	os.WriteFile(path, []byte(`name: cols
bolts:
  - id: sink
    className: gale.sink.Table
    properties:
      - {name: table, value: events_copy}
      - {name: columns, value: [event_id, nosuch]}
      - {name: conflict, value: [event_id]}
streams:
  - {from: log, to: sink, grouping: {type: SHUFFLE}}
`), 0o644)
	_, err := FilePipeline(path, flux.Options{}, nil)
	want := path + `:7:32: bolt "sink": column "nosuch" is not a field of stream "default" of "log"`
	if err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Fatalf("FilePipeline: %v\nwant %s...", err, want)
	}
}
