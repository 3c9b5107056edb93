package wordcount

// The count tasks of cluster mode: each appends every word occurrence it applies to
// a changelog subject of its own, in batches published asynchronously (several in
// flight), and acks an occurrence only once the batch holding it is stored, so that
// whatever process runs the task next rebuilds its state from the changelog and no
// acked occurrence is ever lost.

import (
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/gale-stream/gale/topology"
	"github.com/gale-stream/gale/tuple"
)

// Changelog messages, format version 1. A message is one batch of a count task's
// newly applied occurrences, in the order applied:
//
//	byte 0     1, the format version
//	then, for each occurrence:
//	  varint   its OccurrenceID minus the previous one's in the message (the first:
//	           minus 0), zig-zag encoded (encoding/binary's AppendVarint)
//	  uvarint  the word's length in bytes
//	  bytes    the word (as Words gives it: lowercased UTF-8)
//
// A batch holds at most changelogBatch occurrences and is written once it reaches
// changelogBatchBytes, so every message stays well under maxChangelogMsg (512 KiB);
// a word too long to fit one message on its own (about 500 KiB of letters) is
// refused: its line fails and the error is reported. A count task has at most
// changelogInFlight batches published and not yet answered.
//
// The server fsyncs every message (gale's NATS node runs sync_interval: always), one
// at a time for the stream that all count tasks share, so the messages per second
// bound the words per second: 8192 occurrences a batch (about 70 KB of books) rather
// than 2048 took BenchmarkChangelogCount from about 2.6 to 4.9 million words/s, and
// 4 batches in flight rather than 1 from about 2.8 to 4.9 (medians of 6 alternating
// runs in one window; fsync times on a shared disk vary several-fold). Under a low
// input rate a batch is written by the flush interval instead, smaller.
const (
	changelogVersion    = 1
	changelogBatch      = 8192
	changelogBatchBytes = 256 << 10
	changelogInFlight   = 4
	// maxChangelogWord leaves room for the version byte and two varints.
	maxChangelogWord = maxChangelogMsg - 64
)

// appendOccurrence appends one record to a batch whose previous occurrence is prev.
func appendOccurrence(buf []byte, prev, occ uint64, word string) []byte {
	buf = binary.AppendVarint(buf, int64(occ-prev))
	buf = binary.AppendUvarint(buf, uint64(len(word)))
	return append(buf, word...)
}

// decodeChangelog calls fn for each occurrence of a message.
func decodeChangelog(data []byte, fn func(occ uint64, word string)) error {
	if len(data) == 0 || data[0] != changelogVersion {
		return fmt.Errorf("changelog message: %d bytes, not format version %d", len(data), changelogVersion)
	}
	var prev uint64
	for p := data[1:]; len(p) > 0; {
		d, n := binary.Varint(p)
		if n <= 0 {
			return errors.New("changelog message: bad occurrence delta")
		}
		p = p[n:]
		l, n := binary.Uvarint(p)
		if n <= 0 || l > uint64(len(p)-n) {
			return errors.New("changelog message: bad word length")
		}
		p = p[n:]
		prev += uint64(d)
		fn(prev, string(p[:l]))
		p = p[l:]
	}
	return nil
}

// readChangelog reads the messages of stream matching filter from the first, with an
// ordered consumer, calling fn for every occurrence, until the one with sequence
// stopAt (if > 0) or the last one there is when it is read. It returns the sequence
// of the last message read, and counts the messages in *msgs.
func readChangelog(ctx context.Context, stream jetstream.Stream, filter string, stopAt uint64, fn func(occ uint64, word string), msgs *uint64) (uint64, error) {
	cons, err := stream.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{filter}, InactiveThreshold: 30 * time.Second})
	if err != nil {
		return 0, fmt.Errorf("wordcount: read %s: %w", filter, err)
	}
	it, err := cons.Messages(jetstream.PullMaxMessages(64))
	if err != nil {
		return 0, fmt.Errorf("wordcount: read %s: %w", filter, err)
	}
	defer it.Stop()
	for {
		m, err := it.Next(jetstream.NextContext(ctx))
		if err != nil {
			return 0, fmt.Errorf("wordcount: read %s: %w", filter, err)
		}
		meta, err := m.Metadata()
		if err != nil {
			return 0, fmt.Errorf("wordcount: read %s: %w", filter, err)
		}
		seq := meta.Sequence.Stream
		if err := decodeChangelog(m.Data(), fn); err != nil {
			return 0, fmt.Errorf("wordcount: %s sequence %d: %w", m.Subject(), seq, err)
		}
		*msgs++
		if meta.NumPending == 0 || stopAt > 0 && seq >= stopAt {
			return seq, nil
		}
	}
}

