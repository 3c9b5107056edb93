package server

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/gale-stream/gale/cluster"
	"github.com/gale-stream/gale/cluster/worker"
	"github.com/gale-stream/gale/engine"
	"github.com/gale-stream/gale/sink"
	"github.com/gale-stream/gale/topology"
	"github.com/gale-stream/gale/ui"
)

// Cluster runs the pipeline's bolts on gale workers (gale serve --nats): the log
// spout stays in this process, which owns the log, as a dedicated worker that only
// takes the tasks pinned to it; the other tasks go to the cluster's workers. A
// PostgreSQL sink runs on the workers; an SQLite sink (a file of this machine) stays
// pinned here. Answers and statuses are the same as in one process: a tree
// completes, and the event is PROCESSED, when the sink on a worker has committed.
type Cluster struct {
	Conn  *nats.Conn
	Store *cluster.Store
	// Name is this process's worker name (default "serve-" and the host name).
	Name string
	// Workers is how many workers run the bolts (default 1).
	Workers int
	// Timeout bounds the wait for the workers to run the pipeline (default 60 s).
	Timeout time.Duration
}

// isPostgres tells a PostgreSQL sink URL (written from the workers) from SQLite
// (a file of the serve machine: its writers are pinned to serve).
func isPostgres(url string) bool {
	return strings.HasPrefix(url, "postgres://") || strings.HasPrefix(url, "postgresql://")
}

// remoteLogSpout stands for the log spout in a worker's build: the spout is pinned
// to the serve process that owns the log, so opening it here is a placement bug.
type remoteLogSpout struct{ topology.BaseSpout }

func (*remoteLogSpout) NextTuple() {}

func (*remoteLogSpout) Open(context.Context, topology.TaskContext, topology.SpoutCollector) error {
	return errors.New("serve: the log spout runs only in the gale serve process that owns the log (it is pinned there)")
}

// pinnedDB is a sink database that is not this process's to open: every use fails,
// naming why. The sink's tasks are pinned to the serve process.
func pinnedDB(url string) *sink.DB {
	return &sink.DB{SQL: sql.OpenDB(pinnedConnector{url}), Dialect: sink.SQLite}
}

type pinnedConnector struct{ url string }

func (c pinnedConnector) Connect(context.Context) (driver.Conn, error) {
	return nil, fmt.Errorf("serve: the SQLite sink %s is written only by the gale serve process (its tasks are pinned there)", c.url)
}
func (c pinnedConnector) Driver() driver.Driver { return pinnedDriver{c} }

type pinnedDriver struct{ c pinnedConnector }

func (d pinnedDriver) Open(string) (driver.Conn, error) { return d.c.Connect(context.Background()) }

// clusterRun is serve's part of a pipeline run across workers.
type clusterRun struct {
	w      *worker.Worker
	cancel context.CancelFunc
	done   chan error
	store  *cluster.Store
	name   string
	// submitted: this process's submit was placed, so the pipeline is its to kill.
	// Before that, the topology of that name may be another serve's, running.
	submitted bool

	mu      sync.Mutex
	rt      *engine.Runtime // the generation this process runs now
	ui      *ui.UI          // follows rt, once set
	started chan struct{}   // closed at the first start
	once    sync.Once
}

