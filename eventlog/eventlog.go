package eventlog

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/bits"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/bloom"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/gale-stream/gale/event"
)

// Errors. Every error from a failed commit wraps ErrFailed; appends offered while
// the writer queue is full wrap ErrOverloaded; ErrCorrupt comes from package event.
// ErrDamaged is wrapped by the error of an Open that finds fewer durable records
// than were acknowledged (or cannot tell): the log refuses to start rather than
// lose them silently or give their sequence numbers out again.
var (
	ErrFailed     = errors.New("eventlog: log failed (sticky: reopen to recover)")
	ErrOverloaded = errors.New("eventlog: append queue full")
	ErrClosed     = errors.New("eventlog: closed")
	ErrDamaged    = errors.New("eventlog: log damaged: acknowledged records missing")
	// ErrLocked is wrapped by the error of an Open or Check of a log that another
	// process (a running gale serve) holds open.
	ErrLocked = errors.New("eventlog: the log is locked by another process")
)

// lockedErr wraps err, from opening Pebble in dir, in ErrLocked if another process
// holds the store's LOCK file.
func lockedErr(dir string, err error) error {
	if errors.Is(err, syscall.EAGAIN) || errors.Is(err, syscall.EWOULDBLOCK) || strings.Contains(err.Error(), "lock held") {
		return fmt.Errorf("%w: %s: %w", ErrLocked, dir, err)
	}
	return nil
}

// formatVersion is the Pebble format the log is opened at, and existing stores are
// ratcheted to. It must be FormatWALSyncChunks or newer: before it the WAL's chunks
// carry no synced offset, so Pebble takes a bad chunk in the middle of the WAL for
// its end and replays a shortened log without a word (nats-server#7549). Pinned
// rather than FormatNewest so a Pebble upgrade never ratchets stores by itself.
const formatVersion = pebble.FormatTableFormatV6

// Options configure Open.
type Options struct {
	// Dir is the data directory. Required.
	Dir string
	// FS is the file system; nil means the operating system's. Tests pass Pebble's
	// crashable in-memory FS or an error-injecting one.
	FS vfs.FS
	// MaxBatch caps the records in one group commit (default 8192).
	MaxBatch int
	// QueueLen caps the append requests waiting for the writer (default 16384);
	// beyond it Submit returns ErrOverloaded at once instead of queueing without bound.
	QueueLen int
	// Logger receives Pebble's own messages at debug level; nil discards them.
	Logger *slog.Logger
	// OnCommit, if set, is called by the log's syncer after each group commit is
	// answered (for metrics: one call per group, never per record). It must not
	// block: the next group's answer waits for it.
	OnCommit func(Commit)
	// FilterBytes sizes the in-memory filter over the dedupe index's ids (default
	// 16 MiB: about 1% false positives at 10 million ids; beyond that misses just
	// cost a Pebble Get more often).
	FilterBytes int
	// SeparateMarkSync gives the high-water mark file its own fdatasync on
	// every group commit, even where it could ride the WAL's flush (ext4, see
	// hwm.go). Stats.MarkSync says which is in use.
	SeparateMarkSync bool

	// markWriteBack, set by tests, makes the mark ride the WAL's flush on any
	// file system, written back by this function.
	markWriteBack func(mark, wal vfs.File) error
}

// Entry is the dedupe index entry of an event id: where its newest record is.
type Entry struct {
	Seq        uint64
	ReceivedAt int64 // Unix nanoseconds
	Generation uint32
	Hash       event.ContentHash
	// PersistedAt is when the record became durable (Unix nanoseconds; see
	// Log.PersistedAt), 0 if that is not known. Lookup fills it in; it is not
	// part of the stored entry.
	PersistedAt int64
}

// Namespace names a keyspace for per-event documents kept beside the log.
type Namespace byte

// Namespaces for documents owned by the ingest layer.
const (
	Status     Namespace = 's'
	DeadLetter Namespace = 'x'
)

// Log is the durable event log. Its methods are safe for concurrent use.
type Log struct {
	db       *pebble.DB
	maxBatch int
	ids      *idFilter
	dmg      *damage     // corruption met so far (corrupt.go)
	mark     *hwm        // the durable high-water mark; written by the marker only
	times    syncTimes   // the group commits' sync times (synctime.go)
	markSync string      // how the mark is made durable (Stats.MarkSync)
	lost     []LostRange // recorded by a salvage; read-only after Open

	mu      sync.RWMutex // guards closed against sends on reqs
	closed  bool
	reqs    chan *request
	stopped chan struct{}

	err       atomic.Pointer[error] // sticky failure
	durable   atomic.Uint64         // highest durable seq (0: none)
	committed atomic.Uint64         // next seq to process; every seq below is finished
	notify    chan struct{}         // signalled when durable advances
	failedCh  chan struct{}         // closed on the first failure
	failOnce  sync.Once

	commits, records, commitNanos atomic.Uint64
	bytes, commitFailures         atomic.Uint64
	ids64                         atomic.Int64 // entries in the dedupe index
	onCommit                      func(Commit)
	commitBuckets                 [CommitBuckets]atomic.Uint64
}

// Commit describes one group commit, for Options.OnCommit.
type Commit struct {
	Records int           // records in the group
	Bytes   int           // their encoded size
	Elapsed time.Duration // from the group's write to its fsyncs returning
	Err     error         // non-nil: the group was answered with this error
}

// Stats are counters of the group commits so far.
type Stats struct {
	Commits    uint64        // synced batches (group commits)
	Records    uint64        // records in them
	Bytes      uint64        // the records' encoded size
	CommitTime time.Duration // total time spent in the synced commits
	// CommitFailures counts group commits whose write or fsync failed (the first
	// makes the log fail; later appends are refused without a commit).
	CommitFailures uint64
	// IDs is the number of event ids in the dedupe index (the dedupe window's size).
	IDs       int64
	Durable   uint64
	Committed uint64
	// ByCommitTime counts the synced commits by their time (append to fsync
	// returned): entry i those under CommitBucketBound(i), and at least the bound of
	// i-1. An atomic add per commit, so that the UI and /metrics can show the fsync
	// latency's distribution, not only its mean.
	ByCommitTime [CommitBuckets]uint64
	// MarkSync says how the high-water mark file is made durable before each
	// answer: "wal-flush: ..." (written back before the WAL's fdatasync, whose
	// device flush covers it) or "fdatasync: ..." (its own, concurrent with the
	// WAL's), with the reason.
	MarkSync string
}

// CommitBuckets is the number of commit-time buckets: powers of two from 1 µs up, the
// last one open-ended.
const CommitBuckets = 28

// CommitBucketBound is the upper bound of commit-time bucket i (the last one's is
// about 134 s, and holds longer commits too).
func CommitBucketBound(i int) time.Duration { return time.Microsecond << i }

