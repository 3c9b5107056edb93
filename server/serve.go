package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/gale-stream/gale/engine"
	"github.com/gale-stream/gale/eventlog"
	"github.com/gale-stream/gale/eventlog/jslog"
	"github.com/gale-stream/gale/ingest"
	"github.com/gale-stream/gale/ingest/access"
	"github.com/gale-stream/gale/lineage"
	"github.com/gale-stream/gale/metrics/ingestmetrics"
	"github.com/gale-stream/gale/sink"
	"github.com/gale-stream/gale/topology"
	"github.com/gale-stream/gale/ui"
)

// Options configure Start.
type Options struct {
	// Addr to listen on (default 127.0.0.1:8080; port 0 picks one).
	Addr string
	// DataDir holds the log (DataDir/log) and the default SQLite sink
	// (DataDir/sink.db). Default ./gale-data.
	DataDir string
	// Pipeline is what runs behind the log: its tables are created in the sink,
	// and its topology reads the log spout's tuples (see Pipeline). Required.
	Pipeline Pipeline
	// SinkURL is the sink database: a postgres:// URL or a SQLite path; default
	// DataDir/sink.db.
	SinkURL string
	// Ingest configures the service (its Log is set by Start).
	Ingest ingest.Config
	// HTTP bounds request sizes.
	HTTP ingest.HTTPOptions
	// Topology is the runtime configuration (default topology.DefaultConfig()).
	Topology *topology.Config
	Logger   *slog.Logger
	// Lineage records tuple trees for the UI (default lineage.DefaultConfig()).
	Lineage *lineage.Recorder
	// UIToken, if set, is a token with the ui scope (/ui/ and /metrics).
	UIToken string
	// Net: tokens, TLS, cross-site checks and limits.
	Net NetOptions
	// SeparateMarkSync gives the log's high-water mark its own fdatasync even
	// where it could ride the WAL's flush (eventlog.Options.SeparateMarkSync).
	SeparateMarkSync bool
	// Cluster, if set, runs the pipeline's bolts on gale workers (gale serve --nats).
	Cluster *Cluster
	// JetStream, if set, keeps the event log on a JetStream stream (gale serve --log
	// jetstream, package eventlog/jslog) instead of Pebble in DataDir/log; DataDir
	// then holds only the default SQLite sink. The answers' durability is what
	// JetStream.Durability finds (unless Ingest.Durability is set). The log's
	// Pebble-only metrics (group commits, fsync latency, damaged files) are not
	// exported then.
	JetStream *JetStream

	tap func(*topology.Topology) // tests: sees the topology before it starts
}

// Server is a running gale serve.
type Server struct {
	// Log is the Pebble log; nil with Options.JetStream (see JSLog).
	Log *eventlog.Log
	// JSLog is the JetStream log of Options.JetStream; nil without.
	JSLog *jslog.Log
	// IngestLog is the log the service runs on: Log or JSLog.
	IngestLog ingest.Log
	// DurabilityWhy says how the answers' durability word was found (JetStream).
	DurabilityWhy string
	Service       *ingest.Service
	Runtime       *engine.Runtime
	DB            *sink.DB
	SinkCounters  *sink.Counters
	// SinkHealth says whether the sink's database takes writes; the ingest service
	// (its spout and /readyz) and /metrics read it.
	SinkHealth *sink.Health
	Options    Options

	UI *ui.UI

	http     *http.Server
	ln       net.Listener
	bound    string // the listener's address
	guard    *access.Guard
	certs    *certs // nil without TLS
	done     chan error
	stopHist context.CancelFunc
	histDone chan struct{}
	durDone  chan struct{} // recheckDurability's end; nil if it does not run
	cluster  *clusterRun   // gale serve --nats
	closeLog func() error
}

// runtime is the running topology: with a cluster, the generation this process
// runs now.
func (s *Server) runtime() *engine.Runtime {
	if s.cluster != nil {
		if rt := s.cluster.runtime(); rt != nil {
			return rt
		}
	}
	return s.Runtime
}

