package server_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/gale-stream/gale/cluster"
	"github.com/gale-stream/gale/ingest"
	. "github.com/gale-stream/gale/server"
	"github.com/gale-stream/gale/sink"
	"github.com/gale-stream/gale/topology"
	"github.com/gale-stream/gale/tuple"
)

// greetings is a pipeline of a program's own, defined here as a user would: one
// table of its own, a sink that writes each event's name there, and a metric.
func greetings() (Pipeline, *atomic.Uint64) {
	rows := &atomic.Uint64{}
	table := sink.Table{Name: "greetings", Mode: sink.InsertOnce, Conflict: []string{"event_id"}, Columns: []string{"event_id", "name"}}
	return Pipeline{
		Name: "greetings",
		Schema: func(sink.Dialect) []string {
			return []string{`CREATE TABLE IF NOT EXISTS greetings (event_id TEXT PRIMARY KEY, name TEXT NOT NULL)`}
		},
		SinkComponents: []string{"write"},
		Build: func(p Parts) (Built, error) {
			b := topology.NewBuilder()
			b.SetSpout("in", p.Spout, 1).Output(ingest.SpoutFields...)
			d, err := sink.SetBolt(b, "write", 1, sink.Options{DB: p.DB, Tables: []sink.Table{table}, Counters: p.SinkCounters,
				Health: p.SinkHealth, GiveUpAfter: p.SinkGiveUpAfter, MessageTimeout: p.Config.MessageTimeout,
				Rows: func(t *tuple.Tuple) ([]sink.Row, error) {
					rec, err := ingest.SpoutRecord(t)
					if err != nil {
						return nil, err
					}
					var v struct {
						Name string `json:"name"`
					}
					if err := json.Unmarshal(rec.Event.Payload, &v); err != nil || v.Name == "" {
						return nil, fmt.Errorf("greetings: no name in %s (%v)", rec.Event.Payload, err)
					}
					rows.Add(1)
					return []sink.Row{{Table: table.Name, Values: []any{rec.Event.ID, v.Name}}}, nil
				}})
			if err != nil {
				return Built{}, err
			}
			d.ShuffleGrouping("in")
			topo, err := b.Build()
			return Built{Topology: topo, Collectors: []prometheus.Collector{prometheus.NewCounterFunc(
				prometheus.CounterOpts{Name: "greetings_rows_total", Help: "Greeting rows made."},
				func() float64 { return float64(rows.Load()) })}}, err
		},
	}, rows
}

// The registry refuses what could not run, naming it: a pipeline without a name,
// one without a Build, and a name registered twice (the first stays).
func TestPipelinesRegisterRefuses(t *testing.T) {
	var ps Pipelines
	g, _ := greetings()
	if err := ps.Register(g); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		p    Pipeline
		want string
	}{
		{g, `pipeline "greetings" is registered already`},
		{Pipeline{Name: "hollow", Schema: g.Schema}, `pipeline "hollow" has no Build`},
		{Pipeline{Build: g.Build}, "a pipeline without a name"},
	} {
		if err := ps.Register(tc.p); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Register(%q): %v; want an error saying %s", tc.p.Name, err, tc.want)
		}
	}
	if names := ps.Names(); len(names) != 1 || names[0] != "greetings" {
		t.Fatalf("registered: %v", names)
	}
	if p, err := ps.Lookup("greetings"); err != nil || p.Build == nil {
		t.Fatalf("Lookup(greetings): %+v, %v", p, err)
	}
}