func commitBucket(d time.Duration) int {
	return min(bits.Len64(uint64(max(d, 0)/time.Microsecond)), CommitBuckets-1)
}

// CommitQuantile is the upper bound of the commit-time bucket holding the q-quantile
// (0 < q ≤ 1) of the commits counted in s, 0 if there are none.
func (s Stats) CommitQuantile(q float64) time.Duration {
	var n uint64
	for _, c := range s.ByCommitTime {
		n += c
	}
	if n == 0 {
		return 0
	}
	rank := min(max(uint64(q*float64(n)+0.5), 1), n)
	var seen uint64
	for i, c := range s.ByCommitTime {
		if seen += c; seen >= rank {
			return CommitBucketBound(i)
		}
	}
	return CommitBucketBound(CommitBuckets - 1)
}

// Stats returns the counters.
func (l *Log) Stats() Stats {
	s := Stats{Commits: l.commits.Load(), Records: l.records.Load(), Bytes: l.bytes.Load(),
		CommitTime: time.Duration(l.commitNanos.Load()), CommitFailures: l.commitFailures.Load(),
		IDs: l.ids64.Load(), Durable: l.durable.Load(), Committed: l.committed.Load(), MarkSync: l.markSync}
	for i := range s.ByCommitTime {
		s.ByCommitTime[i] = l.commitBuckets[i].Load()
	}
	return s
}

// chooseMarkSync picks how the mark is made durable (hwm.go) and says why.
func (l *Log) chooseMarkSync(opts Options) string {
	if opts.markWriteBack != nil {
		l.mark.writeBack = opts.markWriteBack
		return "wal-flush: set by a test"
	}
	if opts.SeparateMarkSync {
		return "fdatasync: Options.SeparateMarkSync"
	}
	ok, why := walFlushable(l.mark.f, opts.Dir)
	if !ok {
		return "fdatasync: " + why
	}
	l.mark.writeBack = writeBack
	return "wal-flush: " + why
}

type request struct {
	recs []*event.Record
	done func(error)
}

var committedKey = []byte("m/committed")

// lostPrefix keys the lost ranges a salvage recorded: m/lost/<from:8 BE>.
var lostPrefix = []byte("m/lost/")

func logKey(seq uint64) []byte {
	k := make([]byte, 9)
	k[0] = 'l'
	binary.BigEndian.PutUint64(k[1:], seq)
	return k
}

func nsKey(ns byte, id string) []byte {
	k := make([]byte, 1+len(id))
	k[0] = ns
	copy(k[1:], id)
	return k
}

// Open opens (or creates) the log in opts.Dir, verifies every record from the
// committed offset to the end, and starts the writer. A corrupt record fails Open
// with an error naming its sequence number and wrapping event.ErrCorrupt. A log
// that holds fewer records than were acknowledged (the high-water mark), or whose
// WAL Pebble finds corrupt, fails Open with an error wrapping ErrDamaged that names
// the missing seqs and, where known, the WAL file and offset of the damage.
func Open(opts Options) (*Log, error) {
	if opts.Dir == "" {
		return nil, errors.New("eventlog: Options.Dir is required")
	}
	if opts.MaxBatch <= 0 {
		opts.MaxBatch = 8192
	}
	if opts.QueueLen <= 0 {
		opts.QueueLen = 16384
	}
	if opts.FilterBytes <= 0 {
		opts.FilterBytes = 16 << 20
	}
	fs := opts.FS
	if fs == nil {
		fs = vfs.Default
	}
	desc, err := peek(fs, opts.Dir)
	if err != nil {
		return nil, err
	}
	mark, replicas, found, err := readSide(fs, opts.Dir)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrDamaged, err)
	}
	var wals []WALFile
	switch {
	case !desc.Exists && !found:
		// A new store: the mark exists before Pebble's files do, so a store at
		// formatVersion without it has lost it.
		if err := refuseFresh(fs, opts.Dir); err != nil {
			return nil, err
		}
		h, err := createHWM(fs, opts.Dir, 0)
		if err != nil {
			return nil, err
		}
		_ = h.close()
	case desc.Exists && !found && desc.FormatMajorVersion >= formatVersion:
		return nil, fmt.Errorf("%w: %s: the high-water mark file %s is missing; cannot tell which records were acknowledged",
			ErrDamaged, opts.Dir, fs.PathJoin(opts.Dir, hwmFile))
	case desc.Exists:
		// Pebble's replay leaves no trace of where it stopped, and its flush at
		// Open retires the WAL: read the WAL first, to name any damage.
		if wals, err = scanWALs(fs, opts.Dir); err != nil {
			return nil, err
		}
	}
	after, err := preflight(fs, opts.Dir, mark, replicas, wals)
	if err != nil {
		return nil, err
	}
	dmg := newDamage(opts.FS, opts.Logger)
	hook := &markHook{}
	po := &pebble.Options{
		FS:                 markFS{FS: fs, hook: hook},
		Logger:             pebbleLogger{opts.Logger},
		EventListener:      dmg.listener(),
		MemTableSize:       32 << 20,
		FormatMajorVersion: formatVersion,
	}
	po.Experimental.CompactionScheduler = dmg.compactionGate()
	// Every new event costs a Get of its id in the dedupe index, and nearly all of
	// them miss: bloom filters answer most misses without reading a block.
	for i := range po.Levels {
		po.Levels[i].FilterPolicy = bloom.FilterPolicy(10)
	}
	db, err := pebble.Open(opts.Dir, po)
	if err == nil && (!desc.Exists || desc.FormatMajorVersion < pebble.FormatWALSyncChunks) {
		// Pebble ratchets the format only after it made the WAL it writes next,
		// so that WAL has no synced offsets yet: reopen once so the WAL every
		// record goes to has them.
		if err = db.Close(); err == nil {
			// A compaction scheduler serves one DB: Close unregistered the first.
			po.Experimental.CompactionScheduler = dmg.compactionGate()
			db, err = pebble.Open(opts.Dir, po)
		}
	}
	if err != nil {
		if pebble.IsCorruptionError(err) && hasDamage(wals) {
			return nil, fmt.Errorf("%w: %s: Pebble refuses its WAL (seqs up to %d were acknowledged): %s: %w",
				ErrDamaged, opts.Dir, mark, walSummary(wals, mark), err)
		}
		if lerr := lockedErr(opts.Dir, err); lerr != nil {
			return nil, lerr
		}
		return nil, fmt.Errorf("eventlog: open %s: %w", opts.Dir, err)
	}
	l := &Log{
		db:       db,
		maxBatch: opts.MaxBatch,
		reqs:     make(chan *request, opts.QueueLen),
		stopped:  make(chan struct{}),
		notify:   make(chan struct{}, 1),
		failedCh: make(chan struct{}),
		ids:      newIDFilter(opts.FilterBytes),
		dmg:      dmg,
		onCommit: opts.OnCommit,
	}
	next, err := l.recover(opts.Dir, mark, replicas, wals, after, opts.Logger)
	if err == nil {
		// A fresh mark file (also for a store from before the mark, or one in
		// the format without replicas): every record it could restore is in
		// the store now, synced.
		l.mark, err = createHWM(fs, opts.Dir, next-1)
	}
	if err == nil {
		l.markSync = l.chooseMarkSync(opts)
		hook.h.Store(l.mark)
	}
	// Pebble's WAL syncs write the mark back until it is closed: it closes
	// first, here and in Close.
	if err != nil {
		_ = db.Close()
		_ = l.mark.close()
		return nil, l.openErr(err, opts.Dir)
	}
	if err := l.checkStore(opts.Dir); err != nil {
		_ = db.Close()
		_ = l.mark.close()
		return nil, err
	}
	if closed := newestClosedDamage(wals); (len(after) > 0 || closed) && opts.Logger != nil {
		// Not refused (no acknowledged record is missing), but not silent
		// either: what the dropped batches wrote is gone.
		status, committed := batchWrites(after)
		var seqs uint64
		for _, b := range after {
			seqs = max(seqs, b.max)
		}
		msg := "eventlog: the newest WAL is damaged; Pebble's replay dropped the damaged batch"
		if len(after) > 0 {
			msg += fmt.Sprintf(" and the %d intact batches after it", len(after))
		}
		if closed {
			msg += "; its EOF trailer follows the damage, so it was closed (and synced) after it: not a torn write"
		} else {
			msg += ", taken for a torn tail (no later chunk says it was synced past the damage)"
		}
		msg += "; no acknowledged record is missing, but the status documents and committed offset they held are lost, so those events are processed again (sinks absorb repeats)"
		opts.Logger.Warn(msg, "wal", walSummary(wals, mark), "batches", len(after), "status_documents", status,
			"committed_offset_lost", committed, "committed_offset", l.committed.Load(), "record_seqs_up_to", seqs)
	}
	if len(l.lost) > 0 && opts.Logger != nil {
		for _, r := range l.lost {
			opts.Logger.Warn("eventlog: events recorded lost (by a salvage of a damaged log, or named past its end after a crash); clients must send them again (GET /v1/lost)",
				"from_seq", r.From, "to_seq", r.To, "ids", len(r.IDs), "reason", r.Reason)
		}
	}
	go l.writer(next)
	return l, nil
}

