package jslog

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/gale-stream/gale/event"
	"github.com/gale-stream/gale/eventlog"
)

// Errors of the log.
var (
	// ErrExists: a record for this event id (and generation) is stored already,
	// by another serve process or by an earlier attempt whose answer was lost. The
	// event is a duplicate: a resend finds it through Lookup.
	ErrExists = errors.New("jslog: the event id is stored already")
	// ErrNotStored: the stream did not confirm a record in time (no quorum, the
	// server unreachable): it may or may not be stored, so it is not PERSISTED; a
	// resend finds it if it was.
	ErrNotStored = errors.New("jslog: the stream did not confirm the record")
	ErrClosed    = errors.New("jslog: closed")
)

// Config configures a Log.
type Config struct {
	// JS is the JetStream context of the connection (the caller's; it stays open).
	JS jetstream.JetStream
	// Prefix names the stream (PREFIX-log, subjects PREFIX.log.>) and the documents'
	// bucket (PREFIX-logdocs). Default "gale".
	Prefix string
	// Replicas of the stream and the bucket (default 1; 3 on a three-node cluster).
	// Used when they are created; an existing stream keeps its own.
	Replicas int
	// Timeout bounds each call to the server, and how long Submit waits for the
	// stream's acknowledgements (default 10 s).
	Timeout time.Duration
	// Durability is what PERSISTED means on this cluster, said in every answer
	// (Log.Durability): "replicated:3+fsync", "replicated:3" or "unknown"; default
	// "unknown".
	Durability string
	// Logger gets operational messages (nil: discarded).
	Logger *slog.Logger

	// Holder names this process in the log spout's lease (default hostname-pid).
	Holder string
	// LeaseTTL is how long the log spout's lease outlives its holder's last
	// renewal, so how long the log waits unread after its reader dies (default
	// 10 s). Every process sharing the log must give the same: it is the lease
	// bucket's TTL.
	LeaseTTL time.Duration
	// NoLease: this process never runs the log spout (a benchmark, a tool), so it
	// neither takes nor waits for the lease; it cannot move the committed offset.
	NoLease bool
}

// Log is gale's event log on a JetStream stream, with the same contract as the
// Pebble log (eventlog.Log) as ingest.Service uses it. See the package comment.
type Log struct {
	cfg     Config
	js      jetstream.JetStream
	stream  jetstream.Stream
	docs    jetstream.KeyValue
	name    string // the stream's name
	subj    string // PREFIX.log.
	docsSub string // $KV.PREFIX-logdocs.

	durable   atomic.Uint64
	committed atomic.Uint64
	closed    atomic.Bool
	wg        sync.WaitGroup // Submit's waiters

	// absent is the negative cache behind MayContain: ids a Lookup found without a
	// record, recently. See MayContain.
	nmu    sync.Mutex
	absent map[string]absence
	ntok   atomic.Uint64

	lease *lease // the log spout's lease (lease.go); nil with NoLease

	// The high-water mark and the gap check (hwm.go).
	hwm       atomic.Uint64 // the mark as stored
	hmu       sync.Mutex    // writeMark
	hwmRev    uint64        // its key's revision (hmu)
	lost      []eventlog.LostRange
	salvaging bool
	dmu       sync.Mutex
	damage    error  // the first gap met (dmu)
	gapAt     uint64 // its first seq
	tail      bool   // the stream lost its tail while this process ran (lostTail)

	wmu                  sync.Mutex // OnStatusChange's watch (watch.go)
	watchStop, watchDone chan struct{}

	guard atomic.Pointer[statusGuard] // GuardStatus's (guard.go)

	// The reader (reader.go).
	rmu     sync.Mutex
	rd      *reader
	next    uint64 // the seq after the last one Read took from rd
	base    uint64 // the seq after the last record Read returned: from base to next, only fillers
	readers sync.WaitGroup
}

// Open binds to (or creates) the stream and the documents' bucket, reads the
// committed offset, the high-water mark and the recorded losses, and refuses a
// stream that ends below the mark (ErrLost).
func Open(ctx context.Context, cfg Config) (*Log, error) { return openLog(ctx, cfg, false) }

