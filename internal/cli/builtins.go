package cli

import (
	"fmt"

	"github.com/spf13/pflag"

	"github.com/gale-stream/gale/pipelines/wordcount"
)

// WordcountExtras are word count's flags, its state's setup and its default
// input: testdata's books, made absolute in the submitter so that every worker
// reads the same files.
func WordcountExtras() TopologyExtras {
	return TopologyExtras{
		Flags: func() *pflag.FlagSet { return wordcount.ClusterFlags(&wordcount.ClusterArgs{}) },
		Setup: wordcount.SetupCluster,
		Normalize: func(args []string) ([]string, error) {
			return wordcount.NormalizeClusterArgs(args, defaultBooks)
		},
	}
}

// wordcountSubmitter submits word count from gale wordcount --workers.
func wordcountSubmitter() *App {
	a := &App{Extras: map[string]TopologyExtras{"wordcount": WordcountExtras()}}
	if err := a.Topologies.Register("wordcount", wordcount.ClusterFactory); err != nil {
		panic(err) // a constant name and a non-nil factory
	}
	return a
}

// RegisterPipelineWorkers registers each of a's pipelines as a topology of its
// name, which a gale worker builds when a gale serve --nats submits it. It
// returns an error per pipeline the cluster refuses (a name it does not take, a
// topology's name).
func (a *App) RegisterPipelineWorkers() []error {
	var errs []error
	for _, name := range a.Pipelines.Names() {
		if err := a.Topologies.Register(name, a.Pipelines.WorkerFactory()); err != nil {
			errs = append(errs, fmt.Errorf("pipeline %q: %w", name, err))
		}
	}
	return errs
}
