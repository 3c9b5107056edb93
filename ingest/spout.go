package ingest

import (
	"container/heap"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/gale-stream/gale/event"
	"github.com/gale-stream/gale/eventlog"
	"github.com/gale-stream/gale/topology"
	"github.com/gale-stream/gale/tuple"
)

// SpoutFields are the fields of the tuples the log spout emits: one record of the
// log, one field per part, each a plain value (one the tuple codec encodes without
// registration, so that the tuple can cross processes):
//
//	event_id     string  the event's id
//	source       string
//	type         string
//	key          string  "" when the event has none
//	version      int64   nil when the event has none
//	payload      []byte  the JSON object, byte for byte as sent
//	seq          uint64  the record's log position
//	received_at  int64   Unix nanoseconds when the ingest API took it in
//	generation   uint32  0, or the resubmission that wrote the record
//
// The record's content hash stays in the log. SpoutValues makes the values of a
// record, SpoutRecord reads them back.
var SpoutFields = []string{"event_id", "source", "type", "key", "version", "payload", "seq", "received_at", "generation"}

// SpoutValues returns the tuple values of rec, in SpoutFields' order. The payload
// shares rec's bytes: neither side may modify them.
func SpoutValues(rec *event.Record) tuple.Values {
	e := &rec.Event
	var version any
	if e.Version != nil {
		version = *e.Version
	}
	return tuple.Values{e.ID, e.Source, e.Type, e.Key, version, []byte(e.Payload), rec.Seq, rec.ReceivedAt, rec.Generation}
}

// SpoutRecord reads back the record of a tuple made by SpoutValues, found by the
// field names of SpoutFields (Hash is left zero). An error names the first field that
// is missing or of another type.
func SpoutRecord(t *tuple.Tuple) (event.Record, error) {
	var r event.Record
	e := &r.Event
	var payload []byte
	var version any
	for _, f := range []struct {
		name string
		dst  any
	}{
		{"event_id", &e.ID}, {"source", &e.Source}, {"type", &e.Type}, {"key", &e.Key},
		{"version", &version}, {"payload", &payload}, {"seq", &r.Seq}, {"received_at", &r.ReceivedAt},
		{"generation", &r.Generation},
	} {
		v, ok := t.Lookup(f.name)
		if !ok {
			return r, fmt.Errorf("ingest: a tuple from %s has no field %q (a log spout's tuple has %v)", t.SourceComponent(), f.name, SpoutFields)
		}
		ok = true
		switch d := f.dst.(type) {
		case *string:
			*d, ok = v.(string)
		case *uint64:
			*d, ok = v.(uint64)
		case *int64:
			*d, ok = v.(int64)
		case *uint32:
			*d, ok = v.(uint32)
		case *[]byte:
			*d, ok = v.([]byte)
		case *any: // version: an int64 or nil
			_, isInt := v.(int64)
			*d, ok = v, v == nil || isInt
		}
		if !ok {
			return r, fmt.Errorf("ingest: field %q of a tuple from %s is %T, not what a log spout emits", f.name, t.SourceComponent(), v)
		}
	}
	e.Payload = payload
	if version != nil {
		v := version.(int64)
		e.Version = &v
	}
	return r, nil
}

// Spout returns the factory of the log spout for s: it reads the log in sequence
// from the committed offset, emits each durable record as the root of a tracked
// tuple tree (message id: its seq), and reports outcomes to s: a completed tree is
// PROCESSED; a failed or timed-out one is replayed after an exponential backoff
// without holding back later records, up to max attempts, then FAILED_FINAL.
//
// A sink outage (Config.Sink) is not the events' fault: while the sink is
// unavailable the spout emits nothing (no new records, no replays), and a tree that
// times out while it is, or whose life overlapped an outage, is replayed once the
// sink is back without being charged an attempt (StepInterrupted).
//
// Declare it with parallelism 1 (the log is one sequence): other tasks fail Open.
func (s *Service) Spout() func() topology.Spout {
	return func() topology.Spout { return &logSpout{svc: s} }
}

type logSpout struct {
	svc      *Service
	out      topology.SpoutCollector
	pos      uint64 // next seq to read
	buf      []event.Record
	inflight map[uint64]inflight
	retries  retryHeap
	// On a log several serve processes share: the lease term this spout reads
	// in, and whether it lost the lease it held (it emits nothing until its trees
	// of that term are over and it holds the lease again).
	epoch uint64
	lost  bool
	// The last read error logged, and when.
	readErr   string
	readErrAt time.Time
}