func peek(fs vfs.FS, dir string) (*pebble.DBDesc, error) {
	if _, err := fs.Stat(dir); errors.Is(err, os.ErrNotExist) {
		return &pebble.DBDesc{}, nil
	}
	desc, err := pebble.Peek(dir, fs)
	if err != nil {
		return nil, fmt.Errorf("eventlog: open %s: %w", dir, err)
	}
	return desc, nil
}

// preflight refuses, before Pebble touches the store, a WAL that is damaged where
// intact chunks follow: Pebble stops its replay at the damage (in the WAL's last
// 32 KiB block it takes a bad chunk for the end, even with synced offsets), then
// flushes what it replayed and retires the WAL, so the intact batches after the
// damage would be gone before a salvage could keep them. The damage refuses if a
// later chunk promises the WAL was synced past it, or if the records before it
// end below the mark (and replicas in the mark file cannot restore every batch
// after it); otherwise it is a torn tail and Pebble may drop it. It returns the
// intact batches after such a tail, whose seqs are never given out again.
func preflight(fs vfs.FS, dir string, mark uint64, replicas []sideSlot, wals []WALFile) ([]walBatch, error) {
	found := false
	for _, w := range wals {
		for _, d := range w.Damage {
			found = found || d.Resync >= 0
		}
	}
	if !found {
		return nil, nil
	}
	db, live, after, err := openView(fs, dir, wals)
	if err != nil {
		return nil, nil // Pebble's own Open reports it
	}
	last, err := lastSeq(db)
	lost, lerr := readLost(db)
	_ = db.Close()
	if err != nil || lerr != nil {
		return nil, nil // Pebble's own Open, or recover, reports it
	}
	var liveWALs []WALFile
	synced := false
	for _, w := range wals {
		if slices.Contains(live, w.Name) {
			liveWALs = append(liveWALs, w)
			for _, d := range w.Damage {
				synced = synced || d.Synced && d.Resync >= 0
			}
		}
	}
	top := restorableAfter(last, replicas, after)
	named := max(mark, namedTop(replicas, after))
	switch {
	case mark > top && !(&Log{lost: lost}).lostCovers(top+1, mark):
		return nil, fmt.Errorf("%w: %s: Pebble's replay would stop at WAL damage and drop acknowledged seqs %d..%d (high-water mark %d in %s%s): %s",
			ErrDamaged, dir, last+1, named, mark, hwmFile, namedNote(mark, last, replicas, after), walSummary(liveWALs, mark))
	case synced:
		return nil, fmt.Errorf("%w: %s: the WAL is corrupt before its synced offset (seqs up to %d were acknowledged): %s",
			ErrDamaged, dir, named, walSummary(liveWALs, mark))
	}
	return after, nil
}

func hasDamage(wals []WALFile) bool {
	for _, w := range wals {
		if len(w.Damage) > 0 {
			return true
		}
	}
	return false
}

// restorable is the seq the records reach once the replicas that continue them
// past last are applied.
func restorable(last uint64, replicas []sideSlot) uint64 {
	for _, s := range replicas { // by first seq
		if s.first == last+1 {
			last = s.last
		}
	}
	return last
}

// restorableAfter is restorable for a WAL whose intact batches after a damage,
// which Pebble drops, are after: the replicas may stand in for the damage only if
// they restore every one of those batches (record groups, no other documents;
// a batch of sync times only may go: its groups' records then have no time).
func restorableAfter(last uint64, replicas []sideSlot, after []walBatch) uint64 {
	top := restorable(last, replicas)
	for _, b := range after {
		if b.syncOnly {
			continue
		}
		if b.min == 0 || b.max > top {
			return last
		}
	}
	return top
}

