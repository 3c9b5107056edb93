package worker

// Attacks on the worker: misuse, hangs, leaks and a second worker of the same name.
// Every test is bounded in time; a test that shows a bug is skipped with "BUG:" once
// confirmed (remove the t.Skip to reproduce it).

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gale-stream/gale/cluster"
	"github.com/gale-stream/gale/internal/waitfor"
	"github.com/gale-stream/gale/topology"
	"github.com/gale-stream/gale/tuple"
)

// ticks is the shared state of the attack topology "ticks": an endless spout (one
// task) into a bolt; hooks let a test make Open fail, block or count.
type ticks struct {
	acked   atomic.Int64
	opens   atomic.Int64
	closes  atomic.Int64 // spout Close calls
	builds  atomic.Int64 // factory calls
	depClos atomic.Int64 // Deployment.Close calls
	open    func(ctx context.Context) error
	factory func(ctx context.Context) error
}

type tickSpout struct {
	topology.BaseSpout
	k *ticks
	n int
}

func (s *tickSpout) Open(ctx context.Context, tc topology.TaskContext, out topology.SpoutCollector) error {
	s.Out = out
	s.k.opens.Add(1)
	if s.k.open != nil {
		return s.k.open(ctx)
	}
	return nil
}

func (s *tickSpout) NextTuple() {
	s.n++
	_ = s.Out.Emit(tuple.Values{s.n}, s.n)
}

func (s *tickSpout) Ack(any) { s.k.acked.Add(1) }
func (s *tickSpout) Close() error {
	s.k.closes.Add(1)
	return nil
}

type tickBolt struct{ topology.BaseBasicBolt }

func (tickBolt) Execute(*tuple.Tuple, topology.BasicCollector) error { return nil }

// registerTicks registers topology name over k: ticks (1 task) -> sink (par tasks).
func registerTicks(t *testing.T, reg *cluster.Registry, name string, k *ticks, par int) {
	t.Helper()
	if err := reg.Register(name, func(ctx context.Context, env cluster.Env) (*cluster.Deployment, error) {
		k.builds.Add(1)
		if k.factory != nil {
			if err := k.factory(ctx); err != nil {
				return nil, err
			}
		}
		b := topology.NewBuilder()
		b.SetSpout("ticks", func() topology.Spout { return &tickSpout{k: k} }, 1).Output("n")
		b.SetBasicBolt("sink", func() topology.BasicBolt { return &tickBolt{} }, par).ShuffleGrouping("ticks")
		topo, err := b.Build()
		if err != nil {
			return nil, err
		}
		cfg := topology.DefaultConfig()
		cfg.MessageTimeout = 2 * time.Second
		cfg.MaxSpoutPending = 64
		return &cluster.Deployment{Topology: topo, Config: cfg, Close: func() error { k.depClos.Add(1); return nil }}, nil
	}); err != nil {
		t.Fatal(err)
	}
}

// evlog records a worker's events without ever blocking or panicking.
type evlog struct {
	mu     sync.Mutex
	list   []Event
	notify chan struct{}
}

func newEvlog() *evlog { return &evlog{notify: make(chan struct{}, 1)} }

func (l *evlog) on(e Event) {
	l.mu.Lock()
	l.list = append(l.list, e)
	l.mu.Unlock()
	select {
	case l.notify <- struct{}{}:
	default:
	}
}

func (l *evlog) all() []Event {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]Event(nil), l.list...)
}

func (l *evlog) count(match func(Event) bool) int {
	n := 0
	for _, e := range l.all() {
		if match(e) {
			n++
		}
	}
	return n
}

// waitCount waits up to d until n events match match.
func (l *evlog) waitCount(d time.Duration, match func(Event) bool, n int) bool {
	deadline := time.After(d)
	for l.count(match) < n {
		select {
		case <-l.notify:
		case <-deadline:
			return false
		}
	}
	return true
}

