package engine

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/gale-stream/gale/acker"
	"github.com/gale-stream/gale/topology"
)

// spoutConfig is what a spout task's timeout and max-spout-pending logic depends on.
type spoutConfig struct {
	// MessageTimeout is the time a tree may take, counted from its emit or its last
	// reset, before the spout fails it as timed out.
	MessageTimeout time.Duration
	// MaxPending stops NextTuple calls while this many trees are in flight; 0 is
	// unlimited. (The runtime gives 0 without ackers: nothing is tracked then.)
	MaxPending int
	// Timeouts is whether trees time out at all (false with Config.DisableTimeouts,
	// or without ackers).
	Timeouts bool
}

// spoutEventKind says what became of a tree, and so what the spout task delivers.
type spoutEventKind uint8

const (
	// spoutAcked: the tree completed; deliver Ack. Latency is its complete latency.
	spoutAcked spoutEventKind = iota + 1
	// spoutFailed: a bolt failed the tree; deliver Fail with Reason (the bolt's, or "").
	spoutFailed
	// spoutTimedOut: the message timeout passed; deliver Fail with Reason (the timeout's).
	spoutTimedOut
	// spoutRestarted: the tree's timeout clock restarted; nothing to deliver.
	spoutRestarted
	// spoutLate: an outcome for a tree no longer in flight (timed out, or abandoned);
	// ignored. Only Root and Result are set.
	spoutLate
	// spoutAbandoned: a failure after the stop interrupted work; neither Ack nor Fail.
	spoutAbandoned
)

func (k spoutEventKind) String() string {
	switch k {
	case spoutAcked:
		return "ack"
	case spoutFailed:
		return "fail"
	case spoutTimedOut:
		return "timeout"
	case spoutRestarted:
		return "restart"
	case spoutLate:
		return "late"
	case spoutAbandoned:
		return "abandon"
	}
	return fmt.Sprintf("spoutEventKind(%d)", uint8(k))
}

// spoutEvent is what the spout task is to do about one tree.
type spoutEvent struct {
	Kind  spoutEventKind
	Root  uint64
	MsgID any
	// Start is the tree's emit time (a reset does not move it: complete latency
	// counts from the emit).
	Start int64
	// Latency is now - Start, for spoutAcked.
	Latency int64
	// Reason is the Fail reason, for spoutFailed and spoutTimedOut.
	Reason string
	// Result is the acker's result the event came from (zero for a timeout).
	Result acker.Result
}

// spoutCounters are the cumulative counts of a spoutState.
type spoutCounters struct {
	Acked, Failed, TimedOut uint64
	Late                    uint64 // outcomes for trees no longer in flight, ignored
	Abandoned               uint64 // given up by Abandon, or failed after Interrupt
	Restarts                uint64 // reset outcomes applied
}

// spoutBuckets is the number of rotating buckets: with a rotation every
// MessageTimeout/rotationsPerTimeout, a tree times out between 1 and 1.25 timeouts
// after its emit or last reset.
const spoutBuckets = rotationsPerTimeout + 1

// spoutState is a spout task's timeout and max-spout-pending logic as a deterministic
// state machine: no goroutines, no clock reads, no I/O. Time comes in as an argument,
// in nanoseconds on the caller's monotonic clock; the caller arms its timer for
// NextDeadline. Its only caller is the spout task's run loop, on the task goroutine:
// it is not safe for concurrent use (a caller that shows Pending or the counters to
// other goroutines publishes copies).
//
// The trees in flight sit in spoutBuckets rotating buckets (Storm's RotatingMap): an
// emit or a reset puts a tree in the newest, and Tick, once every
// MessageTimeout/rotationsPerTimeout, drops the oldest bucket, whose trees time out.
// Tick rotates at most once per call and schedules the next rotation a full interval
// after the time it was called, never catching up: after the task was stalled (a slow
// NextTuple, a send blocked by backpressure) several rotations in a row would expire
// trees emitted a moment ago. A stall can only make a timeout late, never early.
type spoutState struct {
	cfg           spoutConfig
	rotateEvery   int64
	nextRotate    int64
	timeoutReason string
	// buckets[0] is the newest; a rotation drops the last.
	buckets     []map[uint64]spoutEntry
	pending     int
	seq         uint64 // emit order, so that the trees timed out together come in it
	interrupted bool
	c           spoutCounters
}

// spoutEntry is a tree in flight.
type spoutEntry struct {
	msgID any
	start int64
	seq   uint64
}

// newSpoutState returns the state of a spout task started at now.
func newSpoutState(cfg spoutConfig, now int64) *spoutState {
	every := int64(cfg.MessageTimeout / rotationsPerTimeout)
	s := &spoutState{
		cfg:           cfg,
		rotateEvery:   every,
		nextRotate:    now + every,
		timeoutReason: fmt.Sprintf("%s: tree not complete after %v", topology.TimeoutReason, cfg.MessageTimeout),
		buckets:       make([]map[uint64]spoutEntry, spoutBuckets),
	}
	for i := range s.buckets {
		s.buckets[i] = map[uint64]spoutEntry{}
	}
	return s
}