// recover reads the committed offset and the lost ranges, verifies the records
// after the offset, restores the groups the WAL lost that a replica in the mark
// file holds, checks the records against the high-water mark, and returns the
// next seq to give out: above every seq ever acknowledged or recorded lost.
func (l *Log) recover(dir string, mark uint64, replicas []sideSlot, wals []WALFile, after []walBatch, logger *slog.Logger) (next uint64, err error) {
	committed := uint64(1)
	v, closer, err := l.db.Get(committedKey)
	switch {
	case err == nil:
		if len(v) != 8 {
			closer.Close()
			return 0, fmt.Errorf("eventlog: committed offset is %d bytes, want 8: %w", len(v), event.ErrCorrupt)
		}
		committed = binary.BigEndian.Uint64(v)
		closer.Close()
	case !errors.Is(err, pebble.ErrNotFound):
		return 0, fmt.Errorf("eventlog: read committed offset: %w", err)
	}
	l.committed.Store(committed)
	if l.lost, err = readLost(l.db); err != nil {
		return 0, err
	}
	last, err := l.verify(dir, committed-1, mark, wals)
	if err != nil {
		return 0, err
	}
	if top := restorable(last, replicas); top > last {
		// The WAL ends short of a group that was durable in the mark file (a
		// damaged, torn or lost last group): apply it again, exactly its
		// records and dedupe entries, then verify them like the rest.
		from := last + 1
		for _, s := range replicas {
			if s.first != last+1 {
				continue
			}
			b := l.db.NewBatch()
			if err := b.SetRepr(slices.Clone(s.repr)); err != nil {
				return 0, fmt.Errorf("eventlog: %s: replica of seqs %d..%d in %s: %w", dir, s.first, s.last, hwmFile, err)
			}
			if err := l.db.Apply(b, pebble.Sync); err != nil {
				return 0, fmt.Errorf("eventlog: %s: restore seqs %d..%d from %s: %w", dir, s.first, s.last, hwmFile, err)
			}
			last = s.last
		}
		if last, err = l.verify(dir, from-1, mark, wals); err != nil {
			return 0, err
		}
		if last != top {
			return 0, fmt.Errorf("eventlog: %s: restored seqs %d..%d from %s but the records end at %d: %w", dir, from, top, hwmFile, last, event.ErrCorrupt)
		}
		if logger != nil {
			logger.Warn("eventlog: the WAL ended short of its last group commits; restored them from the replica in the high-water mark file",
				"from_seq", from, "to_seq", top, "file", hwmFile, "wal", walSummary(wals, mark))
		}
	}
	named := namedTop(replicas, after)
	if mark > last && !l.lostCovers(last+1, mark) {
		return 0, fmt.Errorf("%w: %s: seqs %d..%d were acknowledged (high-water mark %d in %s%s) but the log ends at seq %d: %s",
			ErrDamaged, dir, last+1, max(mark, named), mark, hwmFile, namedNote(mark, last, replicas, after), last, walSummary(wals, mark))
	}
	l.durable.Store(last)
	top := max(last, mark)
	from := top + 1
	for from <= named && l.lostCovers(from, from) {
		from++
	}
	if from <= named {
		// Past the mark and the log's end, yet named by an intact replica (its
		// group's WAL batch gone and the slot before it torn) or by a WAL batch
		// after a torn tail: possibly never answered, but never given out again.
		reason := fmt.Sprintf("past the log's end (seq %d) and the high-water mark (%d), named by an intact replica in %s or a WAL batch after a torn tail, possibly never answered: %s",
			last, mark, hwmFile, walSummary(wals, mark))
		if err := l.recordNamedLost(from, named, replicas, after, reason, time.Now().UnixNano()); err != nil {
			return 0, err
		}
		if logger != nil {
			logger.Warn("eventlog: seqs past the log's end are named by the mark file's replicas or WAL batches Pebble dropped; recorded lost and never given out again (GET /v1/lost)",
				"from_seq", from, "to_seq", named, "file", hwmFile)
		}
	}
	next = max(top, named) + 1
	for _, r := range l.lost {
		next = max(next, r.To+1)
	}
	return next, l.loadIDs()
}

// verify reads the records after seq last, checking each one and that none is
// missing, and returns the highest.
func (l *Log) verify(dir string, last, mark uint64, wals []WALFile) (uint64, error) {
	it, err := l.db.NewIter(&pebble.IterOptions{LowerBound: logKey(last + 1), UpperBound: []byte{'l' + 1}})
	if err != nil {
		return 0, fmt.Errorf("eventlog: scan: %w", err)
	}
	defer it.Close()
	for ok := it.First(); ok; ok = it.Next() {
		seq := binary.BigEndian.Uint64(it.Key()[1:])
		if seq != last+1 && !l.lostCovers(last+1, seq-1) {
			return 0, fmt.Errorf("%w: %s: records %d..%d missing (record seq %d follows %d): %s: %w",
				ErrDamaged, dir, last+1, seq-1, seq, last, walSummary(wals, mark), event.ErrCorrupt)
		}
		r, err := event.Decode(it.Value())
		if err != nil {
			return 0, fmt.Errorf("eventlog: record seq %d: %w", seq, err)
		}
		if r.Seq != seq {
			return 0, fmt.Errorf("eventlog: record at seq %d says seq %d: %w", seq, r.Seq, event.ErrCorrupt)
		}
		last = seq
	}
	if err := it.Error(); err != nil {
		return 0, fmt.Errorf("eventlog: scan: %w", err)
	}
	return last, nil
}

// loadIDs fills the id filter from the dedupe index.
func (l *Log) loadIDs() error {
	it, err := l.db.NewIter(&pebble.IterOptions{LowerBound: []byte{'d'}, UpperBound: []byte{'d' + 1}})
	if err != nil {
		return l.readErr("open: scan of the dedupe index", err)
	}
	defer it.Close()
	n := int64(0)
	for ok := it.First(); ok; ok = it.Next() {
		l.ids.add(string(it.Key()[1:]))
		n++
	}
	l.ids64.Store(n)
	return l.readErr("open: scan of the dedupe index", it.Error())
}

// Submit queues recs for the next group commit and returns at once. done is called
// exactly once, from the writer goroutine, after the sync covering every record of
// recs returned (err nil; each record's Seq is set) or failed (err wraps ErrFailed).
// done must not block. Submit itself fails (and done is not called) when the log is
// closed, failed, or its queue is full (ErrOverloaded).
func (l *Log) Submit(recs []*event.Record, done func(error)) error {
	if err := l.Err(); err != nil {
		return err
	}
	if err := l.refuseDamaged(); err != nil {
		return err
	}
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.closed {
		return ErrClosed
	}
	select {
	case l.reqs <- &request{recs: recs, done: done}:
		return nil
	default:
		return ErrOverloaded
	}
}

// Append is Submit that waits for the sync. ctx only bounds the wait: a record
// whose caller gave up may still become durable.
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