// wait waits up to d for an event matching match.
func (l *evlog) wait(d time.Duration, match func(Event) bool) (Event, bool) {
	deadline := time.After(d)
	for {
		for _, e := range l.all() {
			if match(e) {
				return e, true
			}
		}
		select {
		case <-l.notify:
		case <-deadline:
			return Event{}, false
		}
	}
}

type atkWorker struct {
	w      *Worker
	ev     *evlog
	cancel context.CancelFunc
	done   chan struct{}
	err    error
}

// startAtk runs a worker (Config changed by mod) until the test ends; the cleanup
// waits at most 20 s for Run to return.
func startAtk(t *testing.T, url, name string, reg *cluster.Registry, mod func(*Config)) *atkWorker {
	t.Helper()
	nc := connect(t, url)
	ev := newEvlog()
	cfg := Config{Name: name, Conn: nc, Store: openStore(t, nc), Registry: reg, OnEvent: ev.on,
		StopTimeout: 5 * time.Second, RetryStart: 200 * time.Millisecond, Logger: slog.New(slog.DiscardHandler)}
	if mod != nil {
		mod(&cfg)
	}
	w, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	a := &atkWorker{w: w, ev: ev, cancel: cancel, done: make(chan struct{})}
	go func() { defer close(a.done); a.err = w.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-a.done:
		case <-time.After(20 * time.Second):
			t.Errorf("worker %s: Run did not return within 20s of its context's end", name)
		}
	})
	return a
}

// stopWithin cancels the worker and reports whether Run returned within d.
func (a *atkWorker) stopWithin(d time.Duration) bool {
	a.cancel()
	select {
	case <-a.done:
		return true
	case <-time.After(d):
		return false
	}
}

func submitNamed(t *testing.T, st *cluster.Store, reg *cluster.Registry, name string, want int) (*cluster.Record, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	d, err := reg.Build(ctx, cluster.Env{Topology: name})
	if err != nil {
		t.Fatal(err)
	}
	if d.Close != nil {
		_ = d.Close()
	}
	return st.Submit(ctx, cluster.Spec{Topology: name, Fingerprint: cluster.FingerprintOf(name, d.Topology, d.Config),
		Tasks: cluster.TasksOf(d.Topology, d.Config), Want: want})
}

func kindIs(k EventKind) func(Event) bool { return func(e Event) bool { return e.Kind == k } }

// waitAcked waits until the counter of acked trees reaches want.
func waitAcked(t *testing.T, acked *atomic.Int64, want int64, d time.Duration) {
	t.Helper()
	waitfor.Until(t, d, func() error { return ackedAtLeast(acked, want) })
}

// ackedAtLeast says how many trees are acked unless it is want or more.
func ackedAtLeast(acked *atomic.Int64, want int64) error {
	if n := acked.Load(); n < want {
		return fmt.Errorf("acked %d, want %d", n, want)
	}
	return nil
}

