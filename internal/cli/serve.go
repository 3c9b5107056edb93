package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"strings"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/cobra"

	"github.com/gale-stream/gale/cluster"
	"github.com/gale-stream/gale/cluster/natsnode"
	"github.com/gale-stream/gale/eventlog"
	"github.com/gale-stream/gale/eventlog/jslog"
	"github.com/gale-stream/gale/flux"
	"github.com/gale-stream/gale/ingest"
	"github.com/gale-stream/gale/lineage"
	"github.com/gale-stream/gale/server"
	"github.com/gale-stream/gale/sink"
	"github.com/gale-stream/gale/topology"
)

// serveFlags are the flags shared by serve and orders.
type ServeFlags struct {
	Server        server.Options
	defaultAck    string
	sourceAck     []string
	timeout       time.Duration
	maxPending    int
	shutdown      time.Duration
	logLevel      string
	logFormat     string
	lineageSample float64
	dedupeWindow  time.Duration
	processedWait time.Duration
	// gale serve --nats: the bolts on a cluster's workers.
	cluster    ClusterFlags
	workers    int
	workerName string
	// pipeline names the pipeline (gale serve --pipeline; "": the default), or a
	// pipeline file; filter and envFilter are its substitutions.
	pipeline  string
	filter    string
	envFilter bool
	// gale serve --log jetstream: the event log on a JetStream stream.
	logKind  string
	sysCreds string
	leaseTTL time.Duration
	recheck  time.Duration
}

func (f *ServeFlags) Register(c *cobra.Command, addr string) {
	fl := c.Flags()
	fl.StringVar(&f.Server.Addr, "addr", addr, "address to listen on")
	fl.StringVar(&f.Server.DataDir, "data", "gale-data", "data directory (the log, and the SQLite sink unless --sink)")
	fl.StringVar(&f.Server.SinkURL, "sink", "", "sink database: a postgres:// URL or a SQLite file (default DATA/sink.db), or env:NAME or @PATH naming one (with --nats a password must go so: each worker reads it)")
	fl.BoolVar(&f.Server.SeparateMarkSync, "separate-mark-sync", false, "give the log's high-water mark its own fdatasync on every file system, not only where its copy cannot ride the WAL's flush")
	fl.StringVar(&f.defaultAck, "ack-default", "persisted", "ack level when a request and its source name none")
	fl.StringSliceVar(&f.sourceAck, "source-ack", nil, "per-source default ack level, e.g. debug=accepted,metrics=persisted,orders=processed")
	fl.IntVar(&f.Server.Ingest.Tracker.MaxAttempts, "max-attempts", 5, "processing attempts per event before FAILED_FINAL (dead letter)")
	fl.DurationVar(&f.Server.Ingest.Tracker.BackoffBase, "backoff", 100*time.Millisecond, "delay before the second attempt; doubles each retry")
	fl.DurationVar(&f.dedupeWindow, "dedupe-window", 7*24*time.Hour, "how long an event_id is remembered at least")
	fl.DurationVar(&f.processedWait, "processed-wait", 10*time.Second, "default wait of an ack=processed answer before it says PERSISTED")
	fl.DurationVar(&f.timeout, "timeout", 30*time.Second, "message timeout of a tuple tree")
	fl.IntVar(&f.maxPending, "max-pending", 5000, "max spout pending (trees in flight)")
	fl.DurationVar(&f.shutdown, "shutdown-timeout", 30*time.Second, "on SIGTERM, how long to answer requests and drain trees before stopping")
	fl.StringVar(&f.logLevel, "log-level", "info", "debug, info, warn or error (logs go to stderr; debug logs failed and timed-out trees with their root ids)")
	fl.StringVar(&f.logFormat, "log-format", "text", "text or json")
	fl.StringVar(&f.Server.UIToken, "ui-token", "", "a token with the ui scope, for the web UI (/ui/) and /metrics (Authorization: Bearer, or ?token=); any token closes every route but the probes to requests without one")
	fl.Float64Var(&f.lineageSample, "lineage-sample", lineage.DefaultConfig().Sample,
		"fraction of tuple trees whose whole lineage is recorded (failed and timed-out trees are always recorded)")
}

