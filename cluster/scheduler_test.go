package cluster

import (
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gale-stream/gale/cluster/placement"
)

// events collects a scheduler's events.
type events struct {
	name    string
	ch      chan Event
	dropped atomic.Int64
}

func newEvents(name string) *events { return &events{name: name, ch: make(chan Event, 4096)} }

func (e *events) on(ev Event) {
	select {
	case e.ch <- ev:
	default:
		e.dropped.Add(1)
	}
}

// wait returns the first event for which match is true (dropping the others),
// failing the test after d.
func (e *events) wait(t testing.TB, d time.Duration, what string, match func(Event) bool) Event {
	t.Helper()
	timer := time.NewTimer(d)
	defer timer.Stop()
	var seen []string
	for {
		select {
		case ev := <-e.ch:
			if match(ev) {
				return ev
			}
			seen = append(seen, fmtEvent(ev))
		case <-timer.C:
			t.Fatalf("%s: no %s within %v (%d events dropped); saw:\n%s", e.name, what, d, e.dropped.Load(), strings.Join(seen, "\n"))
		}
	}
}

func fmtEvent(ev Event) string {
	s := fmt.Sprintf("%s epoch %d", ev.Kind, ev.Epoch)
	if ev.Topology != "" {
		s += " " + ev.Topology
	}
	if r := ev.Record; r != nil && r.Assignment != nil {
		s += fmt.Sprintf(" generation %d on %v", r.Generation(), r.Assignment.Workers)
	}
	if ev.Kind == Passed {
		s += fmt.Sprintf(" workers %d writes %d", ev.Workers, ev.Writes)
	}
	if ev.Err != nil {
		s += ": " + ev.Err.Error()
	}
	return s
}

// kind matches events of kind k (of topology topo, if not empty).
func kind(k EventKind, topo string) func(Event) bool {
	return func(ev Event) bool { return ev.Kind == k && (topo == "" || ev.Topology == topo) }
}

// newScheduler returns a scheduler candidate on s and its events, not started.
func newScheduler(t testing.TB, s *Store, name string) (*Scheduler, *events) {
	t.Helper()
	ev := newEvents(name)
	sc, err := s.NewScheduler(SchedulerConfig{Name: name, OnEvent: ev.on})
	if err != nil {
		t.Fatal(err)
	}
	return sc, ev
}

// scheduler starts a scheduler candidate on s until the test ends.
func scheduler(t testing.TB, s *Store, name string) (*events, func()) {
	t.Helper()
	sc, ev := newScheduler(t, s, name)
	return ev, goRun(t, sc.Run)
}

// worker is a worker process: its own connection, store and heartbeat.
type worker struct {
	name string
	h    *Heartbeat
	stop func() // a graceful stop (its key deleted)
	cut  func() // its connection closed: silent, as a crash or a partition
}

func startWorker(t testing.TB, url, prefix, name string, slots int) *worker {
	t.Helper()
	return startWorkerWith(t, url, Config{Prefix: prefix}, name, slots)
}

func startWorkerWith(t testing.TB, url string, cfg Config, name string, slots int) *worker {
	t.Helper()
	s, nc := openStoreConn(t, url, cfg)
	h, stop := heartbeat(t, s, name, slots)
	return &worker{name: name, h: h, stop: stop, cut: nc.Close}
}

// wcSpec is the spec of a small word count (lines 1, split 2, count 2, 1 acker).
func wcSpec(t testing.TB, name string, want int) Spec {
	topo, cfg := shape(t.(*testing.T), "")
	return Spec{Topology: name, Fingerprint: FingerprintOf(name, topo, cfg), Tasks: TasksOf(topo, cfg), Want: want, Args: []string{"--fail-rate", "0.05"}}
}

// perWorker counts an assignment's tasks on each worker.
func perWorker(a *placement.Assignment) map[string]int {
	n := map[string]int{}
	for _, w := range a.Of {
		n[w]++
	}
	return n
}

// waitWorkers waits for a pass that saw n live workers.
func waitWorkers(t *testing.T, ev *events, n int) {
	t.Helper()
	ev.wait(t, 10*time.Second, "pass over "+string(rune('0'+n))+" workers", func(e Event) bool { return e.Kind == Passed && e.Workers == n })
}