// A spout whose Open always fails: the worker reports StartFailed and tries again
// every RetryStart, neither spinning nor leaking (each failed attempt closes its
// Deployment; the connection's subscriptions do not grow).
func TestAttackOpenFailsRetryLoopBounded(t *testing.T) {
	url := runServer(t).ClientURL()
	k := &ticks{open: func(context.Context) error { return errors.New("attack: Open refuses") }}
	reg := &cluster.Registry{}
	registerTicks(t, reg, "ticks", k, 1)
	w := startAtk(t, url, "w1", reg, nil)
	client := openStore(t, connect(t, url))
	waitLive(t, client, 1)
	if _, err := submitNamed(t, client, reg, "ticks", 1); err != nil {
		t.Fatal(err)
	}
	if _, ok := w.ev.wait(10*time.Second, kindIs(StartFailed)); !ok {
		t.Fatal("no StartFailed in 10s")
	}
	subs0 := w.w.cfg.Conn.NumSubscriptions()
	t0 := time.Now()
	// Wait for 5 more attempts: with RetryStart 200 ms they cannot come in less than
	// 4 intervals (a loop that does not wait would make them at once).
	n0 := w.ev.count(kindIs(StartFailed))
	if !w.ev.waitCount(10*time.Second, kindIs(StartFailed), n0+5) {
		t.Fatalf("not 5 more StartFailed in 10s (%d): the retries stopped", w.ev.count(kindIs(StartFailed))-n0)
	}
	if el := time.Since(t0); el < 4*200*time.Millisecond*9/10 {
		t.Errorf("5 StartFailed in %v with RetryStart 200ms: the retries do not wait", el)
	}
	if subs := w.w.cfg.Conn.NumSubscriptions(); subs > subs0+2 {
		t.Errorf("subscriptions grew from %d to %d over the failed starts", subs0, subs)
	}
	if !w.stopWithin(10 * time.Second) {
		t.Fatal("Run did not return within 10s")
	}
	if b, c := k.builds.Load(), k.depClos.Load(); b != c {
		t.Errorf("%d builds, %d Deployment.Close calls: a failed start leaks its deployment", b, c)
	}
	if e := w.ev.count(kindIs(Started)); e != 0 {
		t.Errorf("%d Started events", e)
	}
	for _, e := range w.ev.all() {
		if e.Kind == StartFailed && !strings.Contains(e.Err.Error(), "attack: Open refuses") {
			t.Errorf("StartFailed says %v", e.Err)
		}
	}
}

// Open fails twice, then succeeds: the worker starts the generation on its third
// attempt, and Info says it runs it.
func TestAttackOpenFailsThenRecovers(t *testing.T) {
	url := runServer(t).ClientURL()
	var fails atomic.Int64
	k := &ticks{}
	k.open = func(context.Context) error {
		if fails.Add(1) <= 2 {
			return errors.New("attack: transient")
		}
		return nil
	}
	reg := &cluster.Registry{}
	registerTicks(t, reg, "ticks", k, 1)
	w := startAtk(t, url, "w1", reg, nil)
	client := openStore(t, connect(t, url))
	waitLive(t, client, 1)
	rec, err := submitNamed(t, client, reg, "ticks", 1)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := w.ev.wait(10*time.Second, kindIs(Started)); !ok {
		t.Fatalf("not started after transient Open failures; events %+v", w.ev.all())
	}
	if n := w.ev.count(kindIs(StartFailed)); n != 2 {
		t.Errorf("%d StartFailed, want 2", n)
	}
	waitAcked(t, &k.acked, 100, 10*time.Second)
	if g := w.w.Info().Running["ticks"]; g != rec.Generation() {
		t.Errorf("heartbeat says generation %d, want %d", g, rec.Generation())
	}
}

// Run's context ends while a start is in progress: a factory that waits on the
// context it is given (as a well-behaved factory does). Run must return promptly.
func TestAttackRunReturnsDuringBlockedFactory(t *testing.T) {
	url := runServer(t).ClientURL()
	release := make(chan struct{})
	var once sync.Once
	rel := func() { once.Do(func() { close(release) }) }
	defer rel()
	entered := make(chan struct{}, 1)
	k := &ticks{factory: func(ctx context.Context) error {
		if ctx.Value(submitterKey{}) != nil {
			return nil // the submitter's build, for the fingerprint
		}
		select {
		case entered <- struct{}{}:
		default:
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-release:
			return nil
		}
	}}
	reg := &cluster.Registry{}
	registerTicks(t, reg, "ticks", k, 1)
	w := startAtk(t, url, "w1", reg, nil)
	client := openStore(t, connect(t, url))
	waitLive(t, client, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.WithValue(context.Background(), submitterKey{}, true), 10*time.Second)
		defer cancel()
		d, err := reg.Build(ctx, cluster.Env{Topology: "ticks"})
		if err != nil {
			return
		}
		_, _ = client.Submit(ctx, cluster.Spec{Topology: "ticks", Fingerprint: cluster.FingerprintOf("ticks", d.Topology, d.Config),
			Tasks: cluster.TasksOf(d.Topology, d.Config), Want: 1})
	}()
	select {
	case <-entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the worker's factory was not called in 10s")
	}
	ok := w.stopWithin(5 * time.Second)
	rel() // let the test end either way
	if !ok {
		t.Fatal("worker.Run did not return within 5s of its context's end while the factory waited on its context")
	}
}

