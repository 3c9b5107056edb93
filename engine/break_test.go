package engine

import (
	"context"
	"errors"
	"fmt"
	goruntime "runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gale-stream/gale/codec"
	"github.com/gale-stream/gale/internal/waitfor"
	"github.com/gale-stream/gale/topology"
	"github.com/gale-stream/gale/transport"
	"github.com/gale-stream/gale/transport/transporttest"
	"github.com/gale-stream/gale/tuple"
)

// idSpout emits n tracked trees, ids "task/i", unique across its tasks, and records
// what it is told.
type idSpout struct {
	rec   *recorder
	n, i  int
	task  int
	out   topology.SpoutCollector
	allow *atomic.Int64 // if set, emits only ids below it
}

func (s *idSpout) Open(_ context.Context, tc topology.TaskContext, out topology.SpoutCollector) error {
	s.out, s.task = out, tc.TaskID
	return nil
}

func (s *idSpout) NextTuple() {
	if s.i >= s.n || s.allow != nil && int64(s.i) >= s.allow.Load() {
		return
	}
	id := fmt.Sprintf("%d/%d", s.task, s.i)
	s.i++
	if err := s.out.Emit([]any{id}, id); err != nil {
		panic(err)
	}
}
func (s *idSpout) Ack(id any)   { s.rec.note("ack", id) }
func (s *idSpout) Fail(id any)  { s.rec.note("fail", id) }
func (s *idSpout) Close() error { return nil }

// lossyRun is one run of a three-host topology over a Faulty transport: how it
// ended and what the spouts were told.
type lossyRun struct {
	emitted, acked, failed, timedOut, abandoned int
	rec                                         *recorder
	stopErr                                     error
	stopTook                                    time.Duration
}

// runLossy runs spout(2) -> pass(3, shuffle) -> sink(3, fields) with 3 ackers as
// three engines over a serialising Faulty made with opts, until every tree has an
// outcome (bounded), then stops host 1 and waits for every engine's Done
// (bounded). It fails the test on a hang.
func runLossy(t *testing.T, n int, opts ...transporttest.FaultOption) lossyRun {
	t.Helper()
	rec := newRecorder()
	b := topology.NewBuilder()
	b.SetSpout("s", func() topology.Spout { return &idSpout{rec: rec, n: n} }, 2).Output("id")
	b.SetBolt("pass", passOn, 3).ShuffleGrouping("s").Output("id")
	b.SetBolt("sink", ackAll, 3).FieldsGrouping("pass", "id")
	topo := mustBuild(t, b)
	cfg := quietConfig()
	cfg.Ackers = 3
	cfg.ReceiveQueue = 64 // small windows: credit flow is exercised
	cfg.MessageTimeout = 500 * time.Millisecond
	streams := codec.NewStreams(topo)
	opts = append([]transporttest.FaultOption{transporttest.Serialize(func(m *transport.Message) (*transport.Message, error) {
		return codec.Clone(m, streams)
	})}, opts...)
	f := transporttest.NewFaulty(transport.NewLocal(), opts...)
	var rts []*Runtime
	for _, a := range mustSpread(t, topo, cfg, 3) {
		rt, err := Start(context.Background(), topo, cfg, WithTransport(f), WithAssignment(a))
		if err != nil {
			t.Fatal(err)
		}
		rts = append(rts, rt)
	}
	defer func() {
		for _, rt := range rts {
			rt.hardCancel() // on a failure, leave no goroutine behind
		}
	}()
	total := 2 * n
	waitfor.Until(t, 30*time.Second, func() error {
		if a, fl := rec.counts(); a+fl < total {
			return fmt.Errorf("only %d acked + %d failed of %d trees; faults %+v", a, fl, total, f.Faults())
		}
		return nil
	})
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Second)
	defer cancel()
	began := time.Now()
	run := lossyRun{rec: rec}
	run.stopErr = rts[0].Stop(ctx)
	run.stopTook = time.Since(began)
	if run.stopTook > 5*time.Second {
		t.Log(dumpHosts(rts))
	}
	for i, rt := range rts {
		select {
		case <-rt.Done():
		case <-time.After(10 * time.Second):
			t.Log(dumpHosts(rts))
			t.Fatalf("host %d: Done not closed 10 s after Stop (stop returned %v after %v); faults %+v", i+1, run.stopErr, run.stopTook, f.Faults())
		}
	}
	for _, rt := range rts {
		s := rt.Stats()
		sp := s.Components["s"]
		run.emitted += int(sp.Emitted)
		run.timedOut += int(sp.TimedOut)
		run.abandoned += int(sp.Abandoned)
		run.failed += int(sp.Failed)
		run.acked += int(sp.Acked)
	}
	return run
}

