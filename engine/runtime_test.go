package engine

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gale-stream/gale/internal/waitfor"
	"github.com/gale-stream/gale/topology"
	"github.com/gale-stream/gale/tuple"
)

// waitStat polls a component counter until cond holds (a bound catches hangs only).
func waitStat(t *testing.T, rt *Runtime, what string, cond func(Stats) bool) {
	t.Helper()
	waitfor.True(t, 20*time.Second, what, func() bool { return cond(rt.Stats()) })
}

// holdBolt sends every input to held and acks or fails nothing itself.
func holdBolt(held chan<- *tuple.Tuple, outs chan<- topology.OutputCollector) func() topology.Bolt {
	var mu sync.Mutex // several tasks: keep each tuple paired with its task's collector
	return bolt(func(b *fnBolt, t *tuple.Tuple) {
		mu.Lock()
		defer mu.Unlock()
		if outs != nil {
			outs <- b.out
		}
		held <- t
	})
}

// R1 baseline: S -> A -> B, A anchors its child and acks; the tree completes only once
// B has acked too.
func TestAnchoredChain(t *testing.T) {
	rec := newRecorder()
	held := make(chan *tuple.Tuple, 1)
	outs := make(chan topology.OutputCollector, 1)
	b := topology.NewBuilder()
	b.SetSpout("s", func() topology.Spout { return &listSpout{rec: rec, n: 1} }, 1).Output("id")
	b.SetBolt("a", passOn, 1).ShuffleGrouping("s").Output("id")
	b.SetBolt("b", holdBolt(held, outs), 1).ShuffleGrouping("a")
	rt := start(t, mustBuild(t, b), quietConfig())
	child, out := <-held, <-outs
	waitStat(t, rt, "a to ack its input", func(s Stats) bool { return s.Components["a"].Acked == 1 })
	if a, f := rec.counts(); a != 0 || f != 0 {
		t.Fatalf("tree reported before its leaf was acked: acks=%d fails=%d", a, f)
	}
	if len(child.Roots()) != 1 || !child.Anchored() {
		t.Fatalf("child roots %v, want one", child.Roots())
	}
	if err := out.Ack(child); err != nil {
		t.Fatal(err)
	}
	rec.waitFor(t, "the ack", func(a, f int) bool { return a == 1 })
	stop(t, rt)
	s := rt.Stats()
	if got := rec.ackedIDs(); fmt.Sprint(got) != "[0×1]" {
		t.Fatalf("acked %v", got)
	}
	if c := s.Components["s"]; c.Acked != 1 || c.Failed != 0 || c.Emitted != 1 || c.Transferred != 1 || c.CompleteLatency.Count() != 1 {
		t.Fatalf("spout stats %+v", c)
	}
	if s.Acker.Completed != 1 || s.Acker.Pending != 0 {
		t.Fatalf("acker stats %+v", s.Acker)
	}
}

// A emits two children on two streams to two bolts: the tree waits for both.
func TestFanOut(t *testing.T) {
	rec := newRecorder()
	held := make(chan *tuple.Tuple, 1)
	outs := make(chan topology.OutputCollector, 1)
	b := topology.NewBuilder()
	b.SetSpout("s", func() topology.Spout { return &listSpout{rec: rec, n: 1} }, 1).Output("id")
	b.SetBolt("a", bolt(func(b *fnBolt, t *tuple.Tuple) {
		_ = b.out.EmitTo("left", t.Values(), t)
		_ = b.out.EmitTo("right", t.Values(), t)
		_ = b.out.Ack(t)
	}), 1).ShuffleGrouping("s").OutputStream("left", "id").OutputStream("right", "id")
	b.SetBolt("b", ackAll, 1).Input("a", "left", topology.Shuffle())
	b.SetBolt("c", holdBolt(held, outs), 1).Input("a", "right", topology.Shuffle())
	rt := start(t, mustBuild(t, b), quietConfig())
	child, out := <-held, <-outs
	waitStat(t, rt, "b to ack", func(s Stats) bool { return s.Components["b"].Acked == 1 && s.Components["a"].Acked == 1 })
	if a, _ := rec.counts(); a != 0 {
		t.Fatal("tree completed with the right branch still pending")
	}
	_ = out.Ack(child)
	rec.waitFor(t, "the ack", func(a, f int) bool { return a == 1 })
	stop(t, rt)
	if s := rt.Stats(); s.Components["a"].Emitted != 2 || s.Components["a"].Transferred != 2 {
		t.Fatalf("a emitted %d transferred %d", s.Components["a"].Emitted, s.Components["a"].Transferred)
	}
}