func openLog(ctx context.Context, cfg Config, salvaging bool) (*Log, error) {
	if cfg.JS == nil {
		return nil, errors.New("jslog: Config.JS is required")
	}
	if cfg.Prefix == "" {
		cfg.Prefix = "gale"
	}
	if strings.ContainsAny(cfg.Prefix, ". *>\t\r\n") {
		return nil, fmt.Errorf("jslog: prefix %q: letters, digits, - and _ only", cfg.Prefix)
	}
	if cfg.Replicas == 0 {
		cfg.Replicas = 1
	}
	if cfg.Replicas < 1 || cfg.Replicas > 5 {
		return nil, fmt.Errorf("jslog: %d replicas: JetStream takes 1 to 5", cfg.Replicas)
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 10 * time.Second
	}
	if cfg.Durability == "" {
		cfg.Durability = "unknown"
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Holder == "" {
		cfg.Holder = defaultHolder()
	}
	if cfg.LeaseTTL == 0 {
		cfg.LeaseTTL = defaultLeaseTTL
	}
	if cfg.LeaseTTL < time.Second {
		return nil, fmt.Errorf("jslog: lease TTL %v: at least 1s (JetStream expires keys no finer)", cfg.LeaseTTL)
	}
	l := &Log{cfg: cfg, js: cfg.JS, name: cfg.Prefix + "-log", subj: cfg.Prefix + ".log.", absent: map[string]absence{}, salvaging: salvaging}
	octx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	// An existing stream and bucket keep their replica count: the config below
	// is otherwise applied to them as an update, and a tool that does not say
	// (gale log salvage), or a serve process given another --replicas, would
	// take a replicated log down to one copy.
	replicas := func(stream string) (int, error) {
		s, err := l.js.Stream(octx, stream)
		if errors.Is(err, jetstream.ErrStreamNotFound) {
			return cfg.Replicas, nil
		}
		if err != nil {
			return 0, fmt.Errorf("jslog: stream %s: %w", stream, err)
		}
		return s.CachedInfo().Config.Replicas, nil
	}
	logReplicas, err := replicas(l.name)
	if err != nil {
		return nil, err
	}
	bucket := cfg.Prefix + "-logdocs"
	docsReplicas, err := replicas("KV_" + bucket)
	if err != nil {
		return nil, err
	}
	l.stream, err = l.js.CreateOrUpdateStream(octx, jetstream.StreamConfig{
		Name: l.name, Subjects: []string{l.subj + ">"}, Storage: jetstream.FileStorage,
		Replicas: logReplicas, Retention: jetstream.LimitsPolicy, Discard: jetstream.DiscardNew,
		// One record per event id and generation is kept whatever the limits: the
		// dedupe index is the stream itself (the last record of a subject).
		MaxMsgsPerSubject: -1, Description: "gale serve's event log",
	})
	if err != nil {
		return nil, fmt.Errorf("jslog: stream %s: %w", l.name, err)
	}
	l.docs, err = l.js.CreateOrUpdateKeyValue(octx, jetstream.KeyValueConfig{
		Bucket: bucket, Replicas: docsReplicas, Storage: jetstream.FileStorage, History: 1,
		Description: "gale serve's status documents, dead letters and committed offset",
	})
	if err != nil {
		return nil, fmt.Errorf("jslog: bucket %s: %w", bucket, err)
	}
	l.docsSub = "$KV." + bucket + "."
	info, err := l.stream.Info(octx)
	if err != nil {
		return nil, fmt.Errorf("jslog: stream %s: %w", l.name, err)
	}
	l.durable.Store(info.State.LastSeq)
	if err := l.loadMarks(octx, info.State.LastSeq); err != nil {
		return nil, err
	}
	e, err := l.docs.Get(octx, committedKey)
	switch {
	case errors.Is(err, jetstream.ErrKeyNotFound):
		l.committed.Store(max(1, info.State.FirstSeq))
	case err != nil:
		return nil, fmt.Errorf("jslog: committed offset: %w", err)
	default:
		c, perr := strconv.ParseUint(string(e.Value()), 10, 64)
		if perr != nil {
			return nil, fmt.Errorf("jslog: committed offset %q: %w", e.Value(), perr)
		}
		l.committed.Store(max(c, 1))
	}
	if !cfg.NoLease {
		if err := l.openLease(octx); err != nil {
			return nil, err
		}
	}
	return l, nil
}

const committedKey = "committed"

// Durability says what PERSISTED means on this log (Config.Durability).
func (l *Log) Durability() string { return l.cfg.Durability }

// Stream is the log's stream (its info: replicas, cluster, leader).
func (l *Log) Stream() jetstream.Stream { return l.stream }

// Name is the stream's name (PREFIX-log).
func (l *Log) Name() string { return l.name }

// Replicas is the stream's replica count.
func (l *Log) Replicas() int { return l.stream.CachedInfo().Config.Replicas }

// subject is the subject of an event id's records: the id in base64url, so any
// id is one token.
func (l *Log) subject(id string) string {
	return l.subj + base64.RawURLEncoding.EncodeToString([]byte(id))
}

// docKey is the bucket key of a document.
func docKey(ns eventlog.Namespace, id string) string {
	return string(rune(ns)) + "." + base64.RawURLEncoding.EncodeToString([]byte(id))
}

func (l *Log) op(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, l.cfg.Timeout)
}