// writer is the group commit. It takes every append waiting, gives the records
// their seqs, puts the group in a slot of the mark file and applies it as one
// Pebble batch with Sync but without waiting for the WAL fsync
// (DB.ApplyNoSyncWait, as CockroachDB's raft log does), so the next group is
// written while this one syncs; the side syncer syncs the slots while the WAL
// syncs, and syncer waits for both, in the same order, and only then answers.
// Applying in seq order from one goroutine keeps the WAL in seq order.
func (l *Log) writer(next uint64) {
	syncq := make(chan pendingSync, syncDepth)
	sideq := make(chan chan error, hwmSlots)
	// A token per group in flight, so the slots of the newest answered groups
	// are at rest (see hwm.go).
	free := make(chan struct{}, hwmInFlight)
	for range hwmInFlight {
		free <- struct{}{}
	}
	syncerDone, sideDone := make(chan struct{}), make(chan struct{})
	go l.syncer(syncq, free, syncerDone)
	go l.sideSyncer(sideq, sideDone)
	defer func() {
		close(syncq)
		<-syncerDone
		close(sideq)
		<-sideDone
		close(l.stopped)
	}()
	var buf, key []byte
	slot := 0
	for {
		r, ok := <-l.reqs
		if !ok {
			return
		}
		batch, n := []*request{r}, len(r.recs)
	drain:
		for n < l.maxBatch {
			select {
			case r, ok := <-l.reqs:
				if !ok {
					break drain
				}
				batch = append(batch, r)
				n += len(r.recs)
			default:
				break drain
			}
		}
		<-free
		if err := l.Err(); err != nil {
			free <- struct{}{}
			for _, r := range batch {
				r.done(err)
			}
			continue
		}
		b := l.db.NewBatch()
		l.times.write(b) // the sync times of the groups answered since the last write
		first := next
		size, newIDs := 0, 0
		for _, r := range batch {
			for _, rec := range r.recs {
				rec.Seq = next
				next++
				// Batch.Set copies key and value, so one scratch buffer serves all.
				key = append(key[:0], 'l')
				key = binary.BigEndian.AppendUint64(key, rec.Seq)
				buf = rec.Encode(buf[:0])
				size += len(buf)
				if rec.Generation == 0 {
					newIDs++ // a resubmitted generation overwrites its id's entry
				}
				_ = b.Set(key, buf, nil)
				key = append(append(key[:0], 'd'), rec.Event.ID...)
				buf = encodeEntry(buf[:0], Entry{Seq: rec.Seq, ReceivedAt: rec.ReceivedAt, Generation: rec.Generation, Hash: rec.Hash})
				_ = b.Set(key, buf, nil)
				l.ids.add(rec.Event.ID) // before the apply: a reader may never miss it
			}
		}
		t0 := time.Now()
		p := pendingSync{b: b, reqs: batch, first: first, last: next - 1, start: t0, slot: slot, bytes: size, newIDs: newIDs}
		slot = (slot + 1) % hwmSlots
		var err error
		if repr := b.Repr(); len(repr) <= hwmReplicaMax {
			// The replica is written first: riding the WAL's flush, it is
			// written back when the WAL's sync begins; otherwise its own sync
			// starts at once and runs while Pebble writes and syncs the WAL.
			if err = l.mark.write(p.slot, p.first, p.last, l.durable.Load(), repr); err == nil {
				p.replica = true
				if l.mark.writeBack == nil {
					p.side = make(chan error, 1)
					sideq <- p.side
				}
			}
		}
		if err == nil {
			err = applyNoSyncWait(l.db, b)
		}
		if err != nil {
			_ = b.Close()
			err = l.fail(fmt.Errorf("commit of seq %d..%d: %w", first, next-1, err))
			if p.side != nil {
				<-p.side
			}
			if p.replica {
				l.unreplicate(p)
			}
			for _, r := range batch {
				r.done(err)
			}
			l.commitFailures.Add(1)
			if l.onCommit != nil {
				l.onCommit(Commit{Records: int(p.last - p.first + 1), Bytes: p.bytes, Elapsed: time.Since(p.start), Err: err})
			}
			free <- struct{}{}
			continue
		}
		syncq <- p
	}
}

// syncDepth is how many applied groups may wait in the queue for their fsync,
// besides the one the syncer waits for.
const syncDepth = 2

type pendingSync struct {
	b           *pebble.Batch
	reqs        []*request
	first, last uint64
	start       time.Time
	slot        int
	replica     bool       // the slot holds the group; false: it gets a serial mark
	side        chan error // the replica's own sync; nil if it rides the WAL's flush
	bytes       int        // the records' encoded size
	newIDs      int        // records of generation 0: each adds an id to the index
}

// sideSyncer syncs the mark file for the replicas written so far: one
// fdatasync covers every group waiting (group commit again).
func (l *Log) sideSyncer(q <-chan chan error, done chan<- struct{}) {
	defer close(done)
	var group []chan error
	for ch := range q {
		group = append(group[:0], ch)
	more:
		for {
			select {
			case ch, ok := <-q:
				if !ok {
					break more
				}
				group = append(group, ch)
			default:
				break more
			}
		}
		err := l.mark.sync()
		for _, ch := range group {
			ch <- err
		}
	}
}

// syncer waits for each group's WAL fsync and its slot's (its own, or the WAL's
// when the slot rides its flush), in order, and answers it. A group without a
// replica gets its serial mark here: written only after the WAL sync of its seqs
// returned (written earlier, a power cut could leave it claiming records that
// were never synced and make the next Open refuse a log that lost nothing
// acknowledged), and synced before the answer.
func (l *Log) syncer(q <-chan pendingSync, free chan<- struct{}, done chan<- struct{}) {
	defer close(done)
	for p := range q {
		err := p.b.SyncWait()
		_ = p.b.Close()
		p.b = nil
		if err != nil {
			err = l.fail(fmt.Errorf("sync of seq %d..%d: %w", p.first, p.last, err))
		}
		if p.side != nil {
			if serr := <-p.side; serr != nil && err == nil {
				err = l.fail(serr)
			}
		} else if !p.replica && err == nil && l.Err() == nil {
			err = l.mark.write(p.slot, p.first, p.last, l.durable.Load(), nil)
			if err == nil {
				err = l.mark.sync()
			}
			if err != nil {
				err = l.fail(err)
			}
		}
		if err == nil {
			err = l.Err()
		}
		if err != nil && p.replica {
			l.unreplicate(p)
		}
		elapsed := time.Since(p.start)
		l.commits.Add(1)
		l.records.Add(p.last - p.first + 1)
		l.bytes.Add(uint64(p.bytes))
		l.commitNanos.Add(uint64(elapsed))
		l.commitBuckets[commitBucket(elapsed)].Add(1)
		if err != nil {
			l.commitFailures.Add(1)
		}
		if err == nil {
			if err = l.Err(); err == nil {
				// Its records' persisted time, known before they can be read
				// (synctime.go).
				l.times.synced(groupTime{first: p.first, last: p.last, at: time.Now().UnixNano()})
				// A group synced after an earlier one failed is not reported
				// durable: the failure is sticky, whatever the later fsync
				// said (fsyncgate).
				l.durable.Store(p.last)
				select {
				case l.notify <- struct{}{}:
				default:
				}
			}
		}
		if err == nil {
			l.ids64.Add(int64(p.newIDs))
		}
		for _, r := range p.reqs {
			r.done(err)
		}
		if l.onCommit != nil {
			l.onCommit(Commit{Records: int(p.last - p.first + 1), Bytes: p.bytes, Elapsed: elapsed, Err: err})
		}
		free <- struct{}{}
	}
}