// An unknown name's error lists the names registered, so that a typo in
// --pipeline shows what was meant.
func TestPipelinesLookupListsRegistered(t *testing.T) {
	var ps Pipelines
	if _, err := ps.Lookup("events"); err == nil || !strings.Contains(err.Error(), `unknown pipeline "events": none is registered`) {
		t.Errorf("empty registry: %v", err)
	}
	g, _ := greetings()
	for _, name := range []string{"orders", "events", "greetings"} {
		p := g
		p.Name = name
		if err := ps.Register(p); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := ps.Lookup("order"); err == nil || err.Error() != `unknown pipeline "order": want events, greetings or orders` {
		t.Errorf("Lookup(order): %v", err)
	}
}

// A program's own pipeline runs through Start as gale's do: its table is created
// in the sink, an event posted with ack=processed is answered PROCESSED once its
// row is committed there, and its metrics are in /metrics.
func TestCustomPipelineThroughStart(t *testing.T) {
	g, rows := greetings()
	s, err := start(context.Background(), Options{Addr: "127.0.0.1:0", DataDir: t.TempDir(), Pipeline: g})
	if err != nil {
		t.Fatal(err)
	}
	defer shutdown(t, s)
	code, a := postAck(t, s.URL(), "processed", `{"event_id":"hello-1","source":"front","type":"greeting","payload":{"name":"Ada"}}`)
	if code != 200 || a.Status != ingest.Processed {
		t.Fatalf("%d %+v; want 200 PROCESSED", code, a)
	}
	var name string
	if err := s.DB.SQL.QueryRow(`SELECT name FROM greetings WHERE event_id = 'hello-1'`).Scan(&name); err != nil || name != "Ada" {
		t.Fatalf("the greetings row: %q, %v", name, err)
	}
	if _, fams := scrape(t, s.URL()); rows.Load() == 0 {
		t.Fatal("the pipeline's Rows never ran")
	} else if v, ok := sample(fams, "greetings_rows_total"); !ok || v < 1 {
		t.Errorf("greetings_rows_total: %v (exported: %v); want the pipeline's own metric", v, ok)
	}
	if s.Options.Pipeline.Name != "greetings" {
		t.Errorf("the server runs %q", s.Options.Pipeline.Name)
	}
}

// Start refuses a pipeline whose topology does not fit the server, naming what:
// a second spout (the log spout must be the one source, for the statuses), a
// pinned component the topology lacks. And a zero pipeline.
func TestStartRefusesAPipelineThatDoesNotFit(t *testing.T) {
	g, _ := greetings()
	twoSpouts := g
	twoSpouts.Build = func(p Parts) (Built, error) {
		b := topology.NewBuilder()
		b.SetSpout("in", p.Spout, 1).Output(ingest.SpoutFields...)
		b.SetSpout("ticks", func() topology.Spout { return &idleSpout{} }, 1).Output("n")
		b.SetBasicBolt("write", func() topology.BasicBolt { return &dropBolt{} }, 1).ShuffleGrouping("in").ShuffleGrouping("ticks")
		topo, err := b.Build()
		return Built{Topology: topo}, err
	}
	missing := g
	missing.Pinned = []string{"nowhere"}
	panicky := g
	panicky.Build = func(Parts) (Built, error) { panic("no topology today") }
	for _, tc := range []struct {
		p    Pipeline
		want string
	}{
		{twoSpouts, "the greetings pipeline's topology has 2 spouts (in, ticks): want one, the log spout"},
		{missing, `the greetings pipeline names component "nowhere"`},
		{panicky, "building the greetings pipeline: its Build panicked: no topology today"},
	} {
		dir := t.TempDir()
		_, err := start(context.Background(), Options{Addr: "127.0.0.1:0", DataDir: dir, Pipeline: tc.p})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v; want an error saying %s", err, tc.want)
		}
		// What Start opened is closed: the log can be opened again.
		if s, err := start(context.Background(), Options{Addr: "127.0.0.1:0", DataDir: dir, Pipeline: g}); err != nil {
			t.Errorf("after a refused start: %v", err)
		} else {
			shutdown(t, s)
		}
	}
	if _, err := Start(context.Background(), Options{DataDir: t.TempDir()}); err == nil || !strings.Contains(err.Error(), "no pipeline: set Options.Pipeline") {
		t.Errorf("no pipeline: %v", err)
	}
}

type idleSpout struct{ topology.BaseSpout }

func (*idleSpout) NextTuple() { time.Sleep(time.Millisecond) } // idle, as a spout with nothing to emit waits a little

type dropBolt struct{ topology.BaseBasicBolt }

func (*dropBolt) Execute(*tuple.Tuple, topology.BasicCollector) error { return nil }