// registerNetwork adds the flags of a server others reach: tokens, TLS, cross-site
// checks and limits (gale serve only; gale orders serves itself on loopback).
func (f *ServeFlags) registerNetwork(c *cobra.Command) {
	fl := c.Flags()
	n := &f.Server.Net
	fl.StringVar(&n.TokensFile, "tokens", "", "tokens file: one a line, the token or sha256:<hex> of it, then its scopes (write:SOURCE, write:*, read, admin, ui); re-read on SIGHUP")
	fl.StringSliceVar(&n.AllowOrigins, "allow-origin", nil, "browser Origins besides the server's own that may call it, e.g. https://app.example.com (others: 403)")
	fl.StringSliceVar(&n.AllowHosts, "allow-host", nil, "Host header values answered, HOST:PORT or HOST for any port, * for any (default the listen address, localhost, 127.0.0.1, [::1], with the port)")
	fl.BoolVar(&n.InsecureNoAuth, "insecure-no-auth", false, "allow a non-loopback --addr without any token: anyone who reaches it may write and read")
	fl.StringVar(&n.TLSCert, "tls-cert", "", "TLS certificate (PEM) to serve HTTPS; re-read on SIGHUP")
	fl.StringVar(&n.TLSKey, "tls-key", "", "TLS private key (PEM) of --tls-cert")
	fl.StringVar(&n.TLSClientCA, "tls-client-ca", "", "require client certificates signed by this CA (PEM): mTLS")
	fl.Float64Var(&n.RateLimit, "rate-limit", 0, "events per second per token (per source without tokens), answered 429 past it; 0: no limit")
	fl.IntVar(&n.RateBurst, "rate-burst", 0, "events a token may send at once above --rate-limit (default the rate, at least 1)")
	fl.IntVar(&n.MaxConns, "max-conns", 0, "connections served at once; more wait to be accepted (0: no cap)")
	fl.DurationVar(&n.ReadHeaderTimeout, "read-header-timeout", 10*time.Second, "time to read a request's headers")
	fl.DurationVar(&n.ReadTimeout, "read-timeout", 60*time.Second, "time to read a whole request, body included")
	fl.DurationVar(&n.IdleTimeout, "idle-timeout", 2*time.Minute, "how long a kept-alive connection may idle")
	fl.Int64Var(&f.Server.HTTP.MaxEventBytes, "max-event-bytes", 1<<20, "largest body of POST /v1/events, and line of a batch (413 beyond)")
	fl.Int64Var(&f.Server.HTTP.MaxBatchBytes, "max-batch-bytes", 16<<20, "largest body of POST /v1/events:batch (413 beyond)")
	fl.IntVar(&f.Server.HTTP.MaxBatchLines, "max-batch-lines", ingest.DefaultMaxBatchLines, "most events in one batch (413 beyond)")
}

