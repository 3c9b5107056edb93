package server

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gale-stream/gale/cluster"
	"github.com/gale-stream/gale/flux"
	"github.com/gale-stream/gale/topology"
)

// A pipeline file on a worker: FileWorkerFactory builds it from the resolved
// document serve read (FilePipelineFrom), with the submit arguments' settings,
// into the topology serve built (one fingerprint); a document naming another
// pipeline than the arguments is refused.
func TestFileWorkerFactoryBuildsWhatServeBuilt(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "p.yaml")
	doc := "name: rows\nbolts:\n  - id: sink\n    className: gale.sink.Table\n    parallelism: 2\n    properties:\n" +
		"      - {name: table, value: rows}\n      - {name: columns, value: [event_id]}\n      - {name: conflict, value: [event_id]}\n" +
		"streams:\n  - from: log\n    to: sink\n    grouping: {type: FIELDS, args: [event_id]}\n"
	if err := os.WriteFile(file, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	p, err := FilePipeline(file, flux.Options{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if p.File == nil || p.File.Path != file || len(p.File.Resolved) == 0 {
		t.Fatalf("FilePipeline's File: %+v", p.File)
	}
	a := &submitArgs{pipeline: "rows", sinkURL: filepath.Join(dir, "sink.db"), timeout: 20 * time.Second, maxPending: 9, ackers: 1, pipelineFile: true}
	tc := a.config()
	db := pinnedDB("serve")
	defer db.SQL.Close()
	served, err := p.build(Parts{Spout: func() topology.Spout { return &remoteLogSpout{} }, DB: db, Config: tc})
	if err != nil {
		t.Fatal(err)
	}
	var r cluster.Registry
	r.SetFileFactory(FileWorkerFactory(nil))
	src := &cluster.Source{File: file, Digest: cluster.Digest(p.File.Resolved)}
	env := cluster.Env{Topology: "rows", Worker: "w1", Args: a.args(), Source: src, Document: p.File.Resolved}
	d, err := r.Build(context.Background(), env)
	if err != nil {
		t.Fatal(err)
	}
	if d.Config.MaxSpoutPending != 9 || d.Config.MessageTimeout != 20*time.Second {
		t.Errorf("worker's config %+v: want the submit arguments'", d.Config)
	}
	want, have := cluster.FingerprintOf("rows", served.Topology, tc), cluster.FingerprintOf("rows", d.Topology, d.Config)
	if err := cluster.Check(want, have); err != nil {
		t.Errorf("the worker's build differs from serve's: %v", err)
	}
	// Its arguments name another pipeline than the document.
	b := *a
	b.pipeline = "other"
	env.Topology, env.Args = "other", b.args()
	if _, err := r.Build(context.Background(), env); err == nil || !strings.Contains(err.Error(), `names pipeline "rows", submitted as "other"`) {
		t.Errorf("a document of another name: %v", err)
	}
	// The registered pipelines' factory refuses a file's arguments without its document.
	var ps Pipelines
	if _, err := ps.WorkerFactory()(context.Background(), cluster.Env{Topology: "rows", Args: a.args()}); err == nil || !strings.Contains(err.Error(), "without its document") {
		t.Errorf("a pipeline file's arguments without a source: %v", err)
	}
}