// changelogCount is cluster mode's count bolt. It applies each occurrence once, as
// countBolt, appends it to the batch being filled and holds the input. The batch is
// published to the task's changelog subject when full and otherwise within the flush
// interval, asynchronously: up to changelogInFlight batches are in flight at once
// (a publish that finds them all in flight waits, which is the task's backpressure),
// and a goroutine of the bolt's (a plain Bolt's collector may be used from any
// goroutine) waits for their PubAcks in publish order and acks each batch's inputs
// once the server has stored it. An input whose occurrence was applied already is
// acked at once if that application is stored, or else held with the newest batch
// (the one being filled, or the last one in flight) and acked once it is stored:
// batches are resolved in publish order, so the one holding the first application
// is stored by then.
//
// A batch that fails (refused, no PubAck within the operation timeout, the
// connection lost, or the publish itself refused) fails its inputs and those of
// every later batch, in flight or being filled (their lines replay), and drops the
// state; earlier batches were resolved first, in order. Once the batches in flight
// have all been answered or timed out, the next input rebuilds the state from the
// stream before it is applied: no occurrence whose batch was not stored stays
// applied, and one whose answer was lost (or whose batch came after the failed one)
// is found stored and its replay acked as a duplicate. A hard stop abandons the
// inputs held: neither acked nor failed.
//
// What keeps the counts exact is the dedupe by occurrence id, not a fence: the
// restore and ReadClusterCounts count each occurrence once across a whole changelog
// subject (and ReadClusterCounts across the run's subjects), so an occurrence
// written twice (by a stale incarnation of the task, its process paused while the
// task moved; by a batch whose answer was lost; by batches after a failed one) is
// a duplicate, read and skipped. What a task acks is stored at least once, which is
// all the spout's commit needs.
//
// The fence that remains: a publish made while none of the task's batches is in
// flight (the first of an incarnation, which claims the subject; the first after
// a rebuild; any other after the pipeline ran empty) expects the subject's last
// sequence to be the one the task last read or had stored
// (Nats-Expected-Last-Subject-Sequence). So an incarnation that starts (or
// rebuilds) and finds that another wrote since it read refuses to build on the
// state it read: it fails that batch and rebuilds with the other's records; a
// stale incarnation whose pipeline ran empty is refused at its next write the same
// way. Pipelined publishes cannot carry the fence (the stream's sequence is shared
// by every task's subject, so a batch's sequence is not known until its PubAck),
// so a stale incarnation's writes may still be stored between two of its fences:
// they only add duplicates, and what it acks is stored all the same.
type changelogCount struct {
	failures
	conf *clusterConf
	// key and value are as countBolt's (builtin's Count and Sum); a sum's record
	// holds key NUL value (sumRecord), its sum read back from the changelogs.
	key, value string
	// finish, if set, runs on task 0 in a goroutine of its own from Prepare to
	// Cleanup (builtin's output file once the spout is done).
	finish func(ctx context.Context, tc topology.TaskContext) error
	in     fieldIndex // word (or key), pos [, value]; off optional
	// logRun, if set, names the changelog's run instead of conf.run (which then
	// names the spout's commit only).
	logRun  string
	out     topology.OutputCollector
	ctx     context.Context
	log     *slog.Logger
	kv      jetstream.KeyValue
	stream  jetstream.Stream
	subject string
	// publish is conf.js.PublishMsgAsync; batchMax, batchBytes and inFlightMax are
	// changelogBatch, changelogBatchBytes and changelogInFlight if 0. (Tests set them.)
	publish                           func(*nats.Msg, ...jetstream.PublishOpt) (jetstream.PubAckFuture, error)
	batchMax, batchBytes, inFlightMax int

	mu   sync.Mutex
	cond sync.Cond    // on mu: a batch left flight, one was published, stop
	seen *Occurrences // nil while the state must be rebuilt
	// applied is the number of distinct occurrences the state holds (restored, then
	// applied here). The task keeps no per-word counts: in cluster mode the counts
	// are read from the changelogs (ReadClusterCounts), and a map updated per word
	// that nothing read cost about 6% of a worker's CPU.
	applied uint64
	dups    uint64
	lastSeq uint64 // the subject's last sequence, as of the state held and the batches resolved
	broken  error  // why the state was dropped
	retryAt time.Time
	// The batch being filled: its encoding, size, last occurrence, the occurrences it
	// applies and the inputs it holds.
	enc  []byte
	n    int
	prev uint64
	occs []uint64
	held []*tuple.Tuple
	// unstored holds the applied occurrences whose batch is not stored yet: the one
	// being filled or one in flight.
	unstored unstoredSet
	// flight holds the batches published and not yet resolved, in publish order; the
	// acker removes the first once its inputs are acked or failed.
	flight   []*clBatch
	spare    []*clBatch // resolved batches, their buffers reused
	stopping bool       // Cleanup has begun
	// waiting counts the callers held back on cond (waitLocked): a publish waiting
	// for room, a rebuild or a Drain waiting for the batches in flight. Tests wait
	// on it to know that a call is held back, not slow to return.
	waiting int

	stop      chan struct{}
	wg        sync.WaitGroup
	stopWakes func() bool // stops the wake-up of the waiters at the hard stop
}

