package topology

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/gale-stream/gale/tuple"
)

type nopSpout struct{}

func (nopSpout) Open(context.Context, TaskContext, SpoutCollector) error { return nil }
func (nopSpout) NextTuple()                                              {}
func (nopSpout) Ack(any)                                                 {}
func (nopSpout) Fail(any)                                                {}
func (nopSpout) Close() error                                            { return nil }

type nopBolt struct{}

func (nopBolt) Prepare(context.Context, TaskContext, OutputCollector) error { return nil }
func (nopBolt) Execute(*tuple.Tuple)                                        {}
func (nopBolt) Cleanup() error                                              { return nil }

func spout() Spout { return nopSpout{} }
func bolt() Bolt   { return nopBolt{} }

func TestBuildValidation(t *testing.T) {
	cases := []struct {
		name  string
		build func(b *Builder)
		want  string // "" = valid
	}{
		{"valid", func(b *Builder) {
			b.SetSpout("s", spout, 1).Output("word", "n").DirectStream("d", "x")
			b.SetBolt("a", bolt, 2).FieldsGrouping("s", "word").DirectGrouping("s", "d")
		}, ""},
		{"unknown component", func(b *Builder) {
			b.SetSpout("s", spout, 1).Output("x")
			b.SetBolt("a", bolt, 1).ShuffleGrouping("nope")
		}, `bolt "a" subscribes to unknown component "nope"`},
		{"unknown stream", func(b *Builder) {
			b.SetSpout("s", spout, 1).Output("x")
			b.SetBolt("a", bolt, 1).Input("s", "other", Shuffle())
		}, `bolt "a" subscribes to stream "other" of "s", which "s" does not declare`},
		{"fields grouping on undeclared field", func(b *Builder) {
			b.SetSpout("s", spout, 1).Output("line")
			b.SetBolt("a", bolt, 1).FieldsGrouping("s", "word")
		}, `bolt "a": fields grouping on "word", but stream "default" of "s" declares [line]`},
		{"direct grouping on a non-direct stream", func(b *Builder) {
			b.SetSpout("s", spout, 1).Output("x")
			b.SetBolt("a", bolt, 1).DirectGrouping("s", "default")
		}, `bolt "a" uses direct grouping on stream "default" of "s", which is not declared direct`},
		{"shuffle on a direct stream", func(b *Builder) {
			b.SetSpout("s", spout, 1).DirectStream("d", "x")
			b.SetBolt("a", bolt, 1).Input("s", "d", Shuffle())
		}, `bolt "a" uses shuffle grouping on direct stream "d" of "s": direct streams need direct grouping`},
		{"duplicate id", func(b *Builder) {
			b.SetSpout("s", spout, 1).Output("x")
			b.SetBolt("s", bolt, 1).ShuffleGrouping("s")
		}, `component id "s" is used twice`},
		{"reserved id", func(b *Builder) {
			b.SetSpout("__acker", spout, 1).Output("x")
		}, `component id "__acker" is reserved`},
		{"reserved stream", func(b *Builder) {
			b.SetSpout("s", spout, 1).OutputStream("__tick", "x")
		}, `component "s": stream id "__tick" is reserved`},
		{"parallelism 0", func(b *Builder) {
			b.SetSpout("s", spout, 0).Output("x")
		}, `component "s": parallelism 0, must be 1 to 1048576`},
		{"parallelism too large", func(b *Builder) {
			b.SetSpout("s", spout, 1<<40).Output("x")
		}, `component "s": parallelism 1099511627776, must be 1 to 1048576`},
		{"subscribed twice", func(b *Builder) {
			b.SetSpout("s", spout, 1).Output("x")
			b.SetBolt("a", bolt, 1).ShuffleGrouping("s").ShuffleGrouping("s")
		}, `bolt "a" subscribes to stream "default" of "s" twice`},
		{"unknown grouping kind", func(b *Builder) {
			b.SetSpout("s", spout, 1).Output("x")
			b.SetBolt("a", bolt, 1).Input("s", "default", Grouping{Kind: 42})
		}, `bolt "a" input "s"/"default": unknown grouping kind 42`},
		{"shuffle with fields", func(b *Builder) {
			b.SetSpout("s", spout, 1).Output("x")
			b.SetBolt("a", bolt, 1).Input("s", "default", Grouping{Kind: ShuffleKind, Fields: []string{"x"}})
		}, `shuffle grouping given fields [x] (only fields grouping takes fields)`},
		{"no spout", func(b *Builder) {}, "no spout"},
		{"bolt without inputs", func(b *Builder) {
			b.SetSpout("s", spout, 1).Output("x")
			b.SetBolt("a", bolt, 1)
		}, `bolt "a" has no inputs`},
		{"duplicate field", func(b *Builder) {
			b.SetSpout("s", spout, 1).Output("x", "x")
		}, `component "s" stream "default": field "x" is declared twice`},
		{"cycle", func(b *Builder) {
			b.SetSpout("s", spout, 1).Output("x")
			b.SetBolt("a", bolt, 1).ShuffleGrouping("s").ShuffleGrouping("b").Output("x")
			b.SetBolt("b", bolt, 1).ShuffleGrouping("a").Output("x")
		}, "cycle a -> b -> a"},
		{"tick on a spout", func(b *Builder) {
			b.SetSpout("s", spout, 1).Output("x").TickEvery(time.Second)
		}, `spout "s": tick tuples are for bolts`},
		{"tick interval 0", func(b *Builder) {
			b.SetSpout("s", spout, 1).Output("x")
			b.SetBolt("a", bolt, 1).ShuffleGrouping("s").TickEvery(0)
		}, `bolt "a": tick interval 0s, must be > 0`},
		{"nil factory", func(b *Builder) {
			b.SetSpout("s", nil, 1).Output("x")
		}, `component "s": nil factory`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := NewBuilder()
			tc.build(b)
			topo, err := b.Build()
			if tc.want == "" {
				if err != nil || topo == nil {
					t.Fatalf("Build: %v", err)
				}
				return
			}
			if err == nil || !errors.Is(err, ErrTopology) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Build error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

// Every problem is reported at once, not just the first.
func TestBuildReportsAllErrors(t *testing.T) {
	b := NewBuilder()
	b.SetSpout("s", spout, 0).Output("x")
	b.SetBolt("a", bolt, 1).ShuffleGrouping("nope")
	_, err := b.Build()
	if err == nil || strings.Count(err.Error(), "gale: invalid topology") != 2 {
		t.Fatalf("got %v", err)
	}
}

func TestConfigValidation(t *testing.T) {
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatal(err)
	}
	mod := func(f func(*Config)) Config { c := DefaultConfig(); f(&c); return c }
	cases := []struct {
		cfg  Config
		want string
	}{
		{Config{}, "MessageTimeout = 0s, must be at least 1ms"},
		{mod(func(c *Config) { c.MessageTimeout = 30 }), "MessageTimeout = 30ns, must be at least 1ms"},
		{mod(func(c *Config) { c.Ackers = -1 }), "Ackers = -1"},
		{mod(func(c *Config) { c.DisableTimeouts = true }), "STORM-3514"},
		{mod(func(c *Config) { c.MaxSpoutPending = -5 }), "MaxSpoutPending = -5"},
		{mod(func(c *Config) { c.BatchSize = 0 }), "BatchSize = 0"},
		{mod(func(c *Config) { c.BatchSize = 1_000_000_000 }), "BatchSize = 1000000000, must be at most 65536"},
		{mod(func(c *Config) { c.ReceiveQueue = 0 }), "ReceiveQueue = 0"},
	}
	for _, tc := range cases {
		err := tc.cfg.Validate()
		if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Validate(%+v) = %v, want %q", tc.cfg, err, tc.want)
		}
	}
	// Timeouts off without a pending limit is allowed (tests do this).
	if err := mod(func(c *Config) { c.DisableTimeouts = true; c.MaxSpoutPending = 0; c.MessageTimeout = time.Duration(0) }).Validate(); err != nil {
		t.Fatal(err)
	}
}
