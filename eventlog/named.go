package eventlog

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/cockroachdb/pebble/v2"
)

// The seqs a damaged log may have answered are more than the mark claims: the
// newest answered group is covered by no floor, only by its own replica, and a
// WAL batch after a damage may be the only copy of an answered group. So every
// seq an intact replica or an intact WAL batch names counts (named): the next
// seq is above them all, since a seq given out twice is worse than a gap, and
// what of them has no record is reported and recorded lost with the ids known,
// never dropped silently. A group that was possibly never answered is on the
// safe side so: its client resends, and the resend is a new event.

// namedTop is the highest record seq an intact replica or one of the batches names.
func namedTop(replicas []sideSlot, batches []walBatch) uint64 {
	var top uint64
	for _, s := range replicas {
		top = max(top, s.last)
	}
	for _, b := range batches {
		top = max(top, b.max)
	}
	return top
}

// namedIDs adds to ids the event id of every record seq in from..to that one of
// the batches (replicas' or the WAL's) names through its dedupe entries, with
// that seq.
func namedIDs(ids map[string]uint64, from, to uint64, reprs ...[]byte) {
	for _, repr := range reprs {
		_ = eachSet(repr, func(k, v []byte) error {
			if len(k) > 1 && k[0] == 'd' {
				if e, err := decodeEntry(v); err == nil && from <= e.Seq && e.Seq <= to {
					ids[string(k[1:])] = max(ids[string(k[1:])], e.Seq)
				}
			}
			return nil
		})
	}
}

// eachSet calls fn for each Set in a Pebble batch's repr.
func eachSet(repr []byte, fn func(k, v []byte) error) error {
	var b pebble.Batch
	if err := b.SetRepr(repr); err != nil {
		return err
	}
	r := b.Reader()
	for {
		kind, k, v, ok, err := r.Next()
		if err != nil {
			return err
		}
		if !ok {
			return nil
		}
		if kind == pebble.InternalKeyKindSet {
			if err := fn(k, v); err != nil {
				return err
			}
		}
	}
}

// applyReplica writes a replica's records and dedupe entries into db where they
// add something: a record only where its seq has none, a dedupe entry only
// where the id has none or one of an older seq (a replica can be older than a
// WAL batch applied before it, and must not take an id back to an older
// generation). It returns how many keys it wrote.
func applyReplica(db *pebble.DB, repr []byte) (int, error) {
	b := db.NewBatch()
	defer b.Close()
	n := 0
	err := eachSet(repr, func(k, v []byte) error {
		cur, c, err := db.Get(k)
		switch {
		case errors.Is(err, pebble.ErrNotFound):
		case err != nil:
			return err
		default:
			keep := true
			if k[0] == 'd' {
				old, oerr := decodeEntry(cur)
				e, nerr := decodeEntry(v)
				keep = oerr == nil && (nerr != nil || old.Seq >= e.Seq)
			}
			c.Close()
			if keep {
				return nil
			}
		}
		n++
		return b.Set(k, v, nil)
	})
	if err != nil {
		return 0, fmt.Errorf("replica: %w", err)
	}
	if n == 0 {
		return 0, nil
	}
	return n, b.Commit(pebble.NoSync)
}

// recordNamedLost records, in the log being opened, the seqs from..to that an
// intact replica or a WAL batch Pebble dropped names but no record holds: they
// are past the mark, so possibly never answered, yet never given out again.
func (l *Log) recordNamedLost(from, to uint64, replicas []sideSlot, after []walBatch, reason string, at int64) error {
	ids := map[string]uint64{}
	for _, s := range replicas {
		namedIDs(ids, from, to, s.repr)
	}
	for _, b := range after {
		namedIDs(ids, from, to, b.repr)
	}
	r := LostRange{From: from, To: to, Reason: reason, At: at}
	r.setIDs(ids)
	b := l.db.NewBatch()
	defer b.Close()
	doc, err := json.Marshal(r)
	if err != nil {
		return err
	}
	_ = b.Set(lostKey(from), doc, nil)
	if err := b.Commit(pebble.Sync); err != nil {
		return fmt.Errorf("eventlog: record lost seqs %d..%d: %w", from, to, err)
	}
	l.lost = append(l.lost, r)
	slices.SortFunc(l.lost, func(a, b LostRange) int { return cmp.Compare(a.From, b.From) })
	return nil
}

// namedNote says, for a refusal, which seqs past the log's end (last) the
// replicas hold (a salvage keeps them) and how far the named seqs go past the mark.
func namedNote(mark, last uint64, replicas []sideSlot, after []walBatch) string {
	var held [][2]uint64
	for _, s := range replicas { // by first seq
		if s.first <= last {
			continue
		}
		if n := len(held); n > 0 && held[n-1][1]+1 == s.first {
			held[n-1][1] = s.last
		} else {
			held = append(held, [2]uint64{s.first, s.last})
		}
	}
	out := ""
	if top := namedTop(replicas, after); top > mark {
		out = fmt.Sprintf("; seqs up to %d named by the newest groups' replicas or WAL batches", top)
	}
	for _, h := range held {
		out += fmt.Sprintf("; seqs %d..%d held by replicas in %s, which gale log salvage keeps", h[0], h[1], hwmFile)
	}
	return out
}
