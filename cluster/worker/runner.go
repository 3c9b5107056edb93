package worker

import (
	"context"
	"errors"
	"time"

	"github.com/gale-stream/gale/cluster"
)

// runner runs one topology on a worker: it takes the newest record the worker has
// seen (older ones it has not got to are skipped) and makes what runs match it.
// One goroutine per topology, so a slow start or drain of one does not hold up
// another.
type runner struct {
	w      *Worker
	name   string
	latest chan *cluster.Record // holds at most the newest record not yet applied
	quit   chan struct{}
	done   chan struct{}
	ctx    context.Context // ends at stop, cutting a start under way
	cancel context.CancelFunc

	cur      *live
	finished uint64 // a generation that ended by itself here: not started again
	rec      *cluster.Record
}

func (w *Worker) newRunner(name string) *runner {
	r := &runner{w: w, name: name, latest: make(chan *cluster.Record, 1), quit: make(chan struct{}), done: make(chan struct{})}
	r.ctx, r.cancel = context.WithCancel(context.Background())
	go r.loop()
	return r
}

// offer hands the runner a record, replacing one it has not taken yet.
func (r *runner) offer(rec *cluster.Record) {
	for {
		select {
		case r.latest <- rec:
			return
		default:
		}
		select {
		case <-r.latest:
		default:
		}
	}
}

// stop stops what runs (a drain) and ends the runner.
func (r *runner) stop() {
	close(r.quit)
	r.cancel()
	<-r.done
}

func (r *runner) loop() {
	defer close(r.done)
	defer r.cancel()
	ctx := r.ctx
	retry := time.NewTimer(time.Hour)
	retry.Stop()
	defer retry.Stop()
	for {
		var curDone <-chan struct{}
		if r.cur != nil {
			curDone = r.cur.rt.Done()
		}
		select {
		case <-r.quit:
			if r.cur != nil {
				r.w.stop(r.name, r.cur, true)
				r.cur = nil
			}
			return
		case rec := <-r.latest:
			r.rec = rec
			if r.apply(ctx, rec) {
				retry.Reset(r.w.cfg.RetryStart)
			}
		case <-retry.C:
			if r.apply(ctx, r.rec) {
				retry.Reset(r.w.cfg.RetryStart)
			}
		case <-curDone:
			// Ended by itself: another host of the generation stopped it (a drain
			// every host joins), or its tasks all ended. Not started again until a
			// newer record says so.
			r.finished = r.cur.gen
			r.w.stop(r.name, r.cur, false)
			r.cur = nil
		}
	}
}

// wanted returns the generation of rec that worker name should run, 0 for none.
func wanted(rec *cluster.Record, name string) uint64 {
	if rec == nil || rec.Assignment == nil || rec.Killed || rec.Inactive || cluster.HostOf(rec.Assignment, name) == 0 {
		return 0
	}
	return rec.Generation()
}

// apply makes what runs match rec; it reports whether a failed start should be
// tried again later.
func (r *runner) apply(ctx context.Context, rec *cluster.Record) (retry bool) {
	w := r.w
	want := wanted(rec, w.cfg.Name)
	if r.cur != nil && r.cur.gen != want {
		drain, refusedBy := r.planned(ctx, rec)
		w.stopRefused(r.name, r.cur, drain, refusedBy)
		r.cur = nil
	}
	if want == 0 || r.cur != nil || want == r.finished {
		return false
	}
	if len(r.latest) > 0 {
		// A newer record came meanwhile: start what it says instead (a generation
		// started after its successor would fight it over the state it claims).
		return false
	}
	w.mu.Lock()
	ref, refused := w.refused[r.name]
	w.mu.Unlock()
	if refused && ref.Fingerprint == rec.Fingerprint.String() {
		return false // said already; the scheduler places it elsewhere
	}
	l, err := w.start(ctx, rec)
	if err == nil {
		r.cur = l
		return false
	}
	var rf *refusal
	if errors.As(err, &rf) {
		w.mu.Lock()
		w.refused[r.name] = cluster.Refusal{Fingerprint: rec.Fingerprint.String(), Reason: err.Error()}
		w.mu.Unlock()
		w.publish()
		w.event(Event{Kind: Refused, Topology: r.name, Generation: want, Err: err})
		return false
	}
	w.event(Event{Kind: StartFailed, Topology: r.name, Generation: want, Err: err})
	return true
}

// planned reports whether the change from what runs to rec may drain the running
// generation: only if every worker of it is live and none refused it, and this
// worker was not itself declared lost since it started it (its heartbeat
// expired: it was paused or cut off, and the others cut that generation off
// already). A change the scheduler made because a worker was lost is not
// planned: the lost worker's trees cannot complete, so the generation is cut off
// at once and its spouts' sources replay. Nor is one made because a worker
// refused the generation (its build lacks the topology, or has another
// fingerprint): that worker never ran its part and cannot join a drain, which
// would wait out StopTimeout for it; refusedBy names it.
func (r *runner) planned(ctx context.Context, rec *cluster.Record) (drain bool, refusedBy string) {
	if rec == nil || r.w.hb.Rejoins() != r.cur.rejoins {
		return false, ""
	}
	ctx, cancel := context.WithTimeout(ctx, r.w.cfg.Store.Config().OpTimeout)
	defer cancel()
	ws, err := r.w.cfg.Store.Workers(ctx)
	if err != nil {
		return false, ""
	}
	alive := map[string]cluster.WorkerInfo{}
	for _, wi := range ws {
		alive[wi.Name] = wi
	}
	fp := r.cur.rec.Fingerprint.String()
	for _, name := range r.cur.workers {
		wi, ok := alive[name]
		if !ok {
			return false, ""
		}
		if ref, ok := wi.Refused[r.name]; ok && ref.Fingerprint == fp && wi.Running[r.name] != r.cur.gen {
			return false, name
		}
	}
	return true, ""
}