type submitterKey struct{}

// The same with a spout whose Open waits on the engine's context: Run must return.
func TestAttackRunReturnsDuringBlockedOpen(t *testing.T) {
	url := runServer(t).ClientURL()
	release := make(chan struct{})
	var once sync.Once
	rel := func() { once.Do(func() { close(release) }) }
	defer rel()
	entered := make(chan struct{}, 1)
	k := &ticks{open: func(ctx context.Context) error {
		select {
		case entered <- struct{}{}:
		default:
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-release:
			return nil
		}
	}}
	reg := &cluster.Registry{}
	registerTicks(t, reg, "ticks", k, 1)
	w := startAtk(t, url, "w1", reg, nil)
	client := openStore(t, connect(t, url))
	waitLive(t, client, 1)
	if _, err := submitNamed(t, client, reg, "ticks", 1); err != nil {
		t.Fatal(err)
	}
	select {
	case <-entered:
	case <-time.After(10 * time.Second):
		t.Fatal("Open not called in 10s")
	}
	ok := w.stopWithin(5 * time.Second)
	rel()
	if !ok {
		t.Fatal("worker.Run did not return within 5s of its context's end while a spout's Open waited on its context")
	}
}

// A kill arriving while a slow start is in progress: once the start completes the
// worker stops the generation, and ends with nothing running.
func TestAttackKillDuringSlowStart(t *testing.T) {
	url := runServer(t).ClientURL()
	release := make(chan struct{})
	var once sync.Once
	rel := func() { once.Do(func() { close(release) }) }
	defer rel()
	entered := make(chan struct{}, 1)
	k := &ticks{open: func(ctx context.Context) error {
		select {
		case entered <- struct{}{}:
		default:
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-release:
			return nil
		}
	}}
	reg := &cluster.Registry{}
	registerTicks(t, reg, "ticks", k, 1)
	w := startAtk(t, url, "w1", reg, nil)
	client := openStore(t, connect(t, url))
	waitLive(t, client, 1)
	if _, err := submitNamed(t, client, reg, "ticks", 1); err != nil {
		t.Fatal(err)
	}
	select {
	case <-entered:
	case <-time.After(10 * time.Second):
		t.Fatal("Open not called in 10s")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := client.Kill(ctx, "ticks"); err != nil {
		t.Fatal(err)
	}
	rel()
	if _, ok := w.ev.wait(10*time.Second, kindIs(Stopped)); !ok {
		t.Fatalf("the generation started after its kill was not stopped; events %+v", w.ev.all())
	}
	if r := w.w.Runs(); len(r) != 0 {
		t.Errorf("still runs %+v after the kill", r)
	}
	if g, ok := w.w.Info().Running["ticks"]; ok {
		t.Errorf("heartbeat says it runs generation %d after the kill", g)
	}
}

// A second worker started with a live worker's name must fail with ErrNameInUse and
// must not disturb the running topology: it must not start the first one's tasks
// (same host number, same subjects), nor drain the generation when it leaves.
func TestAttackDuplicateNameDoesNotDisturb(t *testing.T) {
	url := runServer(t).ClientURL()
	k := &ticks{}
	reg := &cluster.Registry{}
	registerTicks(t, reg, "ticks", k, 2)
	w1 := startAtk(t, url, "w1", reg, nil)
	w2 := startAtk(t, url, "w2", reg, nil)
	client := openStore(t, connect(t, url))
	waitLive(t, client, 2)
	rec, err := submitNamed(t, client, reg, "ticks", 2)
	if err != nil {
		t.Fatal(err)
	}
	gen := rec.Generation()
	for _, w := range []*atkWorker{w1, w2} {
		if _, ok := w.ev.wait(10*time.Second, func(e Event) bool { return e.Kind == Started && e.Generation == gen }); !ok {
			t.Fatalf("%s did not start generation %d", w.w.Name(), gen)
		}
	}
	waitAcked(t, &k.acked, 200, 10*time.Second)

	dup := startAtk(t, url, "w1", reg, func(c *Config) { c.NoScheduler = true })
	select {
	case <-dup.done:
	case <-time.After(10 * time.Second):
		t.Fatal("the duplicate w1 did not end within 10s")
	}
	if !errors.Is(dup.err, cluster.ErrNameInUse) {
		t.Errorf("duplicate's Run: %v, want ErrNameInUse", dup.err)
	}
	if n := dup.ev.count(kindIs(Started)); n != 0 {
		t.Errorf("the duplicate w1 started %d generations of the real w1's tasks: %+v", n, dup.ev.all())
	}
	// The topology goes on on the real workers.
	base := k.acked.Load()
	_ = waitfor.Err(context.Background(), 5*time.Second, func() error { return ackedAtLeast(&k.acked, base+200) })
	if a := k.acked.Load(); a < base+200 {
		t.Errorf("the topology stalled after the duplicate left: %d trees acked in 5s", a-base)
	}
	for _, w := range []*atkWorker{w1, w2} {
		if n := w.ev.count(kindIs(Stopped)); n != 0 {
			t.Errorf("%s stopped %d times because of the duplicate (runs now: %+v, heartbeat: %v): %+v", w.w.Name(), n, w.w.Runs(), w.w.Info().Running, w.ev.all())
		}
	}
}

// Misuse of Config: negative slots and a missing connection are refused by New.
func TestAttackConfigMisuse(t *testing.T) {
	url := runServer(t).ClientURL()
	nc := connect(t, url)
	st := openStore(t, nc)
	reg := &cluster.Registry{}
	for _, c := range []Config{
		{Name: "w", Conn: nc, Store: st, Registry: reg, Slots: -1},
		{Name: "w", Store: st, Registry: reg},
		{Name: "w", Conn: nc, Registry: reg},
		{Name: "w", Conn: nc, Store: st},
		{Name: "bad name", Conn: nc, Store: st, Registry: reg},
		{Name: "a.b", Conn: nc, Store: st, Registry: reg},
	} {
		if _, err := New(c); err == nil {
			t.Errorf("New(%+v) accepted", c)
		}
	}
}

// Registry misuse: a nil factory, a bad name, a name twice, and a factory that
// returns no topology are errors, not panics.
func TestAttackRegistryMisuse(t *testing.T) {
	reg := &cluster.Registry{}
	if err := reg.Register("x", nil); err == nil {
		t.Error("nil factory accepted")
	}
	if err := reg.Register("a.b", func(context.Context, cluster.Env) (*cluster.Deployment, error) { return nil, nil }); err == nil {
		t.Error("name with a dot accepted")
	}
	if err := reg.Register("nil", func(context.Context, cluster.Env) (*cluster.Deployment, error) { return nil, nil }); err != nil {
		t.Fatal(err)
	}
	if err := reg.Register("nil", func(context.Context, cluster.Env) (*cluster.Deployment, error) { return nil, nil }); err == nil {
		t.Error("registered twice")
	}
	if _, err := reg.Build(context.Background(), cluster.Env{Topology: "nil"}); err == nil {
		t.Error("a factory returning nil built")
	}
	if _, err := reg.Build(context.Background(), cluster.Env{Topology: "nope"}); !errors.Is(err, cluster.ErrUnknownTopology) {
		t.Errorf("unknown: %v", err)
	}
}

// A worker given a topology whose factory returns (nil, nil) in its build refuses it
// rather than crashing.
func TestAttackFactoryReturnsNil(t *testing.T) {
	url := runServer(t).ClientURL()
	k := &ticks{}
	good := &cluster.Registry{}
	registerTicks(t, good, "ticks", k, 1)
	bad := &cluster.Registry{}
	if err := bad.Register("ticks", func(context.Context, cluster.Env) (*cluster.Deployment, error) { return nil, nil }); err != nil {
		t.Fatal(err)
	}
	w := startAtk(t, url, "w1", bad, nil)
	client := openStore(t, connect(t, url))
	waitLive(t, client, 1)
	_, err := submitNamed(t, client, good, "ticks", 1)
	_ = err // may be refused once w1 refuses, or placed
	if _, ok := w.ev.wait(10*time.Second, kindIs(Refused)); !ok {
		t.Fatalf("no refusal; events %+v", w.ev.all())
	}
}

// attackChildEnv names the scenario a re-executed test binary runs.
const attackChildEnv = "GALE_WORKER_ATTACK_CHILD"

// A Registry factory that panics takes the whole worker process down (with every
// other topology it runs), rather than being a refusal or a failed start as a
// panic in a task's Open is. The scenario runs in a child process (this test binary
// again), which passes only if the worker survived and reported the failure.
func TestAttackFactoryPanics(t *testing.T) {
	if os.Getenv(attackChildEnv) == "factory-panics" {
		factoryPanicsChild(t)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestAttackFactoryPanics$", "-test.v")
	cmd.Env = append(os.Environ(), attackChildEnv+"=factory-panics")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the worker process did not survive a panicking factory: %v\n%s", err, tail(string(out), 40))
	}
}

func factoryPanicsChild(t *testing.T) {
	url := runServer(t).ClientURL()
	good := &cluster.Registry{}
	registerTicks(t, good, "ticks", &ticks{}, 1)
	bad := &cluster.Registry{}
	if err := bad.Register("ticks", func(context.Context, cluster.Env) (*cluster.Deployment, error) {
		panic("attack: factory panics")
	}); err != nil {
		t.Fatal(err)
	}
	w := startAtk(t, url, "w1", bad, nil)
	client := openStore(t, connect(t, url))
	waitLive(t, client, 1)
	go func() { _, _ = submitNamed(t, client, good, "ticks", 1) }()
	if _, ok := w.ev.wait(15*time.Second, func(e Event) bool { return e.Kind == Refused || e.Kind == StartFailed }); !ok {
		t.Fatal("no refusal or failed start for a panicking factory")
	}
}

func tail(s string, n int) string {
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// Two topologies on one worker with two slots: killing one leaves the other
// running (its own runner), and the kill drains only the killed one.
func TestAttackKillOneOfTwo(t *testing.T) {
	url := runServer(t).ClientURL()
	ka, kb := &ticks{}, &ticks{}
	reg := &cluster.Registry{}
	registerTicks(t, reg, "ta", ka, 1)
	registerTicks(t, reg, "tb", kb, 1)
	w := startAtk(t, url, "w1", reg, func(c *Config) { c.Slots = 2 })
	client := openStore(t, connect(t, url))
	waitLive(t, client, 1)
	for _, n := range []string{"ta", "tb"} {
		if _, err := submitNamed(t, client, reg, n, 1); err != nil {
			t.Fatal(err)
		}
	}
	waitAcked(t, &ka.acked, 100, 10*time.Second)
	waitAcked(t, &kb.acked, 100, 10*time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := client.Kill(ctx, "ta"); err != nil {
		t.Fatal(err)
	}
	ev, ok := w.ev.wait(10*time.Second, func(e Event) bool { return e.Kind == Stopped && e.Topology == "ta" })
	if !ok || !ev.Drained || ev.Err != nil {
		t.Fatalf("ta's stop: %+v (found %v)", ev, ok)
	}
	b := kb.acked.Load()
	waitAcked(t, &kb.acked, b+100, 5*time.Second)
	if n := w.ev.count(func(e Event) bool { return e.Kind == Stopped && e.Topology == "tb" }); n != 0 {
		t.Errorf("tb stopped %d times", n)
	}
	// Submitting the killed one again starts it under a higher generation.
	rec, err := submitNamed(t, client, reg, "ta", 1)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := w.ev.wait(10*time.Second, func(e Event) bool {
		return e.Kind == Started && e.Topology == "ta" && e.Generation == rec.Generation()
	}); !ok {
		t.Fatalf("ta not started again at generation %d", rec.Generation())
	}
}

// claims emulates a spout whose durable source is claimed by each incarnation as it
// opens (word count's offsets key: each Open takes it over, and an older incarnation
// is stale from then on and emits nothing more).
type claims struct {
	mu       sync.Mutex
	owner    int
	ownerGen uint64 // the generation of the owner's spout
	next     int
	opens    []string // "worker#n" in the order of the claims
	acked    atomic.Int64
	// block, if set, is called by a spout's Open before it claims.
	block func(worker string, nth int)
	perW  map[string]int
}

type claimSpout struct {
	topology.BaseSpout
	c      *claims
	worker string
	gen    uint64 // the generation it was built for (Env.Generation)
	id     int
	n      int
}

func (s *claimSpout) Open(ctx context.Context, tc topology.TaskContext, out topology.SpoutCollector) error {
	s.Out = out
	s.c.mu.Lock()
	s.c.perW[s.worker]++
	nth := s.c.perW[s.worker]
	block := s.c.block
	s.c.mu.Unlock()
	if block != nil {
		block(s.worker, nth)
	}
	s.c.mu.Lock()
	defer s.c.mu.Unlock()
	// As word count's spout claims its offsets key: never over a newer generation's.
	if s.gen < s.c.ownerGen {
		return fmt.Errorf("claims: generation %d's spout claimed already; this is generation %d's", s.c.ownerGen, s.gen)
	}
	s.c.next++
	s.id, s.c.owner, s.c.ownerGen = s.c.next, s.c.next, s.gen
	s.c.opens = append(s.c.opens, fmt.Sprintf("%s#%d", s.worker, nth))
	return nil
}

func (s *claimSpout) NextTuple() {
	s.c.mu.Lock()
	stale := s.c.owner != s.id
	s.c.mu.Unlock()
	if stale {
		return
	}
	s.n++
	_ = s.Out.Emit(tuple.Values{s.n}, s.n)
}

func (s *claimSpout) Ack(any) { s.c.acked.Add(1) }

// registerClaims registers "claims", word count's shape: lines (1) -> split (2) ->
// count (2), two ackers.
func registerClaims(t *testing.T, reg *cluster.Registry, c *claims) {
	t.Helper()
	if err := reg.Register("claims", func(ctx context.Context, env cluster.Env) (*cluster.Deployment, error) {
		b := topology.NewBuilder()
		b.SetSpout("lines", func() topology.Spout { return &claimSpout{c: c, worker: env.Worker, gen: env.Generation} }, 1).Output("n")
		b.SetBasicBolt("split", func() topology.BasicBolt { return &tickBolt{} }, 2).ShuffleGrouping("lines")
		b.SetBasicBolt("count", func() topology.BasicBolt { return &tickBolt{} }, 2).ShuffleGrouping("lines")
		topo, err := b.Build()
		if err != nil {
			return nil, err
		}
		cfg := topology.DefaultConfig()
		cfg.Ackers = 2
		cfg.MessageTimeout = 2 * time.Second
		cfg.MaxSpoutPending = 64
		return &cluster.Deployment{Topology: topo, Config: cfg}, nil
	}); err != nil {
		t.Fatal(err)
	}
}

// A worker dies (its connection cut, its key left to expire) and a new process
// joins under its name: the scheduler writes generation 2 (without it) and, once it
// has joined, generation 3, which moves the spout to it. The spout's old worker is
// slow to start generation 2 (here its spout's Open is held until the new worker
// has opened generation 3's spout). It must not start generation 2's spout once
// generation 3 runs: a superseded generation's spout that claims its source after
// the newest one did leaves the newest stale, and the topology stalls for good.
// (With word count this is a hung run: TestAttackRestartSameNameAfterKill in
// cmd/gale.)
func TestAttackSupersededGenerationStartedLate(t *testing.T) {
	url := runServer(t).ClientURL()
	c := &claims{perW: map[string]int{}}
	gen3Opened := make(chan struct{})
	var once sync.Once
	reg := &cluster.Registry{}
	registerClaims(t, reg, c)
	client := openStore(t, connect(t, url))
	ws := map[string]*atkWorker{}
	conns := map[string]func(){}
	for _, n := range []string{"w1", "w2", "w3"} {
		nc := connect(t, url)
		conns[n] = nc.Close
		ws[n] = startAtk(t, url, n, reg, func(cfg *Config) { cfg.Conn, cfg.Store = nc, openStore(t, nc) })
	}
	waitLive(t, client, 3)
	rec, err := submitNamed(t, client, reg, "claims", 3)
	if err != nil {
		t.Fatal(err)
	}
	spoutAt := rec.Assignment.Of[1]
	if spoutAt == "w2" {
		t.Fatalf("placement put the spout on w2: %+v", rec.Assignment)
	}
	for _, n := range []string{"w1", "w2", "w3"} {
		if _, ok := ws[n].ev.wait(10*time.Second, kindIs(Started)); !ok {
			t.Fatalf("%s did not start", n)
		}
	}
	waitAcked(t, &c.acked, 200, 10*time.Second)
	// From now on the spout's worker holds its next spout Open (generation 2's) until
	// the new w2 has opened its spout (generation 3's), at most 8 s.
	c.mu.Lock()
	c.block = func(worker string, nth int) {
		if worker == spoutAt && nth == 2 {
			select {
			case <-gen3Opened:
			case <-time.After(8 * time.Second):
			}
		}
		if worker == "w2" {
			once.Do(func() { close(gen3Opened) })
		}
	}
	c.mu.Unlock()
	// w2 dies: its connection is cut, so its key expires; a new w2 starts at once.
	conns["w2"]()
	w2b := startAtk(t, url, "w2", reg, nil)
	_ = w2b
	// Generation 3 moves the spout to the new w2 (else this attack does not apply).
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	recs, err := client.WatchRecords(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var last *cluster.Record
	for r := range recs {
		last = r
		if r.Generation() >= 3 && r.Assignment.Of[1] == "w2" {
			break
		}
	}
	if last == nil || last.Generation() < 3 || last.Assignment.Of[1] != "w2" {
		t.Fatalf("no generation moving the spout to the new w2: %+v", last)
	}
	// Let everything settle on generation 3, then the topology must make progress.
	for _, n := range []string{"w1", "w3"} {
		ws[n].ev.wait(10*time.Second, func(e Event) bool { return e.Kind == Started && e.Generation == last.Generation() })
	}
	base := c.acked.Load()
	_ = waitfor.Err(context.Background(), 5*time.Second, func() error { return ackedAtLeast(&c.acked, base+200) })
	var started []string
	for _, n := range []string{"w1", "w3"} {
		for _, e := range ws[n].ev.all() {
			if e.Kind == Started {
				started = append(started, fmt.Sprintf("%s g%d at %s", n, e.Generation, e.At.Format("15:04:05.000")))
			}
		}
	}
	for _, e := range w2b.ev.all() {
		if e.Kind == Started {
			started = append(started, fmt.Sprintf("w2(new) g%d at %s", e.Generation, e.At.Format("15:04:05.000")))
		}
	}
	if a := c.acked.Load(); a < base+200 {
		t.Errorf("stalled on generation %d: %d trees acked in 5s; spout claims in order %v; starts %v", last.Generation(), a-base, c.opensSnapshot(), started)
	}
}

func (c *claims) opensSnapshot() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.opens...)
}
