package eventlog

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// blockOnlyOf is a data block of the d..l SST other than its first and last that
// holds only keys of kind among those buildSSTStore wrote, with the seqs whose
// records (kind 'l') or dedupe entries (kind 'd') it holds.
func blockOnlyOf(t *testing.T, fs vfs.FS, sst string, kind byte) (int, []uint64) {
	t.Helper()
	seps, err := blockSeparators(fs, sst)
	if err != nil {
		t.Fatal(err)
	}
	blockOf := func(k []byte) int {
		for i, s := range seps {
			if bytes.Compare(k, s) <= 0 {
				return i
			}
		}
		return len(seps)
	}
	for i := 1; i < len(seps)-1; i++ {
		var seqs []uint64
		only := true
		for j, id := range sstIDs() {
			seq := uint64(j + 1)
			for _, k := range [][]byte{nsKey('d', id), logKey(seq)} {
				if blockOf(k) == i {
					only = only && k[0] == kind
					seqs = append(seqs, seq)
				}
			}
		}
		if only && len(seqs) > 0 {
			return i, seqs
		}
	}
	t.Fatalf("no middle block of %c keys only among %d blocks of %s", kind, len(seps), sst)
	return 0, nil
}

// setCommitted moves the committed offset of the log in dir to seq, as the ingest
// service does once the events below it are finished.
func setCommitted(t *testing.T, fs vfs.FS, dir string, seq uint64) {
	t.Helper()
	l, err := Open(Options{Dir: dir, FS: fs})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Apply(&Write{Committed: seq}); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
}

// A bad block holding only dedupe entries: every record is intact, so a salvage
// rebuilds the entries from the records (seq, receipt, generation, payload hash)
// and each id still answers a lookup with the hash a resend is compared with.
// Before, the salvage copied what it could read, said nothing acknowledged was
// lost, and the ids of that block were unknown: a GET answered 404 and a resend
// with another payload was taken as a new event (finding C of the review).
func TestSalvageRebuildsDedupeEntriesLostInABadBlock(t *testing.T) {
	fs := vfs.NewMem()
	sst, _ := buildSSTStore(t, fs, "data")
	victim, seqs := blockOnlyOf(t, fs, sst, 'd')
	flipDataBlockBit(t, fs, sst, victim)

	rep, err := Check("data", fs)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range rep.BadKeys {
		t.Logf("check: DAMAGED %s", k)
	}
	if !rep.Damaged() || len(rep.BadKeys) != 1 {
		t.Fatalf("check: damaged %v, bad keys %v; want the one bad block", rep.Damaged(), rep.BadKeys)
	}
	// Named by what the block holds: ids, not raw keys.
	if want := fmt.Sprintf("dedupe entries of ids after %q..%q", sstIDs()[seqs[0]-2], sstIDs()[seqs[len(seqs)-1]-1]); !strings.Contains(rep.BadKeys[0].String(), want) {
		t.Fatalf("check names the bad block %q; want it to say %s", rep.BadKeys[0].String(), want)
	}
	wantUnindexed := [][2]uint64{{seqs[0], seqs[len(seqs)-1]}}
	if fmt.Sprint(rep.Unindexed) != fmt.Sprint(wantUnindexed) {
		t.Fatalf("check: records without a dedupe entry %v, want %v", rep.Unindexed, wantUnindexed)
	}

	srep, err := Salvage("data", fs, time.Unix(1700000000, 0))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("salvage: %d keys, %d entries rebuilt, lost %+v", srep.Keys, srep.Reindexed, srep.Lost)
	if len(srep.Lost) != 0 || srep.Reindexed != len(seqs) {
		t.Fatalf("salvage lost %+v and rebuilt %d entries; want nothing lost and %d rebuilt", srep.Lost, srep.Reindexed, len(seqs))
	}
	after, err := Check("data", fs)
	if err != nil {
		t.Fatal(err)
	}
	if after.Damaged() || len(after.Unindexed) != 0 {
		t.Fatalf("check after the salvage: damaged %v, bad %v, unindexed %v", after.Damaged(), after.BadKeys, after.Unindexed)
	}
	l := openT(t, fs)
	defer l.Close()
	for i, id := range sstIDs() {
		e, ok, err := l.Lookup(id)
		want := rec(id)
		if err != nil || !ok || e.Seq != uint64(i+1) || e.Hash != want.Hash || e.ReceivedAt != want.ReceivedAt {
			t.Fatalf("Lookup(%q) after the salvage = %+v, %v, %v; want seq %d hash %v", id, e, ok, err, i+1, want.Hash)
		}
	}
}

