package jslog

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/gale-stream/gale/event"
	"github.com/gale-stream/gale/eventlog"
)

// The high-water mark and the gap check: JetStream itself has lost acknowledged
// records, from the middle of a stream (nats-server#7549, sync_interval: always)
// and from its tail after a crash (#7567). Neither may pass unseen, and a lost
// tail must not make the stream give its seqs out twice (the committed offset and
// the status documents name seqs):
//
//   - The mark: the highest seq this log saw stored, kept in key "hwm" of the
//     documents' bucket (a different stream, its own replicas) with each Apply
//     and each lease tick, only ever raised.
//   - Open refuses a stream that ends below the mark (ErrLost, naming the seqs).
//     A running process learns it from an acknowledgement at a seq given out
//     before (the record is taken back out) or from its lease loop's look at the
//     stream's end: Damaged says so and Submit refuses from then on.
//   - Read stops at a missing seq at or past the committed offset (Trim deletes
//     only below it) that no recorded loss covers: ErrLost, and Damaged says so
//     from then on (/readyz fails, the log spout emits nothing past it).
//   - Salvage records the missing ranges in key "lost" (Lost lists them: the
//     ingest service skips them and GET /v1/lost shows them) and fills a lost
//     tail with filler records up to the mark, so that no seq is given out twice.

// ErrLost: records the stream acknowledged are missing from it.
var ErrLost = errors.New("jslog: records answered PERSISTED are missing from the stream")

const (
	hwmKey  = "hwm"
	lostKey = "lost"
	// fillerToken is the subject token of Salvage's filler records (never an
	// event id's: base64url has no ~).
	fillerToken = "~lost"
)

// loadMarks reads the mark and the recorded losses, and refuses a stream that
// ends below the mark (unless salvaging).
func (l *Log) loadMarks(ctx context.Context, last uint64) error {
	e, err := l.docs.Get(ctx, hwmKey)
	switch {
	case errors.Is(err, jetstream.ErrKeyNotFound):
	case err != nil:
		return fmt.Errorf("jslog: high-water mark: %w", err)
	default:
		h, perr := strconv.ParseUint(string(e.Value()), 10, 64)
		if perr != nil {
			return fmt.Errorf("jslog: high-water mark %q: %w", e.Value(), perr)
		}
		l.hwm.Store(h)
		l.hwmRev = e.Revision()
	}
	e, err = l.docs.Get(ctx, lostKey)
	switch {
	case errors.Is(err, jetstream.ErrKeyNotFound):
	case err != nil:
		return fmt.Errorf("jslog: lost ranges: %w", err)
	default:
		if err := json.Unmarshal(e.Value(), &l.lost); err != nil {
			return fmt.Errorf("jslog: lost ranges %q: %w", e.Value(), err)
		}
	}
	if h := l.hwm.Load(); last < h && !l.salvaging {
		return fmt.Errorf("%w: seqs %d..%d were answered PERSISTED (high-water mark %d in bucket %s) but stream %s ends at seq %d: JetStream lost its tail (nats-server#7567); `gale log salvage --log jetstream` records them lost and fills the gap so that no seq is given out twice",
			ErrLost, last+1, h, h, l.docs.Bucket(), l.name, last)
	}
	return nil
}

// writeMark raises the stored mark to the highest seq seen stored, if higher.
func (l *Log) writeMark(ctx context.Context) error {
	l.hmu.Lock()
	defer l.hmu.Unlock()
	for attempt := 0; ; attempt++ {
		d := l.durable.Load()
		if d <= l.hwm.Load() {
			return nil
		}
		val := []byte(strconv.FormatUint(d, 10))
		var rev uint64
		var err error
		if l.hwmRev == 0 {
			rev, err = l.docs.Create(ctx, hwmKey, val)
		} else {
			rev, err = l.docs.Update(ctx, hwmKey, val, l.hwmRev)
		}
		if err == nil {
			l.hwm.Store(d)
			l.hwmRev = rev
			return nil
		}
		if (!isWrongLastSeq(err) && !errors.Is(err, jetstream.ErrKeyExists)) || attempt == 3 {
			return fmt.Errorf("jslog: high-water mark %d: %w", d, err)
		}
		// Another process raised it: read it, and raise it further if need be.
		e, gerr := l.docs.Get(ctx, hwmKey)
		if gerr != nil {
			return fmt.Errorf("jslog: high-water mark: %w", gerr)
		}
		h, perr := strconv.ParseUint(string(e.Value()), 10, 64)
		if perr != nil {
			return fmt.Errorf("jslog: high-water mark %q: %w", e.Value(), perr)
		}
		l.hwmRev = e.Revision()
		if h > l.hwm.Load() {
			l.hwm.Store(h)
		}
	}
}

