package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/gale-stream/gale/cluster"
	"github.com/gale-stream/gale/codec"
	"github.com/gale-stream/gale/engine"
	"github.com/gale-stream/gale/lineage"
	"github.com/gale-stream/gale/transport/natstransport"
)

// Config configures a worker.
type Config struct {
	// Name is the worker's name in the cluster, unique among live workers (default:
	// the host name and the pid).
	Name string
	// Slots is how many topologies it runs at once (default 1). A Dedicated worker
	// takes only tasks pinned to it.
	Slots     int
	Dedicated bool
	// Conn is the worker's NATS connection (the caller's; it stays open). Store is
	// the cluster's state on it (cluster.Open).
	Conn  *nats.Conn
	Store *cluster.Store
	// Registry holds the topologies this build can run (and, with its file
	// factory, builds topologies submitted as files).
	Registry *cluster.Registry
	// ResourcesDir is where the resources of topologies submitted as files (gale
	// submit --resources) are unpacked, each in ResourcesDir/TOPOLOGY-DIGEST
	// (default: gale-resources in the working directory, made absolute).
	ResourcesDir string
	// NoScheduler keeps this worker out of the scheduler's election (every worker
	// stands by default, so any can take over).
	NoScheduler bool
	// StopTimeout bounds the drain of a planned stop (kill, deactivate, rebalance,
	// this worker's own graceful stop): default 30 s.
	StopTimeout time.Duration
	// RetryStart is how long a worker waits before trying again to start a
	// generation whose start failed (not a refusal): default 1 s.
	RetryStart time.Duration
	// Lineage configures the recorder of each generation the worker runs (nil:
	// lineage.DefaultConfig()). What is sampled is decided by the process running
	// the topology's spout (its Sample); this worker's tasks forward what they see
	// of those trees there, and its UI asks for them there. A deployment that
	// brings its own recorder (engine.WithLineage in its Options) keeps it.
	Lineage *lineage.Config
	// Logger gets the worker's log (slog.Default() if nil).
	Logger *slog.Logger
	// OnEvent, if set, is told what the worker does. It must not block.
	OnEvent func(Event)
	// OnStart, if set, is called with each engine the worker starts, before it is
	// announced (to serve its UI or metrics); OnStop when it has stopped.
	OnStart func(topology string, gen uint64, rt *engine.Runtime)
	OnStop  func(topology string, gen uint64, rt *engine.Runtime)
}

// EventKind says what a worker did.
type EventKind int

const (
	// Started: it started its part of a topology's generation (Host, Tasks).
	Started EventKind = iota + 1
	// Stopped: it stopped one (Drained: gracefully, else cut off; Err from Stop).
	Stopped
	// Refused: its build cannot run the topology as submitted (Err says why).
	Refused
	// StartFailed: starting failed for another reason (Err); tried again after
	// Config.RetryStart while the record stays the same.
	StartFailed
)

func (k EventKind) String() string {
	switch k {
	case Started:
		return "started"
	case Stopped:
		return "stopped"
	case Refused:
		return "refused"
	case StartFailed:
		return "start-failed"
	}
	return fmt.Sprintf("EventKind(%d)", int(k))
}

// Event is something a worker did.
type Event struct {
	Kind       EventKind
	Worker     string
	Topology   string
	Generation uint64
	Host       int
	Tasks      []int
	Drained    bool
	// RefusedBy names a worker of the generation that refused it: the generation
	// stopped without a drain because that worker never ran its part, not
	// because a worker was lost (nothing ran there to be lost).
	RefusedBy string
	At        time.Time
	Took      time.Duration
	Err       error
}

// Worker runs its part of every topology the cluster assigns it.
type Worker struct {
	cfg  Config
	info cluster.WorkerInfo
	hb   *cluster.Heartbeat
	log  *slog.Logger

	mu      sync.Mutex
	running map[string]uint64
	refused map[string]cluster.Refusal
	runs    map[string]*Run
}

// Run is one generation of one topology running on a worker.
type Run struct {
	Topology   string
	Generation uint64
	Host       int
	Runtime    *engine.Runtime
}

