package engine

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/gale-stream/gale/internal/testio"
	"github.com/gale-stream/gale/topology"
	"github.com/gale-stream/gale/tuple"
)

// Each misuse is ignored for the tree (the tree's outcome is still right), counted per
// component and kind, returned as ErrMisuse, and logged at most once per component and
// kind per 10 s, with component, task, stream, root and the error in full; the 19
// not logged are counted in a line at the stop.
func TestMisuseIsReported(t *testing.T) {
	type result struct {
		acks, fails int
	}
	cases := []struct {
		kind string
		// misuse does the wrong thing (and the right one) with input t.
		misuse func(b *fnBolt, t *tuple.Tuple, other topology.OutputCollector) error
		want   result
		// leafFails: unanchored children the leaf fails (a refused anchor's child).
		leafFails uint64
		name      string
	}{
		{MisuseDoubleAck, func(b *fnBolt, t *tuple.Tuple, _ topology.OutputCollector) error {
			_ = b.out.Emit(t.Values(), t)
			_ = b.out.Ack(t)
			return b.out.Ack(t) // would cancel the child's edge back in (R2): a stall
		}, result{acks: 20}, 0, ""},
		{MisuseDoubleFail, func(b *fnBolt, t *tuple.Tuple, _ topology.OutputCollector) error {
			_ = b.out.Fail(t)
			return b.out.Fail(t)
		}, result{fails: 20}, 0, ""},
		{MisuseAckAfterFail, func(b *fnBolt, t *tuple.Tuple, _ topology.OutputCollector) error {
			_ = b.out.Fail(t)
			return b.out.Ack(t)
		}, result{fails: 20}, 0, ""},
		{MisuseFailAfterAck, func(b *fnBolt, t *tuple.Tuple, _ topology.OutputCollector) error {
			_ = b.out.Emit(t.Values(), t)
			_ = b.out.Ack(t)
			return b.out.Fail(t)
		}, result{acks: 20}, 0, ""},
		{MisuseAnchorAfterAck, func(b *fnBolt, t *tuple.Tuple, _ topology.OutputCollector) error {
			_ = b.out.Ack(t)
			return b.out.Emit(t.Values(), t) // R3: must not join (or complete) the tree
		}, result{acks: 20}, 20, ""},
		{MisuseForeignTask, func(b *fnBolt, t *tuple.Tuple, other topology.OutputCollector) error {
			err := other.Ack(t) // the other task did not receive t
			_ = b.out.Emit(t.Values(), t)
			_ = b.out.Ack(t)
			return err
		}, result{acks: 20}, 0, ""},
		{MisuseResetAfterDone, func(b *fnBolt, t *tuple.Tuple, _ topology.OutputCollector) error {
			_ = b.out.Ack(t)
			return b.out.ResetTimeout(t)
		}, result{acks: 20}, 0, ""},
		{MisuseForeignTask, func(b *fnBolt, t *tuple.Tuple, other topology.OutputCollector) error {
			err := other.Emit(t.Values(), t) // anchored through a task that did not receive t
			_ = b.out.Ack(t)
			return err
		}, result{acks: 20}, 20, "foreign-anchor"},
	}
	for _, tc := range cases {
		name := tc.kind
		if tc.name != "" {
			name = tc.name
		}
		t.Run(name, func(t *testing.T) {
			rec := newRecorder()
			var logs testio.SyncBuffer
			var mu sync.Mutex
			var errs []error
			colls := map[int]topology.OutputCollector{}
			b := topology.NewBuilder()
			b.SetSpout("s", func() topology.Spout { return &listSpout{rec: rec, n: 20} }, 1).Output("id")
			b.SetBolt("a", func() topology.Bolt {
				fb := &fnBolt{}
				fb.execute = func(b *fnBolt, t *tuple.Tuple) {
					mu.Lock()
					other := colls[1-b.tc.TaskIndex]
					mu.Unlock()
					err := tc.misuse(b, t, other)
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
				}
				return &registering{fnBolt: fb, colls: colls, mu: &mu}
			}, 2).GlobalGrouping("s").Output("id")
			// The leaf acks anchored children and fails unanchored ones: a child whose
			// only anchor was misused must arrive unanchored (and fail nothing).
			b.SetBolt("leaf", bolt(func(b *fnBolt, t *tuple.Tuple) {
				if t.Anchored() {
					_ = b.out.Ack(t)
				} else {
					_ = b.out.Fail(t)
				}
			}), 1).ShuffleGrouping("a")
			cfg := quietConfig()
			cfg.Logger = slog.New(slog.NewTextHandler(&logs, nil))
			rt := start(t, mustBuild(t, b), cfg)
			rec.waitFor(t, "outcomes", func(a, f int) bool { return a+f == 20 })
			stop(t, rt)
			a, f := rec.counts()
			if a != tc.want.acks || f != tc.want.fails {
				t.Fatalf("spout acks %d fails %d, want %+v", a, f, tc.want)
			}
			s := rt.Stats()
			if got := s.Components["leaf"].Failed; got != tc.leafFails {
				t.Fatalf("leaf failed %d unanchored children, want %d", got, tc.leafFails)
			}
			if got := s.Components["a"].Misuse[tc.kind]; got != 20 || s.MisuseTotal() != 20 {
				t.Fatalf("misuse %s counted %d (total %d), want 20", tc.kind, got, s.MisuseTotal())
			}
			mu.Lock()
			for _, err := range errs {
				if !errors.Is(err, topology.ErrMisuse) || !strings.Contains(err.Error(), tc.kind) {
					t.Fatalf("misuse returned %v", err)
				}
			}
			mu.Unlock()
			out := logs.String()
			if n := strings.Count(out, "kind="+tc.kind); n != 2 {
				t.Fatalf("logged %d times, want once and once at the stop:\n%s", n, out)
			}
			first, last, _ := strings.Cut(strings.TrimSpace(out), "\n")
			for _, attr := range []string{"level=WARN", "component=a", "task=", "stream=default", "root=", `err="gale: misuse: ` + tc.kind} {
				if !strings.Contains(first, attr) {
					t.Fatalf("log lacks %s:\n%s", attr, out)
				}
			}
			if !strings.Contains(last, "component=a kind="+tc.kind+" more_since_last_warning=19") {
				t.Fatalf("the stop's line does not count the 19 misuses not logged:\n%s", out)
			}
		})
	}
}