// Emit records a tracked tree emitted at now. The root must not be in flight: the
// runtime draws 64-bit random roots. Looking for it in every bucket first cost a
// third of the spout's map time, so only the newest bucket is checked, for free: a
// root emitted twice within one rotation replaces its entry.
func (s *spoutState) Emit(now int64, root uint64, msgID any) {
	b := s.buckets[0]
	n := len(b)
	s.seq++
	b[root] = spoutEntry{msgID: msgID, start: now, seq: s.seq}
	if len(b) > n {
		s.pending++
	}
}

// Outcome applies an acker outcome received at now. ev says what became of the tree;
// ok is true when the spout is to be told (Ack or Fail): for spoutAcked and
// spoutFailed. A Restarted outcome moves the tree to the newest bucket (its timeout
// clock restarts; its Start does not move). An outcome for a tree not in flight is
// late and ignored; a Failed outcome after Interrupt is abandoned. An outcome with an
// unknown Result changes nothing (ev.Kind 0).
func (s *spoutState) Outcome(now int64, o acker.Outcome) (ev spoutEvent, ok bool) {
	ev = spoutEvent{Root: o.Root, Result: o.Result}
	if o.Result < acker.Completed || o.Result > acker.Restarted {
		return ev, false
	}
	ent, found := s.remove(o.Root)
	if !found {
		s.c.Late++
		ev.Kind = spoutLate
		return ev, false
	}
	ev.MsgID, ev.Start = ent.msgID, ent.start
	switch {
	case o.Result == acker.Restarted:
		s.buckets[0][o.Root] = ent
		s.c.Restarts++
		ev.Kind = spoutRestarted
		return ev, false
	case o.Result == acker.Failed && s.interrupted:
		// The stop interrupted it: neither Fail nor a charge for the spout's source;
		// a restart replays it.
		s.pending--
		s.c.Abandoned++
		ev.Kind = spoutAbandoned
		return ev, false
	case o.Result == acker.Completed:
		s.pending--
		s.c.Acked++
		ev.Kind, ev.Latency = spoutAcked, now-ent.start
		return ev, true
	default: // acker.Failed
		s.pending--
		s.c.Failed++
		ev.Kind, ev.Reason = spoutFailed, o.Reason
		return ev, true
	}
}

// Tick performs the rotation due at now, if one is: it drops the oldest bucket and
// returns its trees as spoutTimedOut events, in emit order. At most one rotation per
// call; the next is due rotateEvery after now. Without timeouts it does nothing, and
// after Interrupt it rotates nothing (the trees left are abandoned at exit).
func (s *spoutState) Tick(now int64) []spoutEvent {
	if !s.cfg.Timeouts || now < s.nextRotate {
		return nil
	}
	s.nextRotate = now + s.rotateEvery
	if s.interrupted {
		return nil
	}
	last := len(s.buckets) - 1
	old := s.buckets[last]
	copy(s.buckets[1:], s.buckets[:last])
	// A fresh map, not old cleared: a Go map keeps the room it once grew to, and a
	// bucket that took many short-lived trees grows past the trees it ever held at
	// once, so reused buckets let the heap creep up with the trees passed.
	s.buckets[0] = make(map[uint64]spoutEntry)
	if len(old) == 0 {
		return nil
	}
	type expired struct {
		root uint64
		ent  spoutEntry
	}
	exp := make([]expired, 0, len(old))
	for root, ent := range old {
		exp = append(exp, expired{root, ent})
	}
	slices.SortFunc(exp, func(a, b expired) int { return cmp.Compare(a.ent.seq, b.ent.seq) })
	evs := make([]spoutEvent, len(exp))
	for i, x := range exp {
		evs[i] = spoutEvent{Kind: spoutTimedOut, Root: x.root, MsgID: x.ent.msgID, Start: x.ent.start, Reason: s.timeoutReason}
	}
	s.pending -= len(evs)
	s.c.TimedOut += uint64(len(evs))
	return evs
}

// NextDeadline is when the next rotation is due: the caller's timer fires then, and
// calls Tick. math.MaxInt64 without timeouts (no timer needed).
func (s *spoutState) NextDeadline() int64 {
	if !s.cfg.Timeouts {
		return math.MaxInt64
	}
	return s.nextRotate
}

// Full reports whether max spout pending holds NextTuple back. Emit is not refused
// when full: one NextTuple may emit several trees and overshoot.
func (s *spoutState) Full() bool {
	return s.cfg.MaxPending > 0 && s.pending >= s.cfg.MaxPending
}

// Pending is the number of trees in flight.
func (s *spoutState) Pending() int { return s.pending }

// Interrupt records that a stop has cut work off (a hard stop, or the end of a
// graceful stop's time): from then on nothing times out, and a Failed outcome is
// abandoned rather than delivered. It cannot be undone.
func (s *spoutState) Interrupt() { s.interrupted = true }

// Abandon gives up every tree in flight, at a hard stop or an expired drain: they are
// counted as abandoned (and no longer pending) and get neither Ack nor Fail. It
// returns how many there were.
func (s *spoutState) Abandon() int {
	n := s.pending
	for _, b := range s.buckets {
		clear(b)
	}
	s.pending = 0
	s.c.Abandoned += uint64(n)
	return n
}

// Counters returns the cumulative counts.
func (s *spoutState) Counters() spoutCounters { return s.c }

// remove takes root out of whichever bucket holds it.
func (s *spoutState) remove(root uint64) (spoutEntry, bool) {
	for _, b := range s.buckets {
		if e, ok := b[root]; ok {
			delete(b, root)
			return e, true
		}
	}
	return spoutEntry{}, false
}
