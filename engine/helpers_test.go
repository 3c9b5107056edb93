package engine

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/gale-stream/gale/topology"
	"github.com/gale-stream/gale/tuple"
)

// recorder collects what spouts are told. Safe for concurrent use.
type recorder struct {
	mu     sync.Mutex
	acked  map[any]int
	failed map[any]int
	order  []string
	change chan struct{}
}

func newRecorder() *recorder {
	return &recorder{acked: map[any]int{}, failed: map[any]int{}, change: make(chan struct{}, 1)}
}

func (r *recorder) note(kind string, id any) {
	r.mu.Lock()
	if kind == "ack" {
		r.acked[id]++
	} else {
		r.failed[id]++
	}
	r.order = append(r.order, fmt.Sprintf("%s %v", kind, id))
	r.mu.Unlock()
	select {
	case r.change <- struct{}{}:
	default:
	}
}

func (r *recorder) counts() (acks, fails int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, n := range r.acked {
		acks += n
	}
	for _, n := range r.failed {
		fails += n
	}
	return
}

func (r *recorder) ackedIDs() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for id, n := range r.acked {
		out = append(out, fmt.Sprintf("%v×%d", id, n))
	}
	sort.Strings(out)
	return out
}

// waitFor waits until cond holds (checked on every callback), or fails the test after
// a generous bound: a hang, not a slow machine, is what it catches.
func (r *recorder) waitFor(t *testing.T, what string, cond func(acks, fails int) bool) {
	t.Helper()
	deadline := time.After(20 * time.Second)
	for {
		if a, f := r.counts(); cond(a, f) {
			return
		}
		select {
		case <-r.change:
		case <-time.After(10 * time.Millisecond):
		case <-deadline:
			a, f := r.counts()
			t.Fatalf("timed out waiting for %s: acks=%d fails=%d", what, a, f)
		}
	}
}

// listSpout emits ids 0..n-1 once each (tracked unless untracked), on stream "default"
// with one field "id", and records acks and fails. With replay, failed ids are emitted
// again (same message id) on a later NextTuple.
type listSpout struct {
	rec       *recorder
	n         int
	next      int
	untracked bool
	replay    bool
	again     []any
	out       topology.SpoutCollector
	onNext    func(out topology.SpoutCollector)
}

func (s *listSpout) Open(_ context.Context, _ topology.TaskContext, out topology.SpoutCollector) error {
	s.out = out
	return nil
}

func (s *listSpout) NextTuple() {
	if s.onNext != nil {
		s.onNext(s.out)
	}
	if len(s.again) > 0 {
		id := s.again[0]
		s.again = s.again[1:]
		_ = s.out.Emit(tuple.Values{id}, id)
		return
	}
	if s.next >= s.n {
		return
	}
	id := s.next
	s.next++
	var msgID any = id
	if s.untracked {
		msgID = nil
	}
	if err := s.out.Emit(tuple.Values{id}, msgID); err != nil {
		panic(err)
	}
}

func (s *listSpout) Ack(id any) { s.rec.note("ack", id) }
func (s *listSpout) Fail(id any) {
	s.rec.note("fail", id)
	if s.replay {
		s.again = append(s.again, id)
	}
}
func (s *listSpout) Close() error { return nil }

// fnBolt is a Bolt made of functions.
type fnBolt struct {
	out     topology.OutputCollector
	tc      topology.TaskContext
	execute func(b *fnBolt, t *tuple.Tuple)
}

func (b *fnBolt) Prepare(_ context.Context, tc topology.TaskContext, out topology.OutputCollector) error {
	b.out, b.tc = out, tc
	return nil
}
func (b *fnBolt) Execute(t *tuple.Tuple) { b.execute(b, t) }
func (b *fnBolt) Cleanup() error         { return nil }

func bolt(execute func(b *fnBolt, t *tuple.Tuple)) func() topology.Bolt {
	return func() topology.Bolt { return &fnBolt{execute: execute} }
}

// ackAll acks every input.
var ackAll = bolt(func(b *fnBolt, t *tuple.Tuple) { _ = b.out.Ack(t) })

// passOn emits the input's values anchored to it, then acks it.
var passOn = bolt(func(b *fnBolt, t *tuple.Tuple) {
	if err := b.out.Emit(t.Values(), t); err != nil {
		panic(err)
	}
	_ = b.out.Ack(t)
})

func quietConfig() topology.Config {
	cfg := topology.DefaultConfig()
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	cfg.BatchSize = 16
	return cfg
}

func mustBuild(t *testing.T, b *topology.Builder) *topology.Topology {
	t.Helper()
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return topo
}

// start starts a topology for a test, with every message through the codec (as
// Storm's topology.testing.always.try.serialize), and stops it at the test's end.
func start(t *testing.T, topo *topology.Topology, cfg topology.Config, opts ...Option) *Runtime {
	t.Helper()
	rt, err := Start(context.Background(), topo, cfg, append([]Option{WithSerialization()}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = rt.Stop(ctx)
		select {
		case <-rt.Done():
		case <-time.After(10 * time.Second):
			t.Error("tasks still running after Stop: a goroutine leak or a stuck task")
		}
	})
	return rt
}

func stop(t *testing.T, rt *Runtime) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := rt.Stop(ctx); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	<-rt.Done()
}
