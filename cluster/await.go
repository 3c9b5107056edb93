package cluster

import (
	"context"
	"fmt"
)

// AwaitOptions say what Store.AwaitRunning waits for.
type AwaitOptions struct {
	// Next waits for a generation above the record's (what the scheduler does next:
	// a failover's, a rebalance's) rather than for the record's own. Meanwhile a
	// record of that generation or an older one, killed, inactive or refused (Error)
	// is followed, not answered: the scheduler may pass through them.
	Next bool
	// Refused, if set, is called once for each worker of the awaited generation
	// whose heartbeat refuses the topology as submitted (its build lacks it, or has
	// another fingerprint), with the reason; the scheduler then places it on the
	// others, or refuses it (an error, without Next).
	Refused func(worker string, r Refusal)
}

// AwaitRunning waits until every worker of rec's generation says in its heartbeat
// that it runs it (WorkerInfo.Running), following the newer records of rec's
// topology, and returns the record whose generation runs on all its workers. Without
// o.Next it fails once the topology is killed or the scheduler refuses it (wrapping
// ErrRefused); when ctx ends first, the error says what was placed and wraps ctx's.
func (s *Store) AwaitRunning(ctx context.Context, rec *Record, o AwaitOptions) (*Record, error) {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	members, err := s.WatchWorkers(wctx, false)
	if err != nil {
		return nil, err
	}
	recs, err := s.WatchRecords(wctx)
	if err != nil {
		return nil, err
	}
	after := rec.Generation()
	live := map[string]WorkerInfo{}
	told := map[string]bool{}
	for {
		wait := o.Next && (rec.Killed || rec.Inactive || rec.Error != "" || rec.Generation() <= after)
		switch {
		case wait:
		case rec.Killed:
			return nil, fmt.Errorf("topology %s was killed while starting", rec.Topology)
		case rec.Error != "":
			return nil, fmt.Errorf("%w: %s", ErrRefused, rec.Error)
		case rec.Assignment != nil && runsEverywhere(rec, live, told, o.Refused):
			return rec, nil
		}
		select {
		case <-ctx.Done():
			if o.Next && rec.Generation() <= after {
				return nil, fmt.Errorf("topology %s: no generation above %d placed within the timeout: %w", rec.Topology, after, ctx.Err())
			}
			return nil, fmt.Errorf("topology %s placed (generation %d) but not running on every worker within the timeout: %w", rec.Topology, rec.Generation(), ctx.Err())
		case ev, ok := <-members:
			if !ok {
				return nil, ctx.Err()
			}
			if ev.Kind == Left {
				delete(live, ev.Worker.Name)
			} else {
				live[ev.Worker.Name] = ev.Worker
			}
		case r, ok := <-recs:
			if !ok {
				return nil, ctx.Err()
			}
			if r.Topology == rec.Topology && r.Revision >= rec.Revision {
				rec = r
			}
		}
	}
}

// runsEverywhere reports whether every worker of rec's assignment runs its
// generation, as live says; it tells refused of each refusal of rec not told yet.
func runsEverywhere(rec *Record, live map[string]WorkerInfo, told map[string]bool, refused func(string, Refusal)) bool {
	all := true
	for _, w := range rec.Assignment.Workers {
		info := live[w]
		if r, ok := info.Refused[rec.Topology]; ok && r.Fingerprint == rec.Fingerprint.String() && !told[w] {
			told[w] = true
			if refused != nil {
				refused(w, r)
			}
		}
		if info.Running[rec.Topology] != rec.Generation() {
			all = false
		}
	}
	return all
}
