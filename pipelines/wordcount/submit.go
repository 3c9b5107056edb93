package wordcount

// Word count as a topology of a gale cluster: its submit arguments (the flags of
// `gale submit wordcount ...`, which every worker builds it from), the factory a
// build registers it with, and the state made once before its first run.

import (
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/pflag"

	"github.com/gale-stream/gale/cluster"
	"github.com/gale-stream/gale/topology"
)

// ClusterBucket names word count's KV bucket and changelog stream in the cluster
// of prefix (cluster.Config.Prefix).
func ClusterBucket(prefix string) string { return prefix + "-wordcount" }

// ClusterArgs are word count's submit arguments, parsed.
type ClusterArgs struct {
	// Options are the topology's; Files, Run and the rest come from the arguments,
	// JS, Bucket and Generation from the worker (ClusterFactory).
	Options ClusterOptions
	// Replicas is how many copies the offsets bucket and the changelog stream have
	// (--state-replicas: 3 on a three-node cluster).
	Replicas int
}

// ClusterFlags are word count's flags in a cluster (gale submit wordcount ..., and
// what gale wordcount --workers submits), bound to a. The files follow them.
func ClusterFlags(a *ClusterArgs) *pflag.FlagSet {
	f := pflag.NewFlagSet("wordcount", pflag.ContinueOnError)
	o := &a.Options
	f.Float64Var(&o.FailRate, "fail-rate", 0, "probability that split fails a line and count fails a word not yet counted")
	f.Uint64Var(&o.Seed, "seed", 1, "seed for --fail-rate")
	f.IntVar(&o.Parallelism, "parallelism", 2, "split tasks and count tasks")
	f.IntVar(&o.Config.Ackers, "ackers", 1, "acker tasks (at least 1: a cluster run replays what a lost worker held)")
	f.IntVar(&o.Config.MaxSpoutPending, "max-pending", 5000, "max spout pending: lines in flight")
	f.DurationVar(&o.Config.MessageTimeout, "timeout", 30*time.Second, "message timeout of a line's tuple tree")
	f.StringVar(&o.Run, "run", "", "names this run's state (spout offsets, count changelogs); submit picks a new one if not given")
	f.IntVar(&a.Replicas, "state-replicas", 1, "copies of the offsets bucket and the changelog stream (3 on a three-node cluster)")
	return f
}

// ParseClusterArgs parses submit arguments as NormalizeClusterArgs leaves them:
// input files and a run name are required. An error names the flag at fault.
func ParseClusterArgs(args []string) (*ClusterArgs, error) {
	a := &ClusterArgs{Options: ClusterOptions{Config: topology.DefaultConfig()}}
	f := ClusterFlags(a)
	if err := f.Parse(args); err != nil {
		return nil, fmt.Errorf("wordcount: %w", err)
	}
	a.Options.Files = f.Args()
	if len(a.Options.Files) == 0 {
		return nil, fmt.Errorf("wordcount: no input files")
	}
	if a.Options.Run == "" {
		return nil, fmt.Errorf("wordcount: no --run")
	}
	// The flags' own names in errors, rather than ClusterOptions' fields.
	switch o := &a.Options; {
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

// ClusterFactory is word count's cluster.Factory: it builds the topology for a
// worker (or for the submitter's fingerprint) from env's arguments, its state in
// the cluster's JetStream (see ClusterOptions).
func ClusterFactory(ctx context.Context, env cluster.Env) (*cluster.Deployment, error) {
	a, err := ParseClusterArgs(env.Args)
	if err != nil {
		return nil, err
	}
	a.Options.JS, a.Options.Generation = env.JS, env.Generation
	a.Options.Bucket = ClusterBucket(env.Prefix)
	topo, err := NewClusterTopology(a.Options)
	if err != nil {
		return nil, err
	}
	return &cluster.Deployment{Topology: topo, Config: a.Options.Config}, nil
}

// SetupCluster makes what word count's tasks keep their state in (EnsureClusterState
// on ClusterBucket(prefix), with --state-replicas copies), once, in the process that
// submits it; it is idempotent.
func SetupCluster(ctx context.Context, js jetstream.JetStream, prefix string, args []string) error {
	a, err := ParseClusterArgs(args)
	if err != nil {
		return err
	}
	return EnsureClusterState(ctx, js, ClusterBucket(prefix), a.Replicas)
}

// NormalizeClusterArgs completes submit arguments so that every worker builds the
// same thing: the flags given, in --name=value form; a run name if none was given
// (the time and a random suffix); and the files as absolute paths, those matching
// defaultGlob when none is named. A missing file or a directory is an error here,
// where the user is: the worker that runs the spout would only fail to start, again
// and again, in its own log.
func NormalizeClusterArgs(args []string, defaultGlob string) ([]string, error) {
	a := &ClusterArgs{}
	f := ClusterFlags(a)
	if err := f.Parse(args); err != nil {
		return nil, fmt.Errorf("wordcount: %w", err)
	}
	files := f.Args()
	if len(files) == 0 {
		files, _ = filepath.Glob(defaultGlob)
		if len(files) == 0 {
			wd, err := os.Getwd()
			if err != nil {
				wd = "the working directory"
			}
			return nil, fmt.Errorf("wordcount: no FILE given and no %s in %s: run from the repository root or name the files", defaultGlob, wd)
		}
	}
	var out []string
	f.Visit(func(fl *pflag.Flag) { out = append(out, "--"+fl.Name+"="+fl.Value.String()) })
	if a.Options.Run == "" {
		out = append(out, "--run="+time.Now().UTC().Format("20060102-150405")+"-"+rand.Text()[:6])
	}
	out = append(out, "--")
	for _, file := range files {
		abs, err := filepath.Abs(file)
		if err != nil {
			return nil, err
		}
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

// CountFiles counts the words of files in one goroutine, with the tokenizer the
// topology uses (Words): what a run's counts must equal exactly.
func CountFiles(files []string) (map[string]uint64, error) {
	counts := map[string]uint64{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		Words(string(b), func(w string, _ int) { counts[w]++ })
	}
	return counts, nil
}
