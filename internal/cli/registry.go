package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/gale-stream/gale/cluster"
	"github.com/gale-stream/gale/component"
	"github.com/gale-stream/gale/server"
)

// App is what a gale binary registered: the topologies its workers run, the
// pipelines its serve runs, and its own commands. Package app fills it in (its
// options check every registration); the command tree reads it.
type App struct {
	// Name names the binary in usage lines ("gale").
	Name       string
	Topologies cluster.Registry
	// Extras of registered topologies, by name.
	Extras    map[string]TopologyExtras
	Pipelines server.Pipelines
	// Components are the spout and bolt classes topology files name.
	Components      component.Registry
	DefaultPipeline string
	Commands        []func() *cobra.Command
}

// TopologyExtras are what a registered topology adds to its factory.
type TopologyExtras struct {
	// Flags are the flags its factory parses from its submit arguments.
	Flags func() *pflag.FlagSet
	// Setup creates the state its tasks keep, once, in the submitter (idempotent).
	Setup func(ctx context.Context, js jetstream.JetStream, prefix string, args []string) error
	// Normalize completes its submit arguments in the submitter.
	Normalize func(args []string) ([]string, error)
}

// Run executes the command line args and returns the exit status.
func (a *App) Run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	root := a.newRoot()
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	if err := root.ExecuteContext(ctx); err != nil {
		var ee ExitError
		if errors.As(err, &ee) {
			return ee.Code
		}
		msg := err.Error()
		if !strings.HasPrefix(msg, "gale:") {
			msg = "gale: " + msg
		}
		fmt.Fprintln(stderr, msg)
		return 2
	}
	return 0
}

// pipeline returns the pipeline named name, or the default one for "".
func (a *App) pipeline(name string) (server.Pipeline, error) {
	if name == "" {
		name = a.DefaultPipeline
	}
	if name == "" {
		switch names := a.Pipelines.Names(); len(names) {
		case 0:
			return server.Pipeline{}, errors.New("this build registers no serve pipeline (app.WithPipeline)")
		case 1:
			name = names[0]
		default:
			return server.Pipeline{}, fmt.Errorf("name one with --pipeline: this build has %s", strings.Join(names, ", "))
		}
	}
	return a.Pipelines.Lookup(name)
}

// topologyFlags returns the flags topology topo declared (nil if none).
func (a *App) topologyFlags(topo string) *pflag.FlagSet {
	if f := a.Extras[topo].Flags; f != nil {
		return f()
	}
	return nil
}

// normalizeArgs completes topo's submit arguments (TopologyExtras.Normalize).
func (a *App) normalizeArgs(topo string, args []string) ([]string, error) {
	if n := a.Extras[topo].Normalize; n != nil {
		return n(slices.Clone(args))
	}
	return args, nil
}

// pipelineList names the registered pipelines with what each does, for help.
func (a *App) pipelineList() string {
	names := a.Pipelines.Names()
	if len(names) == 0 {
		return "none in this build"
	}
	var parts []string
	for _, n := range names {
		p, _ := a.Pipelines.Lookup(n)
		if p.Doc != "" {
			n += " (" + p.Doc + ")"
		}
		parts = append(parts, n)
	}
	return strings.Join(parts, "; ")
}

// componentsCmd lists the component classes this build registers.
func (a *App) componentsCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "components",
		Short: "List the spout and bolt classes this build registers, which topology files name by class",
		Long: `Lists the spout and bolt classes compiled into this binary (app.WithComponent), by
class name, with their kind and what each does. A topology file (Storm's Flux
format) names its components by these classes.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			w := cmd.OutOrStdout()
			ds := a.Components.Classes()
			if len(ds) == 0 {
				fmt.Fprintln(w, "this build registers no component classes (app.WithComponent)")
				return nil
			}
			tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "CLASS\tKIND\tDOES")
			for _, d := range ds {
				fmt.Fprintf(tw, "%s\t%s\t%s\n", d.Class, d.Kind(), d.Doc)
			}
			return tw.Flush()
		},
	}
}

// submittable lists the topologies gale submit takes: the registered ones but
// the serve pipelines (gale serve --nats submits those), or says there is none.
func (a *App) submittable() string {
	var names []string
	for _, n := range a.Topologies.Names() {
		if _, err := a.Pipelines.Lookup(n); err != nil {
			names = append(names, n)
		}
	}
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}

// pipelineNames lists the serve pipelines, or says there is none.
func (a *App) pipelineNames() string {
	if names := a.Pipelines.Names(); len(names) > 0 {
		return strings.Join(names, ", ")
	}
	return "none"
}
