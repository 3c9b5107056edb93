package cluster

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/gale-stream/gale/cluster/placement"
)

// Spec is a topology as submitted: the value of its key (its name) in the
// topologies bucket. Clients write it (Submit, Rebalance, Kill, Deactivate,
// Activate), the scheduler reads it; each write is a request, named by the
// revision it got, which the scheduler's Record answers (Record.Spec).
type Spec struct {
	Topology string `json:"topology"`
	// Fingerprint is the submitter's build's (FingerprintOf); workers compare theirs.
	Fingerprint Fingerprint `json:"fingerprint"`
	// Tasks are the topology's tasks (TasksOf), ackers included.
	Tasks []placement.Task `json:"tasks"`
	// Pins keeps tasks on named workers (task id -> worker).
	Pins map[int]string `json:"pins,omitempty"`
	// Want is the number of workers asked for (gale submit/rebalance --workers).
	Want int `json:"want"`
	// Args are the submit arguments (the topology's flags), which every worker
	// builds the topology with.
	Args []string `json:"args,omitempty"`
	// Source names the resolved document (and resources) of a topology submitted
	// as a file, which every worker builds it from; nil for a registered one.
	Source *Source `json:"source,omitempty"`
	// Inactive: deactivated (spouts not called), still placed.
	Inactive bool `json:"inactive,omitempty"`
	// Killed: its tasks stop and it holds no slot; a later Submit of the name starts
	// it again, under a higher generation.
	Killed bool `json:"killed,omitempty"`
	// Revision is the spec's KV revision, filled when read.
	Revision uint64 `json:"-"`
}

// Record is the scheduler's answer for a topology: the value of its key (its name)
// in the assignments bucket, written only by the scheduler holding the lease, with
// a compare-and-set on its revision and on the bucket's position (see the package
// documentation, "Fencing").
type Record struct {
	Topology string `json:"topology"`
	// Assignment is where each task runs (nil until first placed). A refused request
	// or pass leaves the previous one here, and says why in Error. A killed
	// topology keeps its last, for the workers to know what to stop.
	Assignment *placement.Assignment `json:"assignment,omitempty"`
	// Fingerprint, Args, Source, Want, Inactive and Killed are the spec's, as
	// placed.
	Fingerprint Fingerprint `json:"fingerprint"`
	Args        []string    `json:"args,omitempty"`
	Source      *Source     `json:"source,omitempty"`
	Want        int         `json:"want"`
	Inactive    bool        `json:"inactive,omitempty"`
	Killed      bool        `json:"killed,omitempty"`
	// Spec is the revision of the request this record answers.
	Spec uint64 `json:"spec"`
	// Error is why the last request or pass could not be placed (a placement
	// error's text), "" when it was.
	Error string `json:"error,omitempty"`
	// Short is how many workers fewer than wanted the topology runs on for want of
	// free slots; a later pass fills the gap.
	Short int `json:"short,omitempty"`
	// Moved is how many tasks changed worker in the last change of generation.
	Moved int `json:"moved,omitempty"`
	// Incarnations are the incarnations (WorkerInfo.Incarnation) of the assignment's
	// workers when it was written. A worker restarted under its name (a new process,
	// which knows nothing of the generation's state) makes a new generation, though
	// no task moves: the others cut the old one off, and its sources replay.
	Incarnations map[string]string `json:"incarnations,omitempty"`
	// Epoch is the lease revision of the scheduler term that wrote this record;
	// Scheduler names its holder; Updated is its clock's time.
	Epoch     uint64    `json:"epoch"`
	Scheduler string    `json:"scheduler"`
	Updated   time.Time `json:"updated"`
	// Revision is the record's KV revision, filled when read.
	Revision uint64 `json:"-"`
}

// Generation returns the assignment's generation, 0 without one.
func (r *Record) Generation() uint64 {
	if r == nil || r.Assignment == nil {
		return 0
	}
	return r.Assignment.Generation
}

// ErrNotSubmitted: no topology of that name is submitted (or it was killed).
var ErrNotSubmitted = errors.New("cluster: topology not submitted")

// ErrSubmitted: a topology of that name runs already (kill it first).
var ErrSubmitted = errors.New("cluster: topology already submitted")

// ErrRefused wraps the scheduler's refusal of a request (its placement error).
var ErrRefused = errors.New("cluster: request refused by the scheduler")

