package wordcount

// The count tasks of cluster mode: each appends every word occurrence it applies to
// a changelog subject of its own, and acks an occurrence only once the batch holding
// it is stored, so that whatever process runs the task next rebuilds its state from
// the changelog and no acked occurrence is ever lost.

import (
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
// refused: its line fails and the error is reported.
const (
	changelogVersion    = 1
	changelogBatch      = 2048
	changelogBatchBytes = 256 << 10
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
// countBolt, appends it to the current batch and holds the input; the batch is
// written to the task's changelog subject when full and otherwise within the flush
// interval (by a goroutine of the bolt's: a plain Bolt's collector may be used from
// any goroutine), and its inputs are acked once the server has stored it. An input
// whose occurrence was applied already is acked at once, or with the batch holding
// its first application if that is not stored yet.
//
// Every write expects the subject's last sequence to be the one this task last read
// or wrote (Nats-Expected-Last-Subject-Sequence), so the changelog only ever grows
// from the state the task holds: a stale task (its process paused while the task
// moved) is refused once its successor has written. A write that fails fails its
// inputs (their lines replay) and drops the state, which is rebuilt from the stream
// before the next input is applied: no occurrence whose batch was not stored stays
// applied, and one whose answer was lost is found stored.
type changelogCount struct {
	failures
	conf    *clusterConf
	in      fieldIndex // word, pos, off
	out     topology.OutputCollector
	ctx     context.Context
	log     *slog.Logger
	kv      jetstream.KeyValue
	stream  jetstream.Stream
	subject string

	mu      sync.Mutex
	seen    *Occurrences // nil while the state must be rebuilt
	counts  map[string]uint64
	dups    uint64
	lastSeq uint64 // the subject's last sequence, as of the state held
	broken  error  // why the state was dropped
	retryAt time.Time
	// The batch being filled: its encoding, size, last occurrence, the occurrences
	// it applies and the inputs it holds.
	enc     []byte
	n       int
	prev    uint64
	pending map[uint64]struct{}
	held    []*tuple.Tuple

	stop chan struct{}
	wg   sync.WaitGroup
}

// restoreTimeout bounds the reading of a changelog.
const restoreTimeout = time.Minute

func (b *changelogCount) Prepare(ctx context.Context, tc topology.TaskContext, out topology.OutputCollector) error {
	b.prepare(tc)
	b.in.names = []string{"word", "pos", "off"}
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
	b.subject = changelogSubject(b.conf.bucket, b.conf.run, tc.TaskIndex)
	b.pending = map[uint64]struct{}{}
	b.enc = []byte{changelogVersion}
	b.mu.Lock()
	err = b.restoreLocked()
	b.mu.Unlock()
	if err != nil {
		return err
	}
	b.stop = make(chan struct{})
	b.wg.Add(1)
	go b.flushLoop()
	return nil
}

// restoreLocked rebuilds the counts and the applied occurrences from the task's
// changelog, deduplicating (a subject holds each occurrence once, unless a stale
// task wrote before this one), then frees the pages below the spout's committed low
// watermark: no line below it is emitted again.
func (b *changelogCount) restoreLocked() error {
	ctx, cancel := context.WithTimeout(b.ctx, restoreTimeout)
	defer cancel()
	commit, _, err := readCommit(ctx, b.kv, spoutKey(b.conf.run))
	if err != nil {
		return err
	}
	seen, counts := NewOccurrences(), map[string]uint64{}
	var last, msgs, occs, dups uint64
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
			counts[word]++
		}, &msgs)
		if err != nil {
			return err
		}
	}
	seen.Seen(commit.Low, commit.Low) // raises the floor
	b.seen, b.counts, b.lastSeq, b.broken = seen, counts, last, nil
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
	if b.seen == nil { // a write failed: rebuild first
		if time.Now().Before(b.retryAt) {
			return b.broken
		}
		if err := b.restoreLocked(); err != nil {
			b.broken, b.retryAt = err, time.Now().Add(250*time.Millisecond)
			b.out.ReportError(err)
			return err
		}
	}
	at := b.in.of(t)
	word := t.Value(at[0]).(string)
	pos := t.Value(at[1]).([]uint64) // line_id, low
	if len(pos) != 2 {
		return fmt.Errorf("wordcount: field pos of %s holds %d numbers, want 2 (line_id, low)", t.SourceComponent(), len(pos))
	}
	occ := pos[0] + uint64(t.Value(at[2]).(int))
	if b.seen.Seen(occ, pos[1]) {
		b.dups++
		if _, ok := b.pending[occ]; ok {
			b.held = append(b.held, t) // acked once its first application is stored
		} else {
			_ = b.out.Ack(t)
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
	if b.n > 0 && len(b.enc)+len(word)+20 > changelogBatchBytes {
		if b.flushLocked(); b.seen == nil {
			return b.broken // the write failed: this input fails with the batch's
		}
	}
	b.seen.Add(occ)
	b.counts[word]++
	b.enc = appendOccurrence(b.enc, b.prev, occ, word)
	b.prev = occ
	b.n++
	b.pending[occ] = struct{}{}
	b.held = append(b.held, t)
	if b.n >= changelogBatch {
		b.flushLocked()
	}
	return nil
}

// flushLocked writes the batch and acks its inputs, or fails them and drops the
// state (b.mu held).
func (b *changelogCount) flushLocked() {
	if len(b.held) == 0 {
		return
	}
	var ack *jetstream.PubAck
	err := b.ctx.Err()
	if b.n > 0 && err == nil {
		ctx, cancel := context.WithTimeout(b.ctx, b.conf.timeout())
		ack, err = b.conf.js.PublishMsg(ctx, &nats.Msg{Subject: b.subject, Data: b.enc},
			jetstream.WithExpectStream(changelogStream(b.conf.bucket)),
			jetstream.WithExpectLastSequencePerSubject(b.lastSeq))
		cancel()
	}
	held := b.held
	b.enc, b.n, b.prev, b.held = b.enc[:1], 0, 0, nil
	clear(b.pending)
	if err != nil {
		b.broken = fmt.Errorf("wordcount: changelog %s after sequence %d: %w", b.subject, b.lastSeq, err)
		b.seen, b.counts = nil, nil
		if b.ctx.Err() != nil {
			return // a hard stop: the inputs held are abandoned, not failed
		}
		for _, t := range held {
			_ = b.out.FailWith(t, b.broken)
		}
		b.out.ReportError(b.broken)
		return
	}
	if ack != nil {
		b.lastSeq = ack.Sequence
	}
	for _, t := range held {
		_ = b.out.Ack(t)
	}
}

// flushLoop writes the batch every flush interval, until Cleanup or a hard stop.
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

// Drain writes the batch when the runtime asks (during a graceful stop, whenever the
// task's queue is empty), so that the trees the stop waits for end now.
func (b *changelogCount) Drain() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.flushLocked()
}

// Cleanup stops the flusher. Nothing is held after a graceful stop (Drain ran once
// the last input was executed); after a hard stop what is held is abandoned, and
// the task's state is in its changelog.
func (b *changelogCount) Cleanup() error {
	if b.stop != nil {
		close(b.stop)
		b.wg.Wait()
	}
	return nil
}