// New returns a worker; Run runs it.
func New(cfg Config) (*Worker, error) {
	if cfg.Conn == nil || cfg.Store == nil || cfg.Registry == nil {
		return nil, errors.New("worker: Config needs Conn, Store and Registry")
	}
	host, _ := os.Hostname()
	if cfg.Name == "" {
		cfg.Name = fmt.Sprintf("%s-%d", host, os.Getpid())
	}
	if cfg.Slots == 0 {
		cfg.Slots = 1
	}
	if cfg.Slots < 0 {
		return nil, fmt.Errorf("worker: %d slots", cfg.Slots)
	}
	if cfg.StopTimeout <= 0 {
		cfg.StopTimeout = 30 * time.Second
	}
	if cfg.ResourcesDir == "" {
		cfg.ResourcesDir = "gale-resources"
	}
	if abs, err := filepath.Abs(cfg.ResourcesDir); err == nil {
		cfg.ResourcesDir = abs
	}
	if cfg.RetryStart <= 0 {
		cfg.RetryStart = time.Second
	}
	if cfg.Lineage == nil {
		lc := lineage.DefaultConfig()
		cfg.Lineage = &lc
	}
	if err := cfg.Lineage.Validate(); err != nil {
		return nil, fmt.Errorf("worker: %w", err)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	w := &Worker{cfg: cfg, log: cfg.Logger.With("worker", cfg.Name),
		running: map[string]uint64{}, refused: map[string]cluster.Refusal{}, runs: map[string]*Run{}}
	w.info = cluster.WorkerInfo{Name: cfg.Name, Host: host, PID: os.Getpid(), Started: time.Now(),
		Slots: cfg.Slots, Dedicated: cfg.Dedicated, Module: moduleVersion()}
	hb, err := cfg.Store.NewHeartbeat(w.info)
	if err != nil {
		return nil, err
	}
	w.hb = hb
	return w, nil
}

// Name is the worker's name.
func (w *Worker) Name() string { return w.cfg.Name }

// Info is the worker's heartbeat as last written.
func (w *Worker) Info() cluster.WorkerInfo { return w.hb.Info() }

// Runs lists what the worker runs now.
func (w *Worker) Runs() []Run {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make([]Run, 0, len(w.runs))
	for _, r := range w.runs {
		out = append(out, *r)
	}
	return out
}

func moduleVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		return bi.Main.Version
	}
	return "unknown"
}

// Run joins the cluster (its heartbeat), stands for scheduler, and runs what the
// records assign it until ctx ends; then it stops its topologies (a drain bounded
// by StopTimeout) and leaves. It returns the error that ended it early (another
// live worker has its name: cluster.ErrNameInUse), or nil.
func (w *Worker) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var wg sync.WaitGroup
	defer wg.Wait()

	// The heartbeat goes last: the worker stays a member until its tasks have
	// stopped, so the scheduler moves them only once they have.
	hbCtx, hbCancel := context.WithCancel(context.Background())
	hbDone := make(chan struct{})
	go func() {
		defer close(hbDone)
		if err := w.hb.Run(hbCtx); err != nil && hbCtx.Err() == nil {
			cancel(fmt.Errorf("worker %s: heartbeat: %w", w.cfg.Name, err))
		}
	}()
	defer func() { hbCancel(); <-hbDone }()
	// No work before the name is ours: a second worker started with a live one's
	// name must not run its tasks (nor drain them when it leaves).
	select {
	case <-w.hb.Joined():
	case <-ctx.Done():
		if err := context.Cause(ctx); !errors.Is(err, context.Canceled) {
			return err
		}
		return nil
	}

	if !w.cfg.NoScheduler {
		sc, err := w.cfg.Store.NewScheduler(cluster.SchedulerConfig{Name: w.cfg.Name})
		if err != nil {
			return err
		}
		wg.Go(func() {
			if err := sc.Run(ctx); err != nil && ctx.Err() == nil {
				cancel(fmt.Errorf("worker %s: scheduler: %w", w.cfg.Name, err))
			}
		})
	}
	recs, err := w.cfg.Store.WatchRecords(ctx)
	if err != nil {
		return err
	}
	runners := map[string]*runner{}
	defer func() {
		for _, r := range runners {
			r.stop()
		}
	}()
	for {
		select {
		case <-ctx.Done():
			if err := context.Cause(ctx); !errors.Is(err, context.Canceled) {
				return err
			}
			return nil
		case rec, ok := <-recs:
			if !ok {
				if ctx.Err() == nil {
					return errors.New("worker: the assignments watch ended")
				}
				continue
			}
			r := runners[rec.Topology]
			if r == nil {
				r = w.newRunner(rec.Topology)
				runners[rec.Topology] = r
			}
			r.offer(rec)
		}
	}
}