// Submit submits a topology (Want 0 asks for one worker) and waits (until ctx ends) for the scheduler to place
// it. A refusal (no worker, not enough free slots, a pin on a worker not live)
// withdraws the submission, so nothing is left pending, and returns an error
// wrapping ErrRefused with the scheduler's reason.
func (s *Store) Submit(ctx context.Context, spec Spec) (*Record, error) {
	if err := checkName("topology", spec.Topology); err != nil {
		return nil, err
	}
	if len(spec.Tasks) == 0 {
		return nil, fmt.Errorf("%w: topology %q has no tasks", ErrConfig, spec.Topology)
	}
	if spec.Want < 0 {
		return nil, fmt.Errorf("%w: topology %q wants %d workers", ErrConfig, spec.Topology, spec.Want)
	}
	if spec.Want == 0 {
		spec.Want = 1 // as Storm's topology.workers
	}
	spec.Killed, spec.Inactive = false, false
	val, err := json.Marshal(spec)
	if err != nil {
		return nil, err
	}
	octx, cancel := s.op(ctx)
	rev, err := s.topologies.Create(octx, spec.Topology, val)
	if errors.Is(err, jetstream.ErrKeyExists) {
		// A killed topology's name can be submitted again.
		var old *Spec
		if old, err = s.Spec(octx, spec.Topology); err == nil {
			if !old.Killed {
				err = fmt.Errorf("%w: %q (kill it first)", ErrSubmitted, spec.Topology)
			} else {
				rev, err = s.topologies.Update(octx, spec.Topology, val, old.Revision)
			}
		} else if errors.Is(err, ErrNotSubmitted) {
			err = fmt.Errorf("%w: %q (submitted concurrently)", ErrSubmitted, spec.Topology)
		}
	}
	cancel()
	if err != nil {
		return nil, err
	}
	// withdraw marks the submission killed, unless someone changed it meanwhile, so
	// that nothing is left pending: a submit that failed never starts later.
	withdraw := func() {
		spec.Killed = true
		if val, err := json.Marshal(spec); err == nil {
			octx, cancel := s.op(context.WithoutCancel(ctx))
			_, _ = s.topologies.Update(octx, spec.Topology, val, rev)
			cancel()
		}
	}
	rec, err := s.Await(ctx, spec.Topology, rev)
	if err != nil {
		withdraw() // no answer (no scheduler): the caller was told it failed
		return nil, err
	}
	if rec.Error != "" {
		withdraw()
		return rec, fmt.Errorf("%w: submit %s: %s", ErrRefused, spec.Topology, rec.Error)
	}
	return rec, nil
}

// Spec returns a topology's spec as submitted (ErrNotSubmitted if there is none;
// a killed one is returned, Killed set).
func (s *Store) Spec(ctx context.Context, topology string) (*Spec, error) {
	ctx, cancel := s.op(ctx)
	defer cancel()
	e, err := s.topologies.Get(ctx, topology)
	if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
		return nil, fmt.Errorf("%w: %q", ErrNotSubmitted, topology)
	}
	if err != nil {
		return nil, err
	}
	return decodeSpec(e)
}

func decodeSpec(e jetstream.KeyValueEntry) (*Spec, error) {
	var sp Spec
	if err := json.Unmarshal(e.Value(), &sp); err != nil {
		return nil, fmt.Errorf("cluster: spec of %q: %w", e.Key(), err)
	}
	sp.Topology, sp.Revision = e.Key(), e.Revision()
	return &sp, nil
}

// change applies f to a live topology's spec with a compare-and-set (again on a
// concurrent change) and waits for the scheduler's answer. undo, if not nil, is
// applied back after a refusal (with a compare-and-set on the request's revision).
func (s *Store) change(ctx context.Context, what, topology string, f, undo func(*Spec)) (*Record, error) {
	var rev uint64
	var sp *Spec
	for attempt := 0; ; attempt++ {
		var err error
		sp, err = s.Spec(ctx, topology)
		if err == nil && sp.Killed {
			err = fmt.Errorf("%w: %q was killed", ErrNotSubmitted, topology)
		}
		if err != nil {
			return nil, err
		}
		f(sp)
		val, err := json.Marshal(sp)
		if err != nil {
			return nil, err
		}
		octx, cancel := s.op(ctx)
		rev, err = s.topologies.Update(octx, topology, val, sp.Revision)
		cancel()
		if err == nil {
			break
		}
		if !errors.Is(err, jetstream.ErrKeyRevisionMismatch) || attempt == 4 {
			return nil, fmt.Errorf("cluster: %s %s: %w", what, topology, err)
		}
	}
	rec, err := s.Await(ctx, topology, rev)
	if err != nil {
		return nil, err
	}
	if rec.Error != "" {
		if undo != nil {
			undo(sp)
			if val, err := json.Marshal(sp); err == nil {
				octx, cancel := s.op(ctx)
				_, _ = s.topologies.Update(octx, topology, val, rev)
				cancel()
			}
		}
		return rec, fmt.Errorf("%w: %s %s: %s", ErrRefused, what, topology, rec.Error)
	}
	return rec, nil
}

