package cluster

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/gale-stream/gale/cluster/placement"
)

// WorkerInfo is a worker's heartbeat: the value of its key (its name) in the
// workers bucket, rewritten every HeartbeatTTL/3 and gone HeartbeatTTL after the
// last write.
type WorkerInfo struct {
	Name string `json:"name"`
	// Host and PID say where it runs; Started when (its clock).
	Host    string    `json:"host"`
	PID     int       `json:"pid"`
	Started time.Time `json:"started"`
	// Slots is how many topologies it may run at once; a Dedicated worker takes only
	// the tasks pinned to it (gale serve).
	Slots     int  `json:"slots"`
	Dedicated bool `json:"dedicated,omitempty"`
	// Topologies lists what it runs, as it says (the scheduler counts slots from the
	// assignments, not from this).
	Topologies []string `json:"topologies,omitempty"`
	// Running maps each topology whose tasks the worker runs to the generation of
	// its assignment it runs: the topology is running there again after a move once
	// every worker of the new generation says so.
	Running map[string]uint64 `json:"running,omitempty"`
	// Refused maps each topology the worker refuses to the reason (not in its
	// build, another fingerprint): the scheduler places that topology on other
	// workers, and `gale cluster status` shows why. A refusal names the fingerprint
	// it refused (Fingerprint.String), so a resubmitted topology is tried again.
	Refused map[string]Refusal `json:"refused,omitempty"`
	// Module is its build's module version.
	Module string `json:"module"`
	// Incarnation is unique to one run of one process: it tells a worker restarted
	// under the same name from its previous run, and from another live worker given
	// the same name by mistake. Heartbeat sets it.
	Incarnation string `json:"incarnation"`

	// Beat is when the server stored this heartbeat; Revision its KV revision. Both
	// are filled when read, not stored.
	Beat     time.Time `json:"-"`
	Revision uint64    `json:"-"`
}

// Refusal is why a worker does not run a topology submitted with a fingerprint.
type Refusal struct {
	Fingerprint string `json:"fingerprint"` // the refused submission's (Fingerprint.String)
	Reason      string `json:"reason"`
}

// refuses reports whether w refuses topology name submitted with fingerprint fp.
func (w *WorkerInfo) refuses(name string, fp Fingerprint) bool {
	r, ok := w.Refused[name]
	return ok && r.Fingerprint == fp.String()
}

// clone copies the maps and slices of w.
func (w WorkerInfo) clone() WorkerInfo {
	w.Topologies = slices.Clone(w.Topologies)
	w.Running = maps.Clone(w.Running)
	w.Refused = maps.Clone(w.Refused)
	return w
}

// newIncarnation returns a random id for one run of a worker or scheduler.
func newIncarnation() string { return rand.Text() }

// placement returns the worker as placement sees it.
func (w *WorkerInfo) placement() placement.Worker {
	return placement.Worker{Name: w.Name, Slots: w.Slots, Dedicated: w.Dedicated}
}

// decodeWorker reads a heartbeat entry.
func decodeWorker(e jetstream.KeyValueEntry) (WorkerInfo, error) {
	var w WorkerInfo
	if err := json.Unmarshal(e.Value(), &w); err != nil {
		return w, fmt.Errorf("cluster: heartbeat of %q: %w", e.Key(), err)
	}
	w.Name, w.Beat, w.Revision = e.Key(), e.Created(), e.Revision()
	return w, nil
}

// ErrNameInUse: another live worker has the name.
var ErrNameInUse = errors.New("cluster: worker name in use")

// Heartbeat keeps a worker in the workers bucket. Create one with NewHeartbeat and
// call Run.
type Heartbeat struct {
	s *Store

	mu      sync.Mutex
	info    WorkerInfo
	rev     uint64 // of our last write; 0 before the first
	rejoins int
	dirty   chan struct{}
	joined  chan struct{} // closed at the first write
	once    sync.Once
}