// publish writes the worker's running and refused topologies into its heartbeat.
func (w *Worker) publish() {
	w.mu.Lock()
	running, refused := maps.Clone(w.running), maps.Clone(w.refused)
	w.mu.Unlock()
	w.hb.SetRunning(running, refused)
}

func (w *Worker) event(e Event) {
	e.Worker = w.cfg.Name
	if e.At.IsZero() {
		e.At = time.Now()
	}
	attrs := []any{"topology", e.Topology, "generation", e.Generation}
	switch e.Kind {
	case Started:
		w.log.Info("started", append(attrs, "host", e.Host, "tasks", e.Tasks, "took", e.Took)...)
	case Stopped:
		if e.RefusedBy != "" {
			attrs = append(attrs, "refused_by", e.RefusedBy)
		}
		w.log.Info("stopped", append(attrs, "drained", e.Drained, "took", e.Took, "err", e.Err)...)
	case Refused:
		w.log.Warn("refused", append(attrs, "reason", e.Err)...)
	case StartFailed:
		w.log.Error("start failed", append(attrs, "err", e.Err)...)
	}
	if w.cfg.OnEvent != nil {
		w.cfg.OnEvent(e)
	}
}

// jetStream returns the JetStream context topologies get in their Env.
func (w *Worker) jetStream() (jetstream.JetStream, error) { return jetstream.New(w.cfg.Conn) }

// SubjectPrefix is the subject prefix of one generation of a topology in a cluster:
// the generation is in every subject, so a worker left on an older generation (cut
// off, or paused past its heartbeat) publishes where nobody of the newer one
// listens, and hears nothing of it: fencing by subject.
func SubjectPrefix(clusterPrefix, topology string, gen uint64) string {
	return fmt.Sprintf("%s.t.%s.g%d", clusterPrefix, topology, gen)
}

// build builds topology rec.Topology for rec and checks its fingerprint: a refusal
// (not in this build, another fingerprint) is a *refusal error.
func (w *Worker) build(ctx context.Context, rec *cluster.Record) (*cluster.Deployment, error) {
	js, err := w.jetStream()
	if err != nil {
		return nil, err
	}
	env := cluster.Env{Topology: rec.Topology, Args: rec.Args, Worker: w.cfg.Name,
		Generation: rec.Generation(), Conn: w.cfg.Conn, JS: js, Prefix: w.cfg.Store.Config().Prefix}
	if rec.Source != nil {
		// A topology file: its resolved document and resources from the object
		// store, by digest (checked), the resources unpacked once per digest.
		env.Source = rec.Source.Clone()
		env.Document, env.Resources, err = w.cfg.Store.FetchSource(ctx, rec.Topology, rec.Source, w.cfg.ResourcesDir)
		if errors.Is(err, cluster.ErrSourceMissing) {
			return nil, &refusal{fmt.Errorf("topology file %s: %w", rec.Source.File, err)}
		}
		if err != nil {
			return nil, fmt.Errorf("topology file %s: %w", rec.Source.File, err) // tried again
		}
	}
	dep, err := w.cfg.Registry.Build(ctx, env)
	if err != nil {
		if errors.Is(err, cluster.ErrUnknownTopology) || rec.Source != nil {
			return nil, &refusal{err}
		}
		return nil, &refusal{fmt.Errorf("cannot build it with the submitted arguments %q: %w", rec.Args, err)}
	}
	have := cluster.FingerprintOf(rec.Topology, dep.Topology, dep.Config)
	if rec.Source != nil {
		// What this worker fetched: FetchSource checked the digests it names.
		have.Source = rec.Source.Fingerprint()
	}
	if err := cluster.Check(rec.Fingerprint, have); err != nil {
		if dep.Close != nil {
			_ = dep.Close()
		}
		return nil, &refusal{err}
	}
	return dep, nil
}

// refusal is an error that makes the worker refuse a topology as submitted.
type refusal struct{ err error }

func (r *refusal) Error() string { return r.err.Error() }
func (r *refusal) Unwrap() error { return r.err }