// readErrEvery is how often a read error that persists is logged again.
const readErrEvery = 10 * time.Second

// spoutLease is a log several serve processes share (jslog): only the holder of
// its lease reads it, and a new term (a takeover) starts from the committed
// offset the last holder left.
type spoutLease interface {
	Holding() (epoch uint64, ok bool)
}

// inflight is an emitted record and the sink's outage count at its emit.
type inflight struct {
	rec     *event.Record
	outages uint64
}

func (sp *logSpout) Open(_ context.Context, tc topology.TaskContext, out topology.SpoutCollector) error {
	if tc.Parallelism != 1 {
		return fmt.Errorf("ingest: the log spout reads one sequence: declare it with parallelism 1, not %d", tc.Parallelism)
	}
	sp.out = out
	sp.pos = sp.svc.log.Committed()
	sp.inflight = map[uint64]inflight{}
	return nil
}

func (sp *logSpout) NextTuple() {
	if sp.svc.sinkErr() != nil {
		return // the sink's outage: whatever is emitted would only wait, or time out
	}
	if !sp.leased() {
		return // another serve process reads the log
	}
	now := sp.svc.now()
	if len(sp.retries) > 0 && sp.retries[0].due <= now {
		r := heap.Pop(&sp.retries).(retryItem)
		if _, err := sp.svc.started(r.rec); err != nil {
			sp.svc.cfg.Logger.Error("log spout: cannot restart event", "event_id", r.rec.Event.ID, "err", err)
			return
		}
		sp.send(r.rec)
		return
	}
	for {
		if len(sp.buf) == 0 {
			recs, err := sp.svc.log.Read(sp.pos, 256)
			if err != nil {
				// A record that fails its checksum after Open verified it: stop here
				// rather than skip it; the operator sees the error.
				if msg := err.Error(); msg != sp.readErr || time.Since(sp.readErrAt) >= readErrEvery {
					// Once per error and then every readErrEvery: NextTuple runs
					// every few milliseconds.
					sp.readErr, sp.readErrAt = msg, time.Now()
					sp.svc.cfg.Logger.Error("log spout: read failed; not emitting past it", "seq", sp.pos, "err", err)
				}
				return
			}
			if len(recs) == 0 {
				return
			}
			sp.buf = recs
		}
		if sp.buf[0].Seq <= sp.svc.recoveryEnd {
			// Pending when the process last stopped: record the attempts of a small
			// chunk durably, then emit exactly that chunk now (max spout pending acts
			// between NextTuple calls, as in Storm), so no record is charged an
			// attempt it did not get.
			n := 0
			for n < len(sp.buf) && n < recoveredChunk && sp.buf[n].Seq <= sp.svc.recoveryEnd {
				n++
			}
			chunk := sp.buf[:n]
			if err := sp.svc.startRecovered(chunk); err != nil {
				sp.svc.cfg.Logger.Error("log spout: recording recovered attempts failed; not emitting", "seq", sp.pos, "err", err)
				return
			}
			sp.buf = sp.buf[n:]
			sp.pos = chunk[n-1].Seq + 1
			emitted := false
			for i := range chunk {
				if sp.svc.begin(&chunk[i]) {
					r := chunk[i]
					sp.send(&r)
					emitted = true
				}
			}
			if emitted {
				return
			}
			continue
		}
		rec := &sp.buf[0]
		sp.buf = sp.buf[1:]
		sp.pos = rec.Seq + 1
		if sp.svc.begin(rec) {
			r := *rec
			sp.send(&r)
			return
		}
	}
}

// leased reports whether this spout may read: always on a log of its own; on a
// shared one while this process holds the lease, starting a new term when it has
// just taken it.
func (sp *logSpout) leased() bool {
	sl, ok := sp.svc.log.(spoutLease)
	if !ok {
		return true
	}
	epoch, held := sl.Holding()
	switch {
	case !held:
		if sp.epoch != 0 && !sp.lost {
			sp.loseLease()
		}
		return false
	case epoch == sp.epoch && !sp.lost:
		return true
	case len(sp.inflight) > 0:
		// Trees of the last term still run here: the new term starts once they
		// are over (acked, failed or timed out), so no record is in flight twice.
		if !sp.lost {
			sp.loseLease()
		}
		return false
	}
	sp.pos = sp.svc.takeOver()
	sp.buf, sp.retries = nil, nil
	sp.epoch, sp.lost = epoch, false
	return true
}