// Submit publishes recs to the stream and calls done once every one is stored
// (each Seq set to its stream sequence) or any is not. A record of generation 0 is
// published only if its id has no record yet, one of generation g only if the
// id's last record is the one before it: so two serve processes (or a resend whose
// first answer was lost) never store an id twice; the loser gets ErrExists.
func (l *Log) Submit(recs []*event.Record, done func(error)) error {
	return l.SubmitEach(recs, func(errs []error) {
		var first error
		for _, err := range errs {
			if err != nil {
				first = err
				break
			}
		}
		done(first)
	})
}

// SubmitEach is Submit with an outcome per record: done gets errs, errs[i] nil if
// recs[i] is stored (its Seq set), else wrapping ErrExists (its id, or the
// generation before it, is not as expected: the stream refused it, nothing was
// written; Lookup finds what is stored) or ErrNotStored. So a batch where one id is
// stored already has its other records answered on their own.
func (l *Log) SubmitEach(recs []*event.Record, done func(errs []error)) error {
	if l.closed.Load() {
		return ErrClosed
	}
	if err := l.tailErr(); err != nil {
		return err // the seqs it would get were given out before (hwm.go)
	}
	// Every seq up to floor was given out before this publish (seen here, or
	// in the mark): a record acked at one of them went to a stream that lost
	// its tail.
	floor := max(l.durable.Load(), l.hwm.Load())
	futs := make([]jetstream.PubAckFuture, len(recs))
	for i, r := range recs {
		expect := uint64(0)
		if r.Generation > 0 {
			e, ok, err := l.Lookup(r.Event.ID)
			if err != nil {
				return err
			}
			if ok {
				expect = e.Seq
			}
		}
		l.forgetAbsent(r.Event.ID)
		rec := *r
		rec.Seq = 0 // the stream gives it
		m := nats.NewMsg(l.subject(r.Event.ID))
		m.Data = rec.Encode(nil)
		f, err := l.js.PublishMsgAsync(m, jetstream.WithExpectStream(l.name), jetstream.WithExpectLastSequencePerSubject(expect))
		if err != nil {
			return fmt.Errorf("%w: %w", ErrNotStored, err)
		}
		futs[i] = f
	}
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		done(l.await(recs, futs, floor))
	}()
	return nil
}

