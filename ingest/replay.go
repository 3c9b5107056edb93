package ingest

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"github.com/gale-stream/gale/event"
	"github.com/gale-stream/gale/eventlog"
	"github.com/gale-stream/gale/topology"
)

// Replay feeds a log's records to a topology again, to rebuild what the topology
// writes (gale sink rebuild writes a lost or damaged sink database again through
// gale serve's pipeline). Its spout (Spout) reads the records from seq From to To
// and emits each as the log spout does (SpoutFields, SpoutValues), the root of a
// tracked tree whose message id is its seq; a failed tree is emitted again, up to
// MaxAttempts tries, after which the record is reported not written. Unlike the
// log spout it writes nothing to the log: statuses, attempts, dead letters and the
// committed offset stay as they are, and no backoff or sink health is applied
// (the topology's sink holds its own inputs through an outage).
//
// Done is closed once every record is written (its tree completed) or given up.
// Result then says what was written, what failed, and which seqs the log did not
// hold: runs the log skipped (lost, or trimmed past the dedupe window before its
// first kept record), which a rebuilt sink lacks.
type Replay struct {
	log         ReplayLog
	from, to    uint64
	maxAttempts int

	mu          sync.Mutex
	first, last uint64
	written     int
	failed      []ReplayFailure
	attempts    map[uint64]int
	acked       map[uint64]bool // seqs whose rows are committed
	done        chan struct{}   // closed when every record is written or given up
	// next is the seq after the last one read; gaps are the runs of seqs the log
	// held no record of; kept is set once a record that is not a dead letter was
	// read (Trim removes only before it).
	next uint64
	gaps []ReplayGap
	kept bool
}

// ReplayLog is what a Replay reads: its records, and its dead letters (to tell a
// run trimmed past the dedupe window from a loss). ingest.Log has both
// (eventlog.Log implements it).
type ReplayLog interface {
	Read(from uint64, max int) ([]event.Record, error)
	Get(ns eventlog.Namespace, id string) ([]byte, bool, error)
}

// ReplayFailure is a record a Replay could not have written.
type ReplayFailure struct {
	Seq    uint64
	ID     string // the event's id ("" if the record could not be read)
	Reason string
}

// ReplayGap is a run of seqs, From to To, the log holds no record of.
type ReplayGap struct {
	From, To uint64
	// Trimmed: before the first record that is not a dead letter, where Trim
	// removes finished records past the dedupe window; not a loss.
	Trimmed bool
	// Lost is the salvage's record of the run, if one recorded it lost.
	Lost *eventlog.LostRange
}

// ReplayResult is what a Replay did.
type ReplayResult struct {
	// First and Last are the seqs of the first and last record emitted (0, 0: none).
	First, Last uint64
	// Written counts the records whose trees completed.
	Written int
	// Failed are the records given up: unreadable, or failed MaxAttempts times.
	Failed []ReplayFailure
	// Missing are the runs of seqs from From to To, and the lost ranges recorded
	// past To, that the log holds no record of, split by the salvage records that
	// cover them.
	Missing []ReplayGap
}

// NewReplay replays l's records from seq from to to (both included), each tried
// at most maxAttempts times (at least once).
func NewReplay(l ReplayLog, from, to uint64, maxAttempts int) *Replay {
	return &Replay{log: l, from: from, to: to, maxAttempts: max(maxAttempts, 1), next: from,
		attempts: map[uint64]int{}, acked: map[uint64]bool{}, done: make(chan struct{})}
}

// Spout is the factory of the replay's spout. Give it one task: the records are
// one sequence, and its spout refuses to open with more.
func (r *Replay) Spout() func() topology.Spout {
	return func() topology.Spout {
		return &replaySpout{r: r, pos: r.from, inflight: map[uint64]*event.Record{}}
	}
}

// Done is closed once every record from From to To is written or given up.
func (r *Replay) Done() <-chan struct{} { return r.done }

// Written counts the records whose trees completed so far.
func (r *Replay) Written() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.written
}

