package eventlog

import (
	"context"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/gale-stream/gale/event"
)

// syncTimeKeys counts the log's sync-time entries.
func syncTimeKeys(t *testing.T, l *Log) int {
	t.Helper()
	it, err := l.db.NewIter(&pebble.IterOptions{LowerBound: []byte{syncPrefix}, UpperBound: []byte{syncPrefix + 1}})
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	n := 0
	for ok := it.First(); ok; ok = it.Next() {
		n++
	}
	return n
}

// The time a record became durable is kept, one entry per group commit: after
// its receipt and no later than its answer, the same for every record of a
// group, and the same after a restart. A group's time is written with the next
// write to the log (or at Close), so a kill -9 loses the newest group's: its
// records then have no time (0), never a wrong one.
func TestSyncTimeKeptPerGroupCommit(t *testing.T) {
	fs := vfs.NewCrashableMem()
	l := openT(t, fs)
	type window struct{ received, answered int64 }
	windows := map[string]window{}
	appendGroup := func(ids ...string) {
		now := time.Now().UnixNano()
		var recs []*event.Record
		for _, id := range ids {
			r := rec(id)
			r.ReceivedAt = now
			recs = append(recs, r)
		}
		if err := l.Append(context.Background(), recs...); err != nil {
			t.Fatal(err)
		}
		done := time.Now().UnixNano()
		for _, id := range ids {
			windows[id] = window{now, done}
		}
	}
	appendGroup("a")
	appendGroup("b")
	appendGroup("c1", "c2", "c3") // one group commit

	lookup := func(l *Log, id string) Entry {
		t.Helper()
		e, ok, err := l.Lookup(id)
		if err != nil || !ok {
			t.Fatalf("Lookup(%q) = %v, %v", id, ok, err)
		}
		return e
	}
	at := map[string]int64{}
	for id, w := range windows {
		e := lookup(l, id)
		if e.PersistedAt <= w.received || e.PersistedAt > w.answered {
			t.Fatalf("%s: persisted at %d, want after its receipt %d and no later than its answer %d", id, e.PersistedAt, w.received, w.answered)
		}
		if got, ok, err := l.PersistedAt(e.Seq); err != nil || !ok || got != e.PersistedAt {
			t.Fatalf("PersistedAt(%d) = %d, %v, %v; Lookup said %d", e.Seq, got, ok, err, e.PersistedAt)
		}
		at[id] = e.PersistedAt
	}
	if at["c1"] != at["c2"] || at["c2"] != at["c3"] || at["b"] == at["c1"] || at["a"] == at["b"] {
		t.Fatalf("sync times %v: want one per group commit", at)
	}

	crashed := fs.CrashClone(vfs.CrashCloneCfg{}) // kill -9: only synced bytes count
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}

	l2 := openT(t, crashed)
	for _, id := range []string{"a", "b"} {
		if e := lookup(l2, id); e.PersistedAt != at[id] {
			t.Errorf("after kill -9: %s persisted at %d, was %d", id, e.PersistedAt, at[id])
		}
	}
	for _, id := range []string{"c1", "c2", "c3"} {
		if e := lookup(l2, id); e.PersistedAt != 0 {
			t.Errorf("after kill -9: %s persisted at %d; its group's time was written nowhere durable, want 0 (unknown)", id, e.PersistedAt)
		}
	}
	if n := syncTimeKeys(t, l2); n != 2 {
		t.Errorf("after kill -9: %d sync-time entries, want 2 (groups a and b)", n)
	}
	_ = l2.Close()

	l3 := openT(t, fs) // after the clean Close
	defer l3.Close()
	for id := range windows {
		if e := lookup(l3, id); e.PersistedAt != at[id] {
			t.Errorf("after Close: %s persisted at %d, was %d", id, e.PersistedAt, at[id])
		}
	}
	if n := syncTimeKeys(t, l3); n != 3 {
		t.Errorf("%d sync-time entries for 3 group commits of 5 records, want 3", n)
	}
}

// Trim drops the sync times of the groups whose records it removed, and keeps
// those of groups still holding a record (a dead letter, a young event).
func TestTrimDropsSyncTimes(t *testing.T) {
	l := openT(t, vfs.NewMem())
	defer l.Close()
	var seqs []uint64
	for _, id := range []string{"done-1", "dead", "done-2", "young"} {
		r := rec(id) // received at 1 (long ago)
		if id == "young" {
			r.ReceivedAt = time.Now().UnixNano()
		}
		if err := l.Append(context.Background(), r); err != nil {
			t.Fatal(err)
		}
		seqs = append(seqs, r.Seq)
	}
	var w Write
	w.Committed = seqs[3] + 1 // all four finished
	w.Set(DeadLetter, "dead", []byte(`{}`))
	if err := l.Apply(&w); err != nil {
		t.Fatal(err)
	}
	if n := syncTimeKeys(t, l); n != 4 {
		t.Fatalf("%d sync-time entries before the trim, want 4", n)
	}
	n, err := l.Trim(time.Now().Add(-time.Hour).UnixNano())
	if err != nil || n != 2 {
		t.Fatalf("Trim = %d, %v; want the two finished old records", n, err)
	}
	if n := syncTimeKeys(t, l); n != 2 {
		t.Fatalf("%d sync-time entries after the trim, want 2 (the dead letter's and the young event's)", n)
	}
	for _, s := range []uint64{seqs[1], seqs[3]} {
		if _, ok, err := l.PersistedAt(s); !ok || err != nil {
			t.Fatalf("PersistedAt(%d) after the trim = %v, %v; its record is kept", s, ok, err)
		}
	}
}

// Close writes the sync times no later write carried in a batch of their own, at
// the WAL's end. Such a batch after a WAL damage does not keep the mark file's
// replicas from standing in for the damage: nothing in it needs restoring (its
// groups' records then have no time).
func TestRestorableAfterSkipsSyncTimes(t *testing.T) {
	fs := vfs.NewMem()
	l := openT(t, fs)
	for _, id := range []string{"a", "b"} {
		if err := l.Append(context.Background(), rec(id)); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	wals, err := scanWALs(fs, "data")
	if err != nil {
		t.Fatal(err)
	}
	var batches []walBatch
	for _, w := range wals {
		batches = append(batches, w.Batches...)
	}
	if n := len(batches); n < 2 || !batches[n-1].syncOnly || batches[n-2].syncOnly || batches[n-2].max != 2 {
		t.Fatalf("WAL batches %+v: want b's group, then Close's batch of sync times only", batches)
	}
	replicas := []sideSlot{{first: 1, last: 1}, {first: 2, last: 2}}
	after := batches[len(batches)-2:]
	if top := restorableAfter(0, replicas, after); top != 2 {
		t.Fatalf("restorableAfter = %d, want 2 (the replicas restore both groups; the sync times may go)", top)
	}
	after[1].syncOnly = false // as a status flush: documents no replica holds
	if top := restorableAfter(0, replicas, after); top != 0 {
		t.Fatalf("restorableAfter with a document batch after the damage = %d, want 0", top)
	}
}
