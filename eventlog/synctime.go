package eventlog

import (
	"encoding/binary"
	"fmt"
	"slices"
	"sort"
	"sync"

	"github.com/cockroachdb/pebble/v2"
)

// When a record became durable: the time its group commit's fsync returned, kept
// once per group (not per record) under syncPrefix and the group's last seq, with
// the group's first seq and the time. A record's time is that of the first entry
// at or after its seq, if that entry's group holds it.
//
// The time is known only once the fsync has returned, after the group's batch
// was written, so it is written with the next write to the log: the next group's
// batch, a status flush (Apply), or Close. A kill -9 before any of those loses the
// newest group's time: its records then have none (PersistedAt says so), never a
// wrong one. So do records written before gale kept these times, and those whose
// entry was in a damaged block. Trim drops the entries of the groups it emptied.

// syncPrefix keys the sync-time entries: 'p', the group's last seq (8 bytes BE)
// → its first seq (8 bytes BE), its sync time (Unix ns, 8 bytes BE).
const syncPrefix = 'p'

func syncKey(last uint64) []byte {
	return binary.BigEndian.AppendUint64([]byte{syncPrefix}, last)
}

func encodeSyncTime(dst []byte, g groupTime) []byte {
	dst = binary.BigEndian.AppendUint64(dst, g.first)
	return binary.BigEndian.AppendUint64(dst, uint64(g.at))
}

func decodeSyncTime(k, v []byte) (groupTime, error) {
	if len(k) != 9 || len(v) != 16 {
		return groupTime{}, fmt.Errorf("sync-time entry of %d+%d bytes, want 9+16", len(k), len(v))
	}
	g := groupTime{first: binary.BigEndian.Uint64(v), last: binary.BigEndian.Uint64(k[1:]), at: int64(binary.BigEndian.Uint64(v[8:]))}
	if g.first > g.last || g.first == 0 {
		return groupTime{}, fmt.Errorf("sync-time entry of seqs %d..%d", g.first, g.last)
	}
	return g, nil
}

// groupTime is one group commit's seqs and the time its fsync returned.
type groupTime struct {
	first, last uint64
	at          int64 // Unix ns
}

// recentSyncTimes is how many groups' times the log keeps in memory, so the
// records the log spout reads just after their sync are answered without a read.
const recentSyncTimes = 1024

// syncTimes holds the newest groups' times, and those not written yet.
type syncTimes struct {
	mu      sync.Mutex
	recent  []groupTime // by seq, at most recentSyncTimes
	pending []groupTime // synced, not written to the store yet
}

// synced records a group whose fsync returned at at (the syncer).
func (s *syncTimes) synced(g groupTime) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.recent) == recentSyncTimes {
		s.recent = append(s.recent[:0], s.recent[recentSyncTimes/2:]...)
	}
	s.recent = append(s.recent, g)
	s.pending = append(s.pending, g)
}

// write puts the pending times into b, and takes them off the pending list:
// the caller commits b (a failed commit fails the log).
func (s *syncTimes) write(b *pebble.Batch) {
	s.mu.Lock()
	pending := s.pending
	s.pending = nil
	s.mu.Unlock()
	var v []byte
	for _, g := range pending {
		v = encodeSyncTime(v[:0], g)
		_ = b.Set(syncKey(g.last), v, nil)
	}
}

func (s *syncTimes) hasPending() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.pending) > 0
}

// lookup finds seq's group among the recent ones.
func (s *syncTimes) lookup(seq uint64) (int64, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	i := sort.Search(len(s.recent), func(i int) bool { return s.recent[i].last >= seq })
	if i < len(s.recent) && s.recent[i].first <= seq {
		return s.recent[i].at, true
	}
	return 0, false
}

// PersistedAt is when the record at seq became durable: the time (Unix ns) the
// fsync of its group commit returned. ok is false when that is not known: seq is
// not durable, the log was written before gale kept these times, a kill -9 came
// before the group's time was written (see syncPrefix), or its entry was trimmed
// or damaged. err is a read error (a corruption is noted as damage, as elsewhere).
func (l *Log) PersistedAt(seq uint64) (at int64, ok bool, err error) {
	if seq == 0 || seq > l.durable.Load() {
		return 0, false, nil
	}
	if at, ok := l.times.lookup(seq); ok {
		return at, true, nil
	}
	op := fmt.Sprintf("read of the sync time of seq %d", seq)
	it, err := l.db.NewIter(&pebble.IterOptions{LowerBound: syncKey(seq), UpperBound: []byte{syncPrefix + 1}})
	if err != nil {
		return 0, false, l.readErr(op, err)
	}
	defer it.Close()
	if !it.First() {
		return 0, false, l.readErr(op, it.Error())
	}
	g, derr := decodeSyncTime(it.Key(), it.Value())
	if derr != nil || g.first > seq {
		// Malformed (no time rather than a wrong one), or the group holding seq
		// has no entry (an older log, a lost write): the entry found is a later
		// group's.
		return 0, false, nil
	}
	return g.at, true, nil
}

// pruneSyncTimes deletes, in b, the sync-time entries of groups wholly below
// stop, except those holding a seq of keep (records Trim left, sorted).
func (l *Log) pruneSyncTimes(b *pebble.Batch, stop uint64, keep []uint64) error {
	it, err := l.db.NewIter(&pebble.IterOptions{LowerBound: []byte{syncPrefix}, UpperBound: syncKey(stop)})
	if err != nil {
		return l.readErr("trim of sync times", err)
	}
	for ok := it.First(); ok; ok = it.Next() {
		g, derr := decodeSyncTime(it.Key(), it.Value())
		if derr == nil {
			i, _ := slices.BinarySearch(keep, g.first)
			if i < len(keep) && keep[i] <= g.last {
				continue // a kept record's
			}
		}
		_ = b.Delete(it.Key(), nil)
	}
	if err := it.Close(); err != nil {
		return l.readErr("trim of sync times", err)
	}
	return nil
}