// Every kind of message, dropped at 5% and 20% on its own: every tree still ends
// acked or failed exactly once, Stop returns well within its deadline without
// error, and every engine's Done closes. (Held up, but for the end and end-ack
// cases, which fail now and then, under -race more often: one lost end-ack and a
// peer whose re-send comes three ticks late is the bug of
// TestBreakHostLeavesWhilePeerStillResendsAnEnd.)
func TestBreakLossyEachKind(t *testing.T) {
	kinds := []transport.Kind{transport.KindTuples, transport.KindAcks, transport.KindOutcomes, transport.KindCredit,
		transport.KindProbe, transport.KindEnd, transport.KindEndAck, transport.KindControl}
	for _, k := range kinds {
		for _, frac := range []float64{0.05, 0.2} {
			t.Run(fmt.Sprintf("%s-%v", k, frac), func(t *testing.T) {
				t.Parallel()
				const n = 400
				r := runLossy(t, n, transporttest.Drop(frac, k), transporttest.Seed(int64(k)*100+int64(frac*100)))
				checkLossy(t, r, 2*n)
			})
		}
	}
}

func checkLossy(t *testing.T, r lossyRun, total int) {
	t.Helper()
	a, fl := r.rec.counts()
	if r.emitted != total || a+fl+r.abandoned != total {
		t.Errorf("emitted %d trees; spouts told %d acks + %d fails, %d abandoned: want %d in all", r.emitted, a, fl, r.abandoned, total)
	}
	r.rec.mu.Lock()
	for id, n := range r.rec.acked {
		if n+r.rec.failed[id] != 1 {
			t.Errorf("id %v: %d acks, %d fails", id, n, r.rec.failed[id])
		}
	}
	r.rec.mu.Unlock()
	if r.stopErr != nil || r.stopTook > 5*time.Second {
		t.Errorf("Stop returned %v after %v, with every tree done", r.stopErr, r.stopTook)
	}
	t.Logf("acks %d fails %d (timed out %d) abandoned %d; stop took %v", a, fl, r.timedOut, r.abandoned, r.stopTook)
}

// Everything at once, higher than the three-host proofs: 10% drops of every kind,
// 5% duplicates, 10% reordered within 16.
func TestBreakLossyEverything(t *testing.T) {
	for seed := int64(1); seed <= 4; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			t.Parallel()
			const n = 400
			r := runLossy(t, n, transporttest.Drop(0.1), transporttest.Duplicate(0.05), transporttest.Reorder(0.1, 16), transporttest.Seed(seed))
			checkLossy(t, r, 2*n)
		})
	}
}

// dumpHosts describes each engine's host endpoint: what it still re-sends, and
// whether its tasks have exited.
func dumpHosts(rts []*Runtime) string {
	out := ""
	for i, rt := range rts {
		rt.host.mu.Lock()
		var ops []string
		for id, m := range rt.host.pending {
			ops = append(ops, fmt.Sprintf("req %d op %d to %d", id, m.Op, m.To))
		}
		var ends []string
		for _, k := range rt.host.ends.Due(1<<62, nil) { // (marks them re-sent: a dump only)
			ends = append(ends, fmt.Sprintf("end task %d to host %d", k.task, k.host))
		}
		rt.host.mu.Unlock()
		workers := false
		select {
		case <-rt.workersDone:
			workers = true
		default:
		}
		done := false
		select {
		case <-rt.done:
			done = true
		default:
		}
		out += fmt.Sprintf("host %d: workers done %v, done %v, pending %v, ends %v\n", i+1, workers, done, ops, ends)
	}
	return out
}