// Joined is closed once the heartbeat has been written: the worker holds its name.
// Until then another live worker may hold it (Run then returns ErrNameInUse), so a
// worker takes no work before.
func (h *Heartbeat) Joined() <-chan struct{} { return h.joined }

// NewHeartbeat returns the heartbeat of worker info (Incarnation is set here).
func (s *Store) NewHeartbeat(info WorkerInfo) (*Heartbeat, error) {
	if err := checkName("worker", info.Name); err != nil {
		return nil, err
	}
	if info.Slots < 0 {
		return nil, fmt.Errorf("%w: worker %q has %d slots", ErrConfig, info.Name, info.Slots)
	}
	info.Incarnation = newIncarnation()
	info = info.clone()
	return &Heartbeat{s: s, info: info, dirty: make(chan struct{}, 1), joined: make(chan struct{})}, nil
}

// Info returns the worker's record as last written (or to be written).
func (h *Heartbeat) Info() WorkerInfo {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.info.clone()
}

// Rejoins counts the times this worker found its key expired (it was silent for a
// TTL: paused, or cut off) and wrote it again. Its tasks were meanwhile given to
// others, under a newer generation.
func (h *Heartbeat) Rejoins() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.rejoins
}

// SetTopologies changes the topologies the worker says it runs; written at once.
func (h *Heartbeat) SetTopologies(names []string) {
	h.mu.Lock()
	h.info.Topologies = slices.Clone(names)
	h.mu.Unlock()
	h.touch()
}

// SetRunning says which topologies the worker runs, at which generation, and which
// it refuses and why; written at once. Topologies becomes the names of running.
func (h *Heartbeat) SetRunning(running map[string]uint64, refused map[string]Refusal) {
	h.mu.Lock()
	h.info.Running = maps.Clone(running)
	h.info.Refused = maps.Clone(refused)
	h.info.Topologies = slices.Sorted(maps.Keys(running))
	h.mu.Unlock()
	h.touch()
}

// touch asks Run to write the heartbeat now.
func (h *Heartbeat) touch() {
	select {
	case h.dirty <- struct{}{}:
	default:
	}
}

// Run writes the heartbeat now and every HeartbeatTTL/3 (on the Store's clock)
// until ctx ends; then it deletes the key, so that a worker leaving gracefully is
// gone at once rather than after the TTL. Its first write waits up to a TTL for a
// key left by a previous run of the same worker to expire; another live worker of
// the same name makes it return an error wrapping ErrNameInUse, at once or
// whenever it takes the key over. A failed write (the server unreachable) is
// retried at the next beat; if that lasts a TTL the worker is declared gone, and
// rejoins once it can write again.
func (h *Heartbeat) Run(ctx context.Context) error {
	s := h.s
	every := s.cfg.HeartbeatTTL / 3
	t := s.cfg.Clock.NewTicker(every)
	defer t.Stop()
	var waitedSince time.Time
	for {
		err := h.beat(ctx)
		var taken *nameTakenError
		switch {
		case errors.As(err, &taken):
			// A previous run's key expires within a TTL; a live namesake's never does.
			if h.written() || (!waitedSince.IsZero() && s.cfg.Clock.Since(waitedSince) > s.cfg.HeartbeatTTL+every) {
				return fmt.Errorf("%w: %q is held by %s", ErrNameInUse, h.info.Name, taken.by)
			}
			if waitedSince.IsZero() {
				waitedSince = s.cfg.Clock.Now()
			}
		}
		// Any other error (the server unreachable or slow): try again at the next
		// beat.
		select {
		case <-ctx.Done():
			h.leave()
			return nil
		case <-t.C():
		case <-h.dirty:
		}
	}
}

type nameTakenError struct{ by string }

func (e *nameTakenError) Error() string { return "name held by " + e.by }

func (h *Heartbeat) written() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.rev != 0
}