// Rebalance asks for a topology to run on n workers (n 0: as many as now, evened
// over the live workers) and waits for the scheduler's answer; a refusal keeps the
// topology where it was (and the wanted number as it was).
func (s *Store) Rebalance(ctx context.Context, topology string, n int) (*Record, error) {
	if n < 0 {
		return nil, fmt.Errorf("%w: rebalance %s over %d workers", ErrConfig, topology, n)
	}
	var before int
	return s.change(ctx, "rebalance", topology,
		func(sp *Spec) {
			before = sp.Want
			if n > 0 {
				sp.Want = n
			}
		},
		func(sp *Spec) { sp.Want = before })
}

// Kill stops a topology: the scheduler marks its record killed (its workers stop
// its tasks) and frees its slots.
func (s *Store) Kill(ctx context.Context, topology string) (*Record, error) {
	return s.change(ctx, "kill", topology, func(sp *Spec) { sp.Killed = true }, nil)
}

// Deactivate stops a topology's spouts being called (Storm's deactivate); its tasks
// stay where they are.
func (s *Store) Deactivate(ctx context.Context, topology string) (*Record, error) {
	return s.change(ctx, "deactivate", topology, func(sp *Spec) { sp.Inactive = true }, nil)
}

// Activate undoes Deactivate.
func (s *Store) Activate(ctx context.Context, topology string) (*Record, error) {
	return s.change(ctx, "activate", topology, func(sp *Spec) { sp.Inactive = false }, nil)
}

// Await waits until the scheduler has answered the request of revision rev of a
// topology's spec (its record's Spec is rev or later) and returns the record.
// Without a scheduler (no worker holds the lease) it waits until ctx ends.
func (s *Store) Await(ctx context.Context, topology string, rev uint64) (*Record, error) {
	w, stop, err := s.watch(ctx, s.assignments, topology)
	if err != nil {
		return nil, err
	}
	defer stop()
	noAnswer := func() error {
		holder := "no scheduler holds the lease: is a worker running?"
		if l, err := s.Lease(context.WithoutCancel(ctx)); err == nil {
			holder = "the scheduler is " + l.Holder
		}
		return fmt.Errorf("cluster: no answer for %s (request %d) from the scheduler (%s): %w", topology, rev, holder, ctx.Err())
	}
	for {
		select {
		case e, ok := <-w.Updates():
			if !ok {
				if ctx.Err() != nil { // the watch ends with ctx
					return nil, noAnswer()
				}
				return nil, errors.New("cluster: assignments watch closed")
			}
			if e == nil || isGone(e) {
				continue
			}
			rec, err := decodeRecord(e)
			if err != nil {
				return nil, err
			}
			if rec.Spec >= rev {
				return rec, nil
			}
		case <-ctx.Done():
			return nil, noAnswer()
		}
	}
}

func decodeRecord(e jetstream.KeyValueEntry) (*Record, error) {
	var r Record
	if err := json.Unmarshal(e.Value(), &r); err != nil {
		return nil, fmt.Errorf("cluster: record of %q: %w", e.Key(), err)
	}
	r.Topology, r.Revision = e.Key(), e.Revision()
	return &r, nil
}

// Record returns a topology's record (ErrNotSubmitted if the scheduler has none).
func (s *Store) Record(ctx context.Context, topology string) (*Record, error) {
	ctx, cancel := s.op(ctx)
	defer cancel()
	e, err := s.assignments.Get(ctx, topology)
	if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
		return nil, fmt.Errorf("%w: %q has no record", ErrNotSubmitted, topology)
	}
	if err != nil {
		return nil, err
	}
	return decodeRecord(e)
}