// loseLease stops this spout's term: another process may hold the lease now and
// replays from the committed offset what was not finished here. Events waiting
// for a retry are left to it (their attempts are in the status documents the
// next flush writes); trees in flight run to their end, and their outcome is
// recorded, but a failed one is not retried here.
func (sp *logSpout) loseLease() {
	sp.lost = true
	sp.svc.cfg.Logger.Warn("log spout: this process no longer holds the log spout's lease; emitting nothing",
		"term", sp.epoch, "in_flight", len(sp.inflight), "waiting_retry", len(sp.retries))
	for _, r := range sp.retries {
		sp.svc.release(r.rec)
	}
	sp.retries, sp.buf = nil, nil
}

// recoveredChunk is how many recovered records get their attempts synced together
// and are emitted in one NextTuple call.
const recoveredChunk = 32

// send emits rec as a tracked root whose attempt was started.
func (sp *logSpout) send(rec *event.Record) {
	sp.inflight[rec.Seq] = inflight{rec: rec, outages: sp.svc.sinkOutages()}
	if err := sp.out.Emit(SpoutValues(rec), rec.Seq); err != nil {
		sp.svc.cfg.Logger.Error("log spout: emit failed", "event_id", rec.Event.ID, "err", err)
	}
}

func (sp *logSpout) Ack(msgID any) {
	seq := msgID.(uint64)
	in, ok := sp.inflight[seq]
	if !ok {
		return
	}
	delete(sp.inflight, seq)
	sp.svc.processed(in.rec)
}

func (sp *logSpout) Fail(msgID any) { sp.FailReason(msgID, "") }

// FailReason implements topology.ReasonedSpout: the reason becomes the event's
// last error.
func (sp *logSpout) FailReason(msgID any, reason string) {
	seq := msgID.(uint64)
	in, ok := sp.inflight[seq]
	if !ok {
		return
	}
	delete(sp.inflight, seq)
	if sp.lost {
		// A tree of a term that is over. Whoever holds the lease now replays the
		// event from the committed offset, and charged it this attempt when it
		// took over: recording the failure here would charge it twice, and
		// could dead-letter an event the new holder has processed.
		sp.svc.cfg.Logger.Info("log spout: a tree of a lost lease term failed; the lease's holder replays the event",
			"event_id", in.rec.Event.ID, "seq", seq, "reason", reason)
		sp.svc.drop(in.rec)
		return
	}
	if strings.HasPrefix(reason, topology.TimeoutReason) {
		// A tree that waited on a sink outage timed out because of it: replay it
		// when the sink is back (NextTuple waits for that), without charging.
		if err := sp.svc.sinkErr(); err != nil || sp.svc.sinkOutages() != in.outages {
			cause := "the sink was unavailable during the attempt"
			if err != nil {
				cause = err.Error()
			}
			if sp.svc.interrupted(in.rec, reason+"; "+cause+" (attempt not charged)") {
				sp.retry(retryItem{due: sp.svc.now(), rec: in.rec})
				return
			}
		}
	}
	if retryAt, final := sp.svc.failed(in.rec, reason); !final {
		sp.retry(retryItem{due: retryAt, rec: in.rec})
	}
}

// retry queues a failed record for its next attempt, unless this spout lost its
// lease: then the holder's replay from the committed offset retries it.
func (sp *logSpout) retry(r retryItem) {
	if sp.lost {
		sp.svc.release(r.rec)
		return
	}
	heap.Push(&sp.retries, r)
}

// sinkOutages is the sink's count of outages begun, 0 if it is not known.
func (s *Service) sinkOutages() uint64 {
	if s.cfg.Sink == nil {
		return 0
	}
	return s.cfg.Sink.Outages()
}

// interrupted gives back the attempt of rec's event, whose tree timed out during a
// sink outage; false if the event is not in progress (then it is failed as usual).
func (s *Service) interrupted(rec *event.Record, reason string) bool {
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	st, err := s.tr.Interrupted(now, rec.Event.ID, reason)
	if err != nil {
		s.cfg.Logger.Error("interruption of an event not in progress", "event_id", rec.Event.ID, "err", err)
		return false
	}
	s.docs[rec.Event.ID] = st // the attempt given back survives a restart
	s.cfg.Logger.Debug("event attempt interrupted by a sink outage; not charged", "event_id", rec.Event.ID, "reason", reason)
	s.wakeLocked(rec.Event.ID)
	return true
}

