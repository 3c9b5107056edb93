package cluster

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/gale-stream/gale/cluster/placement"
)

// SchedulerConfig configures a scheduler candidate.
type SchedulerConfig struct {
	// Name names the candidate in the lease and in the records it writes: its
	// worker's name.
	Name string
	// OnEvent, if set, is told of every election, term end, write and pass. It is
	// called on the scheduler's goroutine: it must not block.
	OnEvent func(Event)
}

// EventKind says what a scheduler did.
type EventKind int

const (
	// Elected: it took the lease and started a term (Epoch).
	Elected EventKind = iota + 1
	// TermEnded: it stopped writing; Err says why (ErrFenced, ErrLeaseLost,
	// ErrLeaseExpired, ErrConflict, an I/O error), nil after a graceful stop that
	// released the lease.
	TermEnded
	// Wrote: it wrote a topology's Record (Generation, Moved).
	Wrote
	// Refused: placing a topology failed (Err); its record keeps the previous
	// assignment and says why.
	Refused
	// Passed: a pass over every topology ended (Workers live, Writes, Duration).
	Passed
	// Rewatched: the workers watch had gone silent (Err says how long): the watches
	// were made again and the view rebuilt from them.
	Rewatched
)

func (k EventKind) String() string {
	switch k {
	case Elected:
		return "elected"
	case TermEnded:
		return "term ended"
	case Wrote:
		return "wrote"
	case Refused:
		return "refused"
	case Passed:
		return "passed"
	case Rewatched:
		return "rewatched"
	}
	return fmt.Sprintf("EventKind(%d)", int(k))
}

// Event is something a scheduler did.
type Event struct {
	Kind     EventKind
	Epoch    uint64 // the term's
	Topology string
	// Record is what Wrote wrote (its Revision set).
	Record   *Record
	Workers  int
	Writes   int
	Duration time.Duration
	Err      error
}

var (
	// ErrLeaseLost: the lease's renewal was refused: it expired (the holder was
	// paused or cut off for a TTL) and another took it, or it was deleted.
	ErrLeaseLost = errors.New("cluster: scheduler lease lost")
	// ErrLeaseExpired: the holder could not renew the lease within its TTL (by its
	// own clock), so it stops writing before the server lets another take over.
	ErrLeaseExpired = errors.New("cluster: scheduler lease not renewed within its TTL")
)

// Scheduler is a candidate for the cluster's one scheduler. Every worker runs one:
// the candidate holding the lease places every topology; the others wait to take
// over.
type Scheduler struct {
	s       *Store
	name    string
	inc     string
	onEvent func(Event)
	// beforeWrite, if set (by tests), is called between the lease check and a
	// record's write: where a pause (GC, SIGSTOP, a slow network) lets another
	// scheduler take over unseen.
	beforeWrite func(topology string)
}

// NewScheduler returns a scheduler candidate.
func (s *Store) NewScheduler(cfg SchedulerConfig) (*Scheduler, error) {
	if err := checkName("scheduler", cfg.Name); err != nil {
		return nil, err
	}
	on := cfg.OnEvent
	if on == nil {
		on = func(Event) {}
	}
	return &Scheduler{s: s, name: cfg.Name, inc: newIncarnation(), onEvent: on}, nil
}

// Run campaigns for the lease until ctx ends: it tries to create it now, again
// whenever a watch shows it gone (expired or released), and every LeaseTTL/2 (on
// the Store's clock). Holding it, it schedules (see the package documentation)
// until its term ends, then campaigns again. When ctx ends while it holds the
// lease it releases it, so that another candidate takes over at once. It returns
// nil when ctx ends, or an error it cannot go on from.
func (sc *Scheduler) Run(ctx context.Context) error {
	s := sc.s
	lw, stop, err := s.watch(ctx, s.lease, leaseKey)
	if err != nil {
		return fmt.Errorf("cluster: watch the lease: %w", err)
	}
	defer stop()
	retry := s.cfg.Clock.NewTicker(s.cfg.LeaseTTL / 2)
	defer retry.Stop()
	for ctx.Err() == nil {
		if sc.campaign(ctx, lw) {
			// The term ended. If it ended in error (fenced, a conflict, the server
			// unreachable) wait for the lease to go or for the next retry, rather than
			// spin on an error that lasts.
			select {
			case <-ctx.Done():
				return nil
			case <-retry.C():
				continue
			case e, ok := <-lw.Updates():
				if !ok {
					return sc.closed(ctx)
				}
				_ = e
				continue
			}
		}
	wait:
		for {
			select {
			case <-ctx.Done():
				return nil
			case e, ok := <-lw.Updates():
				if !ok {
					return sc.closed(ctx)
				}
				if e != nil && isGone(e) {
					break wait
				}
			case <-retry.C():
				break wait
			}
		}
	}
	return nil
}