// readMark raises this process's copy of the mark to the stored one.
func (l *Log) readMark(ctx context.Context) error {
	l.hmu.Lock()
	defer l.hmu.Unlock()
	e, err := l.docs.Get(ctx, hwmKey)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("jslog: high-water mark: %w", err)
	}
	h, err := strconv.ParseUint(string(e.Value()), 10, 64)
	if err != nil {
		return fmt.Errorf("jslog: high-water mark %q: %w", e.Value(), err)
	}
	if h > l.hwm.Load() {
		l.hwm.Store(h)
		l.hwmRev = e.Revision()
	}
	return nil
}

// Mark is the high-water mark as this process last read or wrote it.
func (l *Log) Mark() uint64 { return l.hwm.Load() }

// lostCovers reports whether recorded losses cover seqs from..to.
func (l *Log) lostCovers(from, to uint64) bool {
	for s := from; s <= to; {
		i := slices.IndexFunc(l.lost, func(r eventlog.LostRange) bool { return r.From <= s && s <= r.To })
		if i < 0 {
			return false
		}
		s = l.lost[i].To + 1
	}
	return true
}

// gap records that seqs from..to are missing: Damaged says so from now on.
func (l *Log) gap(from, to uint64) error {
	err := fmt.Errorf("%w: seqs %d..%d (at or past the committed offset %d, so not trimmed) are not in stream %s: JetStream lost them (nats-server#7549); the log spout emits nothing past them. Stop gale serve and run `gale log salvage --log jetstream`: it records them lost (GET /v1/lost) so the rest can be processed",
		ErrLost, from, to, l.committed.Load(), l.name)
	l.dmu.Lock()
	if l.damage == nil {
		l.damage, l.gapAt = err, from
	}
	l.dmu.Unlock()
	l.cfg.Logger.Error("jslog: " + err.Error())
	return err
}

// lostTail records that the stream ends below seqs it acknowledged while this
// process ran (a server came back without them, nats-server#7567; the stream was
// deleted and made again): Damaged says so, Read stops, and Submit refuses, for
// every new record would get a seq given out before, at or below the committed
// offset, where the log spout never reads it. Until a salvage and a restart.
func (l *Log) lostTail(last, mark uint64) error {
	err := fmt.Errorf("%w: stream %s went back to seq %d, below seqs it acknowledged (the high-water mark is %d): JetStream lost its tail (nats-server#7567), or the stream was deleted and made again. This process takes no more events (each would get a seq given out before) and the log spout emits nothing. Stop every gale serve sharing it and run `gale log salvage --log jetstream`",
		ErrLost, l.name, last, mark)
	l.dmu.Lock()
	first := !l.tail
	if l.damage == nil || !l.tail {
		l.damage, l.gapAt = err, 0
	}
	l.tail = true
	l.dmu.Unlock()
	if first {
		l.cfg.Logger.Error("jslog: " + err.Error())
	}
	return err
}

// tailErr is lostTail's error once it was met.
func (l *Log) tailErr() error {
	l.dmu.Lock()
	defer l.dmu.Unlock()
	if l.tail {
		return l.damage
	}
	return nil
}

// reusedSeq handles a record the stream acknowledged at seq, at or below floor,
// a seq it had given out before: the record is taken out again (it lies where
// the log spout has read already; left in, it and its resends would be answered
// PERSISTED and never processed), and the tail is lost.
func (l *Log) reusedSeq(r *event.Record, seq, floor uint64) error {
	ctx, cancel := l.op(context.Background())
	defer cancel()
	if err := l.stream.DeleteMsg(ctx, seq); err != nil && !errors.Is(err, jetstream.ErrMsgNotFound) {
		l.cfg.Logger.Error("jslog: taking a record at a seq given out before back out of the stream failed", "event_id", r.Event.ID, "seq", seq, "err", err)
	}
	return fmt.Errorf("%w: %q", l.lostTail(seq, max(floor, l.hwm.Load())), r.Event.ID)
}