// A clBatch is a batch published: what it holds and how its publish is answered.
type clBatch struct {
	enc      []byte
	occs     []uint64
	held     []*tuple.Tuple
	fut      jetstream.PubAckFuture // nil if the publish was refused at once (err)
	err      error
	deadline time.Time // no PubAck by then: failed
	fenced   bool      // expects the subject's last sequence
	failed   bool      // its inputs were failed with an earlier batch's
}

// restoreTimeout bounds the reading of a changelog.
const restoreTimeout = time.Minute

func (b *changelogCount) Prepare(ctx context.Context, tc topology.TaskContext, out topology.OutputCollector) error {
	b.prepare(tc)
	b.in.names = []string{cmp.Or(b.key, "word"), "pos"}
	b.in.optional = "off"
	if b.value != "" {
		b.in.names = append(b.in.names, b.value)
	}
	if err := b.in.check(tc); err != nil {
		return err
	}
	if err := checkGrouping(tc, true); err != nil {
		return err
	}
	b.out, b.ctx, b.log = out, ctx, tc.Logger
	if b.log == nil {
		b.log = slog.Default()
	}
	if err := b.conf.check(); err != nil {
		return err
	}
	var err error
	if b.kv, err = b.conf.js.KeyValue(ctx, b.conf.bucket); err != nil {
		return fmt.Errorf("wordcount: KV bucket %s (made by EnsureClusterState): %w", b.conf.bucket, err)
	}
	name := changelogStream(b.conf.bucket)
	if b.stream, err = b.conf.js.Stream(ctx, name); err != nil {
		return fmt.Errorf("wordcount: stream %s (made by EnsureClusterState): %w", name, err)
	}
	if b.publish == nil {
		b.publish = b.conf.js.PublishMsgAsync
	}
	if b.batchMax <= 0 {
		b.batchMax = changelogBatch
	}
	if b.batchBytes <= 0 {
		b.batchBytes = changelogBatchBytes
	}
	if b.inFlightMax <= 0 {
		b.inFlightMax = changelogInFlight
	}
	b.subject = changelogSubject(b.conf.bucket, cmp.Or(b.logRun, b.conf.run), tc.TaskIndex)
	b.unstored.reset()
	b.enc = []byte{changelogVersion}
	b.cond.L = &b.mu
	b.mu.Lock()
	err = b.restoreLocked()
	b.mu.Unlock()
	if err != nil {
		return err
	}
	b.stop = make(chan struct{})
	// A hard stop wakes whatever waits on cond (a full pipeline, Drain, the acker).
	b.stopWakes = context.AfterFunc(ctx, func() {
		b.mu.Lock()
		b.cond.Broadcast()
		b.mu.Unlock()
	})
	b.wg.Add(2)
	go b.flushLoop()
	go b.ackLoop()
	if b.finish != nil && tc.TaskIndex == 0 {
		fctx, cancel := context.WithCancel(ctx)
		b.wg.Add(1)
		go func() {
			defer b.wg.Done()
			if err := b.finish(fctx, tc); err != nil && fctx.Err() == nil {
				b.log.Error("count: writing the output failed", "err", err)
			}
		}()
		b.wg.Add(1)
		go func() {
			defer b.wg.Done()
			select {
			case <-b.stop:
			case <-fctx.Done():
			}
			cancel()
		}()
	}
	return nil
}

