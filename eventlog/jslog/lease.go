package jslog

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// The log spout's lease. Several serve processes share one log: each takes
// events in and answers for any of them, but only one at a time reads the log
// and runs its spout, so that no record is processed by two at once and the
// committed offset has one writer. That one holds key "spout" of the bucket
// PREFIX-loglease:
//
//   - Taking it: a Create, which fails while the key exists. The bucket's TTL
//     (LeaseTTL) removes the key LeaseTTL after its last write, so a holder that
//     died or was cut off loses it without anyone's say.
//   - Keeping it: an Update on its revision every LeaseTTL/3. A refused update
//     means it expired and may be someone else's now.
//   - The fence: having taken the lease, the new holder rewrites the committed
//     offset's key (its current value, on its current revision) before it reads
//     anything. Every later write of the offset is an Update on the revision the
//     holder last wrote, so the offset write of a holder that lost the lease
//     (paused, cut off, and now back) is refused by the server: ErrFenced. Its
//     status documents still land; they describe work it did.
//   - Holding: true from the fence until LeaseTTL after the last renewal that
//     succeeded, counted from when that renewal was sent (never longer than the
//     server keeps the key), or until a renewal is refused.
//   - Close deletes the key if it still holds it, so another takes over at once.

// ErrFenced: the committed offset was moved by a later holder of the log spout's
// lease: this process lost the lease and its offset write is refused.
var ErrFenced = errors.New("jslog: fenced off: another serve process holds the log spout's lease")

const (
	leaseKey        = "spout"
	defaultLeaseTTL = 10 * time.Second
)

// LeaseInfo is the lease as stored.
type LeaseInfo struct {
	Holder string    `json:"holder"`
	Since  time.Time `json:"since"` // when the holder took it (its clock)
	// Revision is the key's revision (each renewal makes a new one).
	Revision uint64 `json:"-"`
}

// lease is this process's hold on the log spout's lease.
type lease struct {
	kv     jetstream.KeyValue
	holder string
	ttl    time.Duration

	mu     sync.Mutex
	rev    uint64    // the lease key's revision this process wrote last (0: not held)
	epoch  uint64    // the revision it was taken at (the term)
	until  time.Time // held until then, unless a renewal is refused
	comRev uint64    // the committed offset key's revision this holder wrote last
	fenced uint64    // offset writes refused by the fence, for tests and logs
	since  time.Time

	// paused: tests make a holder that stops renewing (a long GC pause, a
	// process cut off from the cluster) while it goes on running.
	paused atomic.Bool

	stop chan struct{}
	done chan struct{}
}

func defaultHolder() string {
	h, err := os.Hostname()
	if err != nil {
		h = "serve"
	}
	return h + "-" + strconv.Itoa(os.Getpid())
}

// Holding reports whether this process holds the log spout's lease now, and the
// term: the lease revision it was taken at, new after each takeover. A log opened
// with NoLease never holds it.
func (l *Log) Holding() (epoch uint64, ok bool) {
	ls := l.lease
	if ls == nil {
		return 0, false
	}
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if ls.rev == 0 || !time.Now().Before(ls.until) {
		return ls.epoch, false
	}
	return ls.epoch, true
}

// Lease reads the lease as stored (nil if nobody holds it).
func (l *Log) Lease(ctx context.Context) (*LeaseInfo, error) {
	if l.lease == nil {
		return nil, errors.New("jslog: opened with NoLease")
	}
	ctx, cancel := l.op(ctx)
	defer cancel()
	e, err := l.lease.kv.Get(ctx, leaseKey)
	if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("jslog: lease: %w", err)
	}
	var li LeaseInfo
	if err := json.Unmarshal(e.Value(), &li); err != nil {
		return nil, fmt.Errorf("jslog: lease %q: %w", e.Value(), err)
	}
	li.Revision = e.Revision()
	return &li, nil
}

// Fenced counts this process's offset writes the fence refused.
func (l *Log) Fenced() uint64 {
	if l.lease == nil {
		return 0
	}
	l.lease.mu.Lock()
	defer l.lease.mu.Unlock()
	return l.lease.fenced
}