// closed is Run's return when the lease watch closes: nil if ctx ended (which
// closes it), else an error.
func (sc *Scheduler) closed(ctx context.Context) error {
	if ctx.Err() != nil {
		return nil
	}
	return errors.New("cluster: lease watch closed")
}

// campaign tries once to take the lease (or to start a new term on it if it is
// still this candidate's, after a term that ended in error) and, if it did, leads
// until the term ends. It reports whether a term ended in error.
func (sc *Scheduler) campaign(ctx context.Context, lw jetstream.KeyWatcher) bool {
	s := sc.s
	l := &Lease{Holder: sc.name, Incarnation: sc.inc, Since: s.cfg.Clock.Now()}
	sent := s.cfg.Clock.Now()
	rev, err := s.acquire(ctx, l)
	if errors.Is(err, jetstream.ErrKeyExists) {
		if have, gerr := s.Lease(ctx); gerr == nil && have.Incarnation == sc.inc {
			l.Since = have.Since
			sent = s.cfg.Clock.Now()
			rev, err = s.renew(ctx, l, have.Revision)
		}
	}
	if err != nil {
		return false
	}
	return sc.lead(ctx, l, rev, sent, lw) != nil
}

// leader is a term's state.
type leader struct {
	l       *Lease
	rev     uint64    // the lease's revision now
	valid   time.Time // the lease is ours until valid+LeaseTTL (the send time of its last write)
	t       *term
	members members
	specs   map[string]*Spec
	recs    map[string]*Record
}

// lead holds the lease of revision rev (written at sent) until the term ends.
func (sc *Scheduler) lead(ctx context.Context, l *Lease, rev uint64, sent time.Time, lw jetstream.KeyWatcher) error {
	s := sc.s
	ld := &leader{l: l, rev: rev, valid: sent, members: members{live: map[string]WorkerInfo{}}, specs: map[string]*Spec{}}
	err := sc.term(ctx, ld, lw)
	if ctx.Err() != nil {
		err = nil
		if rerr := s.release(ld.rev); rerr != nil {
			err = fmt.Errorf("cluster: release the lease: %w", rerr)
		}
	}
	sc.onEvent(Event{Kind: TermEnded, Epoch: ld.epoch(), Err: err})
	return err
}

func (ld *leader) epoch() uint64 {
	if ld.t == nil {
		return 0
	}
	return ld.t.epoch
}

// term runs one term: fence, read, then a pass on every change until the lease is
// lost or ctx ends.
func (sc *Scheduler) term(ctx context.Context, ld *leader, lw jetstream.KeyWatcher) error {
	s := sc.s
	var err error
	if ld.t, err = s.fence(ctx, ld.l, ld.rev); err != nil {
		return err
	}
	if ld.recs, _, err = s.loadRecords(ctx); err != nil {
		return err
	}
	v := &views{}
	defer v.close()
	if err := v.open(ctx, sc, ld); err != nil {
		return err
	}
	sc.onEvent(Event{Kind: Elected, Epoch: ld.t.epoch})

	renew := s.cfg.Clock.NewTicker(s.cfg.LeaseTTL / 3)
	defer renew.Stop()
	for {
		dirty := false
		// One event, then whatever else is ready: a burst makes one pass.
		for first := true; ; first = false {
			var e jetstream.KeyValueEntry
			var ok bool
			var from string
			if first {
				select {
				case <-ctx.Done():
					return ctx.Err()
				case <-renew.C():
					if err := sc.renew(ctx, ld); err != nil {
						return err
					}
					if v.silent(sc, ld) {
						if err := v.open(ctx, sc, ld); err != nil {
							return err
						}
					}
					continue
				case e, ok = <-lw.Updates():
					from = "lease"
				case e, ok = <-v.ww.Updates():
					from = "workers"
				case e, ok = <-v.tw.Updates():
					from = "topologies"
				}
			} else {
				select {
				case e, ok = <-lw.Updates():
					from = "lease"
				case e, ok = <-v.ww.Updates():
					from = "workers"
				case e, ok = <-v.tw.Updates():
					from = "topologies"
				default:
				}
				if from == "" {
					break
				}
			}
			if !ok {
				return fmt.Errorf("cluster: %s watch closed", from)
			}
			switch from {
			case "lease":
				if e == nil {
					continue
				}
				if isGone(e) {
					return fmt.Errorf("%w: it expired or was deleted at revision %d", ErrLeaseLost, e.Revision())
				}
				if other, err := decodeLease(e); err == nil && other.Incarnation != sc.inc {
					return fmt.Errorf("%w: %s holds it (revision %d)", ErrLeaseLost, other.Holder, e.Revision())
				}
			case "workers":
				v.heard = s.cfg.Clock.Now()
				if e == nil {
					v.wInit, dirty = true, true
					continue
				}
				if ev, ok := ld.members.apply(e); ok && ev.Kind != Beat {
					dirty = true
				}
			case "topologies":
				if e == nil {
					v.tInit, dirty = true, true
					continue
				}
				dirty = true
				if isGone(e) {
					delete(ld.specs, e.Key())
					continue
				}
				if sp, err := decodeSpec(e); err == nil {
					ld.specs[sp.Topology] = sp
				}
			}
		}
		if !dirty || !v.wInit || !v.tInit {
			continue
		}
		if err := sc.pass(ctx, ld); err != nil {
			return err
		}
	}
}