// await waits for every record's acknowledgement, bounded by the timeout, and
// returns each record's outcome (nil: stored).
func (l *Log) await(recs []*event.Record, futs []jetstream.PubAckFuture, floor uint64) []error {
	t := time.NewTimer(l.cfg.Timeout)
	defer t.Stop()
	errs := make([]error, len(recs))
	defer func() {
		// Stored, refused or not confirmed (and maybe stored later): either way an
		// absence seen before now is stale.
		for _, r := range recs {
			l.forgetAbsent(r.Event.ID)
		}
	}()
	for i, f := range futs {
		select {
		case ack := <-f.Ok():
			if ack.Sequence <= floor {
				errs[i] = l.reusedSeq(recs[i], ack.Sequence, floor)
				continue
			}
			recs[i].Seq = ack.Sequence
			for {
				d := l.durable.Load()
				if ack.Sequence <= d || l.durable.CompareAndSwap(d, ack.Sequence) {
					break
				}
			}
		case err := <-f.Err():
			var apiErr *jetstream.APIError
			if errors.As(err, &apiErr) && (apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence || apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant) {
				errs[i] = fmt.Errorf("%w: %q", ErrExists, recs[i].Event.ID)
			} else {
				errs[i] = fmt.Errorf("%w: %q: %w", ErrNotStored, recs[i].Event.ID, err)
			}
		case <-t.C:
			errs[i] = fmt.Errorf("%w within %v: %q and %d after it", ErrNotStored, l.cfg.Timeout, recs[i].Event.ID, len(recs)-i-1)
			for j := i + 1; j < len(recs); j++ {
				errs[j] = fmt.Errorf("%w within %v: %q", ErrNotStored, l.cfg.Timeout, recs[j].Event.ID)
			}
			return errs
		}
	}
	return errs
}

// Exists reports whether err (one of SubmitEach's) is the stream's refusal of a
// record whose id has one already (ErrExists).
func (l *Log) Exists(err error) bool { return errors.Is(err, ErrExists) }

