package app_test

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/gale-stream/gale/app"
	"github.com/gale-stream/gale/builtin"
	"github.com/gale-stream/gale/cluster"
	"github.com/gale-stream/gale/component"
	"github.com/gale-stream/gale/flux"
	"github.com/gale-stream/gale/pipelines/events"
	"github.com/gale-stream/gale/pipelines/orders"
	"github.com/gale-stream/gale/topology"
	"github.com/gale-stream/gale/tuple"
)

func emptyFactory(context.Context, cluster.Env) (*cluster.Deployment, error) {
	return nil, errors.New("not built in these tests")
}

func run(t *testing.T, a *app.App, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = a.Run(t.Context(), args, &out, &errb)
	return code, out.String(), errb.String()
}

// Every registration error is found by New and reported by Run, naming what was
// registered, before any command runs: a worker never meets it at submit time.
func TestRegistrationErrorsAreReportedAtStart(t *testing.T) {
	evts := events.Pipeline()
	unnamed := events.Pipeline()
	unnamed.Name = ""
	for _, tc := range []struct {
		name string
		opts []app.Option
		want []string
	}{
		{"duplicate topology", []app.Option{app.WithTopology("lengths", emptyFactory), app.WithTopology("lengths", emptyFactory)},
			[]string{`topology "lengths" registered twice`}},
		{"nil factory", []app.Option{app.WithTopology("lengths", nil)}, []string{`topology "lengths" registered without a factory`}},
		{"bad topology name", []app.Option{app.WithTopology("word count", emptyFactory)}, []string{`topology name "word count"`}},
		{"duplicate pipeline", []app.Option{app.WithPipeline(evts), app.WithPipeline(evts)}, []string{`pipeline "events" is registered already`}},
		{"unnamed pipeline", []app.Option{app.WithPipeline(unnamed)}, []string{"a pipeline without a name"}},
		{"pipeline named like a topology", []app.Option{app.WithTopology("events", emptyFactory), app.WithPipeline(evts)},
			[]string{`pipeline "events"`, `topology "events" registered twice`}},
		{"unknown default pipeline", []app.Option{app.WithPipeline(evts), app.WithDefaultPipeline("orders")},
			[]string{"WithDefaultPipeline", `unknown pipeline "orders"`}},
		{"nil option", []app.Option{nil}, []string{"a nil Option"}},
		{"nil topology option", []app.Option{app.WithTopology("lengths", emptyFactory, nil)}, []string{`topology "lengths": a nil TopologyOption`}},
		{"nil command", []app.Option{app.WithCommand(nil)}, []string{"WithCommand(nil)"}},
		// cobra takes two commands of one name and runs the first: the program's
		// would never run, and nothing would say so.
		{"command named like gale's", []app.Option{app.WithCommand(command("serve"))}, []string{`command "serve"`, "gale's serve command"}},
		{"command named like gale's help", []app.Option{app.WithCommand(command("help"))}, []string{`command "help"`, "gale's help command"}},
		{"alias of gale's command", []app.Option{app.WithCommand(command("ver", "version"))}, []string{`command "ver" (alias "version")`, "gale's version command"}},
		{"two commands of one name", []app.Option{app.WithCommand(command("hello")), app.WithCommand(command("hello"))},
			[]string{`command "hello"`, "an earlier WithCommand"}},
		{"command function returns nil", []app.Option{app.WithCommand(func() *cobra.Command { return nil })}, []string{"WithCommand #1", "nil command"}},
		{"command function panics", []app.Option{app.WithCommand(func() *cobra.Command { panic("boom") })}, []string{"WithCommand #1", "panicked: boom"}},
		{"command without a name", []app.Option{app.WithCommand(command(""))}, []string{"WithCommand #1", "without a name"}},
		{"two-word name", []app.Option{app.WithName("my tool")}, []string{`WithName("my tool")`}},
		{"name with a carriage return", []app.Option{app.WithName("my\rtool")}, []string{`WithName("my\rtool")`}},
		{"name with a no-break space", []app.Option{app.WithName("my\u00a0tool")}, []string{`WithName("my\u00a0tool")`}},
		{"name like a flag", []app.Option{app.WithName("-flag")}, []string{`WithName("-flag")`}},
		{"two errors", []app.Option{app.WithTopology("a b", emptyFactory), app.WithTopology("lengths", nil)},
			[]string{`topology name "a b"`, `topology "lengths" registered without a factory`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := app.New(tc.opts...)
			err := a.Err()
			if !errors.Is(err, app.ErrRegistration) {
				t.Fatalf("Err() = %v, want an ErrRegistration", err)
			}
			code, stdout, stderr := run(t, a, "version")
			if code != 2 || stdout != "" {
				t.Errorf("Run(version): exit %d, stdout %q; want 2 and nothing run", code, stdout)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) || !strings.Contains(stderr, w) {
					t.Errorf("Err() = %v\nstderr %q\nwant both to say %q", err, stderr, w)
				}
			}
		})
	}
}