// The scheduler's life with one candidate: a submit is placed; a lost worker's
// tasks go to a spare (generation + 1) a TTL after its last beat; the worker back
// gets nothing (nothing needs to move); rebalance, a refused submit (no free slot)
// withdrawn, deactivate/activate, kill and a resubmit (generations go on); no
// worker at all keeps the assignment and records the error; workers back fill it
// again.
func TestSchedulerPlacesAndReassigns(t *testing.T) {
	url := runServer(t).ClientURL()
	prefix := newPrefix()
	client := openStore(t, url, Config{Prefix: prefix})
	members, err := client.WatchWorkers(ctxT(t, 60*time.Second), true)
	if err != nil {
		t.Fatal(err)
	}
	ev, _ := scheduler(t, openStore(t, url, Config{Prefix: prefix}), "s1")
	elected := ev.wait(t, 5*time.Second, "election", kind(Elected, ""))
	records, err := client.WatchRecords(ctxT(t, 60*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	w1 := startWorker(t, url, prefix, "w1", 1)
	w2 := startWorker(t, url, prefix, "w2", 1)
	w3 := startWorker(t, url, prefix, "w3", 1)
	waitWorkers(t, ev, 3)

	// Submit: two workers of the three, the first by name (all have one free slot).
	ctx := ctxT(t, 60*time.Second)
	spec := wcSpec(t, "wc", 2)
	rec, err := client.Submit(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	a := rec.Assignment
	if a.Generation != 1 || !slices.Equal(a.Workers, []string{"w1", "w2"}) || a.Want != 2 || len(a.Of) != 6 {
		t.Fatalf("submitted: %+v", a)
	}
	if got := perWorker(a); got["w1"] != 3 || got["w2"] != 3 {
		t.Errorf("tasks per worker %v, want 3 and 3", got)
	}
	if rec.Epoch != elected.Epoch || rec.Scheduler != "s1" || rec.Fingerprint != spec.Fingerprint || !slices.Equal(rec.Args, spec.Args) || rec.Error != "" || rec.Moved != 0 {
		t.Errorf("record %+v", rec)
	}
	want, err := placement.Place(placement.Input{Workers: []placement.Worker{{Name: "w1", Slots: 1}, {Name: "w2", Slots: 1}, {Name: "w3", Slots: 1}},
		Topology: placement.Topology{Name: "wc", Tasks: spec.Tasks}, Want: 2})
	if err != nil || !maps.Equal(a.Of, want.Assignment.Of) {
		t.Errorf("placed %v, Place gives %v (%v)", a.Of, want.Assignment.Of, err)
	}
	onW1 := a.Tasks("w1")
	// Workers learn it from the records' watch (not the fence).
	if r := <-records; r.Topology != "wc" || r.Revision != rec.Revision || !reflect.DeepEqual(r.Assignment, a) {
		t.Errorf("watched record %+v, want %+v", r, rec)
	}

	// w2 is cut off: a TTL after its last beat the server expires its key, and the
	// scheduler moves its three tasks to w3, the spare, leaving w1's alone.
	var lastBeat time.Time
	for drained := false; !drained; {
		select {
		case m := <-members:
			if m.Worker.Name == "w2" {
				lastBeat = m.At
			}
		default:
			drained = true
		}
	}
	w2.cut()
	var left MemberEvent
	for left.Kind != Left {
		m := <-members
		if m.Worker.Name != "w2" {
			continue
		}
		if m.Kind == Left {
			left = m
		} else {
			lastBeat = m.At
		}
	}
	wrote := ev.wait(t, 10*time.Second, "reassignment", func(e Event) bool {
		return e.Kind == Wrote && e.Topology == "wc" && e.Record.Generation() == 2
	})
	b := wrote.Record.Assignment
	if b.Generation != 2 || !slices.Equal(b.Workers, []string{"w1", "w3"}) || wrote.Record.Moved != 3 {
		t.Fatalf("after w2 lost: %+v, moved %d", b, wrote.Record.Moved)
	}
	if !slices.Equal(b.Tasks("w1"), onW1) || !slices.Equal(b.Tasks("w3"), a.Tasks("w2")) {
		t.Errorf("w1 kept %v (had %v), w3 took %v (w2 had %v)", b.Tasks("w1"), onW1, b.Tasks("w3"), a.Tasks("w2"))
	}
	detect, pass := left.At.Sub(lastBeat), wrote.Record.Updated.Sub(left.At)
	if detect < testTTL {
		t.Errorf("w2 declared gone %v after its last beat, before the TTL of %v", detect, testTTL)
	}
	t.Logf("w2 lost: gone %v after its last beat (TTL %v), reassigned %v after that (last beat to reassignment %v)",
		detect.Round(time.Millisecond), testTTL, pass.Round(time.Millisecond), (detect + pass).Round(time.Millisecond))

	// w2 comes back (a restarted process): nothing needs to move to it.
	w2 = startWorker(t, url, prefix, "w2", 1)
	waitWorkers(t, ev, 3)
	if r, err := client.Record(ctx, "wc"); err != nil || r.Revision != wrote.Record.Revision || r.Generation() != 2 {
		t.Fatalf("after w2 came back: %+v (%v), want revision %d unchanged", r, err, wrote.Record.Revision)
	}

	// Rebalance over three: w2 takes one task from each of the others.
	rec, err = client.Rebalance(ctx, "wc", 3)
	if err != nil {
		t.Fatal(err)
	}
	c := rec.Assignment
	if got := perWorker(c); c.Generation != 3 || c.Want != 3 || got["w1"] != 2 || got["w2"] != 2 || got["w3"] != 2 || rec.Moved != 2 {
		t.Fatalf("rebalanced: %+v %v, moved %d", c, got, rec.Moved)
	}

	// Every slot is taken: a second topology is refused, with the reason, and
	// withdrawn (its spec killed, so it does not start when a slot frees).
	_, err = client.Submit(ctx, wcSpec(t, "other", 1))
	if !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), `topology "other" asks for 1 worker, but 0 live workers have a free slot for it; w1 is full (its 1 slot runs wc)`) {
		t.Fatalf("submit with no free slot: %v", err)
	}
	if sp, err := client.Spec(ctx, "other"); err != nil || !sp.Killed {
		t.Errorf("refused submit left %+v (%v), want it killed", sp, err)
	}
	if _, err := client.Submit(ctx, spec); !errors.Is(err, ErrSubmitted) {
		t.Errorf("second submit of wc: %v, want ErrSubmitted", err)
	}

	// Deactivate changes the record, not the placement; activate keeps the placement
	// under a new generation, since the workers stopped the deactivated run and start
	// a new one on subjects of its own.
	if rec, err = client.Deactivate(ctx, "wc"); err != nil || !rec.Inactive || rec.Generation() != 3 {
		t.Fatalf("deactivate: %+v %v", rec, err)
	}
	if rec, err = client.Activate(ctx, "wc"); err != nil || rec.Inactive || rec.Generation() != 4 || perWorker(rec.Assignment)["w1"] != 2 ||
		perWorker(rec.Assignment)["w2"] != 2 || perWorker(rec.Assignment)["w3"] != 2 {
		t.Fatalf("activate: %+v %v", rec, err)
	}

	// Kill frees the slots (the record keeps the last assignment, for the workers to
	// stop); a resubmit goes on from its generation.
	if rec, err = client.Kill(ctx, "wc"); err != nil || !rec.Killed || rec.Generation() != 4 {
		t.Fatalf("kill: %+v %v", rec, err)
	}
	if rec, err = client.Submit(ctx, wcSpec(t, "other", 1)); err != nil || rec.Generation() != 1 || !slices.Equal(rec.Assignment.Workers, []string{"w1"}) {
		t.Fatalf("other after wc's kill: %+v %v", rec, err)
	}
	if rec, err = client.Submit(ctx, spec); err != nil || rec.Generation() != 5 || !slices.Equal(rec.Assignment.Workers, []string{"w2", "w3"}) {
		t.Fatalf("wc submitted again: %+v %v", rec, err)
	}
	st, err := client.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Workers) != 3 || st.Lease == nil || st.Lease.Holder != "s1" || len(st.Records) != 2 || len(st.Specs) != 2 {
		t.Errorf("status: %d workers, lease %+v, %d records, %d specs", len(st.Workers), st.Lease, len(st.Records), len(st.Specs))
	}

	// No worker at all: the assignment stays, the record says why. (The workers
	// leave one by one: a pass may see wc on w3 alone before none is left.)
	w1.stop()
	w2.stop()
	w3.stop()
	last := rec
	ev.wait(t, 10*time.Second, "no-worker record", func(e Event) bool {
		if e.Kind != Wrote || e.Topology != "wc" {
			return false
		}
		if e.Record.Error == "" {
			last = e.Record
			return false
		}
		return true
	})
	lost, err := client.Record(ctx, "wc")
	if err != nil || lost.Error != `placement: topology "wc": no live worker` || !reflect.DeepEqual(lost.Assignment, last.Assignment) {
		t.Fatalf("with no worker: %+v (%v), want the assignment kept: %+v", lost, err, last.Assignment)
	}
	gen := last.Generation()
	// One worker back: wc runs on it, short of one; a second fills the gap.
	startWorker(t, url, prefix, "w4", 2)
	w := ev.wait(t, 10*time.Second, "placement on w4", func(e Event) bool { return e.Kind == Wrote && e.Topology == "wc" && e.Record.Error == "" })
	if a := w.Record.Assignment; a.Generation != gen+1 || !slices.Equal(a.Workers, []string{"w4"}) || w.Record.Short != 1 {
		t.Fatalf("on w4: %+v short %d", a, w.Record.Short)
	}
	startWorker(t, url, prefix, "w5", 2)
	w = ev.wait(t, 10*time.Second, "placement on w4 and w5", func(e Event) bool { return e.Kind == Wrote && e.Topology == "wc" && e.Record.Short == 0 })
	if a := w.Record.Assignment; a.Generation != gen+2 || !slices.Equal(a.Workers, []string{"w4", "w5"}) {
		t.Fatalf("on w4 and w5: %+v", a)
	}
}