// A host left (runHost returned) once its own ends and requests were acknowledged
// and it had heard nothing for three ticks; but a peer may still be
// re-sending an end whose acknowledgement was lost, and three of its re-sends in a
// row can be lost (or held back by reordering). Once the host has left, nobody
// acknowledges that end again, so the peer re-sends it forever:
//   - on the host that called Stop, Stop waits out its whole deadline (and returns
//     nil) though every tree was done in milliseconds;
//   - on a host stopped by message, which has no deadline of its own, Done never
//     closes (its host goroutine and ticker leak) unless the caller's Stop expired.
//
// Now a finished host lingers ten quiet intervals, then says goodbye (three copies),
// and a peer told goodbye stops waiting for it.
//
// Here ends and end-acks are lost at 50% (each is re-sent until acknowledged, so the
// contract says this may only delay the stop); it happens at lower rates too (10% of
// every kind with duplicates and reordering: TestBreakLossyEverything).
func TestBreakHostLeavesWhilePeerStillResendsAnEnd(t *testing.T) {
	for seed := int64(1); seed <= 12; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			t.Parallel()
			const n = 50
			r := runLossy(t, n, transporttest.Drop(0.5, transport.KindEnd, transport.KindEndAck), transporttest.Seed(seed))
			checkLossy(t, r, 2*n)
		})
	}
}

// twoHosts starts spout s (1 task, host 1) -> b (2 tasks, shuffle: one per host)
// with 2 ackers (one per host), as engines 1 and 2 on tr; engine 2's Start context
// is returned for the test to cancel (a process that dies).
func twoHosts(t *testing.T, rec *recorder, n int, cfg topology.Config, tr transport.Transport, bolt func() topology.Bolt) (h1, h2 *Runtime, kill2 context.CancelFunc) {
	t.Helper()
	b := topology.NewBuilder()
	b.SetSpout("s", func() topology.Spout { return &idSpout{rec: rec, n: n} }, 1).Output("id")
	b.SetBolt("b", bolt, 2).ShuffleGrouping("s")
	topo := mustBuild(t, b)
	cfg.Ackers = 2
	of := map[int]int{1: 1, 2: 1, 3: 2, 4: 1, 5: 2}
	ctx2, kill2 := context.WithCancel(context.Background())
	var err error
	if h1, err = Start(context.Background(), topo, cfg, WithTransport(tr), WithAssignment(Assignment{Host: 1, Of: of})); err != nil {
		t.Fatal(err)
	}
	if h2, err = Start(ctx2, topo, cfg, WithTransport(tr), WithAssignment(Assignment{Host: 2, Of: of})); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { kill2(); h1.hardCancel(); h2.hardCancel() })
	return h1, h2, kill2
}

// A peer dies (its Start context is cancelled: a hard stop of that process only).
// The survivor's spout used to use up its credit on the edge to the dead
// host's bolt task and waits in waitCredit (probing a host that never answers), on
// its own goroutine: it no longer rotates its pending map, so none of its pending
// trees ever timed out or failed (not even those on the live host), and it never
// called NextTuple again; only a Stop ended the wait (abandoning every tree). Now
// a send gives up after a message timeout and the edge stalls until a grant. The
// message timeout promises that a tree ends within 1.25 timeouts, later only while
// the spout task is stalled; here the stall has no end.
func TestBreakDeadPeerTreesTimeOut(t *testing.T) {
	rec := newRecorder()
	cfg := quietConfig()
	cfg.MessageTimeout = 300 * time.Millisecond
	cfg.ReceiveQueue = 64
	h1, h2, kill2 := twoHosts(t, rec, 1000, cfg, transport.NewLocal(), ackAll)
	rec.waitFor(t, "some trees acked while both hosts run", func(a, f int) bool { return a >= 50 })
	kill2()
	select {
	case <-h2.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("host 2 did not stop after its context was cancelled")
	}
	// Every tree the spout emitted must now end within about 1.25 message timeouts;
	// wait up to 20 of them.
	waitfor.Until(t, 20*cfg.MessageTimeout, func() error {
		a, f := rec.counts()
		s := h1.Stats().Components["s"]
		if emitted := int(s.Emitted); a+f != emitted || emitted != 1000 {
			return fmt.Errorf("dead peer: spout emitted %d of 1000, told %d acks + %d fails, %d pending, backpressure %v: trees neither time out nor fail",
				emitted, a, f, s.Pending, s.Backpressure)
		}
		return nil
	})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	began := time.Now()
	err := h1.Stop(ctx)
	took := time.Since(began)
	t.Logf("survivor Stop: %v after %v", err, took)
	select {
	case <-h1.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("survivor's Done not closed")
	}
}