// Close hands the records whose trees are still in flight to the service: their
// trees were abandoned (a stop past its deadline, or a generation cut off because a
// worker running part of them was lost), neither acked nor failed. Whether that
// costs them an attempt is the caller's to say: a lost process does
// (ChargeAbandoned), a stop does not (ReleaseAbandoned).
func (sp *logSpout) Close() error {
	recs := make([]*event.Record, 0, len(sp.inflight))
	for _, in := range sp.inflight {
		recs = append(recs, in.rec)
	}
	sp.inflight = nil
	sp.svc.mu.Lock()
	sp.svc.abandoned = recs
	sp.svc.mu.Unlock()
	return nil
}

// ChargeAbandoned charges one failed attempt, with reason, to every event whose
// tree the last log spout abandoned when it closed: for gale serve on a cluster,
// when a worker running part of the topology was lost (a process that dies charges
// one attempt to what it was running, so that an event that kills every worker it
// reaches ends dead-lettered after Config.Tracker.MaxAttempts, not in a loop of
// crashes). The next log spout emits them again (or not, if dead-lettered). It
// returns how many were charged and how many of those were dead-lettered; the list
// is then empty, and a graceful stop leaves it empty.
func (s *Service) ChargeAbandoned(reason string) (charged, deadLettered int) {
	s.mu.Lock()
	recs := s.abandoned
	s.abandoned = nil
	s.mu.Unlock()
	for _, rec := range recs {
		if _, final := s.failed(rec, reason); final {
			deadLettered++
		}
		charged++
	}
	return charged, deadLettered
}

// ReleaseAbandoned gives back the attempt of every event whose tree the last log
// spout abandoned when it closed, with reason: a stop, or an outage, is never
// charged to the event it interrupted. It returns how many were released.
func (s *Service) ReleaseAbandoned(reason string) int {
	s.mu.Lock()
	recs := s.abandoned
	s.abandoned = nil
	s.mu.Unlock()
	n := 0
	for _, rec := range recs {
		if s.interrupted(rec, reason) {
			n++
		}
	}
	return n
}

type retryItem struct {
	due int64
	rec *event.Record
}

type retryHeap []retryItem