// live reports whether neither Cleanup nor a hard stop has begun (b.mu held).
func (b *changelogCount) live() bool { return !b.stopping && b.ctx.Err() == nil }

// restoreLocked rebuilds the applied occurrences from the task's
// changelog, deduplicating (a subject holds an occurrence more than once if a stale
// incarnation of the task, or a batch whose answer was lost or that followed a
// failed one, wrote it again), then frees the pages below the spout's committed
// low watermark: no line below it is emitted again. Nothing is in flight.
func (b *changelogCount) restoreLocked() error {
	ctx, cancel := context.WithTimeout(b.ctx, restoreTimeout)
	defer cancel()
	commit, _, err := readCommit(ctx, b.kv, spoutKey(b.conf.run))
	if err != nil {
		return err
	}
	seen := NewOccurrences()
	var last, msgs, occs, dups, applied uint64
	m, err := b.stream.GetLastMsgForSubject(ctx, b.subject)
	switch {
	case errors.Is(err, jetstream.ErrMsgNotFound):
	case err != nil:
		return fmt.Errorf("wordcount: changelog %s: %w", b.subject, err)
	default:
		last, err = readChangelog(ctx, b.stream, b.subject, m.Sequence, func(occ uint64, word string) {
			occs++
			if !seen.Apply(occ, 0) {
				dups++
				return
			}
			applied++
		}, &msgs)
		if err != nil {
			return err
		}
	}
	seen.Seen(commit.Low, commit.Low) // raises the floor
	b.seen, b.applied, b.lastSeq, b.broken = seen, applied, last, nil
	b.log.Info("count task restored from its changelog", "subject", b.subject, "messages", msgs,
		"occurrences", occs, "duplicates", dups, "last_seq", last, "floor", commit.Low)
	return nil
}

func (b *changelogCount) Execute(t *tuple.Tuple) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.execute(t); err != nil {
		_ = b.out.FailWith(t, err)
	}
}