// command returns a WithCommand function of a command named name.
func command(name string, aliases ...string) func() *cobra.Command {
	return func() *cobra.Command {
		return &cobra.Command{Use: name, Aliases: aliases, RunE: func(*cobra.Command, []string) error { return nil }}
	}
}

// A registered topology is what the binary's worker and submit offer, and its
// flags are the topology's after its name on a submit line.
func TestRegisteredTopologyIsOffered(t *testing.T) {
	flags := func() *pflag.FlagSet {
		f := pflag.NewFlagSet("lengths", pflag.ContinueOnError)
		f.Duration("timeout", 0, "the topology's own --timeout")
		return f
	}
	a := app.New(app.WithName("mytool"), app.WithTopology("lengths", emptyFactory, app.TopologyFlags(flags)),
		app.WithPipeline(orders.Pipeline()))
	if err := a.Err(); err != nil {
		t.Fatal(err)
	}
	if got, want := a.Topologies(), []string{"lengths", "orders"}; !slices.Equal(got, want) {
		t.Errorf("Topologies() = %v, want %v (the pipeline runs on workers under its name)", got, want)
	}
	if got, want := a.Pipelines(), []string{"orders"}; !slices.Equal(got, want) {
		t.Errorf("Pipelines() = %v, want %v", got, want)
	}
	for cmd, want := range map[string]string{"worker": "(lengths; serve\npipelines: orders)", "submit": "Topologies in this build: lengths."} {
		code, stdout, stderr := run(t, a, cmd, "--help")
		if code != 0 || !strings.Contains(stdout, want) {
			t.Errorf("%s --help: exit %d, stderr %q; want %q in:\n%s", cmd, code, stderr, want, stdout)
		}
		if !strings.Contains(stdout, "mytool "+cmd) {
			t.Errorf("%s --help does not use the binary's name mytool:\n%s", cmd, stdout)
		}
	}
	// No worker is listening here: submit fails on the connection, after parsing
	// --timeout 7s as the topology's (submit's own --timeout would be refused
	// before: it takes a duration too, so the check is that the line parses).
	code, _, stderr := run(t, a, "submit", "--nats", "nats://127.0.0.1:1", "--timeout", "1s", "lengths", "--timeout", "7s", "--bogus")
	if code != 2 || strings.Contains(stderr, "unknown flag") {
		t.Errorf("submit: exit %d, %q", code, stderr)
	}
	code, _, stderr = run(t, a, "submit", "--nats", "nats://127.0.0.1:1", "--timeout", "1s", "nosuch")
	if code != 2 || !strings.Contains(stderr, `"nosuch"`) {
		t.Errorf("submit of an unregistered topology: exit %d, %q; want it named", code, stderr)
	}
	// A serve pipeline is submitted by serve --nats, with its log spout.
	code, _, stderr = run(t, a, "submit", "--nats", "nats://127.0.0.1:1", "orders")
	if code != 2 || !strings.Contains(stderr, `"orders" is a serve pipeline: mytool serve --nats --pipeline orders`) {
		t.Errorf("submit of a pipeline: exit %d, %q", code, stderr)
	}
	// A topology without flags says so.
	b := app.New(app.WithTopology("bare", emptyFactory))
	if code, stdout, _ := run(t, b, "submit", "bare", "--help"); code != 0 || !strings.Contains(stdout, "Topology bare declares no flags") {
		t.Errorf("submit bare --help: exit %d:\n%s", code, stdout)
	}
	// The topology's flags, after its name.
	code, stdout, _ := run(t, a, "submit", "lengths", "--help")
	if code != 0 || !strings.Contains(stdout, "Flags of topology lengths:") || !strings.Contains(stdout, "the topology's own --timeout") {
		t.Errorf("submit lengths --help: exit %d:\n%s", code, stdout)
	}
}