// All-grouping sends a copy (its own edge) to each of 3 tasks; the tree waits for all.
func TestAllGrouping(t *testing.T) {
	rec := newRecorder()
	held := make(chan *tuple.Tuple, 3)
	outs := make(chan topology.OutputCollector, 3)
	b := topology.NewBuilder()
	b.SetSpout("s", func() topology.Spout { return &listSpout{rec: rec, n: 1} }, 1).Output("id")
	b.SetBolt("b", holdBolt(held, outs), 3).AllGrouping("s")
	rt := start(t, mustBuild(t, b), quietConfig())
	tasks := map[int]bool{}
	var copies []*tuple.Tuple
	var colls []topology.OutputCollector
	for range 3 {
		c := <-held
		copies = append(copies, c)
		colls = append(colls, <-outs)
		tasks[c.Task()] = true
	}
	if len(tasks) != 3 {
		t.Fatalf("copies went to tasks %v, want 3 distinct", tasks)
	}
	for i := range 2 {
		if err := colls[i].Ack(copies[i]); err != nil {
			t.Fatal(err)
		}
	}
	waitStat(t, rt, "two acks", func(s Stats) bool { return s.Components["b"].Acked == 2 })
	if a, _ := rec.counts(); a != 0 {
		t.Fatal("tree completed with one copy unacked")
	}
	_ = colls[2].Ack(copies[2])
	rec.waitFor(t, "the ack", func(a, f int) bool { return a == 1 })
	stop(t, rt)
	if s := rt.Stats().Components["s"]; s.Emitted != 1 || s.Transferred != 3 {
		t.Fatalf("spout emitted %d transferred %d, want 1 and 3", s.Emitted, s.Transferred)
	}
}

