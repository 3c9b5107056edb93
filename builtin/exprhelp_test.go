package builtin_test

import (
	"context"
	"io"
	"log/slog"
	"slices"
	"sync"
	"testing"

	"github.com/gale-stream/gale/builtin"
	"github.com/gale-stream/gale/component"
	"github.com/gale-stream/gale/flux"
	"github.com/gale-stream/gale/topology"
	"github.com/gale-stream/gale/tuple"
)

// exprRegistry is the built-in classes plus a spout of order lines (fields order,
// quantity, payload) and a sink, for Flux files in tests.
func exprRegistry(t testing.TB) *component.Registry {
	t.Helper()
	reg := &component.Registry{}
	for _, d := range builtin.Components() {
		if err := reg.Register(d); err != nil {
			t.Fatal(err)
		}
	}
	for _, d := range []component.Declaration{
		{Class: "test.Orders", Doc: "order lines",
			Spout: func(component.Spec) (func() topology.Spout, error) {
				return func() topology.Spout { return &exprSpout{} }, nil
			},
			Outputs: func(component.Spec) ([]component.Output, error) {
				return []component.Output{{Fields: []string{"order", "quantity", "payload"}}}, nil
			}},
		{Class: "test.Other", Doc: "other fields",
			Spout: func(component.Spec) (func() topology.Spout, error) {
				return func() topology.Spout { return &exprSpout{} }, nil
			},
			Outputs: func(component.Spec) ([]component.Output, error) {
				return []component.Output{{Fields: []string{"id"}}}, nil
			}},
		{Class: "test.Sink", Doc: "a sink",
			Bolt: func(component.Spec) (func() topology.Bolt, error) {
				return func() topology.Bolt { return &exprSink{} }, nil
			}},
	} {
		if err := reg.Register(d); err != nil {
			t.Fatal(err)
		}
	}
	return reg
}

// exprBuild parses and builds a Flux file named f.yaml.
func exprBuild(t testing.TB, reg *component.Registry, text string) (*flux.Built, error) {
	t.Helper()
	f, err := flux.Parse("f.yaml", []byte(text))
	if err != nil {
		t.Fatalf("parse: %v\n%s", err, text)
	}
	return f.Build(reg)
}

// exprSpout emits its tuples once each, tracked (message id = index), and records
// how each tree ended; it replays nothing, so it is exhausted once all ended.
type exprSpout struct {
	vals []tuple.Values
	out  topology.SpoutCollector
	next int

	mu      sync.Mutex
	acked   int
	reasons map[int]string // failed trees: their reasons
}

func (s *exprSpout) Open(_ context.Context, _ topology.TaskContext, out topology.SpoutCollector) error {
	s.out = out
	return nil
}

func (s *exprSpout) NextTuple() {
	s.mu.Lock() // Exhausted may be asked from another goroutine than the spout's
	i := s.next
	if i < len(s.vals) {
		s.next++
	}
	s.mu.Unlock()
	if i < len(s.vals) {
		_ = s.out.Emit(s.vals[i], i)
	}
}

func (s *exprSpout) Ack(any) {
	s.mu.Lock()
	s.acked++
	s.mu.Unlock()
}

func (s *exprSpout) Fail(id any) { s.FailReason(id, "") }

func (s *exprSpout) FailReason(id any, reason string) {
	s.mu.Lock()
	if s.reasons == nil {
		s.reasons = map[int]string{}
	}
	s.reasons[id.(int)] = reason
	s.mu.Unlock()
}

func (s *exprSpout) Exhausted() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.next == len(s.vals) && s.acked+len(s.reasons) == len(s.vals)
}

func (s *exprSpout) Close() error { return nil }

// exprSink keeps what it receives and acks it.
type exprSink struct {
	topology.BaseBolt
	mu  *sync.Mutex
	got *[]tuple.Values
}

func (b *exprSink) Execute(t *tuple.Tuple) {
	if b.mu != nil {
		b.mu.Lock()
		*b.got = append(*b.got, slices.Clone(t.Values()))
		b.mu.Unlock()
	}
	_ = b.Out.Ack(t)
}

func exprQuiet() topology.Config {
	cfg := topology.DefaultConfig()
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	return cfg
}
