package worker

import (
	"context"
	"errors"
	"github.com/gale-stream/gale/internal/natstest"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/gale-stream/gale/cluster"
	"github.com/gale-stream/gale/internal/leaktest"
	"github.com/gale-stream/gale/internal/testtopo"
	"github.com/gale-stream/gale/topology"
	"github.com/gale-stream/gale/tuple"
)

func TestMain(m *testing.M) { leaktest.Main(m) }

func runServer(t testing.TB) *server.Server {
	t.Helper()
	return natstest.Run(t, natstest.JetStream(t, ""))
}

func connect(t testing.TB, url string) *nats.Conn {
	t.Helper()
	return natstest.Connect(t, url)
}

func openStore(t testing.TB, nc *nats.Conn) *cluster.Store {
	t.Helper()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	st, err := cluster.Open(ctx, js, cluster.Config{Prefix: "wt", HeartbeatTTL: time.Second, LeaseTTL: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

type applyBolt struct {
	topology.BaseBasicBolt
	src *testtopo.Numbers
}

func (b *applyBolt) Execute(t *tuple.Tuple, out topology.BasicCollector) error {
	b.src.Apply(t.Value(0).(int))
	return nil
}

// numbers registers topology "nums" over src: nums (1 task) -> apply (par tasks).
func numbers(reg *cluster.Registry, src *testtopo.Numbers, par int) {
	if err := reg.Register("nums", func(ctx context.Context, env cluster.Env) (*cluster.Deployment, error) {
		b := topology.NewBuilder()
		b.SetSpout("nums", src.Spout, 1).Output("n")
		b.SetBasicBolt("apply", func() topology.BasicBolt { return &applyBolt{src: src} }, par).FieldsGrouping("nums", "n")
		topo, err := b.Build()
		if err != nil {
			return nil, err
		}
		cfg := topology.DefaultConfig()
		cfg.MessageTimeout = 2 * time.Second
		return &cluster.Deployment{Topology: topo, Config: cfg}, nil
	}); err != nil {
		panic(err)
	}
}

// events collects a worker's events.
type events struct{ ch chan Event }

func (e *events) on(ev Event) {
	select {
	case e.ch <- ev:
	default:
		panic("worker test: event buffer full")
	}
}

func (e *events) wait(t *testing.T, what string, match func(Event) bool) Event {
	t.Helper()
	timeout := time.After(30 * time.Second)
	for {
		select {
		case ev := <-e.ch:
			if match(ev) {
				return ev
			}
		case <-timeout:
			t.Fatalf("no %s in 30s", what)
		}
	}
}

type testWorker struct {
	w      *Worker
	ev     *events
	stop   func()
	nc     *nats.Conn
	runErr error
}

// startWorker runs a worker on its own connection until the test ends (or stop).
func startWorker(t *testing.T, url, name string, reg *cluster.Registry) *testWorker {
	t.Helper()
	nc := connect(t, url)
	ev := &events{ch: make(chan Event, 1024)}
	w, err := New(Config{Name: name, Conn: nc, Store: openStore(t, nc), Registry: reg, OnEvent: ev.on, StopTimeout: 10 * time.Second,
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	tw := &testWorker{w: w, ev: ev, nc: nc}
	done := make(chan struct{})
	go func() { defer close(done); tw.runErr = w.Run(ctx) }()
	var once sync.Once
	tw.stop = func() { once.Do(func() { cancel(); <-done }) }
	t.Cleanup(tw.stop)
	return tw
}

func isKind(k EventKind, gen uint64) func(Event) bool {
	return func(e Event) bool { return e.Kind == k && (gen == 0 || e.Generation == gen) }
}

func submit(t *testing.T, st *cluster.Store, reg *cluster.Registry, want int) *cluster.Record {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	d, err := reg.Build(ctx, cluster.Env{Topology: "nums"})
	if err != nil {
		t.Fatal(err)
	}
	rec, err := st.Submit(ctx, cluster.Spec{Topology: "nums", Fingerprint: cluster.FingerprintOf("nums", d.Topology, d.Config),
		Tasks: cluster.TasksOf(d.Topology, d.Config), Want: want})
	if err != nil {
		t.Fatal(err)
	}
	return rec
}

// Three workers run one topology: each starts its part of generation 1 (the
// tasks split between them), every tuple tree completes across them, and a kill
// drains and stops it on all three.
func TestWorkersRunAndKill(t *testing.T) {
	url := runServer(t).ClientURL()
	src := testtopo.NewNumbers(3000)
	reg := &cluster.Registry{}
	numbers(reg, src, 4)
	ws := []*testWorker{startWorker(t, url, "w1", reg), startWorker(t, url, "w2", reg), startWorker(t, url, "w3", reg)}
	client := openStore(t, connect(t, url))
	waitLive(t, client, 3)
	rec := submit(t, client, reg, 3)
	if rec.Generation() != 1 || len(rec.Assignment.Workers) != 3 {
		t.Fatalf("placed: %+v", rec.Assignment)
	}
	var all []int
	for _, w := range ws {
		ev := w.ev.wait(t, w.w.Name()+" started", isKind(Started, 1))
		if want := cluster.HostOf(rec.Assignment, w.w.Name()); ev.Host != want {
			t.Errorf("%s: host %d, want %d", w.w.Name(), ev.Host, want)
		}
		all = append(all, ev.Tasks...)
	}
	slices.Sort(all)
	if want := len(rec.Assignment.Of); len(all) != want || all[0] != 1 || all[len(all)-1] != want {
		t.Errorf("tasks started %v, want 1..%d once each", all, want)
	}
	select {
	case <-src.Done():
	case <-time.After(60 * time.Second):
		t.Fatalf("not every tree completed: %d of %d acked", src.Acked(), src.N())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := client.Kill(ctx, "nums"); err != nil {
		t.Fatal(err)
	}
	for _, w := range ws {
		ev := w.ev.wait(t, w.w.Name()+" stopped", isKind(Stopped, 1))
		if ev.Err != nil {
			t.Errorf("%s stopped with %v", w.w.Name(), ev.Err)
		}
		if len(w.w.Runs()) != 0 {
			t.Errorf("%s still runs %+v", w.w.Name(), w.w.Runs())
		}
	}
	for i := range src.N() {
		if src.Applied(i) < 1 {
			t.Fatalf("number %d never applied", i)
		}
	}
}

// A worker whose build lacks the topology refuses it, says why in its heartbeat,
// and the scheduler moves the topology to the worker that has it; deactivate
// stops it there (drained), activate starts it again under a new generation.
func TestWorkerRefusesAndScheduleMoves(t *testing.T) {
	url := runServer(t).ClientURL()
	src := testtopo.NewNumbers(100)
	reg := &cluster.Registry{}
	numbers(reg, src, 2)
	// w0 has another build: an empty registry (its name sorts first, so placement
	// picks it first).
	w0 := startWorker(t, url, "w0", &cluster.Registry{})
	w1 := startWorker(t, url, "w1", reg)
	client := openStore(t, connect(t, url))
	waitLive(t, client, 2)
	// Submit may answer with generation 1 (on w0) or already with 2 (on w1).
	rec := submit(t, client, reg, 1)
	ev := w0.ev.wait(t, "w0 refuses", isKind(Refused, 1))
	if ev.Err == nil || !errors.Is(ev.Err, cluster.ErrUnknownTopology) || !strings.Contains(ev.Err.Error(), `"nums" (this build has: [])`) {
		t.Errorf("refusal: %v", ev.Err)
	}
	if r := w0.w.Info().Refused["nums"]; r.Fingerprint != rec.Fingerprint.String() || !strings.Contains(r.Reason, "not in this build") {
		t.Errorf("w0's heartbeat says %+v", r)
	}
	started := w1.ev.wait(t, "w1 starts generation 2", isKind(Started, 2))
	if started.Host != 1 {
		t.Errorf("w1 is host %d", started.Host)
	}
	select {
	case <-src.Done():
	case <-time.After(60 * time.Second):
		t.Fatal("not every tree completed on w1")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := client.Deactivate(ctx, "nums"); err != nil {
		t.Fatal(err)
	}
	if ev := w1.ev.wait(t, "w1 stops (deactivated)", isKind(Stopped, 2)); !ev.Drained || ev.Err != nil {
		t.Errorf("deactivate: drained %v, err %v", ev.Drained, ev.Err)
	}
	rec, err := client.Activate(ctx, "nums")
	if err != nil {
		t.Fatal(err)
	}
	if rec.Generation() != 3 {
		t.Errorf("activated at generation %d, want 3", rec.Generation())
	}
	w1.ev.wait(t, "w1 starts generation 3", isKind(Started, 3))
	if opens := src.Opens(); opens != 2 {
		t.Errorf("the spout opened %d times, want 2 (generations 2 and 3)", opens)
	}
}

// waitLive waits until n workers are live.
func waitLive(t *testing.T, st *cluster.Store, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	ch, err := st.WatchWorkers(ctx, false)
	if err != nil {
		t.Fatal(err)
	}
	live := map[string]bool{}
	for ev := range ch {
		live[ev.Worker.Name] = ev.Kind != cluster.Left
		c := 0
		for _, l := range live {
			if l {
				c++
			}
		}
		if c >= n {
			return
		}
	}
	t.Fatalf("%d workers not live in 20s: %v", n, live)
}

// A worker whose build has another fingerprint of the topology (here: another
// parallelism of its bolt) refuses it, naming what differs; with no other worker,
// the scheduler's record says who refused and why. A second topology finds no free
// slot: its submit is refused with the reason.
func TestWorkerRefusesOtherFingerprintAndFullSlots(t *testing.T) {
	url := runServer(t).ClientURL()
	src := testtopo.NewNumbers(10)
	mine, theirs := &cluster.Registry{}, &cluster.Registry{}
	numbers(mine, src, 2)
	numbers(theirs, src, 3)
	w1 := startWorker(t, url, "w1", theirs)
	client := openStore(t, connect(t, url))
	waitLive(t, client, 1)
	// The submit's answer may already be the record naming w1's refusal (the
	// scheduler placed it on w1, w1 refused, the scheduler refused it, before the
	// submitter's watch read the record): a refusal naming w1 is fine too.
	d0, err := mine.Build(context.Background(), cluster.Env{Topology: "nums"})
	if err != nil {
		t.Fatal(err)
	}
	sctx, scancel := context.WithTimeout(context.Background(), 30*time.Second)
	_, err = client.Submit(sctx, cluster.Spec{Topology: "nums", Fingerprint: cluster.FingerprintOf("nums", d0.Topology, d0.Config),
		Tasks: cluster.TasksOf(d0.Topology, d0.Config), Want: 1})
	scancel()
	if err != nil && !strings.Contains(err.Error(), "refused by w1: cluster: topology fingerprint mismatch") {
		t.Fatalf("submit: %v", err)
	}
	withdrawn := err != nil // a refused submit is withdrawn
	ev := w1.ev.wait(t, "w1 refuses", isKind(Refused, 1))
	if !errors.Is(ev.Err, cluster.ErrFingerprint) || !strings.Contains(ev.Err.Error(), "submitted nums (module (devel)): shape") {
		t.Errorf("refusal: %v", ev.Err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	recs, err := client.WatchRecords(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for rec := range recs {
		if withdrawn || strings.Contains(rec.Error, "refused by w1: cluster: topology fingerprint mismatch") {
			break
		}
	}
	if ctx.Err() != nil {
		t.Fatal("no record naming w1's refusal")
	}

	// w2 has the same build as the submitter: it takes the topology and fills its
	// one slot, so (w1 gone) another topology is refused.
	w1.stop()
	w2 := startWorker(t, url, "w2", mine)
	if withdrawn {
		waitLive(t, client, 1)
		submit(t, client, mine, 1)
	}
	w2.ev.wait(t, "w2 starts nums", isKind(Started, 0))
	if err := mine.Register("more", func(ctx context.Context, env cluster.Env) (*cluster.Deployment, error) {
		return mine.Build(ctx, cluster.Env{Topology: "nums"})
	}); err != nil {
		t.Fatal(err)
	}
	d, err := mine.Build(ctx, cluster.Env{Topology: "more"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = client.Submit(ctx, cluster.Spec{Topology: "more", Fingerprint: cluster.FingerprintOf("more", d.Topology, d.Config),
		Tasks: cluster.TasksOf(d.Topology, d.Config), Want: 1})
	if !errors.Is(err, cluster.ErrRefused) || !strings.Contains(err.Error(), "w2 is full (its 1 slot runs nums)") {
		t.Errorf("submit with no free slot: %v", err)
	}
}
