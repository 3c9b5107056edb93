package eventlog

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/gale-stream/gale/event"
)

// Damage in a WAL older than the newest: Pebble replays every live WAL but the
// newest strictly (a closed WAL must end cleanly), so the view Check and Salvage
// open must end such a WAL at a batch boundary and leave the later WALs to the
// scan; a view ending inside a batch made Pebble refuse even the intact part
// ("pebble/record: unexpected EOF"), and Salvage could not run at all.

// recSized is a record whose payload is about n bytes.
func recSized(id string, n int) *event.Record {
	e := event.Event{ID: id, Source: "test", Type: "t", Payload: []byte(`{"pad":"` + strings.Repeat("x", n) + `"}`)}
	return &event.Record{ReceivedAt: 1, Event: e, Hash: e.Hash()}
}

// multiWALLog writes, in memory, groups of perGroup records of about 1 KiB (one
// Append each: one group commit, one WAL batch), each followed by a batch with
// its events' status documents (PROCESSED) and the committed offset past them,
// as the ingest service writes them, until the records span at least minWALs
// live WAL files (Pebble's memtable starts at 256 KiB and doubles; each full one
// starts a new WAL and nothing is flushed yet). It closes the log cleanly and
// returns the acknowledged seq of each id.
func multiWALLog(t *testing.T, fs vfs.FS, perGroup, minWALs int) map[string]uint64 {
	t.Helper()
	l := openT(t, fs)
	acked := map[string]uint64{}
	for g := 0; ; g++ {
		recs := make([]*event.Record, perGroup)
		for i := range recs {
			recs[i] = recSized(fmt.Sprintf("g%d-%d", g, i), 1000)
		}
		if err := l.Append(context.Background(), recs...); err != nil {
			t.Fatal(err)
		}
		var w Write
		for _, r := range recs {
			acked[r.Event.ID] = r.Seq
			w.Set(Status, r.Event.ID, []byte(fmt.Sprintf(`{"event_id":%q,"status":"PROCESSED","seq":%d}`, r.Event.ID, r.Seq)))
		}
		w.Committed = recs[len(recs)-1].Seq + 1
		if err := l.Apply(&w); err != nil {
			t.Fatal(err)
		}
		if g%8 == 7 {
			if n := len(walsWithRecords(t, fs)); n >= minWALs {
				break
			}
		}
		if g > 400 {
			t.Fatal("no WAL rotation after 400 groups")
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return acked
}

// walsWithRecords are the scanned WAL files of "data" that hold records, oldest first.
func walsWithRecords(t *testing.T, fs vfs.FS) []WALFile {
	t.Helper()
	ws, err := scanWALs(fs, "data")
	if err != nil {
		t.Fatal(err)
	}
	var out []WALFile
	for _, w := range ws {
		for _, b := range w.Batches {
			if b.min != 0 {
				out = append(out, w)
				break
			}
		}
	}
	return out
}

// overwrite4 overwrites 4 bytes of the file at off (as the user's report did).
func overwrite4(t *testing.T, fs vfs.FS, path string, off int64) {
	t.Helper()
	rewriteFile(t, fs, path, func(b []byte) {
		if off < 0 || off+4 > int64(len(b)) {
			t.Fatalf("offset %d outside %s (%d bytes)", off, path, len(b))
		}
		copy(b[off:], []byte{0xde, 0xad, 0xbe, 0xef})
	})
}

// Several WALs, one group's batch damaged in an older one (the oldest, or the
// second newest as in the user's report), in its first chunk or in a later one:
// Open refuses naming the seqs; Check lists the WALs live as before the damage
// and says exactly that group is missing; Salvage keeps every other record (those
// before the damage through Pebble, those after it from the WAL scan) and records
// exactly that group lost, with its ids (its status documents, in the next batch,
// name them); Open then starts, lists them lost, and gives out the next seq.
func TestSalvageDamageInOlderWAL(t *testing.T) {
	base := vfs.NewCrashableMem()
	acked := multiWALLog(t, base, 40, 3)
	for _, which := range []string{"oldest", "second-newest"} {
		for _, where := range []string{"first-chunk", "later-chunk"} {
			t.Run(which+"/"+where, func(t *testing.T) {
				// The log was closed: a clone holds all of it.
				salvageOlderWAL(t, base.CrashClone(vfs.CrashCloneCfg{}), acked, which, where)
			})
		}
	}
}

func salvageOlderWAL(t *testing.T, fs vfs.FS, acked map[string]uint64, which, where string) {
	ids := map[uint64]string{}
	var top uint64
	for id, seq := range acked {
		ids[seq] = id
		top = max(top, seq)
	}
	before, err := Check("data", fs)
	if err != nil {
		t.Fatal(err)
	}
	if before.Damaged() || before.OpenErr != nil {
		t.Fatalf("the undamaged log: damaged=%v open %v", before.Damaged(), before.OpenErr)
	}
	ws := walsWithRecords(t, fs)
	w := map[string]WALFile{"oldest": ws[0], "second-newest": ws[len(ws)-2]}[which]
	for _, x := range ws {
		if !slices.Contains(before.LiveWAL, x.Name) {
			t.Fatalf("%s is not live before the damage (live: %v)", x.Name, before.LiveWAL)
		}
	}
	// A group's batch in the middle of the file: about 44 KiB, so two chunks or more.
	var groups []walBatch
	for _, b := range w.Batches {
		if b.min != 0 {
			groups = append(groups, b)
		}
	}
	b := groups[len(groups)/2]
	if len(b.repr) < walBlock+200 {
		t.Fatalf("group batch of %d bytes: want more than one block", len(b.repr))
	}
	off := map[string]int64{"first-chunk": b.off + 100, "later-chunk": b.off + int64(len(b.repr)) - 100}[where]
	overwrite4(t, fs, w.Name, off)
	t.Logf("%d WALs with records, %d acknowledged; damaged %s at %d: the batch of seqs %d..%d at %d",
		len(ws), len(acked), w.Name, off, b.min, b.max, b.off)

	_, err = Open(Options{Dir: "data", FS: fs})
	if !errors.Is(err, ErrDamaged) || !strings.Contains(err.Error(), w.Name) ||
		!strings.Contains(err.Error(), fmt.Sprintf("seqs %d..%d in it", b.min, b.max)) {
		t.Fatalf("Open = %v, want ErrDamaged naming %s and seqs %d..%d", err, w.Name, b.min, b.max)
	}

	snap := snapshot(t, fs, "data")
	rep, err := Check("data", fs)
	if err != nil {
		t.Fatal(err)
	}
	if after := snapshot(t, fs, "data"); after != snap {
		t.Fatal("Check modified the store")
	}
	if rep.OpenErr != nil {
		t.Fatalf("Check: Pebble cannot open the intact part: %v", rep.OpenErr)
	}
	if !slices.Equal(rep.LiveWAL, before.LiveWAL) {
		t.Fatalf("Check: live WALs %v, want those live before the damage %v", rep.LiveWAL, before.LiveWAL)
	}
	if !rep.Damaged() || len(rep.Missing) != 1 || rep.Missing[0] != [2]uint64{b.min, b.max} {
		t.Fatalf("Check: damaged=%v missing %v, want exactly seqs %d..%d", rep.Damaged(), rep.Missing, b.min, b.max)
	}
	if rep.Records != len(acked)-int(b.max-b.min+1) {
		t.Fatalf("Check: %d records intact (with those after the damage), want %d", rep.Records, len(acked)-int(b.max-b.min+1))
	}

	sr, err := Salvage("data", fs, time.Unix(1_700_000_000, 0))
	if err != nil {
		t.Fatalf("Salvage: %v", err)
	}
	if len(sr.Lost) != 1 || sr.Lost[0].From != b.min || sr.Lost[0].To != b.max {
		t.Fatalf("Salvage recorded lost %+v, want exactly seqs %d..%d", sr.Lost, b.min, b.max)
	}
	var want []string
	for s := b.min; s <= b.max; s++ {
		want = append(want, ids[s])
	}
	got := slices.Clone(sr.Lost[0].IDs)
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("lost ids %v, want the group's %v", got, want)
	}

	l, err := Open(Options{Dir: "data", FS: fs})
	if err != nil {
		t.Fatalf("Open after salvage: %v", err)
	}
	defer l.Close()
	if lost := l.Lost(); len(lost) != 1 || lost[0].From != b.min || lost[0].To != b.max {
		t.Fatalf("Lost() after salvage = %+v, want seqs %d..%d", lost, b.min, b.max)
	}
	for id, seq := range acked {
		r, ok, err := l.ReadSeq(seq)
		if err != nil {
			t.Fatal(err)
		}
		e, eok, err := l.Lookup(id)
		if err != nil {
			t.Fatal(err)
		}
		doc, dok, err := l.Get(Status, id)
		if err != nil {
			t.Fatal(err)
		}
		if seq >= b.min && seq <= b.max {
			if ok || eok || dok {
				t.Fatalf("lost seq %d (%s): record %v, dedupe entry %v, status document %v; want none", seq, id, ok, eok, dok)
			}
			continue
		}
		if !ok || r.Event.ID != id || !eok || e.Seq != seq || !dok || !bytes.Contains(doc, []byte("PROCESSED")) {
			t.Fatalf("kept seq %d (%s): record %v (id %q), entry %v (seq %d), status %v %s", seq, id, ok, r.Event.ID, eok, e.Seq, dok, doc)
		}
	}
	// Nothing invented: the records are exactly the acknowledged ones kept.
	recs, err := l.Read(1, 100000)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != len(acked)-int(b.max-b.min+1) {
		t.Fatalf("after salvage %d records, want %d", len(recs), len(acked)-int(b.max-b.min+1))
	}
	for _, r := range recs {
		if ids[r.Seq] != r.Event.ID || r.Seq >= b.min && r.Seq <= b.max {
			t.Fatalf("after salvage a record seq %d id %q: acknowledged as %q", r.Seq, r.Event.ID, ids[r.Seq])
		}
	}
	if c := l.Committed(); c != top+1 {
		t.Fatalf("committed offset %d after salvage, want %d (every kept event PROCESSED)", c, top+1)
	}
	r := rec("after-salvage")
	if err := l.Append(context.Background(), r); err != nil || r.Seq != top+1 {
		t.Fatalf("append after salvage: seq %d (want %d), %v", r.Seq, top+1, err)
	}
}

// TestWALBitFlipSweep for a WAL older than the newest: one bit flipped in each of
// its batches (a chunk header, the first chunk's payload or the last chunk's, in
// turn), in its EOF trailer and at offset 0, each on a fresh copy (a store of some
// 450 KiB: a flip costs about 0.5 s under -race). Each start refuses naming the
// WAL (Pebble takes no damage in a closed WAL) or recovers everything; Check opens
// the intact part and says DAMAGED; a salvage then keeps every acknowledged record
// but at most those of the one damaged batch, records those lost, and the next
// seq is new.
func TestWALBitFlipSweepOlderWAL(t *testing.T) {
	base := vfs.NewCrashableMem()
	acked := multiWALLog(t, base, 40, 2)
	var top uint64
	for _, seq := range acked {
		top = max(top, seq)
	}
	ws := walsWithRecords(t, base)
	w := ws[len(ws)-2]
	end := walEnd(readAll(t, base, w.Name))
	offs := []int64{0, end - 1}
	for i, b := range w.Batches {
		offs = append(offs, []int64{b.off + 5, b.off + 200, b.off + int64(len(b.repr)) - 50}[i%3])
	}
	refused, recovered, lostSeqs := 0, 0, 0
	for _, off := range offs {
		crashed := base.CrashClone(vfs.CrashCloneCfg{})
		flipBit(t, crashed, w.Name, off)
		err := checkRecoveredOrRefused(t, func() (*Log, error) { return Open(Options{Dir: "data", FS: crashed}) }, acked)
		if err == nil {
			recovered++
			continue
		}
		refused++
		if !strings.Contains(err.Error(), w.Name) {
			t.Fatalf("flip at %d: refusal does not name %s: %v", off, w.Name, err)
		}
		rep, err := Check("data", crashed)
		if err != nil || rep.OpenErr != nil || !rep.Damaged() {
			t.Fatalf("flip at %d: Check = %v, open %v, damaged %v; want it to open the intact part and say DAMAGED", off, err, rep.OpenErr, rep.Damaged())
		}
		sr, err := Salvage("data", crashed, time.Unix(0, 0))
		if err != nil {
			t.Fatalf("flip at %d: salvage: %v", off, err)
		}
		// At most one batch lost: its seqs are those of one group commit.
		var damaged [2]uint64
		for _, b := range w.Batches {
			if b.min != 0 && len(sr.Lost) > 0 && b.min <= sr.Lost[0].From && sr.Lost[0].From <= b.max {
				damaged = [2]uint64{b.min, b.max}
			}
		}
		if len(sr.Lost) > 1 || len(sr.Lost) == 1 && (sr.Lost[0].From != damaged[0] || sr.Lost[0].To != damaged[1]) {
			t.Fatalf("flip at %d: salvage recorded lost %+v, want at most the seqs of the one damaged batch (%v)", off, sr.Lost, damaged)
		}
		l, err := Open(Options{Dir: "data", FS: crashed})
		if err != nil {
			t.Fatalf("flip at %d: Open after salvage: %v", off, err)
		}
		lost := &Log{lost: l.Lost()}
		for id, seq := range acked {
			r, ok, err := l.ReadSeq(seq)
			if err != nil || ok && r.Event.ID != id || !ok && !lost.lostCovers(seq, seq) {
				t.Fatalf("flip at %d: after salvage seq %d (%s): found=%v err=%v, recorded lost=%v", off, seq, id, ok, err, lost.lostCovers(seq, seq))
			}
			if !ok {
				lostSeqs++
			}
		}
		r := rec("next")
		if err := l.Append(context.Background(), r); err != nil || r.Seq != top+1 {
			t.Fatalf("flip at %d: append after salvage: seq %d (want %d), %v", off, r.Seq, top+1, err)
		}
		l.Close()
	}
	t.Logf("%d flips in %s (%d bytes, %d WALs with records): %d refused naming it (salvage then kept all but %d acknowledged records, recorded lost), %d recovered everything",
		refused+recovered, w.Name, end, len(ws), refused, lostSeqs, recovered)
}
