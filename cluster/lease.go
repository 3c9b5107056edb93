package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Lease is the scheduler's lease: the value of key "scheduler" in the lease
// bucket, created by the scheduler that takes it (Create fails while it exists),
// renewed by it every LeaseTTL/3 with an Update on its revision, and gone LeaseTTL
// after the last renewal (the bucket's TTL), so that another takes over.
type Lease struct {
	// Holder names the scheduler (its worker's name); Incarnation tells its runs
	// apart.
	Holder      string    `json:"holder"`
	Incarnation string    `json:"incarnation"`
	Since       time.Time `json:"since"` // when it took the lease (its clock)
	// Revision is the lease's KV revision (each renewal makes a new one); Renewed
	// when the server stored it. Filled when read.
	Revision uint64    `json:"-"`
	Renewed  time.Time `json:"-"`
}

// ErrNoLease: no scheduler holds the lease.
var ErrNoLease = errors.New("cluster: no scheduler holds the lease")

// Lease returns the scheduler's lease (ErrNoLease if none holds it).
func (s *Store) Lease(ctx context.Context) (*Lease, error) {
	ctx, cancel := s.op(ctx)
	defer cancel()
	e, err := s.lease.Get(ctx, leaseKey)
	if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
		return nil, ErrNoLease
	}
	if err != nil {
		return nil, err
	}
	return decodeLease(e)
}

func decodeLease(e jetstream.KeyValueEntry) (*Lease, error) {
	var l Lease
	if err := json.Unmarshal(e.Value(), &l); err != nil {
		return nil, fmt.Errorf("cluster: lease: %w", err)
	}
	l.Revision, l.Renewed = e.Revision(), e.Created()
	return &l, nil
}

// acquire creates the lease; jetstream.ErrKeyExists if another holds it.
func (s *Store) acquire(ctx context.Context, l *Lease) (uint64, error) {
	val, err := json.Marshal(l)
	if err != nil {
		return 0, err
	}
	ctx, cancel := s.op(ctx)
	defer cancel()
	return s.lease.Create(ctx, leaseKey, val)
}

// renew rewrites the lease on its revision rev (resetting its TTL);
// jetstream.ErrKeyRevisionMismatch if it expired or another holds it.
func (s *Store) renew(ctx context.Context, l *Lease, rev uint64) (uint64, error) {
	val, err := json.Marshal(l)
	if err != nil {
		return 0, err
	}
	ctx, cancel := s.op(ctx)
	defer cancel()
	return s.lease.Update(ctx, leaseKey, val, rev)
}

// release deletes the lease if it is still revision rev, so that another scheduler
// takes over at once.
func (s *Store) release(rev uint64) error {
	ctx, cancel := s.op(context.Background())
	defer cancel()
	return s.lease.Delete(ctx, leaseKey, jetstream.LastRevision(rev))
}

// fenceValue is the value of key "_fence" in the assignments bucket: the term of
// the scheduler that wrote it last.
type fenceValue struct {
	Epoch       uint64    `json:"epoch"` // the lease revision the term started with
	Holder      string    `json:"holder"`
	Incarnation string    `json:"incarnation"`
	Since       time.Time `json:"since"`
	Revision    uint64    `json:"-"`
}

// ErrFenced: a scheduler's write was refused because another scheduler started a
// term after it (its lease had expired).
var ErrFenced = errors.New("cluster: fenced off: another scheduler holds the lease")

// ErrConflict: a scheduler's write was refused because the key changed since it
// read it, though no other term began (a stale read).
var ErrConflict = errors.New("cluster: conflict: the record changed since read")

// term is a scheduler's hold on the assignments bucket: every write it makes is
// conditional on the bucket's last sequence being pos (nothing written since its
// own last write, the fence included) and on the key's revision.
type term struct {
	epoch  uint64 // the lease revision the term started with
	pos    uint64 // the assignments stream's last sequence, as of the term's last write
	holder string
}

// fence starts a term for the holder of lease revision epoch: it writes the fence
// key, on its revision, unless a term of this epoch or a later one was written
// already. Every later write of an earlier term fails, since the bucket moved.
func (s *Store) fence(ctx context.Context, l *Lease, epoch uint64) (*term, error) {
	for attempt := 0; ; attempt++ {
		ctx, cancel := s.op(ctx)
		e, err := s.assignments.Get(ctx, fenceKey)
		var rev uint64
		switch {
		case err == nil:
			var f fenceValue
			if err := json.Unmarshal(e.Value(), &f); err != nil {
				cancel()
				return nil, fmt.Errorf("cluster: fence: %w", err)
			}
			if f.Epoch >= epoch {
				cancel()
				return nil, fmt.Errorf("%w: %s started a term at lease revision %d, this one has %d", ErrFenced, f.Holder, f.Epoch, epoch)
			}
			rev = e.Revision()
		case errors.Is(err, jetstream.ErrKeyNotFound):
		default:
			cancel()
			return nil, err
		}
		val, err := json.Marshal(fenceValue{Epoch: epoch, Holder: l.Holder, Incarnation: l.Incarnation, Since: l.Since})
		if err != nil {
			cancel()
			return nil, err
		}
		ack, err := s.js.PublishMsg(ctx, &nats.Msg{Subject: s.subject(fenceKey), Data: val},
			jetstream.WithExpectLastSequencePerSubject(rev))
		cancel()
		if err == nil {
			return &term{epoch: epoch, pos: ack.Sequence, holder: l.Holder}, nil
		}
		// A stale read (a replica behind) or a race with another term: read again.
		if !isWrongLastSeq(err) || attempt == 2 {
			return nil, fmt.Errorf("cluster: fence: %w", err)
		}
	}
}

// subject is the assignments bucket's subject for key.
func (s *Store) subject(key string) string {
	return "$KV." + s.assignments.Bucket() + "." + key
}

// write puts key in the assignments bucket if the bucket is still where the term
// left it and the key is still at revision rev (0: absent).
// A refusal is classified: ErrFenced if another term began, else ErrConflict. It
// returns the new revision.
func (s *Store) write(ctx context.Context, t *term, key string, val []byte, rev uint64) (uint64, error) {
	ctx, cancel := s.op(ctx)
	defer cancel()
	m := &nats.Msg{Subject: s.subject(key), Data: val}
	ack, err := s.js.PublishMsg(ctx, m,
		jetstream.WithExpectLastSequence(t.pos),
		jetstream.WithExpectLastSequencePerSubject(rev))
	if err == nil {
		t.pos = ack.Sequence
		return ack.Sequence, nil
	}
	if !isWrongLastSeq(err) {
		return 0, err // unknown outcome: the caller ends the term
	}
	if e, gerr := s.assignments.Get(ctx, fenceKey); gerr == nil {
		var f fenceValue
		if json.Unmarshal(e.Value(), &f) == nil && f.Epoch != t.epoch {
			return 0, fmt.Errorf("%w: %s started a term at lease revision %d, after this one's %d (%s)", ErrFenced, f.Holder, f.Epoch, t.epoch, err)
		}
	}
	return 0, fmt.Errorf("%w: %s (%s)", ErrConflict, key, err)
}