// registering records each task's collector so another task can misuse it.
type registering struct {
	*fnBolt
	colls map[int]topology.OutputCollector
	mu    *sync.Mutex
}

func (r *registering) Prepare(ctx context.Context, tc topology.TaskContext, out topology.OutputCollector) error {
	r.mu.Lock()
	r.colls[tc.TaskIndex] = out
	r.mu.Unlock()
	return r.fnBolt.Prepare(ctx, tc, out)
}

// leakyBasic keeps its BasicCollector and emits with it after Execute has returned.
type leakyBasic struct {
	errs chan error
	go_  chan struct{}
}

func (leakyBasic) Prepare(context.Context, topology.TaskContext) error { return nil }
func (l leakyBasic) Execute(t *tuple.Tuple, out topology.BasicCollector) error {
	go func() {
		<-l.go_ // after the input was acked, with no Execute running
		l.errs <- out.Emit(tuple.Values{1})
		l.errs <- out.ResetTimeout()
	}()
	return nil
}
func (leakyBasic) Cleanup() error { return nil }

// A BasicCollector used after its Execute returned would emit untracked: refused.
func TestBasicCollectorOutsideExecute(t *testing.T) {
	rec := newRecorder()
	errs := make(chan error, 2)
	release := make(chan struct{})
	b := topology.NewBuilder()
	b.SetSpout("s", func() topology.Spout { return &listSpout{rec: rec, n: 1} }, 1).Output("id")
	b.SetBasicBolt("leaky", func() topology.BasicBolt { return leakyBasic{errs, release} }, 1).ShuffleGrouping("s").Output("id")
	b.SetBolt("leaf", ackAll, 1).ShuffleGrouping("leaky")
	rt := start(t, mustBuild(t, b), quietConfig())
	rec.waitFor(t, "the ack", func(a, f int) bool { return a == 1 })
	close(release)
	for range 2 {
		if err := <-errs; !errors.Is(err, topology.ErrMisuse) {
			t.Fatalf("late emit returned %v", err)
		}
	}
	stop(t, rt)
	s := rt.Stats()
	if s.Components["leaky"].Misuse[MisuseBasicOutside] != 2 || s.Components["leaf"].Executed != 0 {
		t.Fatalf("misuse %v, leaf executed %d", s.Components["leaky"].Misuse, s.Components["leaf"].Executed)
	}
}

// slowLeaky keeps the collector of input 0 and emits with it while input 1 is being
// executed: the emit must not join input 1's tree.
type slowLeaky struct {
	first   chan struct{}
	emitted chan error
	n       int
}

