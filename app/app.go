package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"unicode"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/gale-stream/gale/builtin"
	"github.com/gale-stream/gale/cluster"
	"github.com/gale-stream/gale/component"
	"github.com/gale-stream/gale/internal/cli"
	"github.com/gale-stream/gale/multilang"
	"github.com/gale-stream/gale/server"
)

// App is a gale binary: every gale command, over the topologies and pipelines
// registered with its options. Make one with New, run it with Main or Run.
type App struct {
	c cli.App
	// errs are the registration errors, reported by Run before any command runs.
	errs []error
}

// Option configures an App (New).
type Option func(*App)

// ErrRegistration wraps every registration error New finds (App.Err).
var ErrRegistration = errors.New("gale: registration")

// New makes an App with opts. A registration error (a duplicate name, a nil
// factory, a name the cluster refuses) does not panic: Err returns it, and Run
// reports it, naming what was registered, before running any command.
func New(opts ...Option) *App {
	a := &App{c: cli.App{Name: "gale", Extras: map[string]cli.TopologyExtras{}}}
	// Storm's shell wrappers, so that a Flux file's Python or Node components run
	// in every gale binary, and gale's built-in components.
	for _, d := range slices.Concat(multilang.Components(), builtin.Components()) {
		if err := a.c.Components.Register(d); err != nil {
			a.fail(err)
		}
	}
	for _, o := range opts {
		if o == nil {
			a.fail(errors.New("a nil Option"))
			continue
		}
		o(a)
	}
	// A serve pipeline runs on a cluster's workers under its own name: it must be
	// a name the cluster takes, and no topology's.
	for _, err := range a.c.RegisterPipelineWorkers() {
		a.fail(err)
	}
	// A program's command of a name gale or another of its commands has would
	// never run: cobra runs the first of two of one name.
	for _, err := range a.c.CheckCommands() {
		a.fail(err)
	}
	if a.c.DefaultPipeline != "" {
		if _, err := a.c.Pipelines.Lookup(a.c.DefaultPipeline); err != nil {
			a.fail(fmt.Errorf("WithDefaultPipeline: %w", err))
		}
	}
	return a
}

func (a *App) fail(err error) { a.errs = append(a.errs, fmt.Errorf("%w: %w", ErrRegistration, err)) }

// Err returns the registration errors New found, joined; nil if none.
func (a *App) Err() error { return errors.Join(a.errs...) }

// WithName names the binary in usage lines and help ("gale" by default).
func WithName(name string) Option {
	return func(a *App) {
		// Any space or control character (not only ' ', '\t' and '\n') splits or
		// garbles a usage line; a leading '-' reads as a flag in one.
		if name == "" || strings.IndexFunc(name, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }) >= 0 ||
			strings.HasPrefix(name, "-") {
			a.fail(fmt.Errorf("WithName(%q): a name is one word, not starting with '-'", name))
			return
		}
		a.c.Name = name
	}
}

// WithTopology registers topology name, which gale worker runs and gale submit
// submits. Its factory builds it from the submit arguments on each worker (and
// in the submitter, for its fingerprint). A name is letters, digits, '-' and '_'.
//
// The factory's env.Components is the binary's registry of component classes
// (WithComponent), for a topology built from classes.
func WithTopology(name string, f cluster.Factory, opts ...TopologyOption) Option {
	return func(a *App) {
		var wrapped cluster.Factory
		if f != nil {
			wrapped = func(ctx context.Context, env cluster.Env) (*cluster.Deployment, error) {
				env.Components = &a.c.Components
				return f(ctx, env)
			}
		}
		if err := a.c.Topologies.Register(name, wrapped); err != nil {
			a.fail(err)
			return
		}
		var x topologyConfig
		for _, o := range opts {
			if o == nil {
				a.fail(fmt.Errorf("topology %q: a nil TopologyOption", name))
				continue
			}
			o(&x)
		}
		a.c.Extras[name] = cli.TopologyExtras{Flags: x.flags, Setup: x.setup, Normalize: x.normalize}
	}
}