// Result says what the replay did so far; call it once the topology stopped.
// lost are the log's lost ranges (eventlog.Log.Lost): they name the gaps a
// salvage recorded, and those recorded past To are missing too.
func (r *Replay) Result(lost []eventlog.LostRange) ReplayResult {
	r.mu.Lock()
	defer r.mu.Unlock()
	gaps := r.gaps
	if r.next <= r.to {
		gaps = append(gaps, ReplayGap{From: r.next, To: r.to, Trimmed: !r.kept})
	}
	return ReplayResult{First: r.first, Last: r.last, Written: r.written, Failed: append([]ReplayFailure(nil), r.failed...),
		Missing: missingSeqs(gaps, lost, r.from, r.to)}
}

// missingSeqs splits the gaps the replay met, and the lost ranges at or after
// from past the log's end, into runs recorded lost by a salvage and runs no
// salvage recorded (trimmed ones before the log's first kept record apart).
func missingSeqs(gaps []ReplayGap, lost []eventlog.LostRange, from, end uint64) []ReplayGap {
	for i := range lost {
		if lr := lost[i]; lr.To > end && lr.To >= from {
			gaps = append(gaps, ReplayGap{From: max(lr.From, end+1, from), To: lr.To})
		}
	}
	var out []ReplayGap
	for _, g := range gaps {
		s := g.From
		for s <= g.To {
			var in *eventlog.LostRange
			next := g.To
			for i := range lost {
				lr := &lost[i]
				if lr.From <= s && s <= lr.To {
					in, next = lr, min(lr.To, g.To)
					break
				}
				if lr.From > s && lr.From <= next {
					next = lr.From - 1
				}
			}
			out = append(out, ReplayGap{From: s, To: next, Trimmed: g.Trimmed && in == nil, Lost: in})
			if next == ^uint64(0) {
				break
			}
			s = next + 1
		}
	}
	return out
}

// NotWritten returns the ranges of seqs from From to To whose trees did not
// complete, as text ("1..20, 25, 30..300"): at most 20 ranges and a count of the
// rest, "none" if every one did.
func (r *Replay) NotWritten() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var parts []string
	more := 0
	for s := r.from; s <= r.to; s++ {
		if r.acked[s] {
			continue
		}
		e := s
		for e < r.to && !r.acked[e+1] {
			e++
		}
		switch {
		case len(parts) == 20:
			more++
		case e == s:
			parts = append(parts, fmt.Sprint(s))
		default:
			parts = append(parts, fmt.Sprintf("%d..%d", s, e))
		}
		if e == ^uint64(0) {
			break
		}
		s = e
	}
	if len(parts) == 0 {
		return "none"
	}
	if more > 0 {
		parts = append(parts, fmt.Sprintf("and %d more ranges", more))
	}
	return strings.Join(parts, ", ")
}

// replaySpout is a Replay's spout: it reads the log from pos to the replay's To,
// emits each record (message id: its seq), emits a failed one again until
// maxAttempts, and closes the replay's done when nothing is left.
type replaySpout struct {
	r        *Replay
	out      topology.SpoutCollector
	pos      uint64
	buf      []event.Record
	inflight map[uint64]*event.Record
	retry    []*event.Record
	closed   bool
}

func (sp *replaySpout) Open(_ context.Context, tc topology.TaskContext, out topology.SpoutCollector) error {
	if tc.Parallelism != 1 {
		return fmt.Errorf("ingest: the replay spout reads one sequence: parallelism 1, not %d", tc.Parallelism)
	}
	sp.out = out
	sp.finishIfDone()
	return nil
}