// views are a term's watches of the workers and topologies buckets.
type views struct {
	ww, tw       jetstream.KeyWatcher
	stopW, stopT func()
	wInit, tInit bool      // the watches have sent their initial values
	heard        time.Time // the workers watch's last entry (the Store's clock)
}

// open (re)starts the watches, and the term's view with them: the initial values
// rebuild the live workers and the specs, and a pass waits for both.
func (v *views) open(ctx context.Context, sc *Scheduler, ld *leader) error {
	s := sc.s
	v.close()
	clear(ld.members.live)
	clear(ld.specs)
	v.wInit, v.tInit, v.heard = false, false, s.cfg.Clock.Now()
	var err error
	if v.ww, v.stopW, err = s.watch(ctx, s.workers, ">"); err != nil {
		return err
	}
	if v.tw, v.stopT, err = s.watch(ctx, s.topologies, ">"); err != nil {
		return err
	}
	return nil
}

func (v *views) close() {
	for _, stop := range []*func(){&v.stopW, &v.stopT} {
		if *stop != nil {
			(*stop)()
			*stop = nil
		}
	}
}

// silent reports whether the workers watch has gone quiet: live workers beat every
// HeartbeatTTL/3, so a watch that sent nothing for a TTL while some are live has
// lost its consumer (its JetStream node went down; nats.go would notice only after
// two missed idle heartbeats of 5 s, and the reset can fail). Its view may be
// stale: the watches are made again.
func (v *views) silent(sc *Scheduler, ld *leader) bool {
	s := sc.s
	if len(ld.members.live) == 0 || !v.wInit || s.cfg.Clock.Since(v.heard) <= s.cfg.HeartbeatTTL {
		return false
	}
	sc.onEvent(Event{Kind: Rewatched, Epoch: ld.t.epoch, Workers: len(ld.members.live),
		Err: fmt.Errorf("cluster: workers watch silent for %v with %d live workers", s.cfg.Clock.Since(v.heard).Round(time.Millisecond), len(ld.members.live))})
	return true
}

// renew renews the lease on its revision.
func (sc *Scheduler) renew(ctx context.Context, ld *leader) error {
	s := sc.s
	sent := s.cfg.Clock.Now()
	rev, err := s.renew(ctx, ld.l, ld.rev)
	switch {
	case err == nil:
		ld.rev, ld.valid = rev, sent
		return nil
	case errors.Is(err, jetstream.ErrKeyRevisionMismatch):
		return fmt.Errorf("%w: renewal of revision %d refused", ErrLeaseLost, ld.rev)
	}
	return sc.checkValid(ld, err)
}

// checkValid ends the term when the lease's TTL has passed since its last write
// was sent: by now the server may have let another scheduler take it.
func (sc *Scheduler) checkValid(ld *leader, cause error) error {
	s := sc.s
	if age := s.cfg.Clock.Since(ld.valid); age >= s.cfg.LeaseTTL {
		return fmt.Errorf("%w: last renewed %v ago (TTL %v; %v)", ErrLeaseExpired, age.Round(time.Millisecond), s.cfg.LeaseTTL, cause)
	}
	return nil
}