// Records returns every topology's record, by name.
func (s *Store) Records(ctx context.Context) ([]*Record, error) {
	recs, _, err := s.loadRecords(ctx)
	if err != nil {
		return nil, err
	}
	out := slices.Collect(maps.Values(recs))
	slices.SortFunc(out, func(a, b *Record) int { return cmp.Compare(a.Topology, b.Topology) })
	return out, nil
}

// loadRecords reads the assignments bucket: every record, and the fence.
func (s *Store) loadRecords(ctx context.Context) (map[string]*Record, *fenceValue, error) {
	ctx, cancel := s.op(ctx)
	defer cancel()
	w, stop, err := s.watch(ctx, s.assignments, ">")
	if err != nil {
		return nil, nil, err
	}
	defer stop()
	recs := map[string]*Record{}
	var fence *fenceValue
	for {
		select {
		case e, ok := <-w.Updates():
			if !ok {
				return nil, nil, errors.New("cluster: assignments watch closed")
			}
			if e == nil {
				return recs, fence, nil
			}
			if isGone(e) {
				continue
			}
			if e.Key() == fenceKey {
				var f fenceValue
				if err := json.Unmarshal(e.Value(), &f); err != nil {
					return nil, nil, fmt.Errorf("cluster: fence: %w", err)
				}
				f.Revision = e.Revision()
				fence = &f
				continue
			}
			rec, err := decodeRecord(e)
			if err != nil {
				return nil, nil, err
			}
			recs[rec.Topology] = rec
		case <-ctx.Done():
			return nil, nil, ctx.Err()
		}
	}
}

// loadSpecs reads the topologies bucket.
func (s *Store) loadSpecs(ctx context.Context) (map[string]*Spec, error) {
	ctx, cancel := s.op(ctx)
	defer cancel()
	w, stop, err := s.watch(ctx, s.topologies, ">")
	if err != nil {
		return nil, err
	}
	defer stop()
	specs := map[string]*Spec{}
	for {
		select {
		case e, ok := <-w.Updates():
			if !ok {
				return nil, errors.New("cluster: topologies watch closed")
			}
			if e == nil {
				return specs, nil
			}
			if isGone(e) {
				continue
			}
			sp, err := decodeSpec(e)
			if err != nil {
				return nil, err
			}
			specs[sp.Topology] = sp
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// Status is the cluster as `gale cluster status` shows it.
type Status struct {
	Workers []WorkerInfo
	// Lease is the scheduler's lease; nil when no scheduler holds it.
	Lease *Lease
	// Records are the topologies' records, by name; Specs what was asked.
	Records []*Record
	Specs   []*Spec
}

// Status reads the whole cluster's state.
func (s *Store) Status(ctx context.Context) (*Status, error) {
	st := &Status{}
	var err error
	if st.Workers, err = s.Workers(ctx); err != nil {
		return nil, err
	}
	if l, err := s.Lease(ctx); err == nil {
		st.Lease = l
	} else if !errors.Is(err, ErrNoLease) {
		return nil, err
	}
	if st.Records, err = s.Records(ctx); err != nil {
		return nil, err
	}
	specs, err := s.loadSpecs(ctx)
	if err != nil {
		return nil, err
	}
	st.Specs = slices.Collect(maps.Values(specs))
	slices.SortFunc(st.Specs, func(a, b *Spec) int { return cmp.Compare(a.Topology, b.Topology) })
	return st, nil
}

// WatchRecords sends every topology's record, then each one the scheduler writes,
// until ctx ends; then it closes the channel. A worker runs what they assign it:
// its part of the newest generation (EngineAssignment), nothing of a killed one.
func (s *Store) WatchRecords(ctx context.Context) (<-chan *Record, error) {
	w, stop, err := s.watch(ctx, s.assignments, ">")
	if err != nil {
		return nil, err
	}
	out := make(chan *Record, 16)
	go func() {
		defer close(out)
		defer stop()
		for {
			select {
			case e, ok := <-w.Updates():
				if !ok {
					return
				}
				if e == nil || isGone(e) || e.Key() == fenceKey {
					continue
				}
				rec, err := decodeRecord(e)
				if err != nil {
					continue
				}
				select {
				case out <- rec:
				case <-ctx.Done():
					return
				}
			case <-ctx.Done():
				return
			}
		}
	}()
	return out, nil
}