// openLease binds the lease bucket, tries once to take the lease (so a lone serve
// process holds it when Open returns), and starts the loop that keeps it or
// takes it when it is free.
func (l *Log) openLease(ctx context.Context) error {
	cfg := l.cfg
	bucket := cfg.Prefix + "-loglease"
	kv, err := l.js.KeyValue(ctx, bucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		kv, err = l.js.CreateKeyValue(ctx, jetstream.KeyValueConfig{
			Bucket: bucket, Replicas: cfg.Replicas, Storage: jetstream.FileStorage, History: 1,
			TTL: cfg.LeaseTTL, LimitMarkerTTL: cfg.LeaseTTL,
			Description: "the lease of gale serve's log spout: one serve process at a time reads the log",
		})
		if errors.Is(err, jetstream.ErrBucketExists) {
			kv, err = l.js.KeyValue(ctx, bucket)
		}
	}
	if err != nil {
		return fmt.Errorf("jslog: bucket %s: %w", bucket, err)
	}
	st, err := kv.Status(ctx)
	if err != nil {
		return fmt.Errorf("jslog: bucket %s: %w", bucket, err)
	}
	if st.TTL() != cfg.LeaseTTL {
		return fmt.Errorf("jslog: bucket %s has a lease TTL of %v, this process asks for %v: every serve process sharing the log must use the same (or delete the bucket while none runs)", bucket, st.TTL(), cfg.LeaseTTL)
	}
	l.lease = &lease{kv: kv, holder: cfg.Holder, ttl: cfg.LeaseTTL, stop: make(chan struct{}), done: make(chan struct{})}
	l.tryLease()
	go l.leaser()
	return nil
}

// leaser keeps the lease, or takes it once it is free, every TTL/3 until Close.
func (l *Log) leaser() {
	ls := l.lease
	defer close(ls.done)
	t := time.NewTicker(ls.ttl / 3)
	defer t.Stop()
	for {
		select {
		case <-ls.stop:
			return
		case <-t.C:
			l.tryLease()
			ctx, cancel := l.op(context.Background())
			if err := l.checkTail(ctx); err != nil {
				l.cfg.Logger.Debug("jslog: looking at the stream's end failed", "err", err)
			} else if l.tailErr() == nil {
				if err := l.writeMark(ctx); err != nil {
					l.cfg.Logger.Warn("jslog: raising the high-water mark failed", "err", err)
				}
			}
			cancel()
		}
	}
}

// tryLease renews the lease if held, else tries to take it.
func (l *Log) tryLease() {
	ls := l.lease
	if ls.paused.Load() {
		return
	}
	ls.mu.Lock()
	rev := ls.rev
	ls.mu.Unlock()
	ctx, cancel := l.op(context.Background())
	defer cancel()
	sent := time.Now()
	if rev != 0 {
		val, _ := json.Marshal(LeaseInfo{Holder: ls.holder, Since: ls.since})
		nrev, err := ls.kv.Update(ctx, leaseKey, val, rev)
		ls.mu.Lock()
		defer ls.mu.Unlock()
		switch {
		case err == nil:
			ls.rev, ls.until = nrev, sent.Add(ls.ttl)
		case isWrongLastSeq(err) || errors.Is(err, jetstream.ErrKeyNotFound):
			l.cfg.Logger.Warn("jslog: the log spout's lease was lost (expired before its renewal); another serve process may hold it",
				"holder", ls.holder, "revision", rev, "err", err)
			ls.rev = 0
		default:
			// Unknown outcome: still held until its TTL runs out, by Holding.
			l.cfg.Logger.Warn("jslog: renewal of the log spout's lease failed", "holder", ls.holder, "err", err)
		}
		return
	}
	since := time.Now()
	val, _ := json.Marshal(LeaseInfo{Holder: ls.holder, Since: since})
	nrev, err := ls.kv.Create(ctx, leaseKey, val)
	if err != nil {
		if !errors.Is(err, jetstream.ErrKeyExists) {
			l.cfg.Logger.Debug("jslog: taking the log spout's lease failed", "err", err)
		}
		return
	}
	comRev, committed, durable, err := l.fence(ctx)
	if err != nil {
		// Not fenced: give the lease back (or let it expire) and try again later.
		l.cfg.Logger.Warn("jslog: took the log spout's lease but could not fence the committed offset; releasing it", "err", err)
		_ = ls.kv.Delete(ctx, leaseKey, jetstream.LastRevision(nrev))
		return
	}
	l.committed.Store(committed)
	l.seen(durable)
	ls.mu.Lock()
	ls.rev, ls.epoch, ls.until, ls.comRev, ls.since = nrev, nrev, sent.Add(ls.ttl), comRev, since
	ls.mu.Unlock()
	l.cfg.Logger.Info("jslog: this process holds the log spout's lease", "holder", ls.holder, "term", nrev,
		"committed", committed, "durable", durable)
}