// pass places every topology, in name order, and writes what changed.
func (sc *Scheduler) pass(ctx context.Context, ld *leader) error {
	s := sc.s
	start := s.cfg.Clock.Now()
	workers := make([]placement.Worker, 0, len(ld.members.live))
	for _, name := range slices.Sorted(maps.Keys(ld.members.live)) {
		w := ld.members.live[name]
		workers = append(workers, w.placement())
	}
	occupied := map[string]*placement.Assignment{}
	for name, r := range ld.recs {
		if !r.Killed && r.Assignment != nil {
			occupied[name] = r.Assignment
		}
	}
	names := slices.Sorted(maps.Keys(ld.specs))
	for name := range ld.recs {
		if ld.specs[name] == nil {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	writes := 0
	for _, name := range names {
		rec := ld.recs[name]
		others := make([]*placement.Assignment, 0, len(occupied))
		for _, o := range slices.Sorted(maps.Keys(occupied)) {
			others = append(others, occupied[o])
		}
		ready, refusals := willing(workers, ld.members.live, ld.specs[name])
		next, perr := decide(ld.specs[name], rec, placement.Occupy(ready, others...))
		if pe := (*placement.PinError)(nil); errors.As(perr, &pe) && pe.Err == placement.ErrWorkerNotLive && sc.joining(ctx, ld, pe.Worker) {
			// gale serve submits once its heartbeat is stored, and this term's view
			// of the workers may not have it yet: the join's event makes another pass.
			continue
		}
		if perr == nil && next != nil {
			renew(rec, next, ld.members.live)
		}
		if perr != nil && refusals != "" {
			perr = fmt.Errorf("%w (refused by %s)", perr, refusals)
			next.Error = perr.Error()
		}
		if perr != nil {
			sc.onEvent(Event{Kind: Refused, Epoch: ld.t.epoch, Topology: name, Err: perr})
		}
		if next == nil {
			continue
		}
		if next.Killed || next.Assignment == nil {
			delete(occupied, name)
		} else {
			occupied[name] = next.Assignment
		}
		if sameRecord(rec, next) {
			continue
		}
		if err := sc.checkValid(ld, nil); err != nil {
			return err
		}
		next.Epoch, next.Scheduler, next.Updated = ld.t.epoch, sc.name, s.cfg.Clock.Now()
		val, err := json.Marshal(next)
		if err != nil {
			return err
		}
		if sc.beforeWrite != nil {
			sc.beforeWrite(name)
		}
		var rev uint64
		if rec != nil {
			rev = rec.Revision
		}
		if next.Revision, err = s.write(ctx, ld.t, name, val, rev); err != nil {
			return err // fenced, a conflict, or an unknown outcome: the term ends
		}
		ld.recs[name] = next
		writes++
		sc.onEvent(Event{Kind: Wrote, Epoch: ld.t.epoch, Topology: name, Record: next})
	}
	sc.onEvent(Event{Kind: Passed, Epoch: ld.t.epoch, Workers: len(workers), Writes: writes, Duration: s.cfg.Clock.Since(start)})
	return nil
}

// joining reports whether worker name has a heartbeat stored that this term's view
// of the workers has not heard yet (its watch lags the submit's).
func (sc *Scheduler) joining(ctx context.Context, ld *leader, name string) bool {
	if _, live := ld.members.live[name]; live {
		return false
	}
	ctx, cancel := sc.s.op(ctx)
	defer cancel()
	e, err := sc.s.workers.Get(ctx, name)
	return err == nil && !isGone(e)
}

// renew records the incarnations of next's workers and, if one of them is another
// process than when rec was written (restarted under its name, and back before the
// scheduler saw it go), gives next a new generation, so that every worker starts it
// afresh: the restarted process holds none of the old generation's state, and the
// others cut that generation off.
func renew(rec, next *Record, live map[string]WorkerInfo) {
	a := next.Assignment
	if a == nil || next.Killed {
		return
	}
	inc := make(map[string]string, len(a.Workers))
	for _, w := range a.Workers {
		inc[w] = live[w].Incarnation
	}
	if rec != nil && rec.Assignment != nil && !rec.Killed && rec.Incarnations != nil && a.Generation == rec.Assignment.Generation {
		for _, w := range a.Workers {
			if old, ok := rec.Incarnations[w]; ok && old != inc[w] {
				a.Generation++
				next.Moved = len(a.Tasks(w))
				break
			}
		}
	}
	next.Incarnations = inc
}

// willing returns the workers that do not refuse spec's topology as submitted (its
// fingerprint): a worker whose build lacks it, or has another fingerprint of it,
// says so in its heartbeat, and its tasks go to the others. refusals names the
// others and their reasons, for a placement error.
func willing(workers []placement.Worker, live map[string]WorkerInfo, spec *Spec) (ready []placement.Worker, refusals string) {
	if spec == nil {
		return workers, ""
	}
	ready = make([]placement.Worker, 0, len(workers))
	var why []string
	for _, w := range workers {
		if info, ok := live[w.Name]; ok && info.refuses(spec.Topology, spec.Fingerprint) {
			why = append(why, fmt.Sprintf("%s: %s", w.Name, info.Refused[spec.Topology].Reason))
			continue
		}
		ready = append(ready, w)
	}
	return ready, strings.Join(why, "; ")
}

// decide returns a topology's next record given its spec (nil if it has none), its
// record (nil if none) and the live workers (Runs filled by Occupy), and the
// placement error if placing it failed. A nil record means nothing to write.
// Volatile fields (Epoch, Scheduler, Updated, Revision) are the caller's.
func decide(spec *Spec, rec *Record, workers []placement.Worker) (*Record, error) {
	var next Record
	if rec != nil {
		next = *rec
		next.Assignment = rec.Assignment.Clone()
	}
	if spec == nil || spec.Killed {
		if spec == nil && rec == nil {
			return nil, nil
		}
		if spec != nil {
			next.Topology, next.Spec = spec.Topology, spec.Revision
			if rec == nil {
				next.Fingerprint, next.Args, next.Source, next.Want = spec.Fingerprint, slices.Clone(spec.Args), spec.Source.Clone(), spec.Want
			}
		}
		next.Killed, next.Error, next.Short = true, "", 0
		return &next, nil
	}
	next.Topology, next.Spec, next.Inactive = spec.Topology, spec.Revision, spec.Inactive
	var cur *placement.Assignment
	if rec != nil && !rec.Killed {
		cur = rec.Assignment
	}
	want := 0
	if cur == nil || spec.Want != cur.Want {
		want = spec.Want // a submit, or a rebalance: refused rather than placed short
	}
	res, err := placement.Place(placement.Input{
		Workers:  workers,
		Topology: placement.Topology{Name: spec.Topology, Tasks: spec.Tasks, Pins: spec.Pins},
		Want:     want,
		Current:  cur,
	})
	if err != nil {
		next.Error = err.Error()
		if next.Assignment == nil || rec.Killed {
			next.Fingerprint, next.Args, next.Source, next.Want = spec.Fingerprint, slices.Clone(spec.Args), spec.Source.Clone(), spec.Want
		}
		return &next, err
	}
	a := res.Assignment
	if cur == nil && rec != nil && rec.Assignment != nil {
		// Submitted again after a kill: generations go on from the last, so that a
		// frame of the killed run is never taken for one of this run.
		a.Generation = rec.Assignment.Generation + 1
	}
	if res.Changed {
		next.Moved = len(res.Moves)
	} else if rec != nil && rec.Inactive && !spec.Inactive && cur != nil {
		// Activated: the workers drained and stopped the deactivated run, and start a
		// new one; a new generation gives it subjects of its own, so nothing of the
		// old run's is taken for the new one's.
		a.Generation++
	}
	next.Assignment, next.Killed, next.Error, next.Short = a, false, "", res.Short
	next.Fingerprint, next.Args, next.Source, next.Want = spec.Fingerprint, slices.Clone(spec.Args), spec.Source.Clone(), a.Want
	return &next, nil
}

// sameRecord reports whether writing next would change nothing but the volatile
// fields.
func sameRecord(rec, next *Record) bool {
	if rec == nil {
		return false
	}
	a, b := *rec, *next
	b.Epoch, b.Scheduler, b.Updated, b.Revision = a.Epoch, a.Scheduler, a.Updated, a.Revision
	ja, err1 := json.Marshal(&a)
	jb, err2 := json.Marshal(&b)
	return err1 == nil && err2 == nil && bytes.Equal(ja, jb)
}