// Options are the server's options the flags give, with the pipeline pipeline
// returns for --pipeline ("" without it).
func (f *ServeFlags) Options(pipeline func(name string) (server.Pipeline, error)) (server.Options, error) {
	o := f.Server
	p, err := pipeline(f.pipeline)
	if err != nil {
		return o, fmt.Errorf("--pipeline: %w", err)
	}
	o.Pipeline = p
	lvl, err := ingest.ParseLevel(f.defaultAck)
	if err != nil {
		return o, fmt.Errorf("--ack-default: %w", err)
	}
	o.Ingest.DefaultLevel = lvl
	o.Ingest.DedupeWindow = f.dedupeWindow
	o.Ingest.ProcessedWait = f.processedWait
	if len(f.sourceAck) > 0 {
		o.Ingest.SourceLevels = map[string]ingest.Level{}
		for _, kv := range f.sourceAck {
			src, l, ok := strings.Cut(kv, "=")
			if !ok || src == "" {
				return o, fmt.Errorf("--source-ack %q: want SOURCE=LEVEL", kv)
			}
			lv, err := ingest.ParseLevel(l)
			if err != nil {
				return o, fmt.Errorf("--source-ack %q: %w", kv, err)
			}
			o.Ingest.SourceLevels[src] = lv
		}
	}
	var err2 error
	if o.Logger, err2 = NewLogger(os.Stderr, f.logLevel, f.logFormat); err2 != nil {
		return o, err2
	}
	lc := lineage.DefaultConfig()
	lc.Sample = f.lineageSample
	if o.Lineage, err2 = lineage.New(lc); err2 != nil {
		return o, fmt.Errorf("--lineage-sample %v: must be between 0 and 1", f.lineageSample)
	}
	if o.DataDir == "" {
		return o, errors.New("--data is empty: give the data directory (the log is DATA/log)")
	}
	if f.timeout < sink.MinMessageTimeout {
		return o, fmt.Errorf("--timeout %v: at least %v: the sink bounds each transaction by a third of it, so that a stalled database is an outage before any tree times out", f.timeout, sink.MinMessageTimeout)
	}
	tc := topology.DefaultConfig()
	tc.MessageTimeout, tc.MaxSpoutPending, tc.Logger = f.timeout, f.maxPending, o.Logger
	tc.ShutdownTimeout = f.shutdown
	o.Topology = &tc
	return o, nil
}