// Start opens everything (the log, the sink with the pipeline's tables, the
// service) and starts the pipeline and serving. On error what was opened is
// closed. ctx must live as long as the server: canceling it stops the topology
// at once, without the drain Shutdown does (gale serve passes
// context.Background() and stops with Shutdown).
func Start(ctx context.Context, o Options) (_ *Server, err error) {
	if o.Addr == "" {
		o.Addr = "127.0.0.1:8080"
	}
	if o.DataDir == "" {
		o.DataDir = "gale-data"
	}
	if o.Pipeline.zero() {
		return nil, errors.New("serve: no pipeline: set Options.Pipeline (gale's own: events.Pipeline() or orders.Pipeline(), packages pipelines/events and pipelines/orders)")
	}
	if err := o.Pipeline.check(); err != nil {
		return nil, fmt.Errorf("serve: %w", err)
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.SinkURL == "" {
		o.SinkURL = filepath.Join(o.DataDir, "sink.db")
	}
	// The submit arguments of a cluster run are stored in the cluster's KV,
	// readable by every worker and every holder of its credentials: a password
	// goes by reference, which each process resolves itself.
	if o.Cluster != nil && sink.HoldsSecret(o.SinkURL) {
		return nil, fmt.Errorf("serve: %w; with --nats it would be stored in clear in the cluster's KV with the submission: give the URL as env:NAME (an environment variable set for gale serve and every gale worker) or @PATH (a file each of them reads)", sink.ErrSecretInURL)
	}
	// Tokens first: a bad tokens file or an open non-loopback address stops the
	// start before anything is opened.
	guard, err := newGuard(o)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(o.DataDir, 0o755); err != nil {
		return nil, fmt.Errorf("serve: data directory: %w", err)
	}
	// s stays valid for the cleanups below even when Start returns nil.
	s := &Server{Options: o, SinkCounters: &sink.Counters{}, SinkHealth: sink.NewHealth(o.Logger), done: make(chan error, 1),
		guard: guard}
	var closers []func()
	defer func() {
		if err != nil {
			for i := len(closers) - 1; i >= 0; i-- {
				closers[i]()
			}
		}
	}()
	// One registry for /metrics: the topology's collector (ui adds it), the
	// process's, the ingest path's (HTTP, the log, the service) and the sink's.
	reg := prometheus.NewRegistry()
	im, err := ingestmetrics.New(reg)
	if err != nil {
		return nil, err
	}
	if o.JetStream != nil {
		jc := o.JetStream.Log
		if jc.Logger == nil {
			jc.Logger = o.Logger
		}
		if jc.Durability == "" {
			jc.Durability = o.Ingest.Durability
		}
		if s.JSLog, err = jslog.Open(ctx, jc); err != nil {
			return nil, fmt.Errorf("serve: the event log on JetStream: %w", err)
		}
		if o.Ingest.Durability == "" && o.JetStream.Log.Durability == "" {
			word, why := o.JetStream.Durability(ctx, s.JSLog.Stream())
			o.Ingest.Durability = word
			s.Options.Ingest.Durability = word
			o.Logger.Info("PERSISTED means "+word, "why", why, "stream", s.JSLog.Name())
			s.DurabilityWhy = why
		} else {
			o.Ingest.Durability = s.JSLog.Durability()
		}
		s.IngestLog = s.JSLog
		s.closeLog = s.JSLog.Close
	} else {
		s.Log, err = eventlog.Open(eventlog.Options{Dir: filepath.Join(o.DataDir, "log"), Logger: o.Logger, OnCommit: im.OnCommit,
			SeparateMarkSync: o.SeparateMarkSync})
		if errors.Is(err, eventlog.ErrLocked) {
			return nil, fmt.Errorf("serve: the log in %s is locked: is another gale using --data %s? (%w)", filepath.Join(o.DataDir, "log"), o.DataDir, err)
		}
		if err != nil {
			return nil, err
		}
		s.IngestLog = s.Log
		s.closeLog = s.Log.Close
	}
	closers = append(closers, func() { _ = s.closeLog() })
	s.DB, err = sink.Open(ctx, o.SinkURL)
	if err != nil {
		return nil, err
	}
	closers = append(closers, func() { _ = s.DB.Close() })
	if err := o.Pipeline.CreateTables(ctx, s.DB); err != nil {
		return nil, fmt.Errorf("serve: %w", err)
	}
	ic := o.Ingest
	ic.Log = s.IngestLog
	if ic.Logger == nil {
		ic.Logger = o.Logger
	}
	if ic.Sink == nil {
		ic.Sink = s.SinkHealth
	}
	s.Service, err = ingest.New(ic)
	if err != nil {
		return nil, err
	}
	closers = append(closers, func() { _ = s.Service.Close() })

	tc := topology.DefaultConfig()
	if o.Topology != nil {
		tc = *o.Topology
	}
	if tc.Logger == nil {
		tc.Logger = o.Logger
	}
	// Built once: on a cluster every generation this process runs reuses the
	// topology, so that what the pipeline counts outside its tasks spans them.
	built, err := o.Pipeline.build(Parts{Spout: s.Service.Spout(), DB: s.DB, SinkCounters: s.SinkCounters,
		SinkHealth: s.SinkHealth, Config: tc})
	if err != nil {
		return nil, fmt.Errorf("serve: %w", err)
	}
	if o.tap != nil {
		o.tap(built.Topology)
	}
	if o.Lineage == nil {
		if o.Lineage, err = lineage.New(lineage.DefaultConfig()); err != nil {
			return nil, err
		}
	}
	if o.Cluster != nil {
		// The bolts run on the cluster's workers; this process runs the spout (and an
		// SQLite sink), generation after generation.
		if s.cluster, err = s.startCluster(ctx, o, tc, built); err != nil {
			return nil, err
		}
		closers = append(closers, s.cluster.stop)
		s.Runtime = s.cluster.runtime()
	} else {
		s.Runtime, err = engine.Start(ctx, built.Topology, tc, engine.WithLineage(o.Lineage))
		if err != nil {
			return nil, err
		}
		closers = append(closers, func() {
			c, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_ = s.Runtime.Stop(c)
		})
	}
	if err := im.Register(s.Service, s.Log); err != nil { // Pebble's own metrics only with Pebble
		return nil, err
	}
	if err := registerMetrics(reg, s); err != nil {
		return nil, err
	}
	for _, c := range built.Collectors {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("serve: registering the %s pipeline's metrics: %w", o.Pipeline.Name, err)
		}
	}
	if err := reg.Register(guard.Collector()); err != nil {
		return nil, fmt.Errorf("serve: registering the refusal counter: %w", err)
	}
	// The guard checks the UI's token (the ui scope) with every other.
	if s.UI, err = ui.New(ui.Options{Name: o.Pipeline.Name, Runtime: s.Runtime, Registry: reg,
		Ingest: ingestView{svc: s.Service, log: s.IngestLog, pebble: s.Log}}); err != nil {
		return nil, err
	}

	if err := s.listen(o); err != nil {
		return nil, err
	}
	guard.AllowHosts(allowedHosts(o.Net, o.Addr, s.bound))
	hopts := o.HTTP
	hopts.Admit = guard.Admit
	hopts.Ready = func() error {
		select {
		case <-s.runtime().Done():
			return errors.New("the topology stopped")
		default:
			return nil
		}
	}
	// The ingest API at /v1/ and the probes, the operator's UI at /ui/, and the
	// Prometheus metrics at /metrics, on one listener.
	mux := http.NewServeMux()
	mux.Handle("/", s.Service.Handler(hopts))
	mux.Handle("/ui/", http.StripPrefix("/ui", s.UI))
	mux.Handle("/ui", http.RedirectHandler("/ui/", http.StatusMovedPermanently))
	mux.Handle("/metrics", s.UI)
	// Requests refused by the guard are counted by route and code too.
	s.http = httpServer(im.Wrap(guard.Wrap(mux)), o.Net)
	hctx, stopHist := context.WithCancel(context.Background())
	s.stopHist, s.histDone = stopHist, make(chan struct{})
	go func() {
		defer close(s.histDone)
		if s.cluster != nil {
			s.cluster.follow(s.UI)
			s.UI.Run(hctx) // samples every process's stats, generation after generation
			return
		}
		s.UI.History().Run(hctx, func() engine.Stats { return s.runtime().Stats() })
	}()
	if s.JSLog != nil && s.DurabilityWhy != "" && o.JetStream.Recheck >= 0 {
		s.durDone = make(chan struct{})
		go s.recheckDurability(hctx, o.JetStream)
	}
	go func() { s.done <- s.http.Serve(s.ln) }()
	return s, nil
}