// candidate is a scheduler candidate that a test can pause just before a write,
// between its lease check and the write (as a GC pause or SIGSTOP would).
type candidate struct {
	name   string
	sc     *Scheduler
	ev     *events
	armed  atomic.Bool
	paused chan struct{}
	resume chan struct{}
	once   sync.Once
}

func newCandidate(t *testing.T, s *Store, name string) *candidate {
	c := &candidate{name: name, paused: make(chan struct{}), resume: make(chan struct{})}
	c.sc, c.ev = newScheduler(t, s, name)
	c.sc.beforeWrite = func(string) {
		if c.armed.CompareAndSwap(true, false) {
			close(c.paused)
			<-c.resume
		}
	}
	goRun(t, c.sc.Run)
	t.Cleanup(c.unpause) // before Run is stopped
	return c
}

func (c *candidate) unpause() { c.once.Do(func() { close(c.resume) }) }

// Two candidates: exactly one holds the lease while it renews. Paused past the TTL
// just before a write, it loses the lease to the other, which takes over after
// the TTL; when it wakes, its write (a valid compare-and-set: the other, having
// nothing to change, wrote nothing) is refused by the fence and its term ends.
func TestSchedulerTakeoverAndFence(t *testing.T) {
	url := runServer(t).ClientURL()
	prefix := newPrefix()
	client := openStore(t, url, Config{Prefix: prefix})
	ctx := ctxT(t, 60*time.Second)
	leases, stopLeases, err := client.watch(ctx, client.lease, leaseKey)
	if err != nil {
		t.Fatal(err)
	}
	defer stopLeases()
	members, err := client.WatchWorkers(ctx, false)
	if err != nil {
		t.Fatal(err)
	}
	cands := map[string]*candidate{}
	for _, name := range []string{"a", "b"} {
		cands[name] = newCandidate(t, openStore(t, url, Config{Prefix: prefix}), name)
	}
	// nextLease returns the next change of the lease: its holder ("" when gone) and
	// when the server stored it, also kept in last.
	last := map[string]time.Time{}
	nextLease := func() (string, time.Time) {
		t.Helper()
		for {
			select {
			case e := <-leases.Updates():
				if e == nil {
					continue
				}
				if isGone(e) {
					last[""] = e.Created()
					return "", e.Created()
				}
				l, err := decodeLease(e)
				if err != nil {
					t.Fatal(err)
				}
				last[l.Holder] = e.Created()
				return l.Holder, e.Created()
			case <-ctx.Done():
				t.Fatal("no lease change")
			}
		}
	}
	holder, _ := nextLease()
	leader := cands[holder]
	follower := cands[map[string]string{"a": "b", "b": "a"}[holder]]
	elected := leader.ev.wait(t, 5*time.Second, "election", kind(Elected, ""))
	// The leader renews (every TTL/3); the follower, trying at every TTL/2 and at
	// every change, never gets the lease.
	for range 4 {
		if h, _ := nextLease(); h != leader.name {
			t.Fatalf("lease went to %q while %s renewed it", h, leader.name)
		}
	}
	select {
	case e := <-follower.ev.ch:
		t.Fatalf("follower %s: %+v while %s held the lease", follower.name, e, leader.name)
	default:
	}

	startWorker(t, url, prefix, "w1", 1)
	w2 := startWorker(t, url, prefix, "w2", 1)
	startWorker(t, url, prefix, "w3", 1)
	waitWorkers(t, leader.ev, 3)
	rec, err := client.Submit(ctx, wcSpec(t, "wc", 2))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(rec.Assignment.Workers, []string{"w1", "w2"}) || rec.Epoch != elected.Epoch {
		t.Fatalf("submitted: %+v", rec)
	}

	// w2 leaves: the leader decides to move its tasks to w3, and is paused just
	// before it writes that. w2 comes back at once.
	leader.armed.Store(true)
	w2.stop()
	select {
	case <-leader.paused:
	case <-time.After(10 * time.Second):
		t.Fatal("the leader did not try to write after w2 left")
	}
	startWorker(t, url, prefix, "w2", 1)
	waitMember(t, members, 5*time.Second, Left, "w2")
	waitMember(t, members, 5*time.Second, Joined, "w2")

	// The paused leader renews no more: its lease expires a TTL after its last
	// renewal, and the follower takes it.
	var takenAt time.Time
	for takenAt.IsZero() {
		if h, at := nextLease(); h == follower.name {
			takenAt = at
		}
	}
	lastRenewal := last[leader.name]
	if d := takenAt.Sub(lastRenewal); d < testTTL {
		t.Errorf("lease taken over %v after the last renewal, before the TTL of %v", d, testTTL)
	} else {
		t.Logf("lease taken over %v after the paused holder's last renewal (TTL %v)", d.Round(time.Millisecond), testTTL)
	}
	took := follower.ev.wait(t, 5*time.Second, "election", kind(Elected, ""))
	if took.Epoch <= elected.Epoch {
		t.Fatalf("follower's epoch %d is not after the leader's %d", took.Epoch, elected.Epoch)
	}
	// It sees w1, w2 and w3 live, and wc where it should be; but w2 is another
	// process than the one wc's generation 1 was given to (restarted under its
	// name): its only write renews the generation, the placement unchanged.
	var renewed *Record
	follower.ev.wait(t, 5*time.Second, "pass over 3 workers", func(e Event) bool {
		if e.Kind == Wrote {
			if renewed != nil || e.Record.Generation() != 2 || !slices.Equal(e.Record.Assignment.Workers, []string{"w1", "w2"}) ||
				e.Record.Moved != 3 || e.Record.Incarnations["w2"] == rec.Incarnations["w2"] {
				t.Fatalf("follower wrote %+v, want generation 2 on w1 and w2 once (w2 restarted)", e.Record)
			}
			renewed = e.Record
		}
		return e.Kind == Passed && e.Workers == 3
	})
	if renewed == nil {
		t.Fatal("the follower did not renew wc's generation after w2's restart")
	}

	// The leader wakes and writes on the record's current revision: fenced off.
	leader.unpause()
	end := leader.ev.wait(t, 5*time.Second, "end of term", kind(TermEnded, ""))
	if !errors.Is(end.Err, ErrFenced) || end.Epoch != elected.Epoch {
		t.Fatalf("the stale leader's term ended with %v (epoch %d), want ErrFenced (epoch %d)", end.Err, end.Epoch, elected.Epoch)
	}
	t.Logf("stale write refused: %v", end.Err)
	now, err := client.Record(ctx, "wc")
	if err != nil || now.Revision != renewed.Revision || now.Generation() != 2 {
		t.Fatalf("wc after the stale write: %+v (%v), want the follower's revision %d unchanged", now, err, renewed.Revision)
	}

	l, err := client.Lease(ctx)
	if err != nil || l.Holder != follower.name {
		t.Fatalf("lease: %+v %v", l, err)
	}
}