// checkTail looks whether the stream now ends below the mark (the lease loop
// does, every TTL/3, so an idle process learns it too).
func (l *Log) checkTail(ctx context.Context) error {
	// The stored mark, which the others raise too: this process may not have
	// seen the upper records itself.
	if err := l.readMark(ctx); err != nil {
		return err
	}
	mark := max(l.hwm.Load(), l.durable.Load()) // before the look: every seq up to it is given out
	info, err := l.stream.Info(ctx)
	if err != nil {
		return err
	}
	if info.State.LastSeq < mark {
		l.lostTail(info.State.LastSeq, mark)
	}
	return nil
}

func (l *Log) damaged() (error, uint64) {
	l.dmu.Lock()
	defer l.dmu.Unlock()
	return l.damage, l.gapAt
}

// Damaged is non-nil once Read met acknowledged records missing from the stream.
func (l *Log) Damaged() error {
	l.dmu.Lock()
	defer l.dmu.Unlock()
	return l.damage
}

// Lost lists the lost ranges Salvage recorded, oldest first.
func (l *Log) Lost() []eventlog.LostRange { return slices.Clone(l.lost) }

// SalvageReport says what Salvage found and did.
type SalvageReport struct {
	Committed, LastSeq, Mark uint64
	// Lost are the ranges recorded by this salvage (earlier ones are kept).
	Lost []eventlog.LostRange
	// Filled is how many filler records were appended to lift the stream's end
	// back to the mark.
	Filled uint64
}

// Salvage looks for acknowledged records missing from the stream: gaps at or
// past the committed offset, and a tail below the high-water mark. It records
// them in key "lost" (with the ranges recorded before), and appends filler
// records up to the mark after a lost tail, so that no seq is given out twice.
// Stop every serve process sharing the log first: a lease holder refuses it
// unless force.
func Salvage(ctx context.Context, cfg Config, force bool) (*SalvageReport, error) {
	cfg.NoLease = true
	l, err := openLog(ctx, cfg, true)
	if err != nil {
		return nil, err
	}
	defer l.Close()
	if kv, err := l.js.KeyValue(ctx, cfg.Prefix+"-loglease"); err == nil && !force {
		if e, err := kv.Get(ctx, leaseKey); err == nil {
			holder := string(e.Value())
			var li LeaseInfo
			if json.Unmarshal(e.Value(), &li) == nil && li.Holder != "" {
				holder = li.Holder
			}
			return nil, fmt.Errorf("jslog: salvage: a serve process (%s) holds the log spout's lease: stop every serve process sharing the log first (or force it: gale log salvage --force)", holder)
		}
	}
	info, err := l.stream.Info(ctx)
	if err != nil {
		return nil, fmt.Errorf("jslog: salvage: stream %s: %w", l.name, err)
	}
	rep := &SalvageReport{Committed: l.committed.Load(), LastSeq: info.State.LastSeq, Mark: l.hwm.Load()}
	now := time.Now().UnixNano()
	// Gaps from the committed offset to the stream's end.
	if rep.Committed <= info.State.LastSeq {
		lost, err := l.scanGaps(ctx, rep.Committed, info.State.LastSeq)
		if err != nil {
			return rep, err
		}
		for _, g := range lost {
			if !l.lostCovers(g[0], g[1]) {
				rep.Lost = append(rep.Lost, eventlog.LostRange{From: g[0], To: g[1], At: now,
					Reason: fmt.Sprintf("missing from stream %s (salvage)", l.name)})
			}
		}
	}
	// A tail lost below the mark: recorded lost first, then filled so that no
	// seq is given out twice. In this order a salvage cut off while filling
	// leaves no filler unrecorded: Read skips fillers, and the ingest service
	// finishes only the seqs of records it reads and of lost ranges, so an
	// unrecorded filler would hold its committed offset for good.
	if rep.Mark > rep.LastSeq && !l.lostCovers(rep.LastSeq+1, rep.Mark) {
		rep.Lost = append(rep.Lost, eventlog.LostRange{From: rep.LastSeq + 1, To: rep.Mark, At: now,
			Reason: fmt.Sprintf("stream %s ended at seq %d below the high-water mark %d (salvage filled the gap)", l.name, rep.LastSeq, rep.Mark)})
	}
	if len(rep.Lost) > 0 {
		all := append(slices.Clone(l.lost), rep.Lost...)
		slices.SortFunc(all, func(a, b eventlog.LostRange) int { return cmp.Compare(a.From, b.From) })
		b, _ := json.Marshal(all)
		if _, err := l.docs.Put(ctx, lostKey, b); err != nil {
			return rep, fmt.Errorf("jslog: salvage: recording lost ranges: %w", err)
		}
	}
	if rep.Mark > rep.LastSeq {
		subj := l.subj + fillerToken
		for seq := rep.LastSeq + 1; seq <= rep.Mark; seq++ {
			if beforeFiller != nil {
				if err := beforeFiller(seq); err != nil {
					return rep, fmt.Errorf("jslog: salvage: filler at seq %d: %w", seq, err)
				}
			}
			m := nats.NewMsg(subj)
			if _, err := l.js.PublishMsg(ctx, m, jetstream.WithExpectLastSequence(seq-1)); err != nil {
				return rep, fmt.Errorf("jslog: salvage: filler at seq %d (the lost ranges are recorded; run it again to finish): %w", seq, err)
			}
			rep.Filled++
		}
	}
	return rep, nil
}