// unreplicate takes back the replica of a group about to be answered with an
// error, so a restart does not restore what its clients were told to resend
// (they would get "duplicate" for an event they were told failed). Best effort:
// if the mark file's disk fails too, the replica may stay, and restoring a group
// that was durable is still right.
func (l *Log) unreplicate(p pendingSync) {
	floor := l.durable.Load()
	if l.mark.write(p.slot, floor, floor, floor, nil) == nil {
		_ = l.mark.sync()
	}
}

// fail makes err sticky and returns the error every caller will see from now on.
func (l *Log) fail(err error) error {
	wrapped := fmt.Errorf("%w: %w", ErrFailed, err)
	if l.err.CompareAndSwap(nil, &wrapped) {
		l.failOnce.Do(func() { close(l.failedCh) })
		return wrapped
	}
	return *l.err.Load()
}

// Err is the sticky failure, or nil while the log is healthy.
func (l *Log) Err() error {
	if p := l.err.Load(); p != nil {
		return *p
	}
	return nil
}

// Failed is closed when the log fails.
func (l *Log) Failed() <-chan struct{} { return l.failedCh }

// Durable is the highest sequence number whose record is durable (0: none).
func (l *Log) Durable() uint64 { return l.durable.Load() }

// Notify receives a signal (coalesced) whenever Durable advances.
func (l *Log) Notify() <-chan struct{} { return l.notify }

// Committed is the committed offset: the next seq to process. Every record below
// it is finished (processed or dead-lettered).
func (l *Log) Committed() uint64 { return l.committed.Load() }

// Read returns up to max durable records from seq from on, in order. A record that
// fails its checksum is an error naming its seq (wrapping event.ErrCorrupt).
func (l *Log) Read(from uint64, max int) ([]event.Record, error) {
	end := l.durable.Load()
	if from > end || max <= 0 {
		return nil, nil
	}
	// Bounded by records, not by seqs: a range a salvage lost, or one Trim
	// removed under a kept dead letter, is a gap of any width, and a reader at
	// its start must get the records after it.
	op := fmt.Sprintf("read of records from seq %d", from)
	it, err := l.db.NewIter(&pebble.IterOptions{LowerBound: logKey(from), UpperBound: logKey(end + 1)})
	if err != nil {
		return nil, l.readErr(op, err)
	}
	defer it.Close()
	out := make([]event.Record, 0, min(uint64(max), end-from+1))
	for ok := it.First(); ok && len(out) < max; ok = it.Next() {
		seq := binary.BigEndian.Uint64(it.Key()[1:])
		r, err := event.Decode(it.Value())
		if err != nil {
			return out, fmt.Errorf("eventlog: record seq %d: %w", seq, err)
		}
		out = append(out, r)
	}
	return out, l.readErr(op, it.Error())
}

// ReadSeq returns the record at seq, if it is durable and not trimmed.
func (l *Log) ReadSeq(seq uint64) (event.Record, bool, error) {
	if seq == 0 || seq > l.durable.Load() {
		return event.Record{}, false, nil
	}
	v, closer, err := l.db.Get(logKey(seq))
	if errors.Is(err, pebble.ErrNotFound) {
		return event.Record{}, false, nil
	}
	if err != nil {
		return event.Record{}, false, l.readErr(fmt.Sprintf("read of record seq %d", seq), err)
	}
	defer closer.Close()
	r, err := event.Decode(v)
	if err != nil {
		return r, false, fmt.Errorf("eventlog: record seq %d: %w", seq, err)
	}
	return r, true, nil
}

// Lookup returns the dedupe index entry of an event id, with the time its record
// became durable where known (PersistedAt; a read error of it leaves it unknown).
// Entries are written in the same batch as their record, but only entries at or
// below Durable are returned, so an entry is never authoritative before its
// record is durable.
func (l *Log) Lookup(id string) (Entry, bool, error) {
	e, ok, err := l.lookup(id)
	if ok && err == nil {
		if at, known, _ := l.PersistedAt(e.Seq); known {
			e.PersistedAt = at
		}
	}
	return e, ok, err
}

// lookup is Lookup without the persisted time.
func (l *Log) lookup(id string) (Entry, bool, error) {
	if !l.ids.mayContain(id) {
		return Entry{}, false, nil
	}
	v, closer, err := l.db.Get(nsKey('d', id))
	if errors.Is(err, pebble.ErrNotFound) {
		return Entry{}, false, nil
	}
	if err != nil {
		return Entry{}, false, l.readErr(fmt.Sprintf("lookup of %q in the dedupe index", id), err)
	}
	defer closer.Close()
	e, err := decodeEntry(v)
	if err != nil {
		return Entry{}, false, fmt.Errorf("eventlog: index entry of %q: %w", id, err)
	}
	if e.Seq > l.durable.Load() {
		return Entry{}, false, nil
	}
	return e, true, nil
}

// MayContain is false when id is certainly not in the dedupe index (an in-memory
// filter answers; no I/O). An id is added before its record can be durable.
func (l *Log) MayContain(id string) bool { return l.ids.mayContain(id) }

// Write is a group of changes applied atomically and synced by Apply.
type Write struct {
	// Committed, when non-zero, moves the committed offset (never backwards).
	Committed uint64
	sets      []kv
	dels      [][]byte
}

type kv struct{ k, v []byte }

// Set stores a document under (ns, id).
func (w *Write) Set(ns Namespace, id string, doc []byte) {
	w.sets = append(w.sets, kv{nsKey(byte(ns), id), doc})
}

// Delete removes the document under (ns, id).
func (w *Write) Delete(ns Namespace, id string) { w.dels = append(w.dels, nsKey(byte(ns), id)) }

// Each calls set for every document stored and del for every one removed, in the
// order given: for a log other than this one (a replicated log) to apply w.
func (w *Write) Each(set func(ns Namespace, id string, doc []byte), del func(ns Namespace, id string)) {
	for _, kv := range w.sets {
		set(Namespace(kv.k[0]), string(kv.k[1:]), kv.v)
	}
	for _, k := range w.dels {
		del(Namespace(k[0]), string(k[1:]))
	}
}

// Apply commits w with a sync. A failure is sticky, as for appends.
func (l *Log) Apply(w *Write) error {
	if err := l.Err(); err != nil {
		return err
	}
	b := l.db.NewBatch()
	defer b.Close()
	l.times.write(b) // the sync times of the groups answered since the last write
	for _, s := range w.sets {
		_ = b.Set(s.k, s.v, nil)
	}
	for _, d := range w.dels {
		_ = b.Delete(d, nil)
	}
	if w.Committed > l.committed.Load() {
		var v [8]byte
		binary.BigEndian.PutUint64(v[:], w.Committed)
		_ = b.Set(committedKey, v[:], nil)
	}
	if err := commitSync(b); err != nil {
		return l.fail(fmt.Errorf("apply: %w", err))
	}
	for {
		c := l.committed.Load()
		if w.Committed <= c || l.committed.CompareAndSwap(c, w.Committed) {
			break
		}
	}
	return nil
}

