package server

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/pflag"

	"github.com/gale-stream/gale/cluster"
	"github.com/gale-stream/gale/component"
	"github.com/gale-stream/gale/sink"
	"github.com/gale-stream/gale/topology"
)

// Pipeline is what a server runs behind its log: the tables its sink writes and
// the topology that reads the log spout's tuples and writes them. gale's own are
// events.Pipeline and orders.Pipeline (packages pipelines/events and
// pipelines/orders); a program registers its own the same way (Pipelines).
//
// The same Pipeline value must be known by name to every process that runs it:
// the serve process, the gale workers of a cluster (Pipelines.RegisterWorkers),
// and gale sink rebuild, which writes a sink again from the log through it.
type Pipeline struct {
	// Name names the pipeline: gale serve --pipeline NAME, and the topology's name
	// on a cluster and in the UI. Required.
	Name string
	// Doc says in a few words what it does (gale serve --help lists it).
	Doc string
	// Schema returns the statements that create the tables the pipeline writes,
	// in the sink's SQL dialect. They run at every start (and before a rebuild),
	// so they must be idempotent (CREATE ... IF NOT EXISTS). nil: none.
	Schema func(sink.Dialect) []string
	// Build builds the topology from the parts it is given: its one spout is
	// Parts.Spout (one task, fields ingest.SpoutFields), its sink writes to
	// Parts.DB. Required. It is called once in the serve process, whose topology
	// then serves every generation of a cluster run; once per generation on a
	// worker; once by a rebuild. It must build the same topology everywhere (a
	// cluster compares fingerprints).
	Build func(Parts) (Built, error)
	// SinkComponents are the ids of the components that write to Parts.DB. On a
	// cluster (Options.Cluster) a sink that is a file of the serve machine (SQLite)
	// is written by the serve process only: their tasks are pinned to it, and a
	// worker's build gets a DB that refuses every use. A shared database
	// (PostgreSQL) is written from the workers.
	SinkComponents []string
	// Pinned are the ids of other components whose tasks must run in the serve
	// process on a cluster. The log spout always does.
	Pinned []string
	// File is set for a pipeline read from a Storm Flux file (FilePipeline): on a
	// cluster its resolved document goes to the workers through the object store
	// (cluster.Source), and each builds it from that (FileWorkerFactory) rather
	// than by name. nil for a pipeline registered in Go.
	File *PipelineFile
}

// Parts are what a pipeline is built from: what differs between the serve
// process, a worker and a rebuild.
type Parts struct {
	// Spout is the factory of the topology's one spout: the log spout in the serve
	// process, a replay of the log in a rebuild (ingest.Replay), and on a worker a
	// stand-in that refuses to open (the log spout is pinned to serve).
	Spout func() topology.Spout
	// DB is the sink's database, its tables created (Schema).
	DB *sink.DB
	// SinkCounters receive the sink's counts (exported in /metrics), and
	// SinkHealth is told when its database stops and starts taking writes (the
	// log spout and /readyz read it): give them to the sink (sink.Options).
	SinkCounters *sink.Counters
	SinkHealth   *sink.Health
	// SinkGiveUpAfter bounds a sink outage (sink.Options.GiveUpAfter): set by a
	// rebuild, which no one repairs; 0 in serve, where an outage is waited out.
	SinkGiveUpAfter time.Duration
	// Config is the topology's configuration: its MessageTimeout bounds the
	// sink's waits (sink.Options.MessageTimeout) and anything that must outlive
	// a tree.
	Config topology.Config
}

// SinkOptions are the sink's options from what the server gives it: DB,
// Counters, Health, GiveUpAfter and MessageTimeout set. Add Tables and Rows. A
// sink built otherwise must set them all itself: without Health, /readyz and
// the log spout do not see its database go away.
func (p Parts) SinkOptions() sink.Options {
	return sink.Options{DB: p.DB, Counters: p.SinkCounters, Health: p.SinkHealth,
		GiveUpAfter: p.SinkGiveUpAfter, MessageTimeout: p.Config.MessageTimeout}
}