// recheckDurability asks again, every j.Recheck, what PERSISTED means on the
// log's stream, and changes the answers' word when it changed (until ctx ends).
func (s *Server) recheckDurability(ctx context.Context, j *JetStream) {
	defer close(s.durDone)
	every := j.Recheck
	if every == 0 {
		every = time.Minute
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		ictx, cancel := context.WithTimeout(ctx, every)
		word, why := "unknown", ""
		if _, err := s.JSLog.Stream().Info(ictx); err != nil { // replicas, leader: fresh
			why = "stream info: " + err.Error()
		} else {
			word, why = j.Durability(ictx, s.JSLog.Stream())
		}
		cancel()
		if ctx.Err() != nil {
			return
		}
		if before := s.Service.SetDurability(word); before != word {
			s.Options.Logger.Warn("PERSISTED now means "+word+", was "+before, "why", why, "stream", s.JSLog.Name())
		}
	}
}

// URL is the base URL of the API.
func (s *Server) URL() string { return s.scheme() + s.bound }

// Shutdown stops taking connections and answers every request already taken in
// (bounded by ctx), then drains the topology (pending trees complete or are
// abandoned at ctx's deadline, to be replayed at the next start), syncs the last
// statuses and committed offset, and closes the log and the sink.
func (s *Server) Shutdown(ctx context.Context) error {
	s.Service.Drain()                  // waiting answers go out now, with the status reached
	s.http.SetKeepAlivesEnabled(false) // answers in progress close their connections
	herr := s.http.Shutdown(ctx)
	<-s.done
	s.stopHist()
	<-s.histDone
	if s.durDone != nil {
		<-s.durDone
	}
	var rerr error
	if s.cluster != nil {
		s.cluster.stop() // every worker drains the pipeline, this process's spout too
	} else {
		rerr = s.Runtime.Stop(ctx)
		<-s.Runtime.Done()
	}
	serr := s.Service.Close()
	lerr := s.closeLog()
	derr := s.DB.Close()
	return errors.Join(herr, rerr, serr, lerr, derr)
}
