package main

// The wordlen topology on a cluster: its submit arguments, what the submitter makes
// of them, and the factory every worker builds it with.
//
//	lines (wordlen.Lines) ──shuffle──▶ count (wordlen.Count) ──global──▶ out (wordlen.Append)

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/pflag"

	"github.com/gale-stream/gale/cluster"
	"github.com/gale-stream/gale/component"
	"github.com/gale-stream/gale/topology"
)

// TopologyName is what `wordlen submit` names.
const TopologyName = "wordlen"

// topoArgs are the topology's submit arguments, parsed.
type topoArgs struct {
	file, out   string
	parallelism int
}

// topologyFlags are the flags that follow `wordlen submit wordlen`, bound to a.
func topologyFlags(a *topoArgs) *pflag.FlagSet {
	f := pflag.NewFlagSet(TopologyName, pflag.ContinueOnError)
	f.StringVar(&a.file, "file", "", "the text file to read (required; every worker must see it at the same path)")
	f.StringVar(&a.out, "out", "", "the file LINE WORDS LETTERS lines are appended to (required; the worker running the out task writes it)")
	f.IntVar(&a.parallelism, "parallelism", 2, "count tasks")
	return f
}

// parseArgs parses submit arguments as normalizeArgs leaves them.
func parseArgs(args []string) (*topoArgs, error) {
	a := &topoArgs{}
	f := topologyFlags(a)
	if err := f.Parse(args); err != nil {
		return nil, fmt.Errorf("wordlen: %w", err)
	}
	switch {
	case f.NArg() > 0:
		return nil, fmt.Errorf("wordlen: unexpected arguments %q (the input is --file)", f.Args())
	case a.file == "":
		return nil, errors.New("wordlen: no --file")
	case a.out == "":
		return nil, errors.New("wordlen: no --out")
	case a.parallelism < 1 || a.parallelism > topology.MaxParallelism:
		return nil, fmt.Errorf("wordlen: --parallelism %d: must be 1 to %d", a.parallelism, topology.MaxParallelism)
	}
	return a, nil
}

// normalizeArgs runs in `wordlen submit`, where the user is: it makes --file and
// --out absolute (a worker runs in its own directory), checks that the input is a
// file (a worker would only fail to open it, again and again, in its own log), and
// spells every flag out, so that every worker builds the same topology.
func normalizeArgs(args []string) ([]string, error) {
	a, err := parseArgs(args)
	if err != nil {
		return nil, err
	}
	if a.file, err = filepath.Abs(a.file); err != nil {
		return nil, err
	}
	if a.out, err = filepath.Abs(a.out); err != nil {
		return nil, err
	}
	if fi, err := os.Stat(a.file); err != nil {
		return nil, fmt.Errorf("wordlen: --file: %w", err)
	} else if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("wordlen: --file %s: not a regular file", a.file)
	}
	return []string{"--file=" + a.file, "--out=" + a.out, fmt.Sprintf("--parallelism=%d", a.parallelism)}, nil
}

// factory builds the topology from its submit arguments, on each worker and in
// the submitter (for its fingerprint). Every component comes from the class
// registry, by class name, with the values a topology file would give: building
// touches no file (the spout reads in Open, the out bolt opens in Prepare).
func factory(_ context.Context, env cluster.Env) (*cluster.Deployment, error) {
	a, err := parseArgs(env.Args)
	if err != nil {
		return nil, err
	}
	reg := env.Components // the classes main registered with app.WithComponent
	if reg == nil {
		return nil, errors.New("wordlen: no component registry (the factory runs inside app)")
	}
	b := topology.NewBuilder()
	if _, err := reg.Add(b, "lines", LinesClass, component.Spec{Args: []any{a.file}}, 1); err != nil {
		return nil, err
	}
	d, err := reg.Add(b, "count", CountClass, component.Spec{}, a.parallelism)
	if err != nil {
		return nil, err
	}
	d.ShuffleGrouping("lines")
	if d, err = reg.Add(b, "out", AppendClass, component.Spec{Args: []any{a.out}}, 1); err != nil {
		return nil, err
	}
	d.GlobalGrouping("count")
	topo, err := b.Build()
	if err != nil {
		return nil, err
	}
	return &cluster.Deployment{Topology: topo, Config: topology.DefaultConfig()}, nil
}