// Append is Submit that waits.
func (l *Log) Append(ctx context.Context, recs ...*event.Record) error {
	ch := make(chan error, 1)
	if err := l.Submit(recs, func(err error) { ch <- err }); err != nil {
		return err
	}
	select {
	case err := <-ch:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Err is nil: an outage of the cluster fails the calls it interrupts, and the next
// ones work again once it is over (nothing here is sticky, unlike a failed fsync).
func (l *Log) Err() error {
	if l.closed.Load() {
		return ErrClosed
	}
	return nil
}

// Durable is the highest stream sequence known stored: the stream's end when
// opened, or a later acknowledgement or read.
func (l *Log) Durable() uint64 { return l.durable.Load() }

// Committed is the committed offset: every record below it is finished.
func (l *Log) Committed() uint64 { return l.committed.Load() }

// MayContain is false only for an id that a Lookup of this process found without
// a record less than absentTTL ago, and that this process has not submitted since
// (or while that Lookup ran): the ingest service then takes the id as new without
// asking the stream a second time under its lock. Everything else is true: the
// dedupe index is the stream, shared with every other serve process, so only
// Lookup can say.
//
// A stale false costs no correctness: the stream is the dedupe. Submit publishes
// a new id's record expecting the subject to be empty, so if another process (or
// a lost earlier answer) stored it meanwhile the server refuses it and Submit
// fails with ErrExists (a retryable answer; the resend is a duplicate), exactly
// as when the record lands between the service's Lookup and its publish.
func (l *Log) MayContain(id string) bool {
	l.nmu.Lock()
	a, ok := l.absent[id]
	l.nmu.Unlock()
	return !ok || a.at.IsZero() || time.Since(a.at) >= absentTTL
}

// absence is an entry of the negative cache: the Lookup that wrote tok, and when
// it found id absent (zero while that Lookup runs).
type absence struct {
	tok uint64
	at  time.Time
}

const (
	// absentTTL bounds how long a Lookup's "absent" answers MayContain: the ingest
	// service asks again under its lock right after its first Lookup.
	absentTTL = 2 * time.Second
	// maxAbsent bounds the negative cache; past it, it is emptied (forgetting
	// only makes MayContain true, which is always right).
	maxAbsent = 1 << 16
)

// lookupStarts marks a Lookup of id in progress and returns its token.
func (l *Log) lookupStarts(id string) uint64 {
	tok := l.ntok.Add(1)
	l.nmu.Lock()
	if len(l.absent) >= maxAbsent {
		clear(l.absent)
	}
	l.absent[id] = absence{tok: tok}
	l.nmu.Unlock()
	return tok
}

// lookupEnds records the answer of the Lookup of token tok: an absence is kept
// only if nothing forgot id while the Lookup ran (a Submit of id, its
// acknowledgement, a newer Lookup).
func (l *Log) lookupEnds(id string, tok uint64, absent bool) {
	l.nmu.Lock()
	if a, ok := l.absent[id]; ok && a.tok == tok {
		if absent {
			l.absent[id] = absence{tok: tok, at: time.Now()}
		} else {
			delete(l.absent, id)
		}
	}
	l.nmu.Unlock()
}

// forgetAbsent drops what is known of id's absence: this process is storing it.
func (l *Log) forgetAbsent(id string) {
	l.nmu.Lock()
	delete(l.absent, id)
	l.nmu.Unlock()
}

// Lookup returns the dedupe entry of id: its last record (the newest generation),
// with the stored message's timestamp as its PersistedAt.
func (l *Log) Lookup(id string) (eventlog.Entry, bool, error) {
	ctx, cancel := l.op(context.Background())
	defer cancel()
	tok := l.lookupStarts(id)
	m, err := l.stream.GetLastMsgForSubject(ctx, l.subject(id))
	l.lookupEnds(id, tok, errors.Is(err, jetstream.ErrMsgNotFound))
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return eventlog.Entry{}, false, nil
	}
	if err != nil {
		return eventlog.Entry{}, false, fmt.Errorf("jslog: lookup of %q: %w", id, err)
	}
	r, err := event.Decode(m.Data)
	if err != nil {
		return eventlog.Entry{}, false, fmt.Errorf("jslog: record of %q at seq %d: %w", id, m.Sequence, err)
	}
	l.seen(m.Sequence)
	// PersistedAt: when the stream stored it (the leader's clock), the nearest a
	// message has to the quorum's acknowledgement.
	return eventlog.Entry{Seq: m.Sequence, ReceivedAt: r.ReceivedAt, Generation: r.Generation, Hash: r.Hash,
		PersistedAt: m.Time.UnixNano()}, true, nil
}

func (l *Log) seen(seq uint64) {
	for {
		d := l.durable.Load()
		if seq <= d || l.durable.CompareAndSwap(d, seq) {
			return
		}
	}
}

// ReadSeq returns the record at seq.
func (l *Log) ReadSeq(seq uint64) (event.Record, bool, error) {
	ctx, cancel := l.op(context.Background())
	defer cancel()
	m, err := l.stream.GetMsg(ctx, seq)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return event.Record{}, false, nil
	}
	if err != nil {
		return event.Record{}, false, fmt.Errorf("jslog: read of seq %d: %w", seq, err)
	}
	r, err := event.Decode(m.Data)
	if err != nil {
		return event.Record{}, false, fmt.Errorf("jslog: record at seq %d: %w", seq, err)
	}
	r.Seq = m.Sequence
	return r, true, nil
}