// serve runs the default pipeline, the only one, or asks for --pipeline.
func TestServeChoosesItsPipeline(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts []app.Option
		args []string
		want string
	}{
		{"none registered", nil, nil, "this build registers no serve pipeline"},
		{"two, no default", []app.Option{app.WithPipeline(events.Pipeline()), app.WithPipeline(orders.Pipeline())}, nil,
			"name one with --pipeline: this build has events, orders"},
		{"unknown", []app.Option{app.WithPipeline(events.Pipeline())}, []string{"--pipeline", "nosuch"},
			`unknown pipeline "nosuch": want events`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := app.New(tc.opts...)
			code, _, stderr := run(t, a, append([]string{"serve", "--addr", "127.0.0.1:0", "--data", t.TempDir()}, tc.args...)...)
			if code != 2 || !strings.Contains(stderr, tc.want) {
				t.Errorf("serve: exit %d, stderr %q; want 2 and %q", code, stderr, tc.want)
			}
		})
	}
}

// A program's own command runs beside gale's, and ExitCode sets the status.
func TestOwnCommand(t *testing.T) {
	calls := 0
	a := app.New(app.WithCommand(func() *cobra.Command {
		return &cobra.Command{Use: "hello", RunE: func(cmd *cobra.Command, _ []string) error {
			calls++
			cmd.Println("hello from the program")
			return app.ExitCode(3)
		}}
	}))
	code, stdout, _ := run(t, a, "hello")
	if code != 3 || calls != 1 || !strings.Contains(stdout, "hello from the program") {
		t.Errorf("hello: exit %d, %d calls, stdout %q", code, calls, stdout)
	}
	// A second Run builds the tree again (the command's flags start fresh).
	if code, _, _ := run(t, a, "hello"); code != 3 || calls != 2 {
		t.Errorf("second run: exit %d, %d calls", code, calls)
	}
	code, _, stderr := run(t, a, "helo")
	if code != 2 || !strings.Contains(stderr, `did you mean "hello"`) {
		t.Errorf("helo: exit %d, %q", code, stderr)
	}
}

type nopBolt struct{ topology.BaseBasicBolt }

func (*nopBolt) Execute(*tuple.Tuple, topology.BasicCollector) error { return nil }

// Registered component classes are listed by gale components; a class
// registered twice is an error at start naming it.
func TestComponents(t *testing.T) {
	sink := component.Declaration{Class: "mytool.Discard", Doc: "drops what it gets",
		BasicBolt: func(component.Spec) (func() topology.BasicBolt, error) {
			return func() topology.BasicBolt { return &nopBolt{} }, nil
		}}
	a := app.New(app.WithComponent(sink))
	if err := a.Err(); err != nil {
		t.Fatal(err)
	}
	code, stdout, _ := run(t, a, "components")
	if code != 0 || !strings.Contains(stdout, "mytool.Discard") || !strings.Contains(stdout, "basic bolt") || !strings.Contains(stdout, "drops what it gets") {
		t.Errorf("components: exit %d:\n%s", code, stdout)
	}
	// The program's class, Storm's shell wrappers and gale's built-ins, sorted.
	want := []string{"mytool.Discard", flux.ShellBoltClass, flux.ShellSpoutClass}
	for _, d := range builtin.Components() {
		want = append(want, d.Class)
	}
	slices.Sort(want)
	if got := a.Components(); !slices.Equal(got, want) {
		t.Errorf("Components() = %v, want %v", got, want)
	}
	// Every binary has Storm's shell wrappers, for Flux files' Python or Node
	// components.
	code, stdout, _ = run(t, app.New(), "components")
	if code != 0 || !strings.Contains(stdout, flux.ShellSpoutClass) || !strings.Contains(stdout, flux.ShellBoltClass) {
		t.Errorf("components of a bare binary: exit %d: %q", code, stdout)
	}
	twice := app.New(app.WithComponent(sink), app.WithComponent(sink))
	if err := twice.Err(); err == nil || !strings.Contains(err.Error(), `"mytool.Discard"`) {
		t.Errorf("a class registered twice: %v", err)
	}
}

// App's zero value (not made by New) runs as gale with nothing registered: its
// usage lines name gale, and the lists of what it registered say none.
func TestZeroApp(t *testing.T) {
	var a app.App
	if err := a.Err(); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := run(t, &a, "--help")
	if code != 0 || !strings.Contains(stdout, "Usage:\n  gale [flags]\n  gale [command]") {
		t.Errorf("--help: exit %d, stderr %q; want the usage of gale:\n%s", code, stderr, stdout)
	}
	code, _, stderr = run(t, &a, "submit")
	if code != 2 || !strings.Contains(stderr, "(this build has: none)") {
		t.Errorf("submit: exit %d, stderr %q; want it to say the build has no topology", code, stderr)
	}
	if _, stdout, _ = run(t, &a, "worker", "--help"); !strings.Contains(stdout, "compiled into this binary (none; serve\npipelines: none)") {
		t.Errorf("worker --help does not say the build has no topology:\n%s", stdout)
	}
}