// startCluster submits the pipeline to the cluster with its spout (and an SQLite
// sink's writers) pinned to this process, runs this process's worker, and returns
// once every worker runs it. b is this process's build: every generation it runs
// runs b's topology (read-only; each start makes new tasks from its factories),
// so that the pipeline's state outside its tasks (its metrics) spans generations.
func (s *Server) startCluster(ctx context.Context, o Options, tc topology.Config, b Built) (*clusterRun, error) {
	c := o.Cluster
	p := o.Pipeline
	if c.Name == "" {
		host, _ := os.Hostname()
		c.Name = "serve-" + host
	}
	if c.Workers <= 0 {
		c.Workers = 1
	}
	if c.Timeout <= 0 {
		c.Timeout = 60 * time.Second
	}
	sinkURL, err := sink.ResolveURL(o.SinkURL)
	if err != nil {
		return nil, err
	}
	a := &submitArgs{pipeline: p.Name, sinkURL: o.SinkURL, timeout: tc.MessageTimeout, maxPending: tc.MaxSpoutPending, ackers: tc.Ackers,
		pipelineFile: p.File != nil}
	local := &cluster.Registry{}
	build := func(ctx context.Context, env cluster.Env) (*cluster.Deployment, error) {
		// serve's recorder across generations: the event page finds the trees of
		// attempts made before a worker was lost. It runs the spout, so its Sample
		// decides what the workers forward.
		return &cluster.Deployment{Topology: b.Topology, Config: tc, Options: []engine.Option{engine.WithLineage(o.Lineage)}}, nil
	}
	if err := local.Register(p.Name, build); err != nil {
		return nil, err
	}
	if p.File != nil {
		// A pipeline file's record names its document (Source), so this process's
		// worker is handed it as a file: it runs b all the same.
		local.SetFileFactory(build)
	}
	tasks := cluster.TasksOf(b.Topology, tc)
	pins := map[int]string{}
	for _, t := range tasks {
		if p.pinned(b.Topology, t.Component, !isPostgres(sinkURL)) {
			pins[t.ID] = c.Name
		}
	}
	cr := &clusterRun{store: c.Store, name: p.Name, started: make(chan struct{})}
	w, err := worker.New(worker.Config{Name: c.Name, Slots: 1, Dedicated: true, Conn: c.Conn, Store: c.Store, Registry: local,
		Logger: o.Logger, StopTimeout: tc.ShutdownTimeout,
		OnEvent: func(e worker.Event) {
			// Cut off, not drained: a worker running part of the trees in flight was
			// lost (or this process was declared lost). A process that dies charges
			// one attempt to what it was running, so that an event that kills every
			// worker it reaches ends dead-lettered rather than in a loop of crashes.
			// Called on the runner's goroutine, before the next generation's spout
			// opens.
			// A drained stop that still left trees (its deadline passed) is a stop:
			// their attempts are given back.
			if e.Kind != worker.Stopped {
				return
			}
			if e.Drained {
				s.Service.ReleaseAbandoned(fmt.Sprintf("generation %d of the %s pipeline stopped", e.Generation, p.Name))
				return
			}
			if e.RefusedBy != "" {
				// No process died: a worker's build refused its part, and the
				// trees that reached it are replayed on the next generation.
				s.Service.ReleaseAbandoned(fmt.Sprintf("generation %d of the %s pipeline stopped: worker %s refused it", e.Generation, p.Name, e.RefusedBy))
				return
			}
			n, dead := s.Service.ChargeAbandoned(fmt.Sprintf("generation %d of the %s pipeline was cut off: a worker running part of its tuple tree was lost", e.Generation, p.Name))
			if n > 0 {
				o.Logger.Warn("events in flight charged an attempt: a worker was lost", "generation", e.Generation, "events", n, "dead_lettered", dead)
			}
		},
		OnStart: func(_ string, _ uint64, rt *engine.Runtime) {
			cr.mu.Lock()
			cr.rt = rt
			u := cr.ui
			cr.mu.Unlock()
			if u != nil {
				u.SetRuntime(rt)
			}
			cr.once.Do(func() { close(cr.started) })
		}})
	if err != nil {
		return nil, err
	}
	cr.w = w
	wctx, cancel := context.WithCancel(context.Background())
	cr.cancel, cr.done = cancel, make(chan error, 1)
	go func() { cr.done <- w.Run(wctx) }()
	ok := false
	defer func() {
		if !ok {
			cr.stop()
		}
	}()
	sctx, scancel := context.WithTimeout(ctx, c.Timeout)
	defer scancel()
	// The spout is pinned to this process's worker: submit once it is live, or the
	// scheduler refuses the pin.
	if err := waitLive(sctx, c.Store, c.Name, cr.done); err != nil {
		return nil, err
	}
	fp := cluster.FingerprintOf(p.Name, b.Topology, tc)
	var src *cluster.Source
	if p.File != nil {
		// A pipeline file: the workers build it from its resolved document, put
		// in the cluster's object store by digest (FileWorkerFactory), which the
		// fingerprint covers, as gale submit --file ships a topology file.
		if src, err = c.Store.PutSource(sctx, p.File.Path, p.File.Resolved, nil); err != nil {
			return nil, fmt.Errorf("serve: putting pipeline file %s in the cluster's object store: %w", p.File.Path, err)
		}
		fp.Source = src.Fingerprint()
	}
	rec, err := c.Store.Submit(sctx, cluster.Spec{Topology: p.Name, Fingerprint: fp,
		Tasks: tasks, Pins: pins, Want: c.Workers, Args: a.args(), Source: src})
	if errors.Is(err, cluster.ErrSubmitted) {
		err = fmt.Errorf("%w: a gale serve already runs pipeline %s on this cluster (gale kill %s ends it)", err, p.Name, p.Name)
	}
	if err != nil {
		return nil, fmt.Errorf("serve: submitting the %s pipeline to the cluster: %w", p.Name, err)
	}
	cr.submitted = true
	select {
	case <-cr.started:
	case err := <-cr.done:
		cr.done <- err
		return nil, fmt.Errorf("serve: this process's worker stopped: %v", err)
	case <-sctx.Done():
		return nil, fmt.Errorf("serve: the %s pipeline did not start here within %v (is a gale worker running, and free?): %w", p.Name, c.Timeout, sctx.Err())
	}
	// Ready means running: every worker the pipeline is placed on runs it. A
	// worker that refused it (a build without it, or with another fingerprint) is
	// said, not hidden: the scheduler places the tasks on the others.
	told := map[string]bool{}
	refused := func(w string, r cluster.Refusal) {
		told[w] = true
		o.Logger.Warn("a worker refused the pipeline, so it runs on the others", "worker", w, "pipeline", p.Name, "reason", r.Reason)
	}
	if _, err := c.Store.AwaitRunning(sctx, rec, cluster.AwaitOptions{Refused: refused}); err != nil {
		return nil, fmt.Errorf("serve: the %s pipeline is not running on the cluster's workers: %w", p.Name, err)
	}
	// A refusal the scheduler acted on before the wait saw its generation.
	if ws, err := c.Store.Workers(sctx); err == nil {
		for _, wi := range ws {
			if r, ok := wi.Refused[p.Name]; ok && r.Fingerprint == fp.String() && !told[wi.Name] {
				refused(wi.Name, r)
			}
		}
	}
	ok = true
	return cr, nil
}

