package acker

import "fmt"

// Kind is the kind of an acker message.
type Kind uint8

// Message kinds, as Storm's __ack_init, __ack_ack, __ack_fail and __ack_reset_timeout.
const (
	Init  Kind = iota + 1 // spout → acker: Val = XOR of the edges sent, Task = spout task
	Ack                   // bolt → acker: Val = the tuple's edge XOR the edges of its children
	Fail                  // bolt → acker: fail the tree now
	Reset                 // bolt → acker: restart the tree's timeout clock
)

func (k Kind) String() string {
	switch k {
	case Init:
		return "init"
	case Ack:
		return "ack"
	case Fail:
		return "fail"
	case Reset:
		return "reset"
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// Msg is one acker message. It is a plain value so that transports can batch and
// serialise it.
type Msg struct {
	Root uint64
	Val  uint64
	Task int32 // spout task (Init only)
	Kind Kind
	// Reason says why a tuple failed (Fail only; optional). It travels to the spout
	// in the Outcome, so a dead letter can name the error that ended it.
	Reason string
}

// Result is what the ledger tells the spout task about a tree.
type Result uint8

// Results.
const (
	Completed Result = iota + 1 // every tuple of the tree was acked
	Failed                      // a tuple of the tree was failed
	Restarted                   // the tree's clock was restarted (forwarded to the spout)
)

func (r Result) String() string {
	switch r {
	case Completed:
		return "complete"
	case Failed:
		return "fail"
	case Restarted:
		return "reset"
	}
	return fmt.Sprintf("result(%d)", uint8(r))
}

// Outcome is a report for the spout task that rooted a tree.
type Outcome struct {
	Root      uint64
	SpoutTask int32
	Result    Result
	// Latency is the time in nanoseconds (to the millisecond) from the tree's first
	// message at this ledger to this outcome.
	Latency int64
	// Reason is the first fail reason of a Failed tree, if its bolt gave one.
	Reason string
}

const (
	flagInit   uint32 = 1 << 31
	flagFailed uint32 = 1 << 30
	flagReset  uint32 = 1 << 29 // a reset arrived before the init: tell the spout then
	taskMask   uint32 = 1<<29 - 1
)

// MaxTask is the largest spout task id the ledger can hold.
const MaxTask = int32(taskMask)

// entry is the whole per-tree state: 16 bytes (with the 8-byte key, 24 per map slot).
// The start time is kept in milliseconds modulo 2^32: latencies are exact to the
// millisecond for trees younger than 49 days.
type entry struct {
	xor   uint64
	start uint32 // milliseconds, modulo 2^32
	meta  uint32 // flagInit | flagFailed | spout task
}

func (e entry) task() int32 {
	if e.meta&flagInit == 0 {
		return -1
	}
	return int32(e.meta & taskMask)
}

func millis(now int64) uint32 { return uint32(now / 1e6) }

func (e entry) latency(now int64) int64 { return int64(millis(now)-e.start) * 1e6 }

// Stats counts what the ledger has seen. All counts are cumulative except Pending.
type Stats struct {
	Pending   int    // trees held now (their init has arrived)
	Unmatched int    // entries held now without an init: acks that came before their init, or after their tree ended (late or stray)
	Completed uint64 // trees reported complete
	Failed    uint64 // trees reported failed
	Resets    uint64 // reset messages handled
	Expired   uint64 // trees with an init dropped by Rotate (the spout timed them out)
	Orphans   uint64 // entries without an init dropped by Rotate (late or stray acks)
}

// Ledger is the acker's state. It is not safe for concurrent use: one acker task owns it.
type Ledger struct {
	// buckets[0] is the newest; Rotate drops the last one.
	buckets []map[uint64]entry
	stats   Stats
	noInit  int               // entries held without an init
	reasons map[uint64]string // fail reasons of trees not yet reported (rare: kept apart from the 16-byte entries)
}

// New returns a ledger with n rotating buckets (n ≥ 2). With rotation every I, an entry
// untouched by a reset is dropped between (n-1)·I and n·I after its first message.
func New(n int) *Ledger {
	if n < 2 {
		n = 2
	}
	l := &Ledger{buckets: make([]map[uint64]entry, n)}
	for i := range l.buckets {
		l.buckets[i] = make(map[uint64]entry)
	}
	return l
}

// Stats returns the counters.
func (l *Ledger) Stats() Stats {
	s := l.stats
	s.Unmatched = l.noInit
	s.Pending = l.Pending() - l.noInit
	return s
}

// Pending is the number of entries held (pending trees plus orphans).
func (l *Ledger) Pending() int {
	n := 0
	for _, b := range l.buckets {
		n += len(b)
	}
	return n
}

// Step applies one message at time now (nanoseconds) and returns the outcome for the
// spout, if any. A message with Root 0 or an unknown kind is rejected with an error and
// changes nothing.
func (l *Ledger) Step(now int64, m Msg) (Outcome, bool, error) {
	if m.Root == 0 {
		return Outcome{}, false, fmt.Errorf("acker: %s message with root id 0", m.Kind)
	}
	if m.Kind < Init || m.Kind > Reset {
		return Outcome{}, false, fmt.Errorf("acker: unknown message kind %d for root %016x", uint8(m.Kind), m.Root)
	}
	if m.Kind == Init && (m.Task < 0 || m.Task > MaxTask) {
		return Outcome{}, false, fmt.Errorf("acker: init for root %016x names spout task %d, outside 0..%d", m.Root, m.Task, MaxTask)
	}
	bi := -1
	var e entry
	for i, b := range l.buckets {
		if v, ok := b[m.Root]; ok {
			e, bi = v, i
			break
		}
	}
	hadInit := e.meta&flagInit != 0
	if bi < 0 {
		e = entry{start: millis(now)}
	}
	reset := false
	switch m.Kind {
	case Init:
		e.xor ^= m.Val
		if e.meta&flagReset != 0 {
			// A reset raced ahead of the init (the spout's init was still buffered):
			// forward it now, or the spout's clock would never restart.
			reset = true
		}
		e.meta = e.meta&flagFailed | flagInit | uint32(m.Task)
	case Ack:
		e.xor ^= m.Val
	case Fail:
		if e.meta&flagFailed == 0 && m.Reason != "" {
			if l.reasons == nil {
				l.reasons = map[uint64]string{}
			}
			l.reasons[m.Root] = m.Reason
		}
		e.meta |= flagFailed
	case Reset:
		reset = true
		l.stats.Resets++
		if e.meta&flagInit == 0 {
			e.meta |= flagReset
		}
	}
	if e.meta&flagInit != 0 {
		if bi >= 0 && !hadInit && (e.meta&flagFailed != 0 || e.xor == 0) {
			l.noInit-- // removed below: it was held without its init until now
		}
		switch {
		case e.meta&flagFailed != 0:
			l.remove(bi, m.Root)
			l.stats.Failed++
			reason := l.reasons[m.Root]
			delete(l.reasons, m.Root)
			return Outcome{Root: m.Root, SpoutTask: e.task(), Result: Failed, Latency: e.latency(now), Reason: reason}, true, nil
		case e.xor == 0:
			l.remove(bi, m.Root)
			l.stats.Completed++
			return Outcome{Root: m.Root, SpoutTask: e.task(), Result: Completed, Latency: e.latency(now)}, true, nil
		}
	}
	switch {
	case bi < 0 && e.meta&flagInit == 0:
		l.noInit++ // a new entry without its init
	case bi >= 0 && !hadInit && e.meta&flagInit != 0:
		l.noInit-- // the init caught up with its acks
	}
	switch {
	case reset && bi > 0:
		// A reset moves the entry to the newest bucket: its clock starts again.
		delete(l.buckets[bi], m.Root)
		l.buckets[0][m.Root] = e
	case bi < 0:
		l.buckets[0][m.Root] = e
	default:
		l.buckets[bi][m.Root] = e
	}
	if reset && e.meta&flagInit != 0 {
		return Outcome{Root: m.Root, SpoutTask: e.task(), Result: Restarted, Latency: e.latency(now)}, true, nil
	}
	return Outcome{}, false, nil
}

func (l *Ledger) remove(bi int, root uint64) {
	if bi >= 0 {
		delete(l.buckets[bi], root)
	}
}

// Rotate drops the oldest bucket and returns how many trees (with an init) and orphan
// entries (without one) it held. Nothing is reported to spouts: the spout's own pending
// map has already timed these trees out.
func (l *Ledger) Rotate() (expired, orphans int) {
	last := len(l.buckets) - 1
	for root, e := range l.buckets[last] {
		delete(l.reasons, root)
		if e.meta&flagInit != 0 {
			expired++
		} else {
			orphans++
		}
	}
	l.stats.Expired += uint64(expired)
	l.stats.Orphans += uint64(orphans)
	l.noInit -= orphans
	copy(l.buckets[1:], l.buckets[:last])
	// A fresh map, not the last one cleared: a Go map keeps the room it once grew
	// to, and a bucket that took many short-lived trees grows past the trees it
	// ever held at once, so reused buckets let the heap creep up with the trees
	// passed.
	l.buckets[0] = make(map[uint64]entry)
	return expired, orphans
}

// Lookup returns the current XOR value and spout task of a pending tree, for
// diagnostics (which trees are stuck, and where).
func (l *Ledger) Lookup(root uint64) (xor uint64, spoutTask int32, ok bool) {
	for _, b := range l.buckets {
		if e, found := b[root]; found {
			return e.xor, e.task(), true
		}
	}
	return 0, -1, false
}