// A dead peer and the survivor's Stop: the survivor's trees that went to the dead
// host time out and fail (its edges to it stall and drop after a message timeout),
// the dead host's goodbye means no end waits for it, so the Stop returns within its
// deadline and grace with every tree accounted (acked, failed or abandoned), and
// Done closes.
func TestBreakDeadPeerSurvivorStop(t *testing.T) {
	rec := newRecorder()
	cfg := quietConfig()
	cfg.MessageTimeout = 300 * time.Millisecond
	cfg.ReceiveQueue = 64
	h1, h2, kill2 := twoHosts(t, rec, 1000, cfg, transport.NewLocal(), ackAll)
	rec.waitFor(t, "some trees acked while both hosts run", func(a, f int) bool { return a >= 50 })
	kill2()
	<-h2.Done()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	began := time.Now()
	err := h1.Stop(ctx)
	took := time.Since(began)
	if took > 2*time.Second+2*stopGrace+time.Second {
		t.Errorf("survivor Stop took %v with a 2 s deadline", took)
	}
	s := h1.Stats().Components["s"]
	a, f := rec.counts()
	if (err != nil && !errors.Is(err, ErrShutdownTimeout)) || a+f+s.Abandoned != int(s.Emitted) {
		t.Errorf("survivor Stop: %v after %v; emitted %d, %d acks + %d fails + %d abandoned", err, took, s.Emitted, a, f, s.Abandoned)
	}
	select {
	case <-h1.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("survivor's Done not closed after Stop")
	}
	t.Logf("survivor Stop: %v after %v", err, took)
}

// misuseTopo is s(1) -> b(2) with 1 acker: tasks 1..4.
func misuseTopo(t *testing.T) (*topology.Topology, topology.Config) {
	b := topology.NewBuilder()
	b.SetSpout("s", func() topology.Spout { return &idSpout{rec: newRecorder(), n: 10} }, 1).Output("id")
	b.SetBolt("b", ackAll, 2).ShuffleGrouping("s")
	cfg := quietConfig()
	cfg.Ackers = 1
	return mustBuild(t, b), cfg
}

// An Assignment that named what is wrong only in part: host 0 or a negative host
// was taken as host 1 without a word (the doc numbers hosts from 1; an engine
// told it is host 0 then collides with host 1, or silently does host 1's work), and
// a task id the topology does not have is reported only as a count ("names 5
// tasks, the topology has 4"), without the id.
func TestBreakAssignmentErrorsNameWhatIsWrong(t *testing.T) {
	topo, cfg := misuseTopo(t)
	full := func(extra map[int]int) map[int]int {
		of := map[int]int{1: 1, 2: 1, 3: 2, 4: 2}
		for k, v := range extra {
			of[k] = v
		}
		return of
	}
	cases := []struct {
		name string
		a    Assignment
		want string
	}{
		{"host 0", Assignment{Host: 0, Of: full(nil)}, "host 0"},
		{"host -1", Assignment{Host: -1, Of: full(nil)}, "host -1"},
		{"unknown task 99", Assignment{Host: 1, Of: full(map[int]int{99: 1})}, "task 99"},
		{"unknown task 0", Assignment{Host: 1, Of: full(map[int]int{0: 1})}, "task 0"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			rt, err := Start(ctx, topo, cfg, WithTransport(transport.NewLocal()), WithAssignment(c.a))
			if err == nil {
				cancel()
				<-rt.Done()
				t.Fatalf("Start accepted %+v", c.a)
			}
			if !errors.Is(err, topology.ErrConfig) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %q does not name %q", err, c.want)
			}
		})
	}
}

// Two engines claiming one host, and a transport already closed: Start fails and
// says so (held up; kept as a guard).
func TestBreakStartRefusesDuplicateHostAndClosedTransport(t *testing.T) {
	topo, cfg := misuseTopo(t)
	of := map[int]int{1: 1, 2: 1, 3: 2, 4: 2}
	tr := transport.NewLocal()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	rt, err := Start(ctx, topo, cfg, WithTransport(tr), WithAssignment(Assignment{Host: 1, Of: of}))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { cancel(); <-rt.Done() }()
	if _, err := Start(ctx, topo, cfg, WithTransport(tr), WithAssignment(Assignment{Host: 1, Of: of})); err == nil || !strings.Contains(err.Error(), "host 1") || !strings.Contains(err.Error(), "twice") {
		t.Fatalf("second engine on host 1: %v", err)
	}
	closed := transport.NewLocal()
	_ = closed.Close()
	if _, err := Start(ctx, topo, cfg, WithTransport(closed)); !errors.Is(err, transport.ErrClosed) {
		t.Fatalf("closed transport: %v", err)
	}
}