// execute applies t, holds it or acks it; an error fails it (b.mu held).
func (b *changelogCount) execute(t *tuple.Tuple) error {
	if b.seen == nil { // a batch failed: rebuild first
		if err := b.rebuildLocked(); err != nil {
			return err
		}
	}
	at := b.in.of(t)
	word := keyString(t.Value(at[0]))
	pos, ok := t.Value(at[1]).([]uint64) // line_id, low
	if !ok || len(pos) != 2 {
		return fmt.Errorf("wordcount: field pos of %s holds %T %v, want 2 numbers (line_id, low)", t.SourceComponent(), t.Value(at[1]), t.Value(at[1]))
	}
	occ := pos[0]
	if b.in.optAt >= 0 {
		occ += uint64(t.Value(b.in.optAt).(int))
	}
	if b.value != "" {
		v, err := Number(t.Value(at[2]))
		if err != nil {
			// As countBolt: a replay would bring the same value.
			b.out.ReportError(fmt.Errorf("sum: field %s of %s at %d:%d: %w", b.value, t.SourceComponent(), occ>>40, occ&(1<<40-1), err))
			_ = b.out.Ack(t)
			return nil
		}
		word = sumRecord(word, v)
	}
	if b.seen.Seen(occ, pos[1]) {
		b.dups++
		switch {
		case !b.unstored.has(occ):
			_ = b.out.Ack(t)
		case b.n > 0:
			// Its first application is in this batch or in one in flight, stored (if at
			// all) before this one.
			b.held = append(b.held, t)
		default:
			// In flight: it is acked with the last batch in flight, which is resolved
			// once those before it are, and acked only if they were all stored.
			last := b.flight[len(b.flight)-1]
			last.held = append(last.held, t)
		}
		return nil
	}
	if b.fail() {
		return errInjected
	}
	if len(word) > maxChangelogWord {
		err := fmt.Errorf("wordcount: a word of %d bytes at %d:%d does not fit a changelog message", len(word), occ>>40, occ&(1<<40-1))
		b.out.ReportError(err)
		return err
	}
	if b.n > 0 && len(b.enc)+len(word)+20 > b.batchBytes {
		if b.flushLocked(); b.seen == nil {
			return b.broken // a batch failed while this one waited for room
		}
	}
	b.seen.Add(occ)
	b.applied++
	b.enc = appendOccurrence(b.enc, b.prev, occ, word)
	b.prev = occ
	b.n++
	b.occs = append(b.occs, occ)
	b.unstored.add(occ)
	b.held = append(b.held, t)
	if b.n >= b.batchMax {
		b.flushLocked()
	}
	return nil
}

// rebuildLocked restores the state dropped by a failed batch, once every batch in
// flight is resolved (b.mu held): their records, stored or not, are then where the
// restore reads them, and the state matches the stream. A restore that failed is
// tried again after 250 ms; meanwhile inputs fail.
func (b *changelogCount) rebuildLocked() error {
	if time.Now().Before(b.retryAt) {
		return b.broken
	}
	for len(b.flight) > 0 && b.live() {
		b.waitLocked()
	}
	if !b.live() {
		return b.broken
	}
	if err := b.restoreLocked(); err != nil {
		b.broken, b.retryAt = err, time.Now().Add(250*time.Millisecond)
		b.out.ReportError(err)
		return err
	}
	return nil
}

// flushLocked publishes the batch being filled, first waiting while
// inFlightMax batches are in flight (b.mu held; it is released while waiting, and
// the state may be dropped meanwhile). A hard stop drops the state and abandons
// the batch's inputs.
func (b *changelogCount) flushLocked() {
	for b.n > 0 && len(b.flight) >= b.inFlightMax && b.live() {
		b.waitLocked()
	}
	if b.n == 0 {
		return // nothing to write, or the batch failed with an earlier one meanwhile
	}
	if !b.live() {
		// A hard stop (or Cleanup, which follows one or a graceful stop's Drain): the
		// batch's inputs are abandoned, its occurrences unapplied.
		b.dropLocked(fmt.Errorf("wordcount: changelog %s: stopped with %d occurrences unwritten", b.subject, b.n))
		return
	}
	bt := b.spareLocked()
	bt.enc, b.enc = b.enc, bt.enc
	bt.occs, b.occs = b.occs, bt.occs
	bt.held, b.held = b.held, bt.held
	b.n, b.prev = 0, 0
	opts := []jetstream.PublishOpt{jetstream.WithExpectStream(changelogStream(b.conf.bucket))}
	if bt.fenced = len(b.flight) == 0; bt.fenced {
		opts = append(opts, jetstream.WithExpectLastSequencePerSubject(b.lastSeq))
	}
	bt.fut, bt.err = b.publish(&nats.Msg{Subject: b.subject, Data: bt.enc}, opts...)
	bt.deadline = time.Now().Add(b.conf.timeout())
	b.flight = append(b.flight, bt)
	b.cond.Broadcast() // the acker
}