func (sp *replaySpout) NextTuple() {
	r := sp.r
	if len(sp.retry) > 0 {
		rec := sp.retry[0]
		sp.retry = sp.retry[1:]
		sp.send(rec)
		return
	}
	if len(sp.buf) == 0 {
		if sp.pos > r.to {
			return
		}
		recs, err := r.log.Read(sp.pos, 256)
		for len(recs) > 0 && recs[len(recs)-1].Seq > r.to {
			recs = recs[:len(recs)-1] // beyond what this replay covers
		}
		if err != nil && len(recs) == 0 {
			// The record at pos is damaged: report it and go on with the next one.
			sp.giveUp(&event.Record{Seq: sp.pos}, fmt.Sprintf("reading the log: %v", err))
			sp.pos++
			r.mu.Lock()
			r.next = max(r.next, sp.pos)
			r.mu.Unlock()
			sp.finishIfDone()
			return
		}
		// With an error, recs are the good records before the damaged one; the
		// next Read starts at it.
		if len(recs) == 0 {
			sp.pos = r.to + 1 // the rest was trimmed
			sp.finishIfDone()
			return
		}
		for i := range recs {
			sp.read(&recs[i])
		}
		sp.buf = recs
		sp.pos = recs[len(recs)-1].Seq + 1
	}
	rec := sp.buf[0]
	sp.buf = sp.buf[1:]
	r.mu.Lock()
	if r.first == 0 {
		r.first = rec.Seq
	}
	r.last = max(r.last, rec.Seq)
	r.mu.Unlock()
	sp.send(&rec)
}

// read notes a record read from the log: a seq after the one expected leaves a
// gap (the log has no record of the seqs between).
func (sp *replaySpout) read(rec *event.Record) {
	r := sp.r
	r.mu.Lock()
	defer r.mu.Unlock()
	if rec.Seq > r.next {
		r.gaps = append(r.gaps, ReplayGap{From: r.next, To: rec.Seq - 1, Trimmed: !r.kept})
	}
	r.next = max(r.next, rec.Seq+1)
	if !r.kept {
		if _, dead, err := r.log.Get(eventlog.DeadLetter, rec.Event.ID); err != nil || !dead {
			r.kept = true
		}
	}
}

func (sp *replaySpout) send(rec *event.Record) {
	sp.inflight[rec.Seq] = rec
	sp.r.mu.Lock()
	sp.r.attempts[rec.Seq]++
	sp.r.mu.Unlock()
	// The values of SpoutFields, as the log spout emits them.
	if err := sp.out.Emit(SpoutValues(rec), rec.Seq); err != nil {
		delete(sp.inflight, rec.Seq)
		sp.giveUp(rec, fmt.Sprintf("emit: %v", err))
	}
}

func (sp *replaySpout) Ack(msgID any) {
	seq := msgID.(uint64)
	if _, ok := sp.inflight[seq]; !ok {
		return
	}
	delete(sp.inflight, seq)
	r := sp.r
	r.mu.Lock()
	r.written++
	r.acked[seq] = true
	delete(r.attempts, seq)
	r.mu.Unlock()
	sp.finishIfDone()
}

func (sp *replaySpout) Fail(msgID any) { sp.FailReason(msgID, "") }

func (sp *replaySpout) FailReason(msgID any, reason string) {
	seq := msgID.(uint64)
	rec, ok := sp.inflight[seq]
	if !ok {
		return
	}
	delete(sp.inflight, seq)
	sp.r.mu.Lock()
	n := sp.r.attempts[seq]
	sp.r.mu.Unlock()
	if n < sp.r.maxAttempts {
		sp.retry = append(sp.retry, rec)
		return
	}
	if reason == "" {
		reason = "failed"
	}
	sp.giveUp(rec, fmt.Sprintf("%s (after %d attempts)", reason, n))
	sp.finishIfDone()
}

func (sp *replaySpout) giveUp(rec *event.Record, reason string) {
	sp.r.mu.Lock()
	defer sp.r.mu.Unlock()
	delete(sp.r.attempts, rec.Seq)
	sp.r.failed = append(sp.r.failed, ReplayFailure{Seq: rec.Seq, ID: rec.Event.ID, Reason: reason})
}

func (sp *replaySpout) finishIfDone() {
	if !sp.closed && sp.pos > sp.r.to && len(sp.buf) == 0 && len(sp.retry) == 0 && len(sp.inflight) == 0 {
		sp.closed = true
		close(sp.r.done)
	}
}

func (sp *replaySpout) Close() error { return nil }

var _ topology.ReasonedSpout = (*replaySpout)(nil)