// Read returns up to n records from seq from on, in order, without waiting: what
// the reader has read ahead of them (none at the stream's end, or while its
// consumer is being made; an error while it cannot be). Reading on from where
// the last call stopped costs the server nothing; another from makes a new reader.
func (l *Log) Read(from uint64, n int) ([]event.Record, error) {
	if n <= 0 {
		return nil, nil
	}
	l.rmu.Lock()
	defer l.rmu.Unlock()
	if l.closed.Load() {
		return nil, ErrClosed
	}
	if err, at := l.damaged(); err != nil && from >= at {
		// Stopped at a gap: no new reader (each would be one more consumer on
		// the server), until a salvage records it and the log is opened again.
		return nil, err
	}
	if l.rd == nil || from < l.base || from > l.next {
		l.moveReader(from)
	}
	var out []event.Record
	filler := l.subj + fillerToken
	for len(out) < n {
		m := l.rd.take()
		if m == nil {
			break
		}
		md, err := m.Metadata()
		if err != nil {
			l.rd.head = m
			return out, fmt.Errorf("jslog: read from seq %d: %w", l.next, err)
		}
		if seq := md.Sequence.Stream; seq > l.next && l.next >= l.committed.Load() && !l.lostCovers(l.next, seq-1) {
			// Records missing past the committed offset (Trim deletes only below
			// it) that no salvage recorded: stop before them, and say so.
			gerr := l.gap(l.next, seq-1)
			l.dropReader()
			if len(out) > 0 {
				return out, nil // the records before the gap; the next call says why it stops
			}
			return nil, gerr
		}
		if m.Subject() == filler { // Salvage's, for a lost tail: nothing to process
			l.next = md.Sequence.Stream + 1
			continue
		}
		r, err := event.Decode(m.Data())
		if err != nil {
			l.rd.head = m // and again at the next call: not read past
			return out, fmt.Errorf("jslog: record at seq %d: %w", md.Sequence.Stream, err)
		}
		r.Seq = md.Sequence.Stream
		out = append(out, r)
		l.next, l.base = r.Seq+1, r.Seq+1
		l.seen(r.Seq)
	}
	if len(out) == 0 {
		if err := l.rd.failure(); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// moveReader replaces the reader with one at from (rmu held).
func (l *Log) moveReader(from uint64) {
	prev := l.rd
	if prev != nil {
		prev.stop()
	}
	l.rd = l.newReader(from, prev)
	l.next, l.base = from, from
}

// dropReader stops the reader, if any (rmu held).
func (l *Log) dropReader() {
	if l.rd != nil {
		l.rd.stop()
		l.rd = nil
	}
}

// Apply stores w's documents, then moves the committed offset: a crash in between
// leaves the offset behind the documents, so events are replayed (and the sink
// dedupes them), never skipped.
func (l *Log) Apply(w *eventlog.Write) error {
	if l.closed.Load() {
		return ErrClosed
	}
	var futs []jetstream.PubAckFuture
	var perr error
	var guarded []guardedDoc
	g := l.guard.Load()
	w.Each(func(ns eventlog.Namespace, id string, doc []byte) {
		if perr != nil {
			return
		}
		if ns == eventlog.Status && g != nil && g.guarded(doc) {
			guarded = append(guarded, guardedDoc{id: id, doc: doc}) // written below, on a look
			return
		}
		m := nats.NewMsg(l.docsSub + docKey(ns, id))
		m.Data = doc
		f, err := l.js.PublishMsgAsync(m)
		if err != nil {
			perr = err
			return
		}
		futs = append(futs, f)
	}, func(ns eventlog.Namespace, id string) {
		if perr != nil {
			return
		}
		m := nats.NewMsg(l.docsSub + docKey(ns, id))
		m.Header.Set("KV-Operation", "DEL")
		f, err := l.js.PublishMsgAsync(m)
		if err != nil {
			perr = err
			return
		}
		futs = append(futs, f)
	})
	if perr != nil {
		return fmt.Errorf("%w: documents: %w", ErrNotStored, perr)
	}
	t := time.NewTimer(l.cfg.Timeout)
	defer t.Stop()
	for _, f := range futs {
		select {
		case <-f.Ok():
		case err := <-f.Err():
			return fmt.Errorf("%w: document %s: %w", ErrNotStored, f.Msg().Subject, err)
		case <-t.C:
			return fmt.Errorf("%w: documents within %v", ErrNotStored, l.cfg.Timeout)
		}
	}
	if err := l.putGuarded(g, guarded); err != nil {
		return err
	}
	mctx, mcancel := l.op(context.Background())
	defer mcancel()
	if err := l.writeMark(mctx); err != nil {
		return fmt.Errorf("%w: %w", ErrNotStored, err)
	}
	if w.Committed > l.committed.Load() {
		ctx, cancel := l.op(context.Background())
		defer cancel()
		if err := l.writeCommitted(ctx, w.Committed); err != nil {
			if errors.Is(err, ErrFenced) {
				// The documents are stored; the offset is the new holder's to move
				// (it replays from its own, which the sink absorbs).
				l.cfg.Logger.Warn("jslog: committed offset not moved: "+err.Error(), "offset", w.Committed)
				return nil
			}
			return fmt.Errorf("%w: committed offset %d: %w", ErrNotStored, w.Committed, err)
		}
		for {
			c := l.committed.Load()
			if w.Committed <= c || l.committed.CompareAndSwap(c, w.Committed) {
				break
			}
		}
	}
	return nil
}

// Get returns the document under (ns, id).
func (l *Log) Get(ns eventlog.Namespace, id string) ([]byte, bool, error) {
	ctx, cancel := l.op(context.Background())
	defer cancel()
	e, err := l.docs.Get(ctx, docKey(ns, id))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("jslog: document %c %q: %w", ns, id, err)
	}
	return e.Value(), true, nil
}

// Scan calls fn for every document in ns until it returns false (in key order:
// the ids' base64url).
func (l *Log) Scan(ns eventlog.Namespace, fn func(id string, doc []byte) bool) error {
	ctx, cancel := l.op(context.Background())
	defer cancel()
	lister, err := l.docs.ListKeysFiltered(ctx, string(rune(ns))+".>")
	if err != nil {
		if errors.Is(err, jetstream.ErrNoKeysFound) {
			return nil
		}
		return fmt.Errorf("jslog: scan of documents %c: %w", ns, err)
	}
	defer func() { _ = lister.Stop() }()
	var keys []string
	for k := range lister.Keys() {
		keys = append(keys, k)
	}
	for _, k := range keys {
		_, enc, _ := strings.Cut(k, ".")
		id, err := base64.RawURLEncoding.DecodeString(enc)
		if err != nil {
			continue // not one of ours
		}
		e, err := l.docs.Get(ctx, k)
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			continue // deleted meanwhile
		}
		if err != nil {
			return fmt.Errorf("jslog: scan of documents %c: %w", ns, err)
		}
		if !fn(string(id), e.Value()) {
			return nil
		}
	}
	return nil
}

