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
	want := path + `:7:43: component "sink" (class "gale.sink.Table"): invalid spec: property columns: "nosuch" is not a field of stream "default" of "log"`
	if err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Fatalf("FilePipeline: %v\nwant %s...", err, want)
	}
}

// A sink's create property is one statement creating the sink's own table: it
// runs at every start, so a second statement after a ';' (a breaker's DROP
// TABLE of another table ran) or another table is refused at the value's
// line, before anything starts.
func TestFilePipelineChecksCreate(t *testing.T) {
	for _, c := range []struct{ create, want string }{
		{`CREATE TABLE IF NOT EXISTS events_copy (event_id TEXT PRIMARY KEY); DROP TABLE IF EXISTS victim`, "one statement only"},
		{`THIS IS NOT SQL`, `want CREATE TABLE [IF NOT EXISTS] events_copy (...), not "THIS IS NOT SQL"`},
		{`CREATE TABLE IF NOT EXISTS other (event_id TEXT PRIMARY KEY)`, "it creates table other, but the sink writes table events_copy"},
	} {
		dir := t.TempDir()
		path := filepath.Join(dir, "p.yaml")
		if err := os.WriteFile(path, []byte(`name: create
bolts:
  - id: sink
    className: gale.sink.Table
    properties:
      - {name: table, value: events_copy}
      - {name: columns, value: [event_id]}
      - {name: conflict, value: [event_id]}
      - {name: create, value: "`+c.create+`"}
streams:
  - {from: log, to: sink, grouping: {type: SHUFFLE}}
`), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := FilePipeline(path, flux.Options{}, nil)
		if want := path + `:9:31: bolt "sink": property create: ` + c.want; err == nil || !strings.HasPrefix(err.Error(), want) {
			t.Errorf("create %q: %v\nwant %s", c.create, err, want)
		}
	}
	// The statement as it should be, with a final ';', is taken.
	dir := t.TempDir()
	path := filepath.Join(dir, "p.yaml")
	if err := os.WriteFile(path, []byte(`name: create
bolts:
  - id: sink
    className: gale.sink.Table
    properties:
      - {name: table, value: events_copy}
      - {name: columns, value: [event_id]}
      - {name: conflict, value: [event_id]}
      - {name: create, value: "create table if not exists events_copy (event_id TEXT PRIMARY KEY);"}
streams:
  - {from: log, to: sink, grouping: {type: SHUFFLE}}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	p, err := FilePipeline(path, flux.Options{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := p.Schema(0); len(got) != 1 || got[0] != "create table if not exists events_copy (event_id TEXT PRIMARY KEY)" {
		t.Errorf("Schema %q", got)
	}
}