// Get returns the document under (ns, id).
func (l *Log) Get(ns Namespace, id string) ([]byte, bool, error) {
	v, closer, err := l.db.Get(nsKey(byte(ns), id))
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, l.readErr(fmt.Sprintf("get of document %c%q", ns, id), err)
	}
	defer closer.Close()
	return bytes.Clone(v), true, nil
}

// Scan calls fn for every document in ns, in id order, until fn returns false.
func (l *Log) Scan(ns Namespace, fn func(id string, doc []byte) bool) error {
	op := fmt.Sprintf("scan of documents %c", ns)
	it, err := l.db.NewIter(&pebble.IterOptions{LowerBound: []byte{byte(ns)}, UpperBound: []byte{byte(ns) + 1}})
	if err != nil {
		return l.readErr(op, err)
	}
	defer it.Close()
	for ok := it.First(); ok; ok = it.Next() {
		if !fn(string(it.Key()[1:]), bytes.Clone(it.Value())) {
			break
		}
	}
	return l.readErr(op, it.Error())
}

// Close stops accepting appends, lets the writer finish every queued one, and closes
// the database. Records not yet synced when Close returns were answered with errors.
func (l *Log) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return ErrClosed
	}
	l.closed = true
	close(l.reqs)
	l.mu.Unlock()
	<-l.stopped
	if l.Err() == nil && l.times.hasPending() {
		// The newest groups' sync times, which no later write carried.
		b := l.db.NewBatch()
		l.times.write(b)
		if err := commitSync(b); err != nil {
			_ = l.fail(fmt.Errorf("close: sync times: %w", err))
		}
		_ = b.Close()
	}
	if l.Err() != nil {
		// Pebble's commit pipeline is unusable after a failed sync; closing it can
		// only report that again, and after a panic inside Pebble it might block
		// on a lock the panic left held: give it a few seconds, then leave it to
		// the process's exit. What is durable is on disk for the next Open.
		done := make(chan struct{})
		go func() {
			defer close(done)
			defer func() { _ = recover() }()
			_ = l.db.Close()
		}()
		select {
		case <-done:
			_ = l.mark.close()
		case <-time.After(5 * time.Second):
			// Pebble may still sync, and so write the mark back: it stays open.
		}
		return nil
	}
	err := l.db.Close()
	_ = l.mark.close()
	if err != nil {
		return fmt.Errorf("eventlog: close: %w", err)
	}
	return nil
}

// applyNoSyncWait applies b with Sync, returning before the fsync (see writer);
// a Pebble fatal error becomes an error as in commitSync.
func applyNoSyncWait(db *pebble.DB, b *pebble.Batch) (err error) {
	defer recoverPebble(&err)
	return db.ApplyNoSyncWait(b, pebble.Sync)
}

// recoverPebble turns a panic of Pebble's commit path into an error: Logger.Fatalf
// (fatalError) and also the plain error values it panics with when its WAL writer
// already failed (commitWrite, rotateWAL). The log then fails sticky. Go runtime
// fatal errors cannot be recovered: those end the process, and a restart recovers
// from what is durable.
func recoverPebble(err *error) {
	if r := recover(); r != nil {
		switch v := r.(type) {
		case fatalError:
			*err = v.err
		case error:
			*err = fmt.Errorf("pebble panicked: %w", v)
		default:
			*err = fmt.Errorf("pebble panicked: %v", v)
		}
	}
}

// commitSync commits b with a WAL sync. Pebble treats a failed WAL write or sync as
// fatal (Logger.Fatalf: "the commit pipeline will be horked"); our logger panics with
// fatalError there, and this turns it back into an error so the log can fail sticky
// instead of taking the process down mid-answer.
func commitSync(b *pebble.Batch) (err error) {
	defer recoverPebble(&err)
	return b.Commit(pebble.Sync)
}

// fatalMsg keeps the cause of a Pebble fatal message matchable (errors.Is EIO).
type fatalMsg struct {
	msg   string
	cause error
}

func (f fatalMsg) Error() string { return f.msg }
func (f fatalMsg) Unwrap() error { return f.cause }

// fatalError is what pebbleLogger.Fatalf panics with.
type fatalError struct{ err error }

// encodeEntry writes an entry in 53 bytes: seq, receipt time, generation, hash, and
// the hash's rule. An entry of 52 bytes (without the rule) is an older one: HashRaw.
func encodeEntry(dst []byte, e Entry) []byte {
	dst = binary.BigEndian.AppendUint64(dst, e.Seq)
	dst = binary.BigEndian.AppendUint64(dst, uint64(e.ReceivedAt))
	dst = binary.BigEndian.AppendUint32(dst, e.Generation)
	dst = append(dst, e.Hash.Sum[:]...)
	return append(dst, byte(e.Hash.Rule))
}

func decodeEntry(b []byte) (Entry, error) {
	if len(b) != 8+8+4+32 && len(b) != 8+8+4+32+1 {
		return Entry{}, fmt.Errorf("%d bytes, want 53 (or 52 before hash rules): %w", len(b), event.ErrCorrupt)
	}
	var e Entry
	e.Seq = binary.BigEndian.Uint64(b)
	e.ReceivedAt = int64(binary.BigEndian.Uint64(b[8:]))
	e.Generation = binary.BigEndian.Uint32(b[16:])
	copy(e.Hash.Sum[:], b[20:52])
	if len(b) == 53 {
		if e.Hash.Rule = event.HashRule(b[52]); !e.Hash.Rule.Known() {
			return Entry{}, fmt.Errorf("unknown hash rule %d: %w", b[52], event.ErrCorrupt)
		}
	}
	return e, nil
}

// pebbleLogger sends Pebble's messages to slog at debug level (errors at error).
type pebbleLogger struct{ l *slog.Logger }

func (p pebbleLogger) Infof(format string, args ...any) {
	if p.l != nil {
		p.l.Debug(fmt.Sprintf(format, args...), "component", "pebble")
	}
}

func (p pebbleLogger) Errorf(format string, args ...any) {
	if p.l != nil {
		p.l.Error(fmt.Sprintf(format, args...), "component", "pebble")
	}
}

// Fatalf must not return: Pebble goes on as if the failed operation succeeded.
func (p pebbleLogger) Fatalf(format string, args ...any) {
	err := error(fatalMsg{msg: fmt.Sprintf(format, args...)})
	for _, a := range args {
		if e, ok := a.(error); ok {
			err = fatalMsg{msg: err.Error(), cause: e}
			break
		}
	}
	if p.l != nil {
		p.l.Error(err.Error(), "component", "pebble")
	}
	panic(fatalError{err})
}