// A bad block holding only records below the committed offset: those records are
// lost, and the check names them MISSING, the salvage records them lost with the
// ids their (intact) dedupe entries give, and the next check lists them as lost.
// Before, only seqs from the committed offset on were compared, so both said
// nothing acknowledged was lost (finding D of the review).
func TestSalvageRecordsRecordsLostBelowTheCommittedOffset(t *testing.T) {
	fs := vfs.NewMem()
	sst, _ := buildSSTStore(t, fs, "data")
	setCommitted(t, fs, "data", sstEvents+1)
	victim, seqs := blockOnlyOf(t, fs, sst, 'l')
	flipDataBlockBit(t, fs, sst, victim)
	lost := [2]uint64{seqs[0], seqs[len(seqs)-1]}

	rep, err := Check("data", fs)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range rep.BadKeys {
		t.Logf("check: DAMAGED %s", k)
	}
	t.Logf("check: committed %d, %d records, missing %v", rep.Committed, rep.Records, rep.Missing)
	if want := fmt.Sprintf("records seq %d..%d", lost[0], lost[1]); len(rep.BadKeys) != 1 || !strings.Contains(rep.BadKeys[0].String(), want) {
		t.Fatalf("check: bad keys %v; want one naming %s", rep.BadKeys, want)
	}
	if fmt.Sprint(rep.Missing) != fmt.Sprint([][2]uint64{lost}) {
		t.Fatalf("check: missing %v, want %v", rep.Missing, [][2]uint64{lost})
	}

	srep, err := Salvage("data", fs, time.Unix(1700000000, 0))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("salvage: lost %+v", srep.Lost)
	var wantIDs []string
	for s := lost[0]; s <= lost[1]; s++ {
		wantIDs = append(wantIDs, sstIDs()[s-1])
	}
	if len(srep.Lost) != 1 || srep.Lost[0].From != lost[0] || srep.Lost[0].To != lost[1] ||
		strings.Join(srep.Lost[0].IDs, ",") != strings.Join(wantIDs, ",") {
		t.Fatalf("salvage recorded lost %+v; want seqs %d..%d with ids %v", srep.Lost, lost[0], lost[1], wantIDs)
	}
	after, err := Check("data", fs)
	if err != nil {
		t.Fatal(err)
	}
	if after.Damaged() || len(after.Lost) != 1 || after.Lost[0].From != lost[0] {
		t.Fatalf("check after the salvage: damaged %v, missing %v, lost %+v", after.Damaged(), after.Missing, after.Lost)
	}
	l := openT(t, fs)
	defer l.Close()
	if got := l.Lost(); len(got) != 1 || got[0].From != lost[0] || got[0].To != lost[1] {
		t.Fatalf("the salvaged log lists lost %+v", got)
	}
	// Each id with its seq (a GET of the id answers 410 with it).
	for s := lost[0]; s <= lost[1]; s++ {
		if seq, named := l.Lost()[0].SeqOf(sstIDs()[s-1]); !named || seq != s {
			t.Fatalf("lost range names %s at seq %d (%v), want %d", sstIDs()[s-1], seq, named, s)
		}
	}
	if seq, named := l.Lost()[0].SeqOf("not-lost"); named || seq != 0 {
		t.Fatalf("lost range names not-lost at seq %d", seq)
	}
	for _, id := range wantIDs {
		// Gone with its record: a resend of the id is a new event.
		if _, ok, err := l.Lookup(id); ok || err != nil {
			t.Fatalf("Lookup(%q) of a lost event = %v, %v", id, ok, err)
		}
	}
}

// Records that Trim removed (below the committed offset, past the dedupe window)
// are not lost: the check of a trimmed log, which now compares the records below
// the committed offset too, is intact and a salvage records nothing.
func TestTrimmedRecordsAreNotLost(t *testing.T) {
	fs := vfs.NewMem()
	buildSSTStore(t, fs, "data")
	setCommitted(t, fs, "data", 101)
	l := openT(t, fs)
	if n, err := l.Trim(2); err != nil || n != 100 { // rec() stamps every receipt 1
		t.Fatalf("Trim = %d, %v; want 100", n, err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	setCommitted(t, fs, "data", sstEvents+1)
	rep, err := Check("data", fs)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Damaged() || rep.First != 101 {
		t.Fatalf("check of a trimmed log: damaged %v (missing %v, bad %v, unindexed %v), first %d", rep.Damaged(), rep.Missing, rep.BadKeys, rep.Unindexed, rep.First)
	}
	srep, err := Salvage("data", fs, time.Unix(1700000000, 0))
	if err != nil || len(srep.Lost) != 0 || srep.Reindexed != 0 {
		t.Fatalf("salvage of a trimmed log: %+v, %v; want nothing lost or rebuilt", srep, err)
	}
}