// beat writes the heartbeat once: Create the first time (and after the key
// expired), else Update on our last revision, so that two workers given one name
// cannot both beat.
func (h *Heartbeat) beat(ctx context.Context) error {
	s := h.s
	h.mu.Lock()
	info, rev := h.info, h.rev
	h.mu.Unlock()
	val, err := json.Marshal(info)
	if err != nil {
		return err
	}
	// Not cancelled with ctx: a beat under way when the worker stops completes, so
	// that leave knows the revision to delete.
	octx, cancel := s.op(context.WithoutCancel(ctx))
	defer cancel()
	if rev != 0 {
		nrev, err := s.workers.Update(octx, info.Name, val, rev)
		if err == nil {
			h.setRev(nrev, false)
			return nil
		}
		if !errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
			return err
		}
		// Our key is gone (expired: we were declared lost) or someone else wrote it.
	}
	nrev, err := s.workers.Create(octx, info.Name, val)
	if err == nil {
		h.setRev(nrev, rev != 0)
		return nil
	}
	if !errors.Is(err, jetstream.ErrKeyExists) {
		return err
	}
	e, gerr := s.workers.Get(octx, info.Name)
	if gerr != nil {
		return err
	}
	other, derr := decodeWorker(e)
	if derr != nil || other.Incarnation != info.Incarnation {
		return &nameTakenError{by: fmt.Sprintf("%s pid %d started %s", other.Host, other.PID, other.Started.Format(time.RFC3339))}
	}
	// Our own write, whose answer was lost: carry on from it.
	h.setRev(e.Revision(), false)
	return nil
}

func (h *Heartbeat) setRev(rev uint64, rejoined bool) {
	h.mu.Lock()
	h.rev = rev
	if rejoined {
		h.rejoins++
	}
	h.mu.Unlock()
	h.once.Do(func() { close(h.joined) })
}

// leave deletes the worker's key if it is still ours.
func (h *Heartbeat) leave() {
	h.mu.Lock()
	rev, name := h.rev, h.info.Name
	h.rev = 0
	h.mu.Unlock()
	if rev == 0 {
		return
	}
	ctx, cancel := h.s.op(context.Background())
	defer cancel()
	_ = h.s.workers.Delete(ctx, name, jetstream.LastRevision(rev))
}

