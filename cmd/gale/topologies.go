package main

import (
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/pflag"

	"github.com/gale-stream/gale/cluster"
	"github.com/gale-stream/gale/cmd/gale/internal/serve"
	"github.com/gale-stream/gale/pipelines/wordcount"
	"github.com/gale-stream/gale/topology"
)

// The topologies compiled into this binary, which `gale worker` runs and `gale
// submit` submits by name.
var (
	registryOnce sync.Once
	theRegistry  cluster.Registry
)

func registry() *cluster.Registry {
	registryOnce.Do(func() {
		for name, f := range map[string]cluster.Factory{"wordcount": wordcountFactory,
			// gale serve --nats: its pipelines' bolts (the log spout stays in serve).
			"orders": serve.WorkerFactory, "events": serve.WorkerFactory} {
			if err := theRegistry.Register(name, f); err != nil {
				panic(err)
			}
		}
	})
	return &theRegistry
}

// deploymentSetup creates what a topology's tasks keep their state in, once, in
// the submitting process (idempotent).
var deploymentSetup = map[string]func(ctx context.Context, js jetstream.JetStream, prefix string, args []string) error{
	"wordcount": func(ctx context.Context, js jetstream.JetStream, prefix string, args []string) error {
		a, err := parseClusterWordcount(args)
		if err != nil {
			return err
		}
		return wordcount.EnsureClusterState(ctx, js, wordcountBucket(prefix), a.replicas)
	},
}

// wordcountBucket names word count's KV bucket and changelog stream in a cluster.
func wordcountBucket(prefix string) string { return prefix + "-wordcount" }

// clusterWordcount are word count's flags as submitted to a cluster.
type clusterWordcount struct {
	opts     wordcount.ClusterOptions
	replicas int
}

// wordcountFlags are the flags of word count in a cluster (gale submit wordcount
// ..., and what gale wordcount --workers submits).
func wordcountFlags(a *clusterWordcount) *pflag.FlagSet {
	f := pflag.NewFlagSet("wordcount", pflag.ContinueOnError)
	o := &a.opts
	f.Float64Var(&o.FailRate, "fail-rate", 0, "probability that split fails a line and count fails a word not yet counted")
	f.Uint64Var(&o.Seed, "seed", 1, "seed for --fail-rate")
	f.IntVar(&o.Parallelism, "parallelism", 2, "split tasks and count tasks")
	f.IntVar(&o.Config.Ackers, "ackers", 1, "acker tasks (at least 1: a cluster run replays what a lost worker held)")
	f.IntVar(&o.Config.MaxSpoutPending, "max-pending", 5000, "max spout pending: lines in flight")
	f.DurationVar(&o.Config.MessageTimeout, "timeout", 30*time.Second, "message timeout of a line's tuple tree")
	f.StringVar(&o.Run, "run", "", "names this run's state (spout offsets, count changelogs); submit picks a new one if not given")
	f.IntVar(&a.replicas, "state-replicas", 1, "copies of the offsets bucket and the changelog stream (3 on a three-node cluster)")
	return f
}

func parseClusterWordcount(args []string) (*clusterWordcount, error) {
	a := &clusterWordcount{opts: wordcount.ClusterOptions{Config: topology.DefaultConfig()}}
	f := wordcountFlags(a)
	if err := f.Parse(args); err != nil {
		return nil, fmt.Errorf("wordcount: %w", err)
	}
	a.opts.Files = f.Args()
	if len(a.opts.Files) == 0 {
		return nil, fmt.Errorf("wordcount: no input files")
	}
	if a.opts.Run == "" {
		return nil, fmt.Errorf("wordcount: no --run")
	}
	// The flags' own names in errors, rather than ClusterOptions' fields.
	switch o := &a.opts; {
	case !(o.FailRate >= 0 && o.FailRate < 1):
		return nil, fmt.Errorf("wordcount: --fail-rate %v: must be at least 0 and below 1", o.FailRate)
	case o.Config.Ackers < 1:
		return nil, fmt.Errorf("wordcount: --ackers %d: a run on workers needs at least 1, to replay what a lost worker held", o.Config.Ackers)
	case o.Parallelism < 1:
		return nil, fmt.Errorf("wordcount: --parallelism %d: must be at least 1", o.Parallelism)
	case o.Config.MaxSpoutPending < 0:
		return nil, fmt.Errorf("wordcount: --max-pending %d: must be >= 0 (0 = unlimited)", o.Config.MaxSpoutPending)
	case o.Config.MessageTimeout < topology.MinMessageTimeout:
		return nil, fmt.Errorf("wordcount: --timeout %v: must be at least %v", o.Config.MessageTimeout, topology.MinMessageTimeout)
	}
	return a, nil
}

// wordcountFactory builds word count for a worker (or for submit's fingerprint):
// its state lives in the cluster's JetStream (see wordcount.ClusterOptions).
func wordcountFactory(ctx context.Context, env cluster.Env) (*cluster.Deployment, error) {
	a, err := parseClusterWordcount(env.Args)
	if err != nil {
		return nil, err
	}
	a.opts.JS, a.opts.Generation = env.JS, env.Generation
	a.opts.Bucket = wordcountBucket(env.Prefix)
	topo, err := wordcount.NewClusterTopology(a.opts)
	if err != nil {
		return nil, err
	}
	return &cluster.Deployment{Topology: topo, Config: a.opts.Config}, nil
}

// normalizeArgs completes a topology's submit arguments so that every worker
// builds the same thing: word count's files become absolute paths (the books of
// testdata/ if none is named), and a run name is picked if none was given.
func normalizeArgs(topo string, args []string) ([]string, error) {
	if topo != "wordcount" {
		return args, nil
	}
	a := &clusterWordcount{}
	f := wordcountFlags(a)
	if err := f.Parse(args); err != nil {
		return nil, fmt.Errorf("wordcount: %w", err)
	}
	files := f.Args()
	if len(files) == 0 {
		files, _ = filepath.Glob(defaultBooks)
		if len(files) == 0 {
			return nil, fmt.Errorf("wordcount: no FILE given and no %s in %s: run from the repository root or name the files", defaultBooks, mustWd())
		}
	}
	var out []string
	f.Visit(func(fl *pflag.Flag) { out = append(out, "--"+fl.Name+"="+fl.Value.String()) })
	if a.opts.Run == "" {
		out = append(out, "--run="+time.Now().UTC().Format("20060102-150405")+"-"+rand.Text()[:6])
	}
	out = append(out, "--")
	for _, file := range files {
		abs, err := filepath.Abs(file)
		if err != nil {
			return nil, err
		}
		// Checked here, where the user is: the worker that runs the spout would only
		// fail to start, again and again, in its own log.
		st, err := os.Stat(abs)
		if err != nil {
			return nil, fmt.Errorf("wordcount: %w", err)
		}
		if st.IsDir() {
			return nil, fmt.Errorf("wordcount: %s is a directory, not a text file", file)
		}
		out = append(out, abs)
	}
	return out, nil
}

// topologyFlags are the flags of the topologies `gale submit` takes, so that a
// topology's flag named like one of submit's (word count's --timeout) is the
// topology's when it follows the topology's name.
var topologyFlags = map[string]func() *pflag.FlagSet{
	"wordcount": func() *pflag.FlagSet { return wordcountFlags(&clusterWordcount{}) },
}