// failOnce is a bolt whose Prepare fails the first time it is called per *int.
func failOnce(calls *atomic.Int32) func() topology.Bolt {
	return func() topology.Bolt {
		return &prepFail{calls: calls}
	}
}

type prepFail struct {
	fnBolt
	calls *atomic.Int32
}

func (p *prepFail) Prepare(ctx context.Context, tc topology.TaskContext, out topology.OutputCollector) error {
	if p.calls.Add(1) == 1 {
		return errors.New("database not up yet")
	}
	p.execute = func(b *fnBolt, t *tuple.Tuple) { _ = b.out.Ack(t) }
	return p.fnBolt.Prepare(ctx, tc, out)
}

// A Start that failed (a Prepare error) closed the tasks it made but left every
// endpoint it registered (its host endpoint, its tasks') in the shared transport,
// which had no way to unregister one: a second Start of that host on the same
// transport (the retry a supervisor makes) failed with "endpoint -1 registered
// twice". Transports now have Unregister, and an engine unregisters its endpoints
// when Start fails and when it is done.
func TestBreakFailedStartPoisonsSharedTransport(t *testing.T) {
	var calls atomic.Int32
	b := topology.NewBuilder()
	b.SetSpout("s", func() topology.Spout { return &idSpout{rec: newRecorder(), n: 10} }, 1).Output("id")
	b.SetBolt("b", failOnce(&calls), 1).ShuffleGrouping("s")
	topo := mustBuild(t, b)
	cfg := quietConfig()
	tr := transport.NewLocal()
	if _, err := Start(context.Background(), topo, cfg, WithTransport(tr)); err == nil || !strings.Contains(err.Error(), "database not up yet") {
		t.Fatalf("first Start: %v", err)
	}
	rt, err := Start(context.Background(), topo, cfg, WithTransport(tr))
	if err != nil {
		t.Fatalf("retry of a failed Start on the same transport: %v", err)
	}
	stop(t, rt)
}