func (h retryHeap) Len() int           { return len(h) }
func (h retryHeap) Less(i, j int) bool { return h[i].due < h[j].due }
func (h retryHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *retryHeap) Push(x any)        { *h = append(*h, x.(retryItem)) }
func (h *retryHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// begin decides whether a record read from the log is to be processed and, if so,
// records its attempt as started. Not if a newer generation superseded it, or its
// status document says it already finished (processed before a crash, but the
// committed offset had not been synced yet).
func (s *Service) begin(rec *event.Record) bool {
	id := rec.Event.ID
	s.mu.Lock()
	s.supersededLocked(rec)
	e, held := s.tr.m[id]
	accepted := held && e.st.Status == Accepted
	s.mu.Unlock()
	var dv durableView
	// When it became durable: for a held event its appender has not heard of
	// yet, or one loaded from the log.
	var persistedAt int64
	if !held { // I/O outside the lock
		var err error
		if dv, err = s.durableView(id); err != nil {
			s.cfg.Logger.Warn("dedupe index or status document unreadable; processing the event", "event_id", id, "err", err)
			dv = durableView{}
		}
		persistedAt = s.loadedAt(rec, dv)
	} else if accepted {
		persistedAt = s.persistedAt(rec.Seq)
	}
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	if e, ok := s.tr.m[id]; ok {
		if e.st.Generation != rec.Generation {
			s.offsets.Done(rec.Seq) // an older generation; the held one is newer
			return false
		}
		if e.st.Status == Accepted {
			// Durable (it was read below Durable) before its appender heard so.
			if persistedAt == 0 { // it was not held a moment ago, nor accepted
				persistedAt = now
			}
			s.tr.Persisted(persistedAt, id, rec.Seq, rec.Generation)
		}
		if e.st.Status != Persisted {
			s.offsets.Done(rec.Seq)
			return false
		}
		if s.prestarted[rec.Seq] { // its attempt was recorded by startRecovered
			delete(s.prestarted, rec.Seq)
			s.wakeLocked(id)
			return true
		}
	} else {
		if dv.done(rec) {
			s.offsets.Done(rec.Seq)
			return false
		}
		s.tr.Load(rec, dv.doc, persistedAt)
	}
	if _, err := s.tr.Started(now, id); err != nil {
		s.cfg.Logger.Error("log spout: cannot start event", "event_id", id, "err", err)
		s.offsets.Done(rec.Seq)
		return false
	}
	s.wakeLocked(id)
	return true
}

// takeOver starts a term of the log spout's lease: the committed offset and the
// log's end are the ones the log found when it took the lease (the last holder
// moved them), and the records up to that end were pending when the last holder
// stopped reading, so each is charged an attempt before it runs again
// (startRecovered), as after a restart. It returns the offset to read from.
func (s *Service) takeOver() uint64 {
	committed, durable := s.log.Committed(), s.log.Durable()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.offsets = NewOffsets(committed)
	for _, r := range s.log.Lost() {
		s.offsets.Skip(r.From, r.To)
	}
	s.recoveryEnd = durable
	s.prestarted = map[uint64]bool{}
	s.cfg.Logger.Info("log spout: reading the log from the committed offset", "committed", committed, "durable", durable)
	return s.offsets.Committed()
}

// release lets go of an event this process no longer runs (its spout lost the
// lease): it leaves memory once its status document is written, and the
// lease's holder loads it from there.
func (s *Service) release(rec *event.Record) {
	s.mu.Lock()
	defer s.mu.Unlock()
	id := rec.Event.ID
	if st, ok := s.tr.Get(id); ok && st.Generation == rec.Generation {
		if _, pending := s.docs[id]; !pending {
			s.docs[id] = st
		}
		s.tr.Forget(id)
		delete(s.finished, id)
		s.wakeLocked(id) // they read it from the log from now on
	}
}

// drop lets go of an event whose attempt ended in a lease term that is over,
// without recording the end: the holder of the lease replays it.
func (s *Service) drop(rec *event.Record) {
	s.mu.Lock()
	defer s.mu.Unlock()
	id := rec.Event.ID
	if st, ok := s.tr.Get(id); ok && st.Generation == rec.Generation {
		s.tr.Forget(id)
		delete(s.finished, id)
		s.wakeLocked(id)
	}
}

func (s *Service) started(rec *event.Record) (int, error) {
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	n, err := s.tr.Started(now, rec.Event.ID)
	if err == nil {
		s.wakeLocked(rec.Event.ID)
	}
	return n, err
}

func (s *Service) processed(rec *event.Record) {
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	st, err := s.tr.Processed(now, rec.Event.ID)
	if err != nil {
		s.cfg.Logger.Error("completion of an event not in progress", "event_id", rec.Event.ID, "err", err)
		s.offsets.Done(rec.Seq) // its tree is over either way: never stall the offset
		return
	}
	s.counts.event(&rec.Event, Processed)
	s.unsynced[rec.Event.ID] = true
	s.docs[rec.Event.ID] = st
	if st.Generation > 0 {
		// A resubmitted dead letter: its listing goes, even if the :retry's own
		// flush was lost in a crash.
		s.dead[rec.Event.ID] = false
	}
	s.finished[rec.Event.ID] = true
	s.offsets.Done(rec.Seq)
	s.wakeLocked(rec.Event.ID) // waiters see it unsynced and kick a flush
}

// failed records a failed attempt; final means the event is dead-lettered.
func (s *Service) failed(rec *event.Record, reason string) (retryAt int64, final bool) {
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	final, retryAt, st, err := s.tr.Failed(now, rec.Event.ID, reason)
	if err != nil {
		s.cfg.Logger.Error("failure of an event not in progress", "event_id", rec.Event.ID, "err", err)
		s.offsets.Done(rec.Seq) // never stall the offset
		return 0, true
	}
	s.docs[rec.Event.ID] = st // attempts survive a restart
	if final {
		s.deadLetterLocked(rec, st)
	} else {
		s.counts.source(rec.Event.Source).attemptFailures.Add(1)
		s.cfg.Logger.Info("event attempt failed; retrying", "event_id", rec.Event.ID, "attempt", st.Attempts,
			"retry_in", time.Duration(retryAt-now), "reason", reason)
	}
	s.wakeLocked(rec.Event.ID)
	return retryAt, final
}

// startRecovered records, durably and before any of them runs, an attempt for each
// record that was in the log when the service started and is not finished: the
// process stopped while they were pending, maybe because one of them crashed it.
// An attempt is otherwise recorded only when it fails, so without this a poison
// event that kills the process would be retried forever; with it, an event whose
// attempts were all started and never finished is dead-lettered instead.
func (s *Service) startRecovered(recs []event.Record) error {
	var w eventlog.Write
	n := 0
	for i := range recs {
		rec := &recs[i]
		if rec.Seq > s.recoveryEnd {
			break
		}
		id := rec.Event.ID
		s.mu.Lock()
		s.supersededLocked(rec)
		held := s.tr.Has(id)
		s.mu.Unlock()
		if held {
			continue
		}
		dv, err := s.durableView(id)
		if err != nil {
			return err
		}
		if dv.done(rec) {
			continue // begin skips it
		}
		persistedAt := s.loadedAt(rec, dv)
		now := s.now()
		s.mu.Lock()
		if s.tr.Has(id) {
			s.mu.Unlock()
			continue
		}
		st := s.tr.Load(rec, dv.doc, persistedAt)
		if s.tr.Exhausted(id) {
			reason := fmt.Sprintf("%d attempts started and none finished: the process stopped each time (last error: %q)", st.Attempts, st.LastError)
			st, _ = s.tr.GiveUp(now, id, reason)
			s.deadLetterLocked(rec, st)
		} else if _, err := s.tr.Started(now, id); err == nil {
			st, _ = s.tr.Get(id)
			s.prestarted[rec.Seq] = true
		}
		s.mu.Unlock()
		b, _ := json.Marshal(st)
		w.Set(eventlog.Status, id, b)
		n++
	}
	if n == 0 {
		return nil
	}
	return s.log.Apply(&w)
}

// deadLetterLocked records that rec's event ended FAILED_FINAL with status st: its
// document and dead letter go to the next flush, which answers its waiters once
// both are durable, and its seq is finished (s.mu held).
func (s *Service) deadLetterLocked(rec *event.Record, st EventStatus) {
	id := rec.Event.ID
	s.counts.event(&rec.Event, FailedFinal)
	s.docs[id] = st
	s.unsynced[id] = true
	s.dead[id] = true
	s.finished[id] = true
	s.offsets.Done(rec.Seq)
	s.cfg.Logger.Warn("event dead-lettered", "event_id", id, "attempts", st.Attempts, "last_error", st.LastError)
}

// supersededLocked lets go of what is held of rec's event for a generation
// older than rec's (s.mu held). On a log several serve processes share, a dead
// letter can be resubmitted through another process while this one still holds
// the finished old generation (its document stored, the flush that forgets it
// not done yet): the new generation's record must run, not be taken for an
// older one and skipped. A document of the old generation still pending here
// goes too: the new generation's replaces it, and its dead letter is deleted.
func (s *Service) supersededLocked(rec *event.Record) {
	id := rec.Event.ID
	e, ok := s.tr.m[id]
	if !ok || e.st.Generation >= rec.Generation {
		return
	}
	s.tr.Forget(id)
	delete(s.finished, id)
	if d, pending := s.docs[id]; pending && d.Generation < rec.Generation {
		delete(s.docs, id)
		delete(s.dead, id)
		delete(s.unsynced, id)
	}
	s.wakeLocked(id)
}

// durableView is what the log knows of an event id not held in memory.
type durableView struct {
	entry eventlog.Entry // the dedupe index entry, if inIdx
	inIdx bool
	doc   *EventStatus // the status document, if one was synced
}

func (s *Service) durableView(id string) (durableView, error) {
	var dv durableView
	var err error
	if dv.entry, dv.inIdx, err = s.log.Lookup(id); err != nil {
		return dv, err
	}
	dv.doc, err = s.statusDoc(id)
	return dv, err
}

// done reports whether rec needs no processing: a newer generation superseded it,
// or its status document says its generation already finished (before a crash,
// ahead of the committed offset's sync). A document about an earlier seq is not
// rec's: that record is gone (lost to a salvage), and rec is its resend.
func (dv durableView) done(rec *event.Record) bool {
	if dv.inIdx && dv.entry.Generation > rec.Generation {
		return true
	}
	d := dv.doc
	return d != nil && d.Generation == rec.Generation && !d.before(rec.Seq) && (d.Status == Processed || d.Status == FailedFinal)
}