// Built is a pipeline's build.
type Built struct {
	Topology *topology.Topology
	// Collectors are the pipeline's own metrics, registered in the serve
	// process's /metrics (the counts of its tasks in that process). A worker's
	// and a rebuild's are not exported.
	Collectors []prometheus.Collector
}

func (p *Pipeline) zero() bool {
	return p.Name == "" && p.Build == nil && p.Schema == nil && p.SinkComponents == nil && p.Pinned == nil && p.File == nil
}

// check reports what makes p unusable: no name, no Build.
func (p *Pipeline) check() error {
	switch {
	case p.Name == "":
		return errors.New("a pipeline without a name")
	case p.Build == nil:
		return fmt.Errorf("pipeline %q has no Build", p.Name)
	}
	return nil
}

// schema returns p's statements for d.
func (p *Pipeline) schema(d sink.Dialect) []string {
	if p.Schema == nil {
		return nil
	}
	return p.Schema(d)
}

// CreateTables runs p's Schema statements on db.
func (p *Pipeline) CreateTables(ctx context.Context, db *sink.DB) error {
	for _, q := range p.schema(db.Dialect) {
		if _, err := db.SQL.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("creating the %s pipeline's tables in %s: %w", p.Name, db, err)
		}
	}
	return nil
}

// build calls Build and checks that the topology has one spout, the log's, and
// every component p pins or names as a sink writer.
func (p *Pipeline) build(parts Parts) (_ Built, err error) {
	// A panicking Build is an error like any other: Start then closes what it
	// opened (the log's lock above all), so the process can start again.
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("building the %s pipeline: its Build panicked: %v", p.Name, r)
		}
	}()
	b, err := p.Build(parts)
	if err != nil {
		return Built{}, fmt.Errorf("building the %s pipeline: %w", p.Name, err)
	}
	if b.Topology == nil {
		return Built{}, fmt.Errorf("building the %s pipeline: Build returned no topology", p.Name)
	}
	var spouts []string
	for _, c := range b.Topology.Components {
		if c.IsSpout() {
			spouts = append(spouts, c.ID)
		}
	}
	if len(spouts) != 1 {
		return Built{}, fmt.Errorf("the %s pipeline's topology has %d spouts (%s): want one, the log spout (Parts.Spout)",
			p.Name, len(spouts), strings.Join(spouts, ", "))
	}
	for _, id := range slices.Concat(p.SinkComponents, p.Pinned) {
		if b.Topology.Component(id) == nil {
			return Built{}, fmt.Errorf("the %s pipeline names component %q (SinkComponents or Pinned), which its topology does not have", p.Name, id)
		}
	}
	return b, nil
}

// logSpout is the id of the topology's one spout (build checked there is one).
func logSpout(t *topology.Topology) string {
	for _, c := range t.Components {
		if c.IsSpout() {
			return c.ID
		}
	}
	return ""
}

// pinned says whether component id's tasks run only in the serve process on a
// cluster: the log spout, p.Pinned, and p.SinkComponents with a local sink.
func (p *Pipeline) pinned(t *topology.Topology, id string, localSink bool) bool {
	return id == logSpout(t) || slices.Contains(p.Pinned, id) || (localSink && slices.Contains(p.SinkComponents, id))
}

// Pipelines is a registry of pipelines by name: what gale serve --pipeline, gale
// sink rebuild --pipeline and the cluster's workers choose from. The zero value
// is empty and ready; it is safe for concurrent use.
type Pipelines struct {
	mu sync.Mutex
	m  map[string]Pipeline
}

// Register adds p under p.Name. It refuses a pipeline without a name or a
// Build, and a name already registered, naming it.
func (ps *Pipelines) Register(p Pipeline) error {
	if err := p.check(); err != nil {
		return fmt.Errorf("server: Register: %w", err)
	}
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if _, ok := ps.m[p.Name]; ok {
		return fmt.Errorf("server: Register: pipeline %q is registered already", p.Name)
	}
	if ps.m == nil {
		ps.m = map[string]Pipeline{}
	}
	ps.m[p.Name] = p
	return nil
}