// Trim forgets finished records received before cutoff, oldest first, below the
// committed offset: each record, and its status document unless a newer generation
// of the event is kept. A dead-lettered record stays (an operator's :retry needs
// it). At most trimBatch records a call.
func (l *Log) Trim(cutoff int64) (int, error) {
	if _, held := l.Holding(); !held {
		return 0, nil // the holder of the log spout's lease trims (it knows the offset)
	}
	ctx, cancel := l.op(context.Background())
	defer cancel()
	info, err := l.stream.Info(ctx)
	if err != nil {
		return 0, fmt.Errorf("jslog: trim: %w", err)
	}
	n := 0
	for seq := info.State.FirstSeq; seq < l.committed.Load() && seq <= info.State.LastSeq && n < trimBatch; seq++ {
		r, ok, err := l.ReadSeq(seq)
		if err != nil {
			return n, err
		}
		if !ok {
			continue // deleted before
		}
		if r.ReceivedAt >= cutoff {
			break
		}
		if _, dead, err := l.Get(eventlog.DeadLetter, r.Event.ID); err != nil || dead {
			if err != nil {
				return n, err
			}
			continue
		}
		if err := l.stream.DeleteMsg(ctx, seq); err != nil && !errors.Is(err, jetstream.ErrMsgNotFound) {
			return n, fmt.Errorf("jslog: trim of seq %d: %w", seq, err)
		}
		if _, kept, err := l.Lookup(r.Event.ID); err == nil && !kept {
			_ = l.docs.Delete(ctx, docKey(eventlog.Status, r.Event.ID))
		}
		n++
	}
	return n, nil
}

const trimBatch = 10000

// Close stops taking records, waits for Submit's waiters, and stops the reader
// (its consumer deleted).
func (l *Log) Close() error {
	if l.closed.Swap(true) {
		return nil
	}
	l.wg.Wait()
	l.rmu.Lock()
	l.dropReader()
	l.rmu.Unlock()
	l.closeWatch()
	l.closeLease()
	l.readers.Wait() // each has deleted its consumer (meanwhile: a server gone costs one timeout, not two)
	return nil
}