// scanGaps returns the runs of seqs from..last missing from the stream.
func (l *Log) scanGaps(ctx context.Context, from, last uint64) ([][2]uint64, error) {
	sc, err := l.newScanner(ctx, from)
	if err != nil {
		return nil, err
	}
	defer sc.close()
	var lost [][2]uint64
	next := from
	for next <= last {
		recs, gaps, err := sc.scan(1024)
		if err != nil {
			return nil, err
		}
		if len(recs) == 0 && len(gaps) == 0 { // the end was deleted
			gaps = append(gaps, [2]uint64{next, last})
		}
		for _, g := range gaps {
			lost = append(lost, g)
			next = max(next, g[1]+1)
		}
		if len(recs) > 0 {
			next = max(next, recs[len(recs)-1]+1)
		}
	}
	return lost, nil
}

// beforeFiller, when set (tests), runs before each filler is appended; an error
// cuts the salvage off there.
var beforeFiller func(seq uint64) error

// scanner reads the stream from a seq on, for Salvage, through one consumer it
// makes once and deletes when done. (An ordered consumer's FetchNoWait made a new
// consumer on the server each call, one per 1,024 records, and none was deleted.)
type scanner struct {
	l    *Log
	c    jetstream.Consumer
	name string
	next uint64 // the seq after the last one read
	dseq uint64 // the consumer's seq of the last message read
}

func (l *Log) newScanner(ctx context.Context, from uint64) (*scanner, error) {
	name := l.cfg.Prefix + "-salvage-" + rand.Text()
	ctx, cancel := l.op(ctx)
	defer cancel()
	c, err := l.js.CreateConsumer(ctx, l.name, jetstream.ConsumerConfig{
		Name: name, Description: "gale log salvage's scan of the log",
		DeliverPolicy: jetstream.DeliverByStartSequencePolicy, OptStartSeq: from,
		AckPolicy: jetstream.AckNonePolicy, MemoryStorage: true, Replicas: 1,
		InactiveThreshold: readerInactive,
	})
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout) {
			l.deleteConsumer(name, false) // made, maybe, its answer lost
		}
		return nil, fmt.Errorf("jslog: scan from seq %d: %w", from, err)
	}
	return &scanner{l: l, c: c, name: name, next: from}, nil
}

// close deletes the scanner's consumer.
func (s *scanner) close() { s.l.deleteConsumer(s.name, true) }

// scan reads up to max more messages and returns their seqs and the runs of seqs
// missing between the last call's and the last one read now.
func (s *scanner) scan(max int) (seqs []uint64, gaps [][2]uint64, err error) {
	batch, err := s.c.FetchNoWait(max)
	if err != nil {
		return nil, nil, fmt.Errorf("jslog: scan from seq %d: %w", s.next, err)
	}
	for m := range batch.Messages() {
		md, err := m.Metadata()
		if err != nil {
			return seqs, gaps, err
		}
		if md.Sequence.Consumer != s.dseq+1 {
			// Not a gap in the stream: messages lost on their way here. Recording
			// them lost would be false.
			return seqs, gaps, fmt.Errorf("jslog: scan from seq %d: messages lost on their way (consumer seq %d after %d); run it again", s.next, md.Sequence.Consumer, s.dseq)
		}
		s.dseq = md.Sequence.Consumer
		seq := md.Sequence.Stream
		if seq > s.next {
			gaps = append(gaps, [2]uint64{s.next, seq - 1})
		}
		seqs = append(seqs, seq)
		s.next = seq + 1
	}
	if err := batch.Error(); err != nil && !errors.Is(err, nats.ErrTimeout) && !errors.Is(err, jetstream.ErrNoMessages) {
		return seqs, gaps, err
	}
	return seqs, gaps, nil
}