func (a *App) serveCmd() *cobra.Command {
	var f ServeFlags
	c := &cobra.Command{
		Use:   "serve",
		Short: "Serve the ingest API (HTTP) over a durable log, feeding a topology that writes to an idempotent SQL sink",
		Long: `gale serve takes events in at POST /v1/events and /v1/events:batch and answers each
with how far it got: ACCEPTED (memory), PERSISTED (fsynced in the log), PROCESSED (tuple
tree complete, sink committed), FAILED_RETRYABLE or FAILED_FINAL. The log (Pebble) is
DATA/log and the SQLite sink DATA/sink.db (--data); SIGTERM answers every request taken
in, drains the topology and syncs before exiting.

--log jetstream --nats URL keeps the log on a JetStream stream (PREFIX-log, --replicas
copies) instead: PERSISTED once a quorum of the replicas stored the event, and the
pipeline runs in this process unless --workers is given. Several serve processes may
share the stream (the same --nats and --prefix, a shared --sink such as PostgreSQL):
each takes events in and answers for any event, and one at a time, the holder of a
lease in JetStream KV, runs the log spout; another takes over --spout-lease-ttl after it
dies, from the committed offset. Every answer that names a seq says what
PERSISTED meant ("durability"; an ACCEPTED answer has neither): "fsync" (Pebble); "replicated:N+fsync" when every
server fsyncs each write (sync_interval: always: gale nats does, as its --nats-data
records; with --sys-creds the servers are asked), "replicated:N" when one does not
(NATS's default fsyncs every 2 minutes), "unknown" when it cannot be told. The
Pebble-only metrics (group commits, fsync latency, damaged files) are not exported.

Endpoints:
  POST /v1/events              one JSON event    ?ack=accepted|persisted|processed&wait=10s
  POST /v1/events:batch        NDJSON, one event per line (same parameters)
  GET  /v1/events/{id}         an event's status, attempts and transitions
  POST /v1/events/{id}:retry   send a dead letter again, as a new attempt
  GET  /v1/dead-letters        events that failed --max-attempts times   ?limit=100
  GET  /v1/lost                seq ranges (and ids) a log salvage lost: send them again
  GET  /healthz                the process answers
  GET  /readyz                 ready to take events (503 after a failed fsync)
  GET  /ui/                    the web UI (--ui-token)
  GET  /metrics                Prometheus metrics (--ui-token)`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			lookup := a.pipeline
			if isPipelineFile(f.pipeline) {
				// A Storm Flux file: read and checked now, every refusal at its
				// FILE:LINE:COLUMN, before anything starts.
				// With --nats and workers, they build it from its resolved document,
				// shipped through the cluster's object store (server.FileWorkerFactory).
				p, err := server.FilePipeline(f.pipeline, flux.Options{Filter: f.filter, EnvFilter: f.envFilter}, &a.Components)
				if err != nil {
					return err
				}
				lookup = func(string) (server.Pipeline, error) { return p, nil }
			} else if cmd.Flags().Changed("filter") || cmd.Flags().Changed("env-filter") {
				return errors.New("--filter and --env-filter are for a pipeline file (--pipeline FILE.yaml)")
			}
			o, err := f.Options(lookup)
			if err != nil {
				return err
			}
			if os.Getenv("GOGC") == "" {
				debug.SetGCPercent(200) // fewer GC cycles per request; GOGC in the environment wins
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			// Before Start: a SIGHUP's default action would end the process.
			hup := make(chan os.Signal, 1)
			signal.Notify(hup, syscall.SIGHUP)
			defer signal.Stop(hup)
			flags := cmd.Flags()
			switch f.logKind {
			case "pebble":
				if flags.Changed("sys-creds") {
					return errors.New("--sys-creds is for --log jetstream (it asks the NATS servers how they sync)")
				}
				if flags.Changed("durability-recheck") {
					return errors.New("--durability-recheck is for --log jetstream (the Pebble log's answers always say fsync)")
				}
				if flags.Changed("spout-lease-ttl") {
					return errors.New("--spout-lease-ttl is for --log jetstream (the lease of the log spout that serve processes sharing the stream hold in turn)")
				}
			case "jetstream":
				if f.cluster.url == "" {
					return errors.New("--log jetstream keeps the log on a NATS JetStream stream: give --nats URL (a NATS cluster, or gale nats)")
				}
				if !flags.Changed("workers") {
					f.workers = 0 // the pipeline in this process, unless workers are asked for
				}
			default:
				return fmt.Errorf("--log %q: want pebble (a local log in DATA/log) or jetstream (a stream on the --nats cluster)", f.logKind)
			}
			if f.cluster.url == "" {
				for _, name := range []string{"workers", "worker-name", "nats-data", "creds", "nkey", "prefix", "replicas", "nats-timeout"} {
					if flags.Changed(name) {
						return fmt.Errorf("--%s is for a pipeline on a cluster: give --nats URL too (without it gale serve runs the pipeline in this process)", name)
					}
				}
			}
			if flags.Changed("replicas") && (f.cluster.replicas < 1 || f.cluster.replicas > 5) {
				return fmt.Errorf("--replicas %d: JetStream keeps 1 to 5 copies (3 on a three-node cluster)", f.cluster.replicas)
			}
			if f.workers < 0 || (f.workers == 0 && f.logKind != "jetstream") {
				return fmt.Errorf("--workers %d: at least 1 (--workers 0, the pipeline in this process, is for --log jetstream; without --nats the Pebble log runs it here)", f.workers)
			}
			var closeNATS []func()
			defer func() {
				for _, c := range closeNATS {
					c()
				}
			}()
			if f.cluster.url != "" {
				var nc *nats.Conn
				if f.workers > 0 {
					var st *cluster.Store
					if nc, st, err = f.cluster.Connect(ctx, "gale serve"); err != nil {
						return err
					}
					o.Cluster = &server.Cluster{Conn: nc, Store: st, Name: f.workerName, Workers: f.workers, Timeout: f.cluster.timeout}
				} else if nc, err = f.cluster.dial("gale serve"); err != nil {
					return err
				}
				closeNATS = append(closeNATS, nc.Close)
				if f.logKind == "jetstream" {
					if o.JetStream, err = f.jetStream(nc, &closeNATS); err != nil {
						return err
					}
					if flags.Changed("nats-timeout") {
						// The log's bound too: how long a request waits for the stream's
						// acknowledgement before it answers FAILED_RETRYABLE.
						o.JetStream.Log.Timeout = f.cluster.timeout
					}
				}
			}
			s, err := server.Start(context.Background(), o)
			if errors.Is(err, eventlog.ErrDamaged) {
				return fmt.Errorf("%w\nthe log is damaged: `gale log check --data %s` says what is intact; `gale log salvage --data %s` starts from it and records what is lost",
					err, o.DataDir, o.DataDir)
			}
			if err != nil {
				return err
			}
			if s.JSLog != nil {
				fmt.Fprintf(cmd.ErrOrStderr(), "gale serve: pipeline %s; log on JetStream stream %s (replicas: %d) at %s; sink %s; listening on %s\n",
					s.Options.Pipeline.Name, s.JSLog.Name(), s.JSLog.Replicas(), f.cluster.url, s.DB, s.URL())
				fmt.Fprintf(cmd.ErrOrStderr(), "gale serve: PERSISTED means %s: %s\n", s.Options.Ingest.Durability, s.DurabilityWhy)
				if _, held := s.JSLog.Holding(); held {
					fmt.Fprintf(cmd.ErrOrStderr(), "gale serve: this process (%s) holds the log spout's lease: it reads the log\n", o.JetStream.Log.Holder)
				} else {
					who := "another serve process"
					if li, err := s.JSLog.Lease(ctx); err == nil && li != nil {
						who = li.Holder
					}
					fmt.Fprintf(cmd.ErrOrStderr(), "gale serve: %s holds the log spout's lease; this process (%s) takes events in and answers, and takes the spout over if the lease is free for %v\n",
						who, o.JetStream.Log.Holder, s.JSLog.LeaseTTL())
				}
			} else {
				fmt.Fprintf(cmd.ErrOrStderr(), "gale serve: pipeline %s; log in %s; sink %s; listening on %s\n",
					s.Options.Pipeline.Name, filepath.Join(o.DataDir, "log"), s.DB, s.URL())
				fmt.Fprintf(cmd.ErrOrStderr(), "gale serve: each group commit's copy in %s is made durable by %s\n",
					filepath.Join(o.DataDir, "log", "GALE-HWM"), s.Log.Stats().MarkSync)
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "gale serve: web UI on %s/ui/, Prometheus metrics on %s/metrics\n", s.URL(), s.URL())
			for ctx.Err() == nil {
				select {
				case <-hup:
					_ = s.Reload() // logs what it reloaded, or why it kept the old
				case <-ctx.Done():
				}
			}
			fmt.Fprintln(cmd.ErrOrStderr(), "gale serve: shutting down: answering requests taken in, draining trees")
			sctx, cancel := context.WithTimeout(context.Background(), f.shutdown)
			defer cancel()
			if err := s.Shutdown(sctx); err != nil {
				return fmt.Errorf("shutdown: %w", err)
			}
			fmt.Fprintln(cmd.ErrOrStderr(), "gale serve: stopped")
			return nil
		},
	}
	f.Register(c, "127.0.0.1:8080")
	f.registerNetwork(c)
	f.cluster.registerAs(c.Flags(), "nats-timeout", "")
	c.Flags().Lookup("nats-timeout").Usage = "how long the command waits for the cluster; with --log jetstream, if given, also the bound of each call to the stream and of a request's wait for its acknowledgement (FAILED_RETRYABLE past it; not given: 10s)"
	c.Flags().IntVar(&f.workers, "workers", 1, "with --nats, how many gale workers run the pipeline's bolts (0 with --log jetstream unless given: the pipeline in this process)")
	c.Flags().StringVar(&f.workerName, "worker-name", "", "with --nats, this process's worker name (default serve-HOST)")
	c.Flags().StringVar(&f.pipeline, "pipeline", a.DefaultPipeline, "the pipeline to run behind the log: "+a.pipelineList()+"; or a Storm Flux file (FILE.yaml) whose streams read from: log")
	c.Flags().StringVar(&f.filter, "filter", "", "with --pipeline FILE.yaml, a properties file (key: value or key=value lines) for the file's ${key} (Flux's --filter)")
	c.Flags().BoolVar(&f.envFilter, "env-filter", false, "with --pipeline FILE.yaml, replace ${ENV-NAME} with the environment's NAME (Flux's --env-filter)")
	c.Flags().StringVar(&f.logKind, "log", "pebble", "the event log: pebble (DATA/log, fsynced: PERSISTED means fsync) or jetstream (a stream PREFIX-log on --nats, --replicas copies; the Pebble-only metrics, group commits, fsync latency and damaged files, are not exported)")
	c.Flags().DurationVar(&f.recheck, "durability-recheck", time.Minute, "with --log jetstream, how often to ask the servers again what PERSISTED means (the answers' \"durability\"), when it was found by asking (0: never)")
	c.Flags().DurationVar(&f.leaseTTL, "spout-lease-ttl", 10*time.Second, "with --log jetstream, how long the log spout's lease outlives its holder: serve processes sharing the stream take events in and answer for any of them, one at a time reads the log, and another takes over that long after the reader dies (every one must give the same)")
	c.Flags().StringVar(&f.sysCreds, "sys-creds", "", "with --log jetstream, credentials of the system account (a .creds file or an nkey seed file): every server is asked whether it fsyncs each write, for the answers' durability")
	return c
}