// ClusterStats on an engine that had stopped (Done closed) sent its requests and
// then waited for replies nobody would read (its host loop had exited): it returned
// only when ctx ended, naming the other hosts as the ones that did not answer; with
// context.Background() it never returned. Now it says at once that it has stopped.
func TestBreakClusterStatsAfterStopReturnsPromptly(t *testing.T) {
	rec := newRecorder()
	b := topology.NewBuilder()
	b.SetSpout("s", func() topology.Spout { return &idSpout{rec: rec, n: 20} }, 1).Output("id")
	b.SetBolt("b", ackAll, 2).ShuffleGrouping("s")
	topo := mustBuild(t, b)
	cfg := quietConfig()
	cfg.Ackers = 2
	rts := startHosts(t, topo, cfg, 2, transport.NewLocal())
	rec.waitFor(t, "trees acked", func(a, f int) bool { return a == 20 })
	stop(t, rts[0])
	for _, rt := range rts {
		<-rt.Done()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	began := time.Now()
	_, err := rts[0].ClusterStats(ctx)
	if took := time.Since(began); took > time.Second {
		t.Fatalf("ClusterStats after Stop returned after %v (its context's whole deadline): %v", took, err)
	}
	if err == nil {
		t.Fatal("ClusterStats after Stop claims every host answered")
	}
}

// Stop called concurrently, and again after Done, with Stats read throughout:
// no panic, no hang, the same answer.
func TestBreakStopConcurrentAndTwice(t *testing.T) {
	rec := newRecorder()
	b := topology.NewBuilder()
	b.SetSpout("s", func() topology.Spout { return &idSpout{rec: rec, n: 2000} }, 2).Output("id")
	b.SetBolt("b", passOn, 2).ShuffleGrouping("s").Output("id")
	b.SetBolt("c", ackAll, 2).ShuffleGrouping("b")
	topo := mustBuild(t, b)
	cfg := quietConfig()
	cfg.Ackers = 2
	rts := startHosts(t, topo, cfg, 3, transport.NewLocal())
	rec.waitFor(t, "some trees acked", func(a, f int) bool { return a > 100 })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	errs := make(chan error, 4)
	statsDone := make(chan struct{})
	go func() {
		defer close(statsDone)
		for {
			for _, rt := range rts {
				_ = rt.Stats()
			}
			select {
			case <-rts[0].Done():
				return
			default:
			}
		}
	}()
	for _, rt := range []*Runtime{rts[0], rts[0], rts[1], rts[2]} {
		go func() { errs <- rt.Stop(ctx) }()
	}
	for range 4 {
		select {
		case err := <-errs:
			if err != nil {
				t.Errorf("concurrent Stop: %v", err)
			}
		case <-ctx.Done():
			t.Fatal("concurrent Stops did not return")
		}
	}
	<-statsDone
	if err := rts[0].Stop(ctx); err != nil {
		t.Errorf("Stop after Done: %v", err)
	}
	a, f := rec.counts()
	var ab int
	for _, rt := range rts {
		ab += rt.Stats().Components["s"].Abandoned
	}
	if ab != 0 || a+f == 0 {
		t.Errorf("after concurrent Stops: %d acks, %d fails, %d abandoned", a, f, ab)
	}
}

// Stop while the spout waits for credit from a bolt stuck in Execute (on another
// host): Stop gives up at its deadline plus the documented grace with
// ErrShutdownTimeout, every tree is acked, failed or abandoned, and Done closes
// once Execute returns. A bolt's own goroutine that emits or acks after Cleanup
// gets ErrStopped (counted as misuse), never a panic or a block.
func TestBreakStopWhileProducerWaitsOnStuckBolt(t *testing.T) {
	rec := newRecorder()
	release := make(chan struct{})
	entered := make(chan struct{}, 1)
	late := make(chan error, 2)
	var cleaned sync.WaitGroup
	cleaned.Add(2)
	stuck := func() topology.Bolt {
		return &cleanupBolt{fnBolt: fnBolt{execute: func(b *fnBolt, tp *tuple.Tuple) {
			select {
			case entered <- struct{}{}:
			default:
			}
			<-release
			_ = b.out.Ack(tp)
		}}, cleaned: &cleaned, late: late}
	}
	cfg := quietConfig()
	cfg.ReceiveQueue = 32
	cfg.MessageTimeout = 30 * time.Second
	h1, h2, _ := twoHosts(t, rec, 100000, cfg, transport.NewLocal(), stuck)
	select {
	case <-entered:
	case <-time.After(10 * time.Second):
		t.Fatal("bolt never executed")
	}
	// Wait until the spout is blocked for credit.
	waitfor.True(t, 10*time.Second, "spout blocked for credit", func() bool { return h1.Stats().Components["s"].Backpressure > 50*time.Millisecond })
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	began := time.Now()
	err := h1.Stop(ctx)
	took := time.Since(began)
	if !errors.Is(err, ErrShutdownTimeout) || took > time.Second+2*stopGrace+time.Second {
		t.Errorf("Stop: %v after %v", err, took)
	}
	close(release)
	for i, rt := range []*Runtime{h1, h2} {
		select {
		case <-rt.Done():
		case <-time.After(10 * time.Second):
			t.Fatalf("host %d: Done not closed after Execute returned", i+1)
		}
	}
	cleaned.Wait()
	for range 2 {
		if err := <-late; !errors.Is(err, topology.ErrStopped) {
			t.Errorf("emit after Cleanup: %v", err)
		}
	}
	s1 := h1.Stats().Components["s"]
	a, f := rec.counts()
	if a+f+s1.Abandoned != int(s1.Emitted) {
		t.Errorf("emitted %d, %d acks + %d fails + %d abandoned", s1.Emitted, a, f, s1.Abandoned)
	}
	t.Logf("Stop: %v after %v; emitted %d, %d acks, %d fails, %d abandoned", err, took, s1.Emitted, a, f, s1.Abandoned)
}

// cleanupBolt emits from a goroutine of its own once Cleanup has run.
type cleanupBolt struct {
	fnBolt
	cleaned *sync.WaitGroup
	late    chan error
}

func (c *cleanupBolt) Cleanup() error {
	out := c.out
	go func() {
		defer c.cleaned.Done()
		c.late <- out.Emit(tuple.Values{"late"})
	}()
	return nil
}

// engineGoroutines returns the stacks of goroutines running engine code (not this
// test's own).
func engineGoroutines() []string {
	buf := make([]byte, 1<<22)
	buf = buf[:goruntime.Stack(buf, true)]
	var out []string
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "gale/engine.(*") || strings.Contains(g, "gale/engine.Start") {
			if !strings.Contains(g, "gale/engine.TestBreak") {
				out = append(out, g)
			}
		}
	}
	return out
}