// spareLocked returns a batch to publish, with empty buffers (b.mu held).
func (b *changelogCount) spareLocked() *clBatch {
	if n := len(b.spare); n > 0 {
		bt := b.spare[n-1]
		b.spare[n-1] = nil
		b.spare = b.spare[:n-1]
		return bt
	}
	return &clBatch{enc: []byte{changelogVersion}}
}

// dropLocked drops the state and the batch being filled, whose inputs it returns
// (b.mu held): they are to be failed, or abandoned.
func (b *changelogCount) dropLocked(why error) []*tuple.Tuple {
	held := b.held
	b.held = nil
	b.enc, b.n, b.prev, b.occs = b.enc[:1], 0, 0, b.occs[:0]
	b.unstored.reset()
	b.seen, b.applied, b.broken = nil, 0, why
	return held
}

// ackLoop resolves the batches in flight in publish order, until Cleanup or a hard
// stop: it waits for the first one's PubAck (or error, or deadline), then acks or
// fails what it holds.
func (b *changelogCount) ackLoop() {
	defer b.wg.Done()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		b.mu.Lock()
		for len(b.flight) == 0 && b.live() {
			b.cond.Wait()
		}
		if !b.live() {
			b.mu.Unlock()
			return
		}
		bt := b.flight[0]
		b.mu.Unlock()
		var ack *jetstream.PubAck
		err := bt.err
		if err == nil {
			timer.Reset(time.Until(bt.deadline))
			select {
			case ack = <-bt.fut.Ok():
			case err = <-bt.fut.Err():
			case <-timer.C:
				err = fmt.Errorf("no PubAck in %v: %w", b.conf.timeout(), context.DeadlineExceeded)
			case <-b.stop:
				return
			case <-b.ctx.Done():
				return
			}
			timer.Stop()
			if err == nil && ack == nil {
				err = jetstream.ErrInvalidJSAck
			}
		}
		if !b.resolve(bt, ack, err) {
			return
		}
	}
}

// resolve acks the inputs of bt, the first batch in flight, if it was stored, or
// else fails them with those of every later batch and drops the state; then removes
// bt from flight. The inputs are acked or failed outside b.mu, bt still in flight
// (Drain returns once they all are). It returns false at a hard stop: the inputs
// are abandoned.
func (b *changelogCount) resolve(bt *clBatch, ack *jetstream.PubAck, err error) bool {
	b.mu.Lock()
	var acks, fails []*tuple.Tuple
	var broken error
	switch {
	case bt.failed: // failed with an earlier batch: it is only waited for
	case err == nil:
		if b.seen != nil {
			b.lastSeq = max(b.lastSeq, ack.Sequence)
		}
		for _, occ := range bt.occs {
			b.unstored.remove(occ)
		}
		acks, bt.held = bt.held, nil
	default:
		fence := ""
		if bt.fenced {
			fence = fmt.Sprintf(" (expecting last sequence %d)", b.lastSeq)
		}
		broken = fmt.Errorf("wordcount: changelog %s, batch of %d occurrences%s: %w", b.subject, len(bt.occs), fence, err)
		fails, bt.held = bt.held, nil
		for _, later := range b.flight[1:] {
			later.failed = true
			fails = append(fails, later.held...)
			later.held = nil
		}
		fails = append(fails, b.dropLocked(broken)...)
	}
	hard := b.ctx.Err() != nil
	b.mu.Unlock()
	if hard {
		return false
	}
	for _, t := range acks {
		_ = b.out.Ack(t)
	}
	for _, t := range fails {
		_ = b.out.FailWith(t, broken)
	}
	if broken != nil {
		b.out.ReportError(broken)
	}
	b.mu.Lock()
	copy(b.flight, b.flight[1:])
	b.flight[len(b.flight)-1] = nil
	b.flight = b.flight[:len(b.flight)-1]
	if ack != nil && len(b.spare) <= b.inFlightMax {
		// Answered: nats.go holds its data no longer (a batch that timed out may be
		// sent again by nats.go's retry, so it is not reused).
		clear(acks)
		*bt = clBatch{enc: bt.enc[:1], occs: bt.occs[:0], held: acks[:0]}
		b.spare = append(b.spare, bt)
	}
	b.cond.Broadcast()
	b.mu.Unlock()
	return true
}