// dial connects to the cluster's NATS without binding the cluster's state
// (gale serve --log jetstream running the pipeline in this process).
func (c *ClusterFlags) dial(name string) (*nats.Conn, error) {
	opts, err := c.natsOptions(name)
	if err != nil {
		return nil, err
	}
	nc, err := nats.Connect(c.url, opts...)
	if err != nil {
		return nil, fmt.Errorf("NATS at %s: %w", c.url, err)
	}
	return nc, nil
}

// jetStream is the log of gale serve --log jetstream on nc, and how it tells what
// PERSISTED means: the servers' own answer with --sys-creds, else the record of
// the embedded node whose credentials nc uses (--nats-data), else unknown.
func (f *ServeFlags) jetStream(nc *nats.Conn, closers *[]func()) (*server.JetStream, error) {
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, err
	}
	holder := f.workerName
	if holder == "" {
		host, _ := os.Hostname()
		holder = fmt.Sprintf("%s-%d (%s)", host, os.Getpid(), f.Server.Addr)
	}
	j := &server.JetStream{Log: jslog.Config{JS: js, Prefix: f.cluster.prefix, Replicas: max(f.cluster.replicas, 1),
		Holder: holder, LeaseTTL: f.leaseTTL}, Recheck: f.recheck}
	if f.recheck <= 0 {
		j.Recheck = -1
	}
	switch {
	case f.sysCreds != "":
		opt, err := credsOption(f.sysCreds)
		if err != nil {
			return nil, fmt.Errorf("--sys-creds: %w", err)
		}
		sys, err := nats.Connect(f.cluster.url, nats.Name("gale serve (system account)"), opt)
		if err != nil {
			return nil, fmt.Errorf("--sys-creds: NATS at %s: %w", f.cluster.url, err)
		}
		*closers = append(*closers, sys.Close)
		j.SysConn = sys
	case f.cluster.creds == "" && f.cluster.nkey == "":
		if _, err := os.Stat(natsnode.CredentialsFile(f.cluster.natsData)); err == nil {
			if si, err := natsnode.ReadSync(f.cluster.natsData); err == nil {
				j.Embedded = &si
			}
		}
	}
	return j, nil
}

// credsOption reads a .creds file (JWT and nkey) or an nkey seed file.
func credsOption(file string) (nats.Option, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	if strings.Contains(string(b), "BEGIN NATS USER JWT") {
		return nats.UserCredentials(file), nil
	}
	return nats.NkeyOptionFromSeed(file)
}

// isPipelineFile says whether --pipeline names a file (FILE.yaml or FILE.yml)
// rather than a registered pipeline.
func isPipelineFile(name string) bool {
	return strings.HasSuffix(name, ".yaml") || strings.HasSuffix(name, ".yml")
}