// After a lossy three-host run every engine goroutine ends (no leak). (Ends and
// end-acks are not dropped here: see TestBreakHostLeavesWhilePeerStillResendsAnEnd.)
func TestBreakNoGoroutineLeftAfterLossyRun(t *testing.T) {
	r := runLossy(t, 200, transporttest.Drop(0.05, transport.KindTuples, transport.KindAcks, transport.KindOutcomes,
		transport.KindCredit, transport.KindProbe, transport.KindControl), transporttest.Duplicate(0.02), transporttest.Seed(3))
	checkLossy(t, r, 400)
	// A goroutine's exit is no event to wait on: the stacks are polled.
	waitfor.Until(t, 5*time.Second, func() error {
		if left := engineGoroutines(); len(left) > 0 {
			return fmt.Errorf("%d engine goroutines left after every Done:\n%s", len(left), strings.Join(left, "\n\n"))
		}
		return nil
	})
}

// Spread with n < 1 hosts panicked (integer divide by zero); it refuses instead.
func TestBreakSpreadOverNoHosts(t *testing.T) {
	topo, cfg := misuseTopo(t)
	for _, n := range []int{0, -1} {
		func() {
			defer func() {
				if p := recover(); p != nil {
					t.Errorf("Spread(topo, cfg, %d) panicked: %v", n, p)
				}
			}()
			if _, err := Spread(topo, cfg, n); !errors.Is(err, topology.ErrConfig) || !strings.Contains(err.Error(), fmt.Sprintf("%d hosts", n)) {
				t.Errorf("Spread(topo, cfg, %d) = %v, want an ErrConfig naming %d hosts", n, err, n)
			}
		}()
	}
}

// A dead peer that hosted only an acker: the survivor's trees whose acker it was
// time out and are failed to the spout (charged), the others are acked; none hangs.
func TestBreakDeadAckerHostTreesTimeOut(t *testing.T) {
	rec := newRecorder()
	b := topology.NewBuilder()
	var allow atomic.Int64
	allow.Store(10)
	b.SetSpout("s", func() topology.Spout { return &idSpout{rec: rec, n: 400, allow: &allow} }, 1).Output("id")
	b.SetBolt("b", ackAll, 1).ShuffleGrouping("s")
	topo := mustBuild(t, b)
	cfg := quietConfig()
	cfg.Ackers = 2
	cfg.MessageTimeout = 300 * time.Millisecond
	of := map[int]int{1: 1, 2: 1, 3: 1, 4: 2}
	ctx2, kill2 := context.WithCancel(context.Background())
	tr := transport.NewLocal()
	h1, err := Start(context.Background(), topo, cfg, WithTransport(tr), WithAssignment(Assignment{Host: 1, Of: of}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h1.hardCancel() })
	h2, err := Start(ctx2, topo, cfg, WithTransport(tr), WithAssignment(Assignment{Host: 2, Of: of}))
	if err != nil {
		t.Fatal(err)
	}
	rec.waitFor(t, "the first trees acked", func(a, f int) bool { return a == 10 })
	kill2()
	<-h2.Done()
	allow.Store(400)
	rec.waitFor(t, "every tree acked or failed", func(a, f int) bool { return a+f == 400 })
	a, f := rec.counts()
	if a == 0 || f == 0 {
		t.Errorf("%d acks, %d fails: want both (half the roots go to the dead acker)", a, f)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	err = h1.Stop(ctx)
	select {
	case <-h1.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("survivor's Done not closed")
	}
	t.Logf("%d acks, %d fails; survivor Stop: %v", a, f, err)
}