// flushLoop publishes the batch every flush interval, until Cleanup or a hard stop.
func (b *changelogCount) flushLoop() {
	defer b.wg.Done()
	t := time.NewTicker(b.conf.flushInterval)
	defer t.Stop()
	for {
		select {
		case <-b.stop:
			return
		case <-b.ctx.Done():
			return
		case <-t.C:
			b.mu.Lock()
			b.flushLocked()
			b.mu.Unlock()
		}
	}
}

// Drain publishes the batch being filled and waits until every batch in flight is
// resolved, its inputs acked or failed, when the runtime asks (during a graceful
// stop, whenever the task's queue is empty), so that the trees the stop waits for
// end now. A hard stop ends the wait.
func (b *changelogCount) Drain() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.flushLocked()
	for len(b.flight) > 0 && b.live() {
		b.waitLocked()
	}
}

// waitLocked waits on cond, counted in waiting meanwhile (b.mu held).
func (b *changelogCount) waitLocked() {
	b.waiting++
	b.cond.Wait()
	b.waiting--
}

// Cleanup stops the flusher and the acker. Nothing is held after a graceful stop
// (Drain ran once the last input was executed); after a hard stop what is held is
// abandoned, and the task's state is in its changelog.
func (b *changelogCount) Cleanup() error {
	if b.stop == nil {
		return nil
	}
	b.mu.Lock()
	b.stopping = true
	b.cond.Broadcast()
	b.mu.Unlock()
	close(b.stop)
	b.wg.Wait()
	b.stopWakes()
	return nil
}

// unstoredSet is a set of occurrences in bitmap pages, as Occurrences, from which
// they are removed again; a page is freed once empty. Its zero value is not ready:
// call reset.
type unstoredSet struct {
	pages map[uint64]*unstoredPage
	last  *unstoredPage
	lastI uint64
	spare *unstoredPage // a freed page (empty: all its bits are 0), reused
}

type unstoredPage struct {
	bits page
	n    int // bits set
}

// reset empties the set.
func (u *unstoredSet) reset() {
	u.pages, u.last = map[uint64]*unstoredPage{}, nil
}

func (u *unstoredSet) page(pi uint64) *unstoredPage {
	if u.last != nil && u.lastI == pi {
		return u.last
	}
	p := u.pages[pi]
	if p != nil {
		u.last, u.lastI = p, pi
	}
	return p
}

func (u *unstoredSet) has(occ uint64) bool {
	p := u.page(occ >> pageShift)
	bit := occ & (1<<pageShift - 1)
	return p != nil && p.bits[bit/64]&(1<<(bit%64)) != 0
}

// add adds occ, which is not in the set.
func (u *unstoredSet) add(occ uint64) {
	pi := occ >> pageShift
	p := u.page(pi)
	if p == nil {
		if p, u.spare = u.spare, nil; p == nil {
			p = new(unstoredPage)
		}
		u.pages[pi] = p
		u.last, u.lastI = p, pi
	}
	bit := occ & (1<<pageShift - 1)
	if w := &p.bits[bit/64]; *w&(1<<(bit%64)) == 0 {
		*w |= 1 << (bit % 64)
		p.n++
	}
}

// remove removes occ if it is in the set.
func (u *unstoredSet) remove(occ uint64) {
	pi := occ >> pageShift
	p := u.page(pi)
	bit := occ & (1<<pageShift - 1)
	if p == nil || p.bits[bit/64]&(1<<(bit%64)) == 0 {
		return
	}
	p.bits[bit/64] &^= 1 << (bit % 64)
	if p.n--; p.n == 0 {
		delete(u.pages, pi)
		u.last, u.spare = nil, p
	}
}