// fence rewrites the committed offset's key on its revision, so that every later
// offset write of an earlier holder is refused, and returns the new revision, the
// offset, and the stream's end.
func (l *Log) fence(ctx context.Context) (comRev, committed, durable uint64, err error) {
	info, err := l.stream.Info(ctx)
	if err != nil {
		return 0, 0, 0, fmt.Errorf("jslog: stream %s: %w", l.name, err)
	}
	if h := l.hwm.Load(); info.State.LastSeq < h {
		return 0, 0, 0, fmt.Errorf("%w: stream %s ends at seq %d, below the high-water mark %d: not reading it (`gale log salvage --log jetstream`)", ErrLost, l.name, info.State.LastSeq, h)
	}
	for attempt := 0; ; attempt++ {
		e, gerr := l.docs.Get(ctx, committedKey)
		switch {
		case errors.Is(gerr, jetstream.ErrKeyNotFound):
			committed = max(1, info.State.FirstSeq)
			comRev, err = l.docs.Create(ctx, committedKey, []byte(strconv.FormatUint(committed, 10)))
		case gerr != nil:
			return 0, 0, 0, fmt.Errorf("jslog: committed offset: %w", gerr)
		default:
			if committed, err = strconv.ParseUint(string(e.Value()), 10, 64); err != nil {
				return 0, 0, 0, fmt.Errorf("jslog: committed offset %q: %w", e.Value(), err)
			}
			committed = max(committed, 1)
			comRev, err = l.docs.Update(ctx, committedKey, e.Value(), e.Revision())
		}
		if err == nil {
			return comRev, committed, info.State.LastSeq, nil
		}
		// Another holder's last write landed between the read and the rewrite.
		if (!isWrongLastSeq(err) && !errors.Is(err, jetstream.ErrKeyExists)) || attempt == 2 {
			return 0, 0, 0, fmt.Errorf("jslog: fence of the committed offset: %w", err)
		}
	}
}

// writeCommitted moves the committed offset to c on the revision this holder
// wrote last: ErrFenced if a later holder wrote it since, or if this process does
// not hold the lease.
func (l *Log) writeCommitted(ctx context.Context, c uint64) error {
	ls := l.lease
	if ls == nil {
		_, err := l.docs.Put(ctx, committedKey, []byte(strconv.FormatUint(c, 10)))
		return err
	}
	ls.mu.Lock()
	rev, held := ls.comRev, ls.rev != 0
	ls.mu.Unlock()
	if !held || rev == 0 {
		ls.mu.Lock()
		ls.fenced++
		ls.mu.Unlock()
		return fmt.Errorf("%w (this process, %s, does not hold it)", ErrFenced, ls.holder)
	}
	nrev, err := l.docs.Update(ctx, committedKey, []byte(strconv.FormatUint(c, 10)), rev)
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if err != nil {
		if isWrongLastSeq(err) {
			ls.fenced++
			ls.rev = 0 // a later term began: stop reading now, not at the TTL
			return fmt.Errorf("%w (%s's write of offset %d on revision %d refused)", ErrFenced, ls.holder, c, rev)
		}
		return err
	}
	if ls.comRev == rev {
		ls.comRev = nrev
	}
	return nil
}

// closeLease stops the loop and gives the lease back if held.
func (l *Log) closeLease() {
	ls := l.lease
	if ls == nil {
		return
	}
	close(ls.stop)
	<-ls.done
	ls.mu.Lock()
	rev := ls.rev
	ls.rev = 0
	ls.mu.Unlock()
	if rev != 0 {
		ctx, cancel := l.op(context.Background())
		defer cancel()
		if err := ls.kv.Delete(ctx, leaseKey, jetstream.LastRevision(rev)); err != nil {
			l.cfg.Logger.Warn("jslog: giving back the log spout's lease failed; it expires on its own", "err", err, "ttl", ls.ttl)
		}
	}
}

// isWrongLastSeq reports whether err is JetStream's refusal of a conditional write
// (code 10071, or 10164 on a replicated stream).
func isWrongLastSeq(err error) bool {
	var apiErr *jetstream.APIError
	if !errors.As(err, &apiErr) {
		return false
	}
	return apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence ||
		apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant
}

// LeaseTTL is the lease's TTL (Config.LeaseTTL); 0 with NoLease.
func (l *Log) LeaseTTL() time.Duration {
	if l.lease == nil {
		return 0
	}
	return l.lease.ttl
}