func (*slowLeaky) Prepare(context.Context, topology.TaskContext) error { return nil }
func (l *slowLeaky) Execute(t *tuple.Tuple, out topology.BasicCollector) error {
	l.n++
	if l.n == 1 {
		go func() { <-l.first; l.emitted <- out.Emit(tuple.Values{-1}) }()
		return nil
	}
	close(l.first) // input 0 is done; input 1's Execute is running now
	<-l.emitted    // the stale emit has happened (or been refused)
	return nil
}
func (*slowLeaky) Cleanup() error { return nil }

func TestStaleBasicCollectorNeverJoinsAnotherTree(t *testing.T) {
	rec := newRecorder()
	sl := &slowLeaky{first: make(chan struct{}), emitted: make(chan error, 1)}
	b := topology.NewBuilder()
	b.SetSpout("s", func() topology.Spout { return &listSpout{rec: rec, n: 2} }, 1).Output("id")
	b.SetBasicBolt("leaky", func() topology.BasicBolt { return sl }, 1).ShuffleGrouping("s").Output("id")
	b.SetBolt("leaf", bolt(func(b *fnBolt, t *tuple.Tuple) { _ = b.out.Fail(t) }), 1).ShuffleGrouping("leaky")
	cfg := quietConfig()
	cfg.BatchSize = 1
	rt := start(t, mustBuild(t, b), cfg)
	rec.waitFor(t, "both outcomes", func(a, f int) bool { return a+f == 2 })
	stop(t, rt)
	if a, f := rec.counts(); a != 2 || f != 0 {
		t.Fatalf("acks %d fails %d: a stale collector's emit joined a live tree", a, f)
	}
	if rt.Stats().Components["leaky"].Misuse[MisuseBasicOutside] != 1 {
		t.Fatal("stale emit not counted as misuse")
	}
}

// A nil anchor would emit untracked and a nil input cannot be acked: both are counted.
func TestNilTupleMisuse(t *testing.T) {
	rec := newRecorder()
	errs := make(chan error, 4)
	b := topology.NewBuilder()
	b.SetSpout("s", func() topology.Spout { return &listSpout{rec: rec, n: 1} }, 1).Output("id")
	b.SetBolt("a", bolt(func(b *fnBolt, t *tuple.Tuple) {
		errs <- b.out.Emit(t.Values(), nil)
		errs <- b.out.Ack(nil)
		errs <- b.out.Fail(nil)
		errs <- b.out.ResetTimeout(nil)
		_ = b.out.Ack(t)
	}), 1).ShuffleGrouping("s").Output("id")
	b.SetBolt("leaf", ackAll, 1).ShuffleGrouping("a")
	rt := start(t, mustBuild(t, b), quietConfig())
	rec.waitFor(t, "ack", func(a, f int) bool { return a == 1 })
	stop(t, rt)
	for range 4 {
		if err := <-errs; !errors.Is(err, topology.ErrMisuse) {
			t.Fatalf("got %v", err)
		}
	}
	if n := rt.Stats().Components["a"].Misuse[MisuseNilTuple]; n != 4 {
		t.Fatalf("nil-tuple misuse counted %d, want 4", n)
	}
}

// panicky keeps its collector and panics; the collector must be dead afterwards.
type panicky struct{ kept chan topology.BasicCollector }

func (panicky) Prepare(context.Context, topology.TaskContext) error { return nil }
func (p panicky) Execute(t *tuple.Tuple, out topology.BasicCollector) error {
	p.kept <- out
	panic("boom")
}
func (panicky) Cleanup() error { return nil }

func TestPanickedBasicCollectorIsRefused(t *testing.T) {
	rec := newRecorder()
	kept := make(chan topology.BasicCollector, 1)
	b := topology.NewBuilder()
	b.SetSpout("s", func() topology.Spout { return &listSpout{rec: rec, n: 1} }, 1).Output("id")
	b.SetBasicBolt("p", func() topology.BasicBolt { return panicky{kept} }, 1).ShuffleGrouping("s").Output("id")
	b.SetBolt("leaf", ackAll, 1).ShuffleGrouping("p")
	rt := start(t, mustBuild(t, b), quietConfig())
	rec.waitFor(t, "the fail", func(a, f int) bool { return f == 1 })
	if err := (<-kept).Emit(tuple.Values{1}); !errors.Is(err, topology.ErrMisuse) {
		t.Fatalf("emit through a panicked Execute's collector: %v", err)
	}
	stop(t, rt)
	s := rt.Stats()
	if s.Components["p"].Misuse[MisuseBasicOutside] != 1 || s.Components["leaf"].Executed != 0 {
		t.Fatalf("misuse %v, leaf executed %d", s.Components["p"].Misuse, s.Components["leaf"].Executed)
	}
}