// Lookup returns the pipeline registered as name; the error of an unknown name
// lists those registered.
func (ps *Pipelines) Lookup(name string) (Pipeline, error) {
	ps.mu.Lock()
	p, ok := ps.m[name]
	ps.mu.Unlock()
	if !ok {
		names := ps.Names()
		if len(names) == 0 {
			return Pipeline{}, fmt.Errorf("unknown pipeline %q: none is registered", name)
		}
		return Pipeline{}, fmt.Errorf("unknown pipeline %q: want %s", name, orList(names))
	}
	return p, nil
}

// Names returns the registered names, sorted.
func (ps *Pipelines) Names() []string {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	names := make([]string, 0, len(ps.m))
	for n := range ps.m {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// orList joins names as "a", "a or b", "a, b or c".
func orList(names []string) string {
	if len(names) == 1 {
		return names[0]
	}
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}

// RegisterWorkers registers, under each pipeline's name, the factory a gale
// worker builds it with when a gale serve --nats submits it (WorkerFactory).
func (ps *Pipelines) RegisterWorkers(r *cluster.Registry) error {
	f := ps.WorkerFactory()
	for _, name := range ps.Names() {
		if err := r.Register(name, f); err != nil {
			return err
		}
	}
	return nil
}

// WorkerFactory builds, on a gale worker, the pipeline a gale serve --nats
// submitted (its name and settings are in the submit arguments): every task but
// the log spout, which is pinned to the serve process and refuses to open
// elsewhere. With a PostgreSQL sink the worker writes to it; an SQLite sink's
// writers are pinned to serve too, and its database is never opened here.
func (ps *Pipelines) WorkerFactory() cluster.Factory {
	return func(ctx context.Context, env cluster.Env) (*cluster.Deployment, error) {
		a, err := parseSubmitArgs(env.Args)
		if err != nil {
			return nil, err
		}
		if a.pipelineFile {
			// A file's record carries its Source, and the registry hands it to the
			// file factory (FileWorkerFactory): here it came without one.
			return nil, fmt.Errorf("pipeline %s is a pipeline file submitted without its document", a.pipeline)
		}
		p, err := ps.Lookup(a.pipeline)
		if err != nil {
			return nil, err
		}
		return workerDeployment(ctx, env, a, p)
	}
}

// FileWorkerFactory builds, on a gale worker, what is submitted as a file
// (cluster.Registry.SetFileFactory), with the component classes of reg (the
// binary's): a pipeline file a gale serve --nats --pipeline FILE.yaml submitted
// (its submit arguments carry --pipeline-file, besides the settings every
// pipeline's carry) is built from its resolved document (env.Document) by
// FilePipelineFrom, the serve process's code path, and deployed as WorkerFactory
// deploys a registered pipeline; anything else is a topology file (gale submit
// --file: no arguments), built by cluster.FileFactory. A class the build lacks is
// a refusal naming it.
func FileWorkerFactory(reg *component.Registry) cluster.Factory {
	topologies := cluster.FileFactory(reg)
	return func(ctx context.Context, env cluster.Env) (*cluster.Deployment, error) {
		if !slices.Contains(env.Args, pipelineFileArg) {
			return topologies(ctx, env)
		}
		a, err := parseSubmitArgs(env.Args)
		if err != nil {
			return nil, err
		}
		if env.Source == nil || env.Document == nil {
			return nil, fmt.Errorf("pipeline file %s: no document to build", a.pipeline)
		}
		p, err := FilePipelineFrom(env.Source.File, env.Document, reg)
		if err == nil && p.Name != a.pipeline {
			err = fmt.Errorf("it names pipeline %q, submitted as %q", p.Name, a.pipeline)
		}
		if err != nil {
			return nil, oneLine(fmt.Errorf("pipeline file %s (lines of its resolved document): %w", env.Source.File, err))
		}
		d, err := workerDeployment(ctx, env, a, p)
		if err != nil {
			return nil, oneLine(fmt.Errorf("pipeline file %s (lines of its resolved document): %w", env.Source.File, err))
		}
		return d, nil
	}
}

// oneLine is err on one line (flux joins refusals with newlines): a worker's
// refusal shows in a row of gale cluster status and in serve's WARN line.
func oneLine(err error) error {
	if !strings.Contains(err.Error(), "\n") {
		return err
	}
	return &lineErr{msg: strings.ReplaceAll(err.Error(), "\n", "; "), err: err}
}

type lineErr struct {
	msg string
	err error
}

func (e *lineErr) Error() string { return e.msg }
func (e *lineErr) Unwrap() error { return e.err }

// workerDeployment is p built on a worker with the settings a: the log spout a
// stand-in that refuses to open, the sink's database PostgreSQL opened here, or
// for SQLite one that refuses every use (its writers are pinned to serve).
func workerDeployment(ctx context.Context, env cluster.Env, a *submitArgs, p Pipeline) (*cluster.Deployment, error) {
	tc := a.config()
	var db *sink.DB
	var closeDB func() error
	// A sink given by reference (env:NAME, @PATH) is read here, on the worker:
	// it is only known to be PostgreSQL once resolved.
	sinkURL := a.sinkURL
	if env.Worker != "" {
		var err error
		if sinkURL, err = sink.ResolveURL(a.sinkURL); err != nil {
			return nil, err
		}
	}
	if isPostgres(sinkURL) && env.Worker != "" {
		var err error
		if db, err = sink.Open(ctx, sinkURL); err != nil {
			return nil, err
		}
		closeDB = db.Close
	} else {
		db = pinnedDB(a.sinkURL)
	}
	b, err := p.build(Parts{Spout: func() topology.Spout { return &remoteLogSpout{} }, DB: db,
		SinkCounters: &sink.Counters{}, SinkHealth: sink.NewHealth(nil), Config: tc})
	if err != nil {
		if closeDB != nil {
			_ = closeDB()
		}
		return nil, err
	}
	return &cluster.Deployment{Topology: b.Topology, Config: tc, Close: closeDB}, nil
}

// submitArgs are what a worker builds the pipeline with, as the serve process
// does: the submit arguments.
type submitArgs struct {
	pipeline   string
	sinkURL    string
	timeout    time.Duration
	maxPending int
	ackers     int
	// pipelineFile: the pipeline is a file's (Pipeline.File), whose resolved
	// document the record's Source names (FileWorkerFactory).
	pipelineFile bool
}

// pipelineFileArg marks the submit arguments of a pipeline file.
const pipelineFileArg = "--pipeline-file"

func (a *submitArgs) args() []string {
	args := []string{"--pipeline=" + a.pipeline, "--sink=" + a.sinkURL, "--timeout=" + a.timeout.String(),
		fmt.Sprintf("--max-pending=%d", a.maxPending), fmt.Sprintf("--ackers=%d", a.ackers)}
	if a.pipelineFile {
		args = append(args, pipelineFileArg)
	}
	return args
}

func parseSubmitArgs(args []string) (*submitArgs, error) {
	a := &submitArgs{}
	f := pflag.NewFlagSet("serve pipeline", pflag.ContinueOnError)
	f.StringVar(&a.pipeline, "pipeline", "", "the pipeline's name")
	f.StringVar(&a.sinkURL, "sink", "", "the sink database")
	f.DurationVar(&a.timeout, "timeout", 30*time.Second, "message timeout")
	f.IntVar(&a.maxPending, "max-pending", 5000, "max spout pending")
	f.IntVar(&a.ackers, "ackers", 1, "acker tasks")
	f.BoolVar(&a.pipelineFile, strings.TrimPrefix(pipelineFileArg, "--"), false, "the pipeline is a file's, its document the record's source")
	if err := f.Parse(args); err != nil {
		return nil, err
	}
	if a.pipeline == "" {
		return nil, errors.New("no --pipeline")
	}
	if a.sinkURL == "" {
		return nil, errors.New("no --sink")
	}
	return a, nil
}

func (a *submitArgs) config() topology.Config {
	tc := topology.DefaultConfig()
	tc.MessageTimeout, tc.MaxSpoutPending, tc.Ackers = a.timeout, a.maxPending, a.ackers
	return tc
}