// waitLive waits until worker name's heartbeat is in the workers bucket, or its Run
// has ended (done gets its error, and is given it back).
func waitLive(ctx context.Context, st *cluster.Store, name string, done chan error) error {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ch, err := st.WatchWorkers(wctx, false)
	if err != nil {
		return err
	}
	for {
		select {
		case ev, ok := <-ch:
			if !ok {
				return fmt.Errorf("serve: this process's worker %s did not join the cluster: %w", name, ctx.Err())
			}
			if ev.Kind != cluster.Left && ev.Worker.Name == name {
				return nil
			}
		case err := <-done:
			done <- err
			return fmt.Errorf("serve: this process's worker stopped: %v", err)
		}
	}
}

// follow makes u read each generation this process runs from now on.
func (cr *clusterRun) follow(u *ui.UI) {
	cr.mu.Lock()
	cr.ui = u
	rt := cr.rt
	cr.mu.Unlock()
	u.SetRuntime(rt)
}

// runtime is the generation this process runs now.
func (cr *clusterRun) runtime() *engine.Runtime {
	cr.mu.Lock()
	defer cr.mu.Unlock()
	return cr.rt
}

// stop kills the pipeline on the cluster if this process submitted it (every worker
// drains it) and stops this process's worker.
func (cr *clusterRun) stop() {
	if cr.submitted {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, _ = cr.store.Kill(ctx, cr.name)
	}
	cr.cancel()
	<-cr.done
}