// Without a scheduler a request is written but not answered: Submit says so when
// its context ends. Bad requests are refused before anything is written.
func TestSubmitWithoutScheduler(t *testing.T) {
	url := runServer(t).ClientURL()
	client := openStore(t, url, Config{Prefix: newPrefix()})
	_, err := client.Submit(ctxT(t, 300*time.Millisecond), wcSpec(t, "wc", 1))
	if err == nil || !strings.Contains(err.Error(), "no answer for wc (request 1) from the scheduler (no scheduler holds the lease: is a worker running?)") {
		t.Errorf("submit without a scheduler: %v", err)
	}
	ctx := ctxT(t, 5*time.Second)
	for _, sp := range []Spec{wcSpec(t, "a.b", 1), {Topology: "empty"}, wcSpec(t, "_x", 1)} {
		if _, err := client.Submit(ctx, sp); !errors.Is(err, ErrConfig) {
			t.Errorf("submit %q: %v, want ErrConfig", sp.Topology, err)
		}
	}
	if _, err := client.Rebalance(ctx, "nope", 2); !errors.Is(err, ErrNotSubmitted) {
		t.Errorf("rebalance of a topology never submitted: %v", err)
	}
}

// A worker that refuses a topology as submitted (its build lacks it, or has another
// fingerprint) says so in its heartbeat: the scheduler moves its tasks to the
// workers that do not refuse it, and refuses the topology once none is left. A
// refusal of another fingerprint (an older submission) does not count.
func TestSchedulerAvoidsRefusingWorkers(t *testing.T) {
	url := runServer(t).ClientURL()
	prefix := newPrefix()
	client := openStore(t, url, Config{Prefix: prefix})
	ev, _ := scheduler(t, openStore(t, url, Config{Prefix: prefix}), "s1")
	ev.wait(t, 5*time.Second, "election", kind(Elected, ""))
	w1 := startWorker(t, url, prefix, "w1", 1)
	w2 := startWorker(t, url, prefix, "w2", 1)
	waitWorkers(t, ev, 2)

	ctx := ctxT(t, 60*time.Second)
	spec := wcSpec(t, "wc", 2)
	rec, err := client.Submit(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(rec.Assignment.Workers, []string{"w1", "w2"}) {
		t.Fatalf("submitted on %v, want w1 and w2", rec.Assignment.Workers)
	}
	// A refusal of another fingerprint changes nothing.
	w2.h.SetRunning(nil, map[string]Refusal{"wc": {Fingerprint: "wc shape 0000 codec v1 module x", Reason: "old"}})
	ev.wait(t, 10*time.Second, "pass after w2's stale refusal", kind(Passed, ""))
	if rec, err = client.Record(ctx, "wc"); err != nil || rec.Generation() != 1 {
		t.Fatalf("after a refusal of another fingerprint: %+v %v, want generation 1", rec, err)
	}
	// w2 refuses this submission: its tasks go to w1, under a new generation.
	w2.h.SetRunning(nil, map[string]Refusal{"wc": {Fingerprint: spec.Fingerprint.String(), Reason: "cluster: topology not in this build"}})
	wrote := ev.wait(t, 10*time.Second, "wc moved off w2", kind(Wrote, "wc"))
	if a := wrote.Record.Assignment; a.Generation != 2 || !slices.Equal(a.Workers, []string{"w1"}) || perWorker(a)["w1"] != 6 {
		t.Fatalf("after w2 refused: %+v", a)
	}
	// w1 refuses too: nobody is left, the record says so and keeps the assignment.
	w1.h.SetRunning(nil, map[string]Refusal{"wc": {Fingerprint: spec.Fingerprint.String(), Reason: "fingerprint differs"}})
	refused := ev.wait(t, 10*time.Second, "wc refused", kind(Refused, "wc"))
	if refused.Err == nil || !strings.Contains(refused.Err.Error(), `no live worker (refused by w1: fingerprint differs; w2: cluster: topology not in this build)`) {
		t.Errorf("refusal: %v", refused.Err)
	}
}

// A submit pinned to a worker whose heartbeat is stored but not yet in the term's
// view of the workers (the two watches are not ordered) waits for the join instead
// of being refused: gale serve submits the moment its own heartbeat is stored, and
// was refused "pinned to worker serve, which is not live" now and then.
func TestSchedulerWaitsForAPinnedWorkerItHasNotHeardYet(t *testing.T) {
	url := runServer(t).ClientURL()
	s := openStore(t, url, Config{Prefix: newPrefix()})
	sc, _ := newScheduler(t, s, "sched")
	w := startWorker(t, url, s.Config().Prefix, "serve", 1)
	ld := &leader{members: members{live: map[string]WorkerInfo{}}}
	ctx := ctxT(t, 10*time.Second)
	select {
	case <-w.h.Joined():
	case <-ctx.Done():
		t.Fatal("the heartbeat never joined")
	}
	if !sc.joining(ctx, ld, "serve") {
		t.Error("serve's heartbeat is stored, the view has not heard it: want joining")
	}
	if sc.joining(ctx, ld, "ghost") {
		t.Error("ghost has no heartbeat: want not joining (a refusal)")
	}
	ld.members.live["serve"] = WorkerInfo{Name: "serve"}
	if sc.joining(ctx, ld, "serve") {
		t.Error("serve is live in the view: its pin's failure is another matter")
	}
}