// TopologyOption configures a registered topology (WithTopology).
type TopologyOption func(*topologyConfig)

type topologyConfig struct {
	flags     func() *pflag.FlagSet
	setup     func(ctx context.Context, js jetstream.JetStream, prefix string, args []string) error
	normalize func(args []string) ([]string, error)
}

// TopologyFlags gives the flags a topology's factory parses from its submit
// arguments. gale submit then reads a flag that follows the topology's name as
// the topology's even when submit has one of that name (--timeout),.
func TopologyFlags(flags func() *pflag.FlagSet) TopologyOption {
	return func(x *topologyConfig) { x.flags = flags }
}

// TopologySetup gives what gale submit runs once before the first worker builds
// the topology: it creates the buckets and streams its tasks keep state in. It
// must be idempotent (a resubmit runs it again).
func TopologySetup(setup func(ctx context.Context, js jetstream.JetStream, prefix string, args []string) error) TopologyOption {
	return func(x *topologyConfig) { x.setup = setup }
}

// TopologyArgs gives what completes a topology's submit arguments in the
// submitter, so that every worker builds the same thing (a default file list,
// a path made absolute). An error refuses the submit.
func TopologyArgs(normalize func(args []string) ([]string, error)) TopologyOption {
	return func(x *topologyConfig) { x.normalize = normalize }
}

// WithPipeline registers a gale serve pipeline: gale serve --pipeline NAME runs
// it, gale sink rebuild --pipeline NAME writes a sink again through it, and gale
// worker builds it when a gale serve --nats submits it.
func WithPipeline(p server.Pipeline) Option {
	return func(a *App) {
		if err := a.c.Pipelines.Register(p); err != nil {
			a.fail(err)
		}
	}
}

// WithComponent registers a spout or bolt class that topology files (Storm's
// Flux format) name by d.Class; gale components lists them.
func WithComponent(d component.Declaration) Option {
	return func(a *App) {
		if err := a.c.Components.Register(d); err != nil {
			a.fail(err)
		}
	}
}

// WithDefaultPipeline names the pipeline gale serve runs without --pipeline.
// Without it, a binary with one pipeline runs that one, and one with several
// asks for --pipeline.
func WithDefaultPipeline(name string) Option {
	return func(a *App) { a.c.DefaultPipeline = name }
}

// WithCommand adds a command of the program's own beside gale's. new is called
// for each run of the command line (Run may run more than once in one process),
// and once by New, which checks the command: a nil one, one without a name, and
// a name or alias that is gale's (serve, version, help...) or another
// WithCommand's are registration errors.
func WithCommand(new func() *cobra.Command) Option {
	return func(a *App) {
		if new == nil {
			a.fail(errors.New("WithCommand(nil)"))
			return
		}
		a.c.Commands = append(a.c.Commands, new)
	}
}

// Main runs the command line of this process (os.Args) and exits with its status.
func Main(opts ...Option) { New(opts...).Main() }

// Main runs the command line of this process and exits with its status.
func (a *App) Main() {
	os.Exit(a.Run(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
}

// Run executes the command line args (without the program's name) writing to
// stdout and stderr, and returns the exit status: 0, 1 when a command found what
// it checked wrong, 2 on an error (a registration error first of all).
func (a *App) Run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(a.errs) > 0 {
		for _, err := range a.errs {
			fmt.Fprintln(stderr, err)
		}
		return 2
	}
	return a.c.Run(ctx, args, stdout, stderr)
}

// ExitCode is an error a command of the program's own (WithCommand) returns to
// end with status code and print nothing more.
func ExitCode(code int) error { return cli.ExitError{Code: code} }

// Topologies lists the registered topologies (serve pipelines included), sorted.
func (a *App) Topologies() []string { return a.c.Topologies.Names() }

// Components lists the registered component classes, sorted.
func (a *App) Components() []string {
	var cs []string
	for _, d := range a.c.Components.Classes() {
		cs = append(cs, d.Class)
	}
	return cs
}

// Pipelines lists the registered serve pipelines, sorted.
func (a *App) Pipelines() []string { return a.c.Pipelines.Names() }