var _ io.Closer = (*Log)(nil)

// Trim forgets finished records received before cutoff (Unix nanoseconds): their
// log records, and their dedupe entries and status documents unless a newer
// generation of the event is still kept, and the sync times of the group commits
// it emptied. Dead letters are never trimmed: they wait
// for an operator's :retry. Only records below the committed
// offset are trimmed, oldest first, stopping at the first one received at or after
// cutoff, so an id is remembered at least until cutoff passes its receipt (the dedupe
// window). Deletions are not synced: a crash may bring some back until the next Trim.
// It returns the number of records removed.
func (l *Log) Trim(cutoff int64) (int, error) {
	if err := l.Err(); err != nil {
		return 0, err
	}
	if err := l.Damaged(); err != nil {
		// Deleting now would hide from gale log check what the damage cost.
		return 0, fmt.Errorf("eventlog: not trimming a damaged store: %w", err)
	}
	committed := l.committed.Load()
	it, err := l.db.NewIter(&pebble.IterOptions{LowerBound: []byte{'l'}, UpperBound: logKey(committed)})
	if err != nil {
		return 0, l.readErr("trim", err)
	}
	b := l.db.NewBatch()
	defer b.Close()
	n, ids := 0, int64(0)
	// stop: every record below it was removed, or is kept in kept.
	stop, kept := committed, []uint64(nil)
	for ok := it.First(); ok; ok = it.Next() {
		r, derr := event.Decode(it.Value())
		if derr != nil {
			_ = it.Close()
			return n, fmt.Errorf("eventlog: trim: record seq %d: %w", binary.BigEndian.Uint64(it.Key()[1:]), derr)
		}
		if r.ReceivedAt >= cutoff {
			stop = r.Seq
			break
		}
		// An unreadable dead letter or index entry stops the trim: taken for
		// absent, a dead letter's record would be deleted.
		_, dead, gerr := l.Get(DeadLetter, r.Event.ID)
		if gerr != nil {
			_ = it.Close()
			return 0, fmt.Errorf("eventlog: trim: %w", gerr)
		}
		if dead {
			// An unresolved dead letter stays, record and all, until it is
			// resubmitted: an operator must see it, and :retry reads its record
			// (so a :retry can never race with its own trimming).
			kept = append(kept, r.Seq)
			continue
		}
		e, ok, lerr := l.lookup(r.Event.ID)
		if lerr != nil {
			_ = it.Close()
			return 0, fmt.Errorf("eventlog: trim: %w", lerr)
		}
		if ok && e.Seq == r.Seq {
			_ = b.Delete(nsKey('d', r.Event.ID), nil)
			_ = b.Delete(nsKey(byte(Status), r.Event.ID), nil)
			ids++
		}
		_ = b.Delete(it.Key(), nil)
		n++
	}
	if err := it.Close(); err != nil {
		return 0, l.readErr("trim", err)
	}
	if n == 0 {
		return 0, nil
	}
	if err := l.pruneSyncTimes(b, stop, kept); err != nil {
		return 0, fmt.Errorf("eventlog: trim: %w", err)
	}
	if err := commitNoSync(b); err != nil {
		return 0, l.fail(fmt.Errorf("trim: %w", err))
	}
	l.ids64.Add(-ids)
	return n, nil
}

func commitNoSync(b *pebble.Batch) (err error) {
	defer recoverPebble(&err)
	return b.Commit(pebble.NoSync)
}

// LostRange is a run of seqs that were acknowledged but could not be salvaged from
// a damaged log, recorded by Salvage so clients can send those events again.
type LostRange struct {
	From uint64 `json:"from_seq"`
	To   uint64 `json:"to_seq"`
	// IDs are the event ids of these seqs that some surviving copy named (a
	// dedupe index entry or a status document); the others are unknown.
	IDs []string `json:"ids,omitempty"`
	// Seqs[i] is the seq of IDs[i] (ranges recorded before gale kept them have
	// none).
	Seqs []uint64 `json:"seqs,omitempty"`
	// Reason says what was damaged (WAL file and offset where known).
	Reason string `json:"reason"`
	// At is when the salvage ran (Unix nanoseconds).
	At int64 `json:"at_unix_nano"`
}

// setIDs sets the ids the range names and their seqs, in id order.
func (r *LostRange) setIDs(seqOf map[string]uint64) {
	r.IDs, r.Seqs = nil, nil
	for id := range seqOf {
		r.IDs = append(r.IDs, id)
	}
	slices.Sort(r.IDs)
	for _, id := range r.IDs {
		r.Seqs = append(r.Seqs, seqOf[id])
	}
}

// SeqOf says whether the range names id, and its seq (0 if the range was
// recorded before gale kept the seqs of its ids and holds more than one seq).
func (r LostRange) SeqOf(id string) (seq uint64, named bool) {
	i, ok := slices.BinarySearch(r.IDs, id)
	if !ok {
		return 0, false
	}
	if len(r.Seqs) == len(r.IDs) {
		return r.Seqs[i], true
	}
	if r.From == r.To {
		return r.From, true
	}
	return 0, true
}

// Unknown is how many of the range's seqs have no id a surviving copy named.
func (r LostRange) Unknown() uint64 {
	n := r.To - r.From + 1
	return n - min(n, uint64(len(r.IDs)))
}

// Lost returns the lost ranges recorded by salvages of this log, oldest seq first.
func (l *Log) Lost() []LostRange { return slices.Clone(l.lost) }

func lostKey(from uint64) []byte {
	return binary.BigEndian.AppendUint64(append([]byte(nil), lostPrefix...), from)
}

func readLost(db *pebble.DB) ([]LostRange, error) {
	it, err := db.NewIter(&pebble.IterOptions{LowerBound: lostPrefix, UpperBound: prefixEnd(lostPrefix)})
	if err != nil {
		return nil, fmt.Errorf("eventlog: read lost ranges: %w", err)
	}
	defer it.Close()
	var out []LostRange
	for ok := it.First(); ok; ok = it.Next() {
		var r LostRange
		if err := json.Unmarshal(it.Value(), &r); err != nil {
			return nil, fmt.Errorf("eventlog: lost range %q: %w: %w", it.Key(), err, event.ErrCorrupt)
		}
		out = append(out, r)
	}
	if err := it.Error(); err != nil {
		return nil, fmt.Errorf("eventlog: read lost ranges: %w", err)
	}
	return out, nil
}

// lostCovers says whether every seq in from..to is in a recorded lost range.
func (l *Log) lostCovers(from, to uint64) bool {
	for _, r := range l.lost { // sorted by From
		if r.From <= from && from <= r.To {
			if to <= r.To {
				return true
			}
			from = r.To + 1
		}
	}
	return from > to
}

func prefixEnd(p []byte) []byte {
	e := bytes.Clone(p)
	e[len(e)-1]++
	return e
}
