package worker

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gale-stream/gale/cluster"
	"github.com/gale-stream/gale/component"
	"github.com/gale-stream/gale/flux"
	"github.com/gale-stream/gale/topology"
	"github.com/gale-stream/gale/tuple"
)

type fileSpout struct{ topology.BaseSpout }

func (*fileSpout) NextTuple() {}

type fileBolt struct{ topology.BaseBasicBolt }

func (*fileBolt) Execute(*tuple.Tuple, topology.BasicCollector) error { return nil }

// fileClasses registers "f.Spout" and, if withBolt, "f.Bolt".
func fileClasses(t *testing.T, withBolt bool) *component.Registry {
	t.Helper()
	var reg component.Registry
	if err := reg.Register(component.Declaration{Class: "f.Spout",
		Spout: func(component.Spec) (func() topology.Spout, error) {
			return func() topology.Spout { return &fileSpout{} }, nil
		},
		Outputs: func(component.Spec) ([]component.Output, error) {
			return []component.Output{{Fields: []string{"n"}}}, nil
		},
	}); err != nil {
		t.Fatal(err)
	}
	if withBolt {
		if err := reg.Register(component.Declaration{Class: "f.Bolt",
			BasicBolt: func(component.Spec) (func() topology.BasicBolt, error) {
				return func() topology.BasicBolt { return &fileBolt{} }, nil
			},
		}); err != nil {
			t.Fatal(err)
		}
	}
	return &reg
}

// startFileWorker runs a worker whose registry builds topology files with
// classes, unpacking resources under dir.
func startFileWorker(t *testing.T, url, name string, classes *component.Registry, dir string) *testWorker {
	t.Helper()
	reg := &cluster.Registry{}
	reg.SetFileFactory(cluster.FileFactory(classes))
	nc := connect(t, url)
	ev := &events{ch: make(chan Event, 1024)}
	w, err := New(Config{Name: name, Conn: nc, Store: openStore(t, nc), Registry: reg, OnEvent: ev.on, StopTimeout: 10 * time.Second,
		ResourcesDir: dir, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	tw := &testWorker{w: w, ev: ev, nc: nc}
	done := make(chan struct{})
	go func() { defer close(done); tw.runErr = w.Run(ctx) }()
	var once sync.Once
	tw.stop = func() { once.Do(func() { cancel(); <-done }) }
	t.Cleanup(tw.stop)
	return tw
}

// A topology file: the worker whose classes lack one refuses it naming the
// class, the other fetches the document and resources and runs it; a source not
// in the object store is refused as such.
func TestWorkerRunsTopologyFile(t *testing.T) {
	url := runServer(t).ClientURL()
	tmp := t.TempDir()
	path := filepath.Join(tmp, "f.yaml")
	doc := "name: ftopo\nspouts:\n  - id: src\n    className: f.Spout\nbolts:\n  - id: sink\n    className: f.Bolt\n    parallelism: 2\nstreams:\n  - from: src\n    to: sink\n    grouping:\n      type: SHUFFLE\n"
	if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	res := filepath.Join(tmp, "res")
	if err := os.MkdirAll(res, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(res, "data.txt"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := flux.Load(path, flux.Options{})
	if err != nil {
		t.Fatal(err)
	}
	b, err := f.Build(fileClasses(t, true))
	if err != nil {
		t.Fatal(err)
	}
	archive, err := cluster.Pack(res)
	if err != nil {
		t.Fatal(err)
	}
	// w0 (first in placement's order) lacks f.Bolt; w1 has every class.
	w0 := startFileWorker(t, url, "w0", fileClasses(t, false), filepath.Join(tmp, "w0"))
	w1 := startFileWorker(t, url, "w1", fileClasses(t, true), filepath.Join(tmp, "w1"))
	client := openStore(t, connect(t, url))
	waitLive(t, client, 2)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	src, err := client.PutSource(ctx, "f.yaml", f.Resolved, archive)
	if err != nil {
		t.Fatal(err)
	}
	fp := cluster.FingerprintOf("ftopo", b.Topology, b.Config)
	fp.Source = src.Fingerprint()
	if _, err := client.Submit(ctx, cluster.Spec{Topology: "ftopo", Fingerprint: fp, Tasks: cluster.TasksOf(b.Topology, b.Config), Want: 1, Source: src}); err != nil {
		t.Fatal(err)
	}
	ev := w0.ev.wait(t, "w0 refuses", isKind(Refused, 1))
	if ev.Err == nil || !strings.Contains(ev.Err.Error(), `unknown class "f.Bolt"`) || !strings.Contains(ev.Err.Error(), "f.yaml:") || strings.Contains(ev.Err.Error(), "\n") {
		t.Errorf("w0's refusal: %v", ev.Err)
	}
	if r := w0.w.Info().Refused["ftopo"]; !strings.Contains(r.Reason, "f.Bolt") {
		t.Errorf("w0's heartbeat says %+v", r)
	}
	w1.ev.wait(t, "w1 starts", isKind(Started, 2))
	if b, err := os.ReadFile(filepath.Join(tmp, "w1", "ftopo-"+src.Resources[:16], "data.txt")); err != nil || string(b) != "x" {
		t.Errorf("w1's resources: %q %v", b, err)
	}
	if _, err := client.Kill(ctx, "ftopo"); err != nil {
		t.Fatal(err)
	}
	w1.ev.wait(t, "w1 stops", isKind(Stopped, 2))

	// A source nobody put: refused (not tried again and again).
	gone := &cluster.Source{File: "gone.yaml", Digest: cluster.Digest([]byte("gone"))}
	fp.Topology, fp.Source = "gone", gone.Fingerprint()
	if _, err := client.Submit(ctx, cluster.Spec{Topology: "gone", Fingerprint: fp, Tasks: cluster.TasksOf(b.Topology, b.Config), Want: 1, Source: gone}); err != nil {
		t.Fatal(err)
	}
	for _, w := range []*testWorker{w0, w1} {
		ev := w.ev.wait(t, w.w.Name()+" refuses gone", func(e Event) bool { return e.Kind == Refused && e.Topology == "gone" })
		if !strings.Contains(ev.Err.Error(), "not in the object store") {
			t.Errorf("%s: %v", w.w.Name(), ev.Err)
		}
	}
}
