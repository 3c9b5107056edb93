package main

import (
	"context"
	"sync"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/pflag"

	"github.com/gale-stream/gale/cluster"
	"github.com/gale-stream/gale/pipelines/wordcount"
)

// The topologies compiled into this binary, which `gale worker` runs and `gale
// submit` submits by name.
var (
	registryOnce sync.Once
	theRegistry  cluster.Registry
)

func registry() *cluster.Registry {
	registryOnce.Do(func() {
		if err := theRegistry.Register("wordcount", wordcount.ClusterFactory); err != nil {
			panic(err)
		}
		// gale serve --nats: its pipelines' bolts (the log spout stays in serve).
		if err := servePipelines.RegisterWorkers(&theRegistry); err != nil {
			panic(err)
		}
	})
	return &theRegistry
}

// deploymentSetup creates what a topology's tasks keep their state in, once, in
// the submitting process (idempotent).
var deploymentSetup = map[string]func(ctx context.Context, js jetstream.JetStream, prefix string, args []string) error{
	"wordcount": wordcount.SetupCluster,
}

// normalizeArgs completes a topology's submit arguments so that every worker
// builds the same thing (word count's: wordcount.NormalizeClusterArgs, the books of
// testdata/ if no file is named).
func normalizeArgs(topo string, args []string) ([]string, error) {
	if topo != "wordcount" {
		return args, nil
	}
	return wordcount.NormalizeClusterArgs(args, defaultBooks)
}

// topologyFlags are the flags of the topologies `gale submit` takes, so that a
// topology's flag named like one of submit's (word count's --timeout) is the
// topology's when it follows the topology's name.
var topologyFlags = map[string]func() *pflag.FlagSet{
	"wordcount": func() *pflag.FlagSet { return wordcount.ClusterFlags(&wordcount.ClusterArgs{}) },
}