// start starts this worker's part of rec's generation.
func (w *Worker) start(ctx context.Context, rec *cluster.Record) (*live, error) {
	begin := time.Now()
	dep, err := w.build(ctx, rec)
	if err != nil {
		return nil, err
	}
	ok := false
	defer func() {
		if !ok && dep.Close != nil {
			_ = dep.Close()
		}
	}()
	ea, err := cluster.EngineAssignment(rec.Assignment, w.cfg.Name)
	if err != nil {
		return nil, err
	}
	gen := rec.Generation()
	tasks := len(cluster.TasksOf(dep.Topology, dep.Config))
	lin, err := lineage.New(*w.cfg.Lineage) // validated by New
	if err != nil {
		return nil, err
	}
	tr, err := natstransport.New(w.cfg.Conn, codec.NewStreams(dep.Topology),
		natstransport.WithPrefix(SubjectPrefix(w.cfg.Store.Config().Prefix, rec.Topology, gen)),
		natstransport.WithEndpoints(natstransport.Endpoints(tasks, len(rec.Assignment.Workers))),
		natstransport.WithLocalDelivery())
	if err != nil {
		return nil, err
	}
	// The engine's context is its hard stop, cut when the generation is superseded
	// by one that a lost worker caused (its trees cannot complete): not the runner's.
	// While it starts (Open and Prepare may wait on it), the worker's stop cuts it too.
	ectx, cancel := context.WithCancel(context.Background())
	unlink := context.AfterFunc(ctx, cancel)
	opts := append([]engine.Option{engine.WithTransport(tr), engine.WithAssignment(ea), engine.WithLineage(lin)}, dep.Options...)
	rt, err := engine.Start(ectx, dep.Topology, dep.Config, opts...)
	if !unlink() && err == nil {
		err = fmt.Errorf("worker: stopping while generation %d of %s started: %w", gen, rec.Topology, context.Cause(ctx))
		cancel()
		<-rt.Done()
	}
	if err != nil {
		cancel()
		_ = tr.Close()
		return nil, err
	}
	ok = true
	var mine []int
	for task, h := range ea.Of {
		if h == ea.Host {
			mine = append(mine, task)
		}
	}
	slices.Sort(mine)
	l := &live{rec: rec, gen: gen, host: ea.Host, rt: rt, tr: tr, dep: dep, cancel: cancel, workers: rec.Assignment.Workers, rejoins: w.hb.Rejoins()}
	if w.cfg.OnStart != nil {
		w.cfg.OnStart(rec.Topology, gen, rt)
	}
	w.mu.Lock()
	w.running[rec.Topology] = gen
	delete(w.refused, rec.Topology)
	w.runs[rec.Topology] = &Run{Topology: rec.Topology, Generation: gen, Host: ea.Host, Runtime: rt}
	w.mu.Unlock()
	w.publish()
	w.event(Event{Kind: Started, Topology: rec.Topology, Generation: gen, Host: ea.Host, Tasks: mine, Took: time.Since(begin)})
	return l, nil
}

// live is a started generation.
type live struct {
	rec     *cluster.Record
	gen     uint64
	host    int
	rt      *engine.Runtime
	tr      *natstransport.Transport
	dep     *cluster.Deployment
	cancel  context.CancelFunc
	workers []string
	rejoins int // the heartbeat's Rejoins when it started
}

// stop stops a running generation: gracefully (a drain bounded by StopTimeout,
// which every host of the generation joins) if drain, else at once (its trees in
// flight are abandoned, and their spouts' durable sources replay them).
func (w *Worker) stop(name string, l *live, drain bool) { w.stopRefused(name, l, drain, "") }

// stopRefused is stop of a generation that worker refusedBy refused (if not
// ""): the Stopped event says so.
func (w *Worker) stopRefused(name string, l *live, drain bool, refusedBy string) {
	begin := time.Now()
	var err error
	if drain {
		ctx, cancel := context.WithTimeout(context.Background(), w.cfg.StopTimeout)
		err = l.rt.Stop(ctx)
		cancel()
	}
	l.cancel()
	<-l.rt.Done()
	if cerr := l.tr.Close(); cerr != nil && err == nil {
		err = cerr
	}
	if l.dep.Close != nil {
		if cerr := l.dep.Close(); cerr != nil && err == nil {
			err = cerr
		}
	}
	if w.cfg.OnStop != nil {
		w.cfg.OnStop(name, l.gen, l.rt)
	}
	w.mu.Lock()
	if w.running[name] == l.gen {
		delete(w.running, name)
		delete(w.runs, name)
	}
	w.mu.Unlock()
	w.publish()
	w.event(Event{Kind: Stopped, Topology: name, Generation: l.gen, Host: l.host, Drained: drain, RefusedBy: refusedBy, Took: time.Since(begin), Err: err})
}