// Workers lists the live workers (whose heartbeat has not expired), by name.
func (s *Store) Workers(ctx context.Context) ([]WorkerInfo, error) {
	ctx, cancel := s.op(ctx)
	defer cancel()
	w, stop, err := s.watch(ctx, s.workers, ">")
	if err != nil {
		return nil, err
	}
	defer stop()
	var out []WorkerInfo
	for {
		select {
		case e, ok := <-w.Updates():
			if !ok {
				return nil, errors.New("cluster: workers watch closed")
			}
			if e == nil {
				slices.SortFunc(out, func(a, b WorkerInfo) int { return cmp.Compare(a.Name, b.Name) })
				return out, nil
			}
			if isGone(e) {
				continue
			}
			wi, err := decodeWorker(e)
			if err != nil {
				return nil, err
			}
			out = append(out, wi)
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// MemberEventKind says what happened to a worker.
type MemberEventKind int

const (
	// Joined: a worker appeared (a new name, or a new incarnation of a name).
	Joined MemberEventKind = iota + 1
	// Beat: a live worker's heartbeat, its slots unchanged.
	Beat
	// Changed: a live worker's heartbeat with other slots, dedication or topologies.
	Changed
	// Left: a worker's key expired (not heard from within the TTL) or was deleted (a
	// graceful leave).
	Left
)

func (k MemberEventKind) String() string {
	switch k {
	case Joined:
		return "joined"
	case Beat:
		return "beat"
	case Changed:
		return "changed"
	case Left:
		return "left"
	}
	return fmt.Sprintf("MemberEventKind(%d)", int(k))
}

// MemberEvent is a change in the workers bucket.
type MemberEvent struct {
	Kind MemberEventKind
	// Worker is the worker's heartbeat (for Left, the last one seen; only Name
	// if none was).
	Worker WorkerInfo
	// At is the server's time of the change: for Left by expiry, when the server
	// removed the key (its last beat plus the TTL, plus the server's expiry check).
	At time.Time
	// Expired tells an expiry (the server's marker) from a graceful leave.
	Expired bool
}

// members tracks the live workers from a watch of the workers bucket.
type members struct {
	live map[string]WorkerInfo
}

// apply folds one watch entry in and returns the event it is.
func (m *members) apply(e jetstream.KeyValueEntry) (MemberEvent, bool) {
	name := e.Key()
	old, had := m.live[name]
	if isGone(e) {
		if !had {
			return MemberEvent{}, false
		}
		delete(m.live, name)
		return MemberEvent{Kind: Left, Worker: old, At: e.Created(), Expired: e.Operation() == jetstream.KeyValuePurge}, true
	}
	w, err := decodeWorker(e)
	if err != nil {
		return MemberEvent{}, false
	}
	m.live[name] = w
	switch {
	case !had || old.Incarnation != w.Incarnation:
		return MemberEvent{Kind: Joined, Worker: w, At: e.Created()}, true
	case old.Slots != w.Slots || old.Dedicated != w.Dedicated || !slices.Equal(old.Topologies, w.Topologies) ||
		!maps.Equal(old.Running, w.Running) || !maps.Equal(old.Refused, w.Refused):
		return MemberEvent{Kind: Changed, Worker: w, At: e.Created()}, true
	}
	return MemberEvent{Kind: Beat, Worker: w, At: e.Created()}, true
}

// WatchWorkers sends the live workers (Joined, once each) and then every change,
// until ctx ends; then it closes the channel. Beats are sent only if beats is true.
// A watch silent for a HeartbeatTTL while workers are live (its JetStream node
// went down) is made again; workers gone meanwhile are then sent as Left.
func (s *Store) WatchWorkers(ctx context.Context, beats bool) (<-chan MemberEvent, error) {
	w, stop, err := s.watch(ctx, s.workers, ">")
	if err != nil {
		return nil, err
	}
	out := make(chan MemberEvent, 16)
	go func() {
		defer close(out)
		defer func() { stop() }()
		tick := s.cfg.Clock.NewTicker(s.cfg.HeartbeatTTL / 3)
		defer tick.Stop()
		m := members{live: map[string]WorkerInfo{}}
		heard := s.cfg.Clock.Now()
		var unseen map[string]bool // after a new watch: live workers not in its initial values yet
		send := func(ev MemberEvent) bool {
			select {
			case out <- ev:
				return true
			case <-ctx.Done():
				return false
			}
		}
		for {
			select {
			case e, ok := <-w.Updates():
				if !ok {
					return
				}
				heard = s.cfg.Clock.Now()
				if e == nil {
					for name := range unseen {
						old := m.live[name]
						delete(m.live, name)
						if !send(MemberEvent{Kind: Left, Worker: old, At: heard, Expired: true}) {
							return
						}
					}
					unseen = nil
					continue
				}
				delete(unseen, e.Key())
				ev, ok := m.apply(e)
				if !ok || ev.Kind == Beat && !beats {
					continue
				}
				if !send(ev) {
					return
				}
			case <-tick.C():
				if len(m.live) == 0 || s.cfg.Clock.Since(heard) <= s.cfg.HeartbeatTTL {
					continue
				}
				nw, nstop, err := s.watch(ctx, s.workers, ">")
				if err != nil {
					continue // the next tick tries again
				}
				stop()
				w, stop, heard = nw, nstop, s.cfg.Clock.Now()
				unseen = map[string]bool{}
				for name := range m.live {
					unseen[name] = true
				}
			case <-ctx.Done():
				return
			}
		}
	}()
	return out, nil
}