// A gale worker builds the pipeline a serve --nats submitted by the name in its
// arguments, from the registry: the log spout is a stand-in that refuses to open
// away from serve, and an SQLite sink is never opened there. An unknown name is
// refused listing the registered ones; RegisterWorkers registers each name.
func TestPipelinesWorkerFactory(t *testing.T) {
	var ps Pipelines
	g, _ := greetings()
	if err := ps.Register(g); err != nil {
		t.Fatal(err)
	}
	var r cluster.Registry
	if err := ps.RegisterWorkers(&r); err != nil {
		t.Fatal(err)
	}
	if names := r.Names(); len(names) != 1 || names[0] != "greetings" {
		t.Fatalf("worker registry: %v", names)
	}
	db := filepath.Join(t.TempDir(), "sink.db")
	d, err := r.Build(context.Background(), cluster.Env{Topology: "greetings", Worker: "w1",
		Args: []string{"--pipeline=greetings", "--sink=" + db, "--timeout=20s", "--max-pending=7", "--ackers=2"}})
	if err != nil {
		t.Fatal(err)
	}
	if d.Config.MessageTimeout != 20*time.Second || d.Config.MaxSpoutPending != 7 || d.Config.Ackers != 2 || d.Topology.Component("write") == nil {
		t.Fatalf("deployment: %+v", d.Config)
	}
	err = d.Topology.Component("in").Spout().Open(context.Background(), topology.TaskContext{Parallelism: 1}, nil)
	if err == nil || !strings.Contains(err.Error(), "runs only in the gale serve process") {
		t.Errorf("the log spout opened on a worker: %v", err)
	}
	if _, err := os.Stat(db); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the worker made the SQLite sink %s, which only serve writes: %v", db, err)
	}
	_, err = ps.WorkerFactory()(context.Background(), cluster.Env{Topology: "hello", Args: []string{"--pipeline=hello", "--sink=" + db}})
	if err == nil || !strings.Contains(err.Error(), `unknown pipeline "hello": want greetings`) {
		t.Errorf("an unknown pipeline on a worker: %v", err)
	}
}

// A sink URL holding a password is refused for a cluster run before anything
// opens: the submit arguments would store it in clear in the cluster's KV. It
// goes by reference (env:NAME or @PATH), which each process resolves itself.
func TestClusterRunRefusesASinkPasswordInClear(t *testing.T) {
	g, _ := greetings()
	dir := filepath.Join(t.TempDir(), "data")
	_, err := start(context.Background(), Options{Addr: "127.0.0.1:0", DataDir: dir, Pipeline: g,
		SinkURL: "postgres://gale:hunter2@127.0.0.1:1/gale", Cluster: &Cluster{}})
	if !errors.Is(err, sink.ErrSecretInURL) || !strings.Contains(err.Error(), "env:NAME") || strings.Contains(err.Error(), "hunter2") {
		t.Fatalf("Start with --nats and a password in the sink URL: %v, want ErrSecretInURL naming env:NAME, without the password", err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the refused start made its data directory: %v", err)
	}
}

// A worker resolves a sink given by reference itself, and says which variable it
// lacks.
func TestWorkerResolvesTheSinkReference(t *testing.T) {
	var ps Pipelines
	g, _ := greetings()
	if err := ps.Register(g); err != nil {
		t.Fatal(err)
	}
	args := []string{"--pipeline=greetings", "--sink=env:GALE_TEST_WORKER_SINK"}
	_, err := ps.WorkerFactory()(context.Background(), cluster.Env{Topology: "greetings", Worker: "w1", Args: args})
	if err == nil || !strings.Contains(err.Error(), "GALE_TEST_WORKER_SINK is not set") {
		t.Fatalf("a worker without the sink's variable: %v", err)
	}
	db := filepath.Join(t.TempDir(), "sink.db")
	t.Setenv("GALE_TEST_WORKER_SINK", db)
	d, err := ps.WorkerFactory()(context.Background(), cluster.Env{Topology: "greetings", Worker: "w1", Args: args})
	if err != nil || d.Topology.Component("write") == nil {
		t.Fatalf("a worker with the sink's variable set: %v", err)
	}
	// SQLite, once resolved: its writers are serve's, the worker never opens it.
	if _, err := os.Stat(db); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the worker made the SQLite sink %s, which only serve writes: %v", db, err)
	}
}