// Seed 000 §3.2: fork to two checks, join by fields grouping, emit anchored to both
// parents. Pairs of spout tuples (2k, 2k+1) are joined too, so each joined child
// belongs to two trees: both complete only when it is acked, and failing it fails both.
func TestForkJoinMultiAnchor(t *testing.T) {
	rec := newRecorder()
	const n = 200
	var mu sync.Mutex
	rootsSeen := map[int]int{}
	b := topology.NewBuilder()
	b.SetSpout("s", func() topology.Spout { return &listSpout{rec: rec, n: n} }, 1).Output("id")
	check := func(kind string) func() topology.Bolt {
		return bolt(func(b *fnBolt, t *tuple.Tuple) {
			id := t.Value(0).(int)
			_ = b.out.Emit(tuple.Values{id / 2, kind, id}, t)
			_ = b.out.Ack(t)
		})
	}
	b.SetBolt("risk", check("risk"), 2).ShuffleGrouping("s").Output("pair", "kind", "id")
	b.SetBolt("stock", check("stock"), 2).ShuffleGrouping("s").Output("pair", "kind", "id")
	b.SetBolt("join", func() topology.Bolt {
		waiting := map[int][]*tuple.Tuple{}
		return &fnBolt{execute: func(b *fnBolt, t *tuple.Tuple) {
			p := t.ValueByField("pair").(int)
			waiting[p] = append(waiting[p], t)
			if len(waiting[p]) < 4 { // risk and stock for both ids of the pair
				return
			}
			if err := b.out.Emit(tuple.Values{p}, waiting[p]...); err != nil {
				panic(err)
			}
			for _, in := range waiting[p] {
				_ = b.out.Ack(in)
			}
			delete(waiting, p)
		}}
	}, 2).FieldsGrouping("risk", "pair").FieldsGrouping("stock", "pair").Output("pair")
	b.SetBolt("sink", bolt(func(b *fnBolt, t *tuple.Tuple) {
		mu.Lock()
		rootsSeen[len(t.Roots())]++
		mu.Unlock()
		if t.Value(0).(int)%10 == 0 {
			_ = b.out.Fail(t)
		} else {
			_ = b.out.Ack(t)
		}
	}), 1).ShuffleGrouping("join")
	rt := start(t, mustBuild(t, b), quietConfig())
	rec.waitFor(t, "every tree", func(a, f int) bool { return a+f == n })
	stop(t, rt)
	mu.Lock()
	defer mu.Unlock()
	if rootsSeen[2] != n/2 || len(rootsSeen) != 1 {
		t.Fatalf("joined children by number of roots: %v, want all %d with 2", rootsSeen, n/2)
	}
	// Pairs p%10==0 were failed: ids 20k, 20k+1 for p=10k.
	acks, fails := rec.counts()
	if fails != 2*(n/2/10) || acks != n-fails {
		t.Fatalf("acks %d fails %d", acks, fails)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	for id := range n {
		wantFail := (id/2)%10 == 0
		if (rec.failed[id] == 1) != wantFail || rec.acked[id]+rec.failed[id] != 1 {
			t.Fatalf("id %d: acked %d failed %d", id, rec.acked[id], rec.failed[id])
		}
	}
}

// R19: a child emitted without an anchor is not in the tree: its failure replays
// nothing and the root is acked.
func TestUnanchoredChildFailureDoesNotFailRoot(t *testing.T) {
	rec := newRecorder()
	b := topology.NewBuilder()
	b.SetSpout("s", func() topology.Spout { return &listSpout{rec: rec, n: 50} }, 1).Output("id")
	b.SetBolt("a", bolt(func(b *fnBolt, t *tuple.Tuple) {
		_ = b.out.Emit(t.Values()) // no anchor
		_ = b.out.Ack(t)
	}), 1).ShuffleGrouping("s").Output("id")
	b.SetBolt("b", bolt(func(b *fnBolt, t *tuple.Tuple) { _ = b.out.Fail(t) }), 1).ShuffleGrouping("a")
	rt := start(t, mustBuild(t, b), quietConfig())
	rec.waitFor(t, "acks", func(a, f int) bool { return a == 50 })
	waitStat(t, rt, "b's fails", func(s Stats) bool { return s.Components["b"].Failed == 50 })
	stop(t, rt)
	if _, f := rec.counts(); f != 0 {
		t.Fatalf("%d fails reached the spout", f)
	}
}

// A bolt's Fail reaches the spout's Fail at once (not through the timeout).
func TestFailReachesSpout(t *testing.T) {
	rec := newRecorder()
	b := topology.NewBuilder()
	b.SetSpout("s", func() topology.Spout { return &listSpout{rec: rec, n: 100} }, 1).Output("id")
	b.SetBolt("a", passOn, 2).ShuffleGrouping("s").Output("id")
	b.SetBolt("b", bolt(func(b *fnBolt, t *tuple.Tuple) {
		if t.Value(0).(int)%2 == 0 {
			_ = b.out.Fail(t)
		} else {
			_ = b.out.Ack(t)
		}
	}), 2).ShuffleGrouping("a")
	rt := start(t, mustBuild(t, b), quietConfig())
	rec.waitFor(t, "all outcomes", func(a, f int) bool { return a+f == 100 })
	stop(t, rt)
	rec.mu.Lock()
	for id := range 100 {
		if id%2 == 0 && (rec.failed[id] != 1 || rec.acked[id] != 0) || id%2 == 1 && (rec.acked[id] != 1 || rec.failed[id] != 0) {
			t.Errorf("id %d: acked %d failed %d", id, rec.acked[id], rec.failed[id])
		}
	}
	rec.mu.Unlock()
	s := rt.Stats()
	if c := s.Components["s"]; c.Failed != 50 || c.TimedOut != 0 || c.Acked != 50 {
		t.Fatalf("spout acked %d failed %d timed out %d", c.Acked, c.Failed, c.TimedOut)
	}
	if s.Acker.Failed != 50 || s.Acker.Completed != 50 {
		t.Fatalf("acker %+v", s.Acker)
	}
}

// A tree nobody finishes times out at the spout; a late ack afterwards is ignored and
// counted: by the spout as a late outcome if the acker still held the tree, or by
// the acker as an entry without an init (then an orphan) if it had expired it. On a
// fake clock both paths are exact: the spout times the trees out at the fifth
// rotation, the acker expires them at the sixth, and half the acks go before it, half
// after. (On the wall clock the test waited for the acker and hung whenever load let
// it expire a tree before its ack came.)
func TestTimeoutReachesSpout(t *testing.T) {
	rec := newRecorder()
	held := make(chan *tuple.Tuple, 10)
	outs := make(chan topology.OutputCollector, 10)
	b := topology.NewBuilder()
	b.SetSpout("s", func() topology.Spout { return &listSpout{rec: rec, n: 10} }, 1).Output("id")
	b.SetBolt("b", holdBolt(held, outs), 1).ShuffleGrouping("s")
	cfg := quietConfig()
	cfg.MessageTimeout = 200 * time.Millisecond
	f := startFake(t, mustBuild(t, b), cfg)
	rt := f.rt
	tuples, collectors := receive(t, held, 10), receive(t, outs, 10) // all emitted at the clock's start
	for range rotationsPerTimeout + 1 {
		f.rotate()
	}
	if _, fails := rec.counts(); fails != 10 {
		t.Fatalf("%d of 10 trees timed out after 1.25 timeouts", fails)
	}
	ack := func(n int) {
		for range n {
			if err := collectors[0].Ack(tuples[0]); err != nil {
				t.Fatal(err)
			}
			collectors, tuples = collectors[1:], tuples[1:]
		}
	}
	ack(5) // the acker still holds these trees: late at the spout
	waitStat(t, rt, "5 late outcomes at the spout", func(s Stats) bool { return s.Components["s"].LateOutcomes == 5 })
	f.rotate() // the acker's sixth: it expires the other 5
	if s := rt.Stats(); s.Acker.Expired != 5 || s.Acker.Completed != 5 {
		t.Fatalf("after the acker's sixth rotation: %+v, want 5 expired and 5 completed", s.Acker)
	}
	ack(5) // the acker no longer holds these
	waitStat(t, rt, "5 acks without a tree at the acker", func(s Stats) bool { return s.Acker.Unmatched == 5 })
	s := rt.Stats()
	c := s.Components["s"]
	if a, _ := rec.counts(); a != 0 || c.TimedOut != 10 || c.Failed != 0 || c.Acked != 0 || c.LateOutcomes != 5 || c.Pending != 0 {
		t.Fatalf("acks %d, spout stats %+v", a, c)
	}
}

// R12 (STORM-2231): a bolt acks and emits from 10 goroutines at once. Run with -race:
// every tree completes, none times out.
func TestAsyncAckFromGoroutines(t *testing.T) {
	const n = 10_000
	rec := newRecorder()
	b := topology.NewBuilder()
	b.SetSpout("s", func() topology.Spout { return &listSpout{rec: rec, n: n} }, 1).Output("id")
	b.SetBolt("async", func() topology.Bolt { return &asyncBolt{} }, 2).ShuffleGrouping("s").Output("id")
	b.SetBolt("sink", ackAll, 1).ShuffleGrouping("async")
	cfg := quietConfig()
	cfg.MaxSpoutPending = 1000
	rt := start(t, mustBuild(t, b), cfg)
	rec.waitFor(t, "all acks", func(a, f int) bool { return a+f == n })
	stop(t, rt)
	s := rt.Stats()
	if a, f := rec.counts(); a != n || f != 0 || s.Components["s"].TimedOut != 0 {
		t.Fatalf("acks %d fails %d timeouts %d", a, f, s.Components["s"].TimedOut)
	}
	if s.Components["sink"].Acked != n || s.Components["async"].Emitted != n {
		t.Fatalf("sink acked %d, async emitted %d", s.Components["sink"].Acked, s.Components["async"].Emitted)
	}
}

// asyncBolt hands inputs to 10 worker goroutines that emit anchored and ack.
type asyncBolt struct {
	out  topology.OutputCollector
	work chan *tuple.Tuple
	wg   sync.WaitGroup
}

func (b *asyncBolt) Prepare(_ context.Context, _ topology.TaskContext, out topology.OutputCollector) error {
	b.out = out
	b.work = make(chan *tuple.Tuple, 64)
	for range 10 {
		b.wg.Add(1)
		go func() {
			defer b.wg.Done()
			for t := range b.work {
				if err := b.out.Emit(t.Values(), t); err != nil {
					panic(err)
				}
				if err := b.out.Ack(t); err != nil {
					panic(err)
				}
			}
		}()
	}
	return nil
}
func (b *asyncBolt) Execute(t *tuple.Tuple) { b.work <- t }
func (b *asyncBolt) Cleanup() error {
	close(b.work)
	b.wg.Wait()
	return nil
}

// basicBolt returns nil, an error or panics depending on the input (R20).
type basicBolt struct{}

func (basicBolt) Prepare(context.Context, topology.TaskContext) error { return nil }
func (basicBolt) Execute(t *tuple.Tuple, out topology.BasicCollector) error {
	switch id := t.Value(0).(int); id % 3 {
	case 0:
		return out.Emit(tuple.Values{id})
	case 1:
		_ = out.Emit(tuple.Values{id}) // anchored: the child is in the failed tree too
		return errors.New("refused")
	default:
		panic(fmt.Sprintf("boom %d", id))
	}
}
func (basicBolt) Cleanup() error { return nil }

// R20: BasicBolt acks on nil, fails on error, fails and reports on panic, and goes on.
func TestBasicBoltNilErrorPanic(t *testing.T) {
	rec := newRecorder()
	b := topology.NewBuilder()
	b.SetSpout("s", func() topology.Spout { return &listSpout{rec: rec, n: 30} }, 1).Output("id")
	b.SetBasicBolt("basic", func() topology.BasicBolt { return basicBolt{} }, 1).ShuffleGrouping("s").Output("id")
	b.SetBolt("sink", ackAll, 1).ShuffleGrouping("basic")
	rt := start(t, mustBuild(t, b), quietConfig())
	rec.waitFor(t, "all outcomes", func(a, f int) bool { return a+f == 30 })
	stop(t, rt)
	rec.mu.Lock()
	for id := range 30 {
		ok := rec.acked[id] == 1 && rec.failed[id] == 0
		if ok != (id%3 == 0) || rec.acked[id]+rec.failed[id] != 1 {
			t.Errorf("id %d: acked %d failed %d", id, rec.acked[id], rec.failed[id])
		}
	}
	rec.mu.Unlock()
	c := rt.Stats().Components["basic"]
	if c.Acked != 10 || c.Failed != 20 || c.Errors != 10 || c.Executed != 30 {
		t.Fatalf("basic bolt stats: acked %d failed %d errors %d executed %d", c.Acked, c.Failed, c.Errors, c.Executed)
	}
	if c.LastError == "" {
		t.Fatal("panic not reported")
	}
}

// Max spout pending is never exceeded between NextTuple calls, and is reached.
func TestMaxSpoutPending(t *testing.T) {
	const limit, n = 10, 300
	rec := newRecorder()
	var maxSeen, calls atomic.Int64
	var over atomic.Int64
	spout := func() topology.Spout {
		return &listSpout{rec: rec, n: n, onNext: func(out topology.SpoutCollector) {
			p := int64(out.Pending())
			calls.Add(1)
			if p >= limit {
				over.Add(1)
			}
			if p > maxSeen.Load() {
				maxSeen.Store(p)
			}
		}}
	}
	// The bolt holds inputs until it has limit of them, so the spout must hit the limit.
	var held []*tuple.Tuple
	b := topology.NewBuilder()
	b.SetSpout("s", spout, 1).Output("id")
	b.SetBolt("b", bolt(func(b *fnBolt, t *tuple.Tuple) {
		held = append(held, t)
		if len(held) == limit {
			for _, h := range held {
				_ = b.out.Ack(h)
			}
			held = held[:0]
		}
	}), 1).ShuffleGrouping("s")
	cfg := quietConfig()
	cfg.MaxSpoutPending = limit
	rt := start(t, mustBuild(t, b), cfg)
	rec.waitFor(t, "all acks", func(a, f int) bool { return a == n })
	stop(t, rt)
	if over.Load() != 0 || maxSeen.Load() != limit-1 {
		t.Fatalf("NextTuple called %d times with pending >= %d; max pending seen at a call %d (want %d)", over.Load(), limit, maxSeen.Load(), limit-1)
	}
}

// R18: with 0 ackers a tracked emit is acked at once and bolt fails do nothing.
func TestNoAckers(t *testing.T) {
	rec := newRecorder()
	b := topology.NewBuilder()
	b.SetSpout("s", func() topology.Spout { return &listSpout{rec: rec, n: 40} }, 1).Output("id")
	b.SetBolt("b", bolt(func(b *fnBolt, t *tuple.Tuple) { _ = b.out.Fail(t) }), 1).ShuffleGrouping("s")
	cfg := quietConfig()
	cfg.Ackers = 0
	rt := start(t, mustBuild(t, b), cfg)
	rec.waitFor(t, "acks", func(a, f int) bool { return a == 40 })
	waitStat(t, rt, "bolt fails", func(s Stats) bool { return s.Components["b"].Failed == 40 })
	stop(t, rt)
	s := rt.Stats()
	if _, f := rec.counts(); f != 0 || s.Acker.Tasks != 0 || s.Components["s"].Pending != 0 || s.Components["s"].Acked != 40 {
		t.Fatalf("fails %d, acker tasks %d, spout stats %+v", f, s.Acker.Tasks, s.Components["s"])
	}
}

// Direct grouping: the producer picks the task; mistakes are errors.
func TestDirectGrouping(t *testing.T) {
	rec := newRecorder()
	var mu sync.Mutex
	got := map[int]int{} // id -> task that received it
	var errs []error
	b := topology.NewBuilder()
	b.SetSpout("s", func() topology.Spout { return &listSpout{rec: rec, n: 30} }, 1).Output("id")
	b.SetBolt("router", bolt(func(b *fnBolt, t *tuple.Tuple) {
		tasks := b.tc.ComponentTasks("dst")
		id := t.Value(0).(int)
		if err := b.out.EmitDirect(tasks[id%3], "to", t.Values(), t); err != nil {
			panic(err)
		}
		mu.Lock()
		errs = append(errs, b.out.EmitTo("to", t.Values(), t), b.out.EmitDirect(b.tc.TaskID, "to", t.Values(), t))
		mu.Unlock()
		_ = b.out.Ack(t)
	}), 1).ShuffleGrouping("s").DirectStream("to", "id")
	b.SetBolt("dst", bolt(func(b *fnBolt, t *tuple.Tuple) {
		mu.Lock()
		got[t.Value(0).(int)] = b.tc.TaskIndex
		mu.Unlock()
		_ = b.out.Ack(t)
	}), 3).DirectGrouping("router", "to")
	rt := start(t, mustBuild(t, b), quietConfig())
	rec.waitFor(t, "acks", func(a, f int) bool { return a == 30 })
	stop(t, rt)
	mu.Lock()
	defer mu.Unlock()
	for id := range 30 {
		if got[id] != id%3 {
			t.Fatalf("id %d went to task index %d, want %d", id, got[id], id%3)
		}
	}
	for _, err := range errs {
		if !errors.Is(err, topology.ErrDirect) {
			t.Fatalf("wrong direct emit gave %v, want ErrDirect", err)
		}
	}
}

// R16: retry state keyed by the logical message. Every attempt is a new tree (new
// root) but the spout gets back its own message id, so a cap of 5 attempts holds.
func TestRetryKeyedByLogicalMessage(t *testing.T) {
	const n, maxAttempts = 20, 5
	var mu sync.Mutex
	attempts := map[string]int{}
	dead := map[string]bool{}
	b := topology.NewBuilder()
	b.SetSpout("s", func() topology.Spout {
		return &retrySpout{n: n, max: maxAttempts, mu: &mu, attempts: attempts, dead: dead}
	}, 1).Output("id")
	b.SetBolt("b", bolt(func(b *fnBolt, t *tuple.Tuple) { _ = b.out.Fail(t) }), 2).ShuffleGrouping("s")
	rt := start(t, mustBuild(t, b), quietConfig())
	waitStat(t, rt, "every message to die", func(Stats) bool { mu.Lock(); defer mu.Unlock(); return len(dead) == n })
	stop(t, rt)
	for k, a := range attempts {
		if a != maxAttempts {
			t.Fatalf("%s: %d attempts, want %d", k, a, maxAttempts)
		}
	}
	if c := rt.Stats().Components["s"]; c.Failed != n*maxAttempts || c.Emitted != n*maxAttempts {
		t.Fatalf("spout failed %d emitted %d, want %d", c.Failed, c.Emitted, n*maxAttempts)
	}
}

type retrySpout struct {
	n, max, next int
	mu           *sync.Mutex
	attempts     map[string]int
	dead         map[string]bool
	again        []string
	out          topology.SpoutCollector
}

func (s *retrySpout) Open(_ context.Context, _ topology.TaskContext, out topology.SpoutCollector) error {
	s.out = out
	return nil
}
func (s *retrySpout) NextTuple() {
	var id string
	switch {
	case len(s.again) > 0:
		id, s.again = s.again[0], s.again[1:]
	case s.next < s.n:
		id = fmt.Sprintf("msg-%d", s.next)
		s.next++
	default:
		return
	}
	s.mu.Lock()
	s.attempts[id]++
	s.mu.Unlock()
	_ = s.out.Emit(tuple.Values{id}, id)
}
func (s *retrySpout) Ack(any) {}
func (s *retrySpout) Fail(msgID any) {
	id := msgID.(string)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.attempts[id] >= s.max {
		s.dead[id] = true // dead-letter: give up, keep the record
		return
	}
	s.again = append(s.again, id)
}
func (s *retrySpout) Close() error { return nil }

// R7 (STORM-1549): ResetTimeout keeps a slow tuple's tree alive past the timeout: on
// a fake clock, the tuple is held for 3 timeouts (12 rotations), its timeout reset
// before each rotation (once the acker has handled the reset before it).
func TestResetTimeoutKeepsTreeAlive(t *testing.T) {
	rec := newRecorder()
	held := make(chan *tuple.Tuple, 1)
	outs := make(chan topology.OutputCollector, 1)
	b := topology.NewBuilder()
	b.SetSpout("s", func() topology.Spout { return &listSpout{rec: rec, n: 1} }, 1).Output("id")
	b.SetBolt("slow", holdBolt(held, outs), 1).ShuffleGrouping("s")
	cfg := quietConfig()
	cfg.MessageTimeout = 400 * time.Millisecond
	f := startFake(t, mustBuild(t, b), cfg)
	out, in := receive(t, outs, 1)[0], receive(t, held, 1)[0]
	for i := uint64(1); i <= 12; i++ {
		if err := out.ResetTimeout(in); err != nil {
			t.Fatal(err)
		}
		waitStat(t, f.rt, fmt.Sprintf("the acker to handle reset %d", i), func(s Stats) bool { return s.Acker.Resets == i })
		f.rotate()
	}
	if err := out.Ack(in); err != nil {
		t.Fatal(err)
	}
	rec.waitFor(t, "the outcome", func(a, f int) bool { return a+f == 1 })
	s := f.rt.Stats()
	if a, f := rec.counts(); a != 1 || f != 0 || s.Acker.Resets != 12 {
		t.Fatalf("acks %d fails %d resets %d", a, f, s.Acker.Resets)
	}
}

// resetSpout is a listSpout told of its trees' timeout resets.
type resetSpout struct {
	listSpout
	resets chan any
}

func (s *resetSpout) TimeoutReset(msgID any) { s.resets <- msgID }

// A TimeoutResetSpout is told each time a bolt restarts the timeout of one of its
// trees (as a JetStream spout sends InProgress then); a plain spout is not.
func TestTimeoutResetSpoutIsTold(t *testing.T) {
	rec := newRecorder()
	sp := &resetSpout{listSpout: listSpout{rec: rec, n: 2}, resets: make(chan any, 8)}
	b := topology.NewBuilder()
	b.SetSpout("s", func() topology.Spout { return sp }, 1).Output("id")
	b.SetBolt("b", bolt(func(b *fnBolt, t *tuple.Tuple) {
		if t.Values()[0] == 1 { // tree 1: two resets, then done
			for range 2 {
				if err := b.out.ResetTimeout(t); err != nil {
					panic(err)
				}
			}
		}
		_ = b.out.Ack(t)
	}), 1).ShuffleGrouping("s")
	rt := start(t, mustBuild(t, b), quietConfig())
	rec.waitFor(t, "both trees", func(a, f int) bool { return a == 2 })
	for range 2 {
		select {
		case id := <-sp.resets:
			if id != 1 {
				t.Fatalf("TimeoutReset(%v), want msgID 1", id)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("the spout was not told of the reset")
		}
	}
	stop(t, rt)
	select {
	case id := <-sp.resets:
		t.Fatalf("a third TimeoutReset(%v)", id)
	default:
	}
}

// Stop waits for pending trees, then closes every task; with a short deadline it gives
// up and says how many trees were abandoned.
func TestGracefulStop(t *testing.T) {
	rec := newRecorder()
	held := make(chan *tuple.Tuple, 5)
	outs := make(chan topology.OutputCollector, 5)
	var closed atomic.Int32
	b := topology.NewBuilder()
	b.SetSpout("s", func() topology.Spout {
		return &closingSpout{listSpout: listSpout{rec: rec, n: 5}, closed: &closed}
	}, 1).Output("id")
	b.SetBolt("b", holdBolt(held, outs), 1).ShuffleGrouping("s")
	rt := start(t, mustBuild(t, b), quietConfig())
	var ts []*tuple.Tuple
	var cs []topology.OutputCollector
	for range 5 {
		ts, cs = append(ts, <-held), append(cs, <-outs)
	}
	stopped := make(chan error, 1)
	go func() { stopped <- rt.Stop(context.Background()) }()
	waitStat(t, rt, "stop to begin", func(Stats) bool { return rt.stopping.Load() })
	select {
	case err := <-stopped:
		t.Fatalf("Stop returned %v with 5 trees pending", err)
	default:
	}
	for i := range ts {
		_ = cs[i].Ack(ts[i])
	}
	if err := <-stopped; err != nil {
		t.Fatal(err)
	}
	if a, _ := rec.counts(); a != 5 || closed.Load() != 1 {
		t.Fatalf("acks %d, spout closed %d times", a, closed.Load())
	}

	// Now a bolt that never acks and a 100 ms deadline.
	rec2 := newRecorder()
	b2 := topology.NewBuilder()
	b2.SetSpout("s", func() topology.Spout { return &listSpout{rec: rec2, n: 3} }, 1).Output("id")
	b2.SetBolt("b", bolt(func(*fnBolt, *tuple.Tuple) {}), 1).ShuffleGrouping("s")
	rt2 := start(t, mustBuild(t, b2), quietConfig())
	waitStat(t, rt2, "3 executes", func(s Stats) bool { return s.Components["b"].Executed == 3 })
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	err := rt2.Stop(ctx)
	if !errors.Is(err, ErrShutdownTimeout) || err.Error() != "gale: shutdown deadline passed with trees pending: 3 trees" {
		t.Fatalf("Stop = %v", err)
	}
}

type closingSpout struct {
	listSpout
	closed *atomic.Int32
}

func (s *closingSpout) Close() error { s.closed.Add(1); return nil }

// Emits that do not match the declaration are refused with errors that name the
// problem, and nothing is sent.
func TestEmitErrors(t *testing.T) {
	rec := newRecorder()
	var mu sync.Mutex
	var errs []error
	b := topology.NewBuilder()
	b.SetSpout("s", func() topology.Spout { return &listSpout{rec: rec, n: 1} }, 1).Output("id")
	b.SetBolt("a", bolt(func(b *fnBolt, t *tuple.Tuple) {
		mu.Lock()
		errs = append(errs, b.out.EmitTo("nope", t.Values(), t), b.out.Emit(tuple.Values{1, 2}, t))
		mu.Unlock()
		_ = b.out.Ack(t)
	}), 1).ShuffleGrouping("s").Output("id")
	b.SetBolt("c", ackAll, 1).ShuffleGrouping("a")
	rt := start(t, mustBuild(t, b), quietConfig())
	rec.waitFor(t, "ack", func(a, f int) bool { return a == 1 })
	stop(t, rt)
	mu.Lock()
	defer mu.Unlock()
	if !errors.Is(errs[0], topology.ErrUnknownStream) || errs[0].Error() != `gale: undeclared stream: "a" emits on stream "nope", which it does not declare` {
		t.Fatalf("undeclared stream: %v", errs[0])
	}
	if !errors.Is(errs[1], topology.ErrFieldCount) || errs[1].Error() != `gale: values do not match declared fields: stream "default" of "a" declares 1 fields [id], emit has 2 values` {
		t.Fatalf("field count: %v", errs[1])
	}
	if s := rt.Stats().Components["a"]; s.Emitted != 0 || s.Transferred != 0 {
		t.Fatalf("a emitted %d", s.Emitted)
	}
}

// Tick tuples let a bolt batch its inputs and ack them every T (the sink pattern).
func TestTickTuplesFlushBatches(t *testing.T) {
	rec := newRecorder()
	var ticksSeen atomic.Int32
	b := topology.NewBuilder()
	b.SetSpout("s", func() topology.Spout { return &listSpout{rec: rec, n: 500} }, 1).Output("id")
	b.SetBolt("batcher", func() topology.Bolt {
		var batch []*tuple.Tuple
		return &fnBolt{execute: func(b *fnBolt, t *tuple.Tuple) {
			if !t.IsTick() {
				batch = append(batch, t)
				return
			}
			ticksSeen.Add(1)
			if t.SourceComponent() != "__system" || t.SourceStream() != "__tick" || t.Anchored() {
				panic("bad tick " + t.String())
			}
			if _, ok := t.ValueByField("time").(time.Time); !ok {
				panic("tick without time")
			}
			_ = b.out.Ack(t) // harmless, and not counted: a tick is no input
			for _, in := range batch {
				_ = b.out.Ack(in)
			}
			batch = batch[:0]
		}}
	}, 2).ShuffleGrouping("s").TickEvery(10 * time.Millisecond)
	rt := start(t, mustBuild(t, b), quietConfig())
	rec.waitFor(t, "all acks", func(a, f int) bool { return a == 500 })
	stop(t, rt)
	c := rt.Stats().Components["batcher"]
	if ticksSeen.Load() == 0 || uint64(ticksSeen.Load()) != c.Ticks || c.Executed != 500 || c.Acked != 500 || c.ProcessLatency.Count() != 500 || c.MisuseTotal() != 0 {
		t.Fatalf("ticks seen %d, stats %+v", ticksSeen.Load(), c)
	}
}

// parity routes even ids to the first target and odd ids to the second.
type parity struct{ targets []int }

func (p *parity) Prepare(_ *tuple.Source, targets []int) error { p.targets = targets; return nil }
func (p *parity) ChooseTasks(values tuple.Values, dst []int) []int {
	id := values[0].(int)
	if id < 0 {
		return append(dst, 9999) // not a target: the emit must be refused
	}
	return append(dst, p.targets[id%2])
}

// Custom, none, local-or-shuffle and global groupings route as documented.
func TestOtherGroupings(t *testing.T) {
	rec := newRecorder()
	var mu sync.Mutex
	got := map[string]map[int]int{} // consumer -> task index -> count
	var customErr error
	note := func(name string) func() topology.Bolt {
		return bolt(func(b *fnBolt, t *tuple.Tuple) {
			mu.Lock()
			if got[name] == nil {
				got[name] = map[int]int{}
			}
			got[name][b.tc.TaskIndex]++
			if name == "custom" && t.Value(0).(int)%2 != b.tc.TaskIndex {
				customErr = fmt.Errorf("id %d reached task index %d", t.Value(0), b.tc.TaskIndex)
			}
			mu.Unlock()
			_ = b.out.Ack(t)
		})
	}
	var refused error
	b := topology.NewBuilder()
	b.SetSpout("s", func() topology.Spout {
		return &listSpout{rec: rec, n: 100, onNext: func(out topology.SpoutCollector) {
			if refused == nil {
				refused = out.Emit(tuple.Values{-1}, nil)
			}
		}}
	}, 1).Output("id")
	b.SetBolt("custom", note("custom"), 2).CustomGrouping("s", "default", func() topology.CustomGrouping { return &parity{} })
	b.SetBolt("none", note("none"), 2).NoneGrouping("s")
	b.SetBolt("local", note("local"), 2).LocalOrShuffleGrouping("s")
	b.SetBolt("global", note("global"), 3).GlobalGrouping("s")
	rt := start(t, mustBuild(t, b), quietConfig())
	rec.waitFor(t, "acks", func(a, f int) bool { return a == 100 })
	stop(t, rt)
	mu.Lock()
	defer mu.Unlock()
	if customErr != nil || got["custom"][0] != 50 || got["custom"][1] != 50 {
		t.Fatalf("custom: %v %v", got["custom"], customErr)
	}
	if got["none"][0] != 50 || got["none"][1] != 50 || got["local"][0] != 50 || got["local"][1] != 50 {
		t.Fatalf("none %v local %v: want an even spread", got["none"], got["local"])
	}
	if len(got["global"]) != 1 || got["global"][0] != 100 {
		t.Fatalf("global: %v, want all 100 on task index 0", got["global"])
	}
	if refused == nil || !strings.Contains(refused.Error(), "custom grouping to \"custom\" chose task 9999") {
		t.Fatalf("custom grouping choosing a non-target: %v", refused)
	}
}
