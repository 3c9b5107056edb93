package eventlog

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/gale-stream/gale/event"
	"github.com/gale-stream/gale/internal/ssttest"
)

// The §1/§3 SST bit-flip cases. Each builds a store, flips one bit in the middle of
// a data block holding only keys of the kind under test, and checks that the store
// either gives back every PERSISTED event or refuses to start naming the damage;
// never a panic. buildSSTStore writes as the log does (a record and its index entry
// in one batch, so one SST holds both kinds, in blocks of their own);
// buildSplitSSTStore gives each kind an SST of its own, flushed right after writing
// only that kind.

const sstEvents = 400 // enough that the index entries alone fill several blocks

func sstIDs() []string {
	ids := make([]string, sstEvents)
	for i := range ids {
		ids[i] = fmt.Sprintf("ev-%04d", i)
	}
	return ids
}

func statusDoc(id string) []byte { return []byte(`{"event_id":"` + id + `","status":"PROCESSED"}`) }

// sstFile is one SST of the live store: its path and smallest and largest keys.
type sstFile struct {
	path            string
	level           int
	smallest, large []byte
}

func liveSSTs(t *testing.T, l *Log, dir string) []sstFile {
	t.Helper()
	levels, err := l.db.SSTables()
	if err != nil {
		t.Fatal(err)
	}
	var out []sstFile
	for level, lv := range levels {
		for _, f := range lv {
			out = append(out, sstFile{path: filepath.Join(dir, fmt.Sprintf("%06d.sst", f.BackingSSTNum)),
				level: level, smallest: f.Smallest.UserKey, large: f.Largest.UserKey})
		}
	}
	return out
}

// sstOf is the one SST whose keys run from kind lo to kind hi.
func sstOf(t *testing.T, files []sstFile, lo, hi byte) string {
	t.Helper()
	var found []string
	for _, f := range files {
		if f.smallest[0] == lo && f.large[0] == hi {
			found = append(found, f.path)
		}
	}
	if len(found) != 1 {
		t.Fatalf("SSTs with keys %c..%c: %v (all: %+v)", lo, hi, found, files)
	}
	return found[0]
}

// buildSSTStore writes sstEvents events (records 'l' and their index entries 'd',
// which one batch writes together) and flushes them into one SST, then their
// status documents ('s') alone and flushes those into a second, and closes the log.
// It returns the SST holding d..l and the one holding s..s.
func buildSSTStore(t *testing.T, fs vfs.FS, dir string) (recordSST, statusSST string) {
	t.Helper()
	l, err := Open(Options{Dir: dir, FS: fs})
	if err != nil {
		t.Fatal(err)
	}
	var recs []*event.Record
	for _, id := range sstIDs() {
		recs = append(recs, rec(id))
	}
	if err := l.Append(context.Background(), recs...); err != nil {
		t.Fatal(err)
	}
	// The group's sync time would go with the next write, the status
	// documents': each SST here holds only the kinds it is named for.
	l.times.mu.Lock()
	l.times.pending = nil
	l.times.mu.Unlock()
	if err := l.db.Flush(); err != nil {
		t.Fatal(err)
	}
	writeStatusSST(t, l)
	files := liveSSTs(t, l, dir)
	recordSST, statusSST = sstOf(t, files, 'd', 'l'), sstOf(t, files, 's', 's')
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return recordSST, statusSST
}

// writeStatusSST writes the status documents of sstIDs alone and flushes them
// into an SST of their own.
func writeStatusSST(t *testing.T, l *Log) {
	t.Helper()
	var w Write
	for _, id := range sstIDs() {
		w.Set(Status, id, statusDoc(id))
	}
	if err := l.Apply(&w); err != nil {
		t.Fatal(err)
	}
	if err := l.db.Flush(); err != nil {
		t.Fatal(err)
	}
}

// buildSplitSSTStore is buildSSTStore with the records ('l'), their index entries
// ('d') and their status documents ('s') each in an SST of its own, written alone
// and flushed. Append writes a record and its index entry in one batch, so the
// pairs are appended to a scratch store first and copied into dir kind by kind.
func buildSplitSSTStore(t *testing.T, fs vfs.FS, dir string) map[byte]string {
	t.Helper()
	scratch, err := Open(Options{Dir: "scratch", FS: vfs.NewMem()})
	if err != nil {
		t.Fatal(err)
	}
	var recs []*event.Record
	for _, id := range sstIDs() {
		recs = append(recs, rec(id))
	}
	if err := scratch.Append(context.Background(), recs...); err != nil {
		t.Fatal(err)
	}
	kvs := map[byte][][2][]byte{}
	for _, kind := range []byte{'l', 'd'} {
		it, err := scratch.db.NewIter(&pebble.IterOptions{LowerBound: []byte{kind}, UpperBound: []byte{kind + 1}})
		if err != nil {
			t.Fatal(err)
		}
		for it.First(); it.Valid(); it.Next() {
			kvs[kind] = append(kvs[kind], [2][]byte{append([]byte(nil), it.Key()...), append([]byte(nil), it.Value()...)})
		}
		if err := it.Close(); err != nil {
			t.Fatal(err)
		}
		if len(kvs[kind]) != sstEvents {
			t.Fatalf("scratch store: %d keys of kind %c, want %d", len(kvs[kind]), kind, sstEvents)
		}
	}
	if err := scratch.Close(); err != nil {
		t.Fatal(err)
	}

	l, err := Open(Options{Dir: dir, FS: fs})
	if err != nil {
		t.Fatal(err)
	}
	for _, kind := range []byte{'l', 'd'} {
		b := l.db.NewBatch()
		for _, kv := range kvs[kind] {
			if err := b.Set(kv[0], kv[1], nil); err != nil {
				t.Fatal(err)
			}
		}
		if err := l.db.Apply(b, pebble.Sync); err != nil {
			t.Fatal(err)
		}
		if err := l.db.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	writeStatusSST(t, l)
	files := liveSSTs(t, l, dir)
	out := map[byte]string{}
	for _, kind := range []byte{'l', 'd', 's'} {
		out[kind] = sstOf(t, files, kind, kind)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	// The copy is a store the log reads back whole.
	l, err = Open(Options{Dir: dir, FS: fs})
	if err != nil {
		t.Fatalf("reopen of the split store: %v", err)
	}
	checkAllIntact(t, l)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return out
}

// flipDataBlockBit flips one bit in the middle of data block i of the SST at path
// (i < 0 counts from the end). Data blocks are in key order, so block 0 of the
// d..l SST holds index entries only and its last block records only.
func flipDataBlockBit(t *testing.T, fs vfs.FS, path string, i int) {
	t.Helper()
	if n, err := ssttest.DataBlocks(fs, path); err != nil || n < 3 {
		t.Fatalf("%s: %d data blocks, %v; want at least 3", path, n, err)
	}
	if _, err := ssttest.FlipDataBlockBit(fs, path, i); err != nil {
		t.Fatal(err)
	}
}

// checkAllIntact asserts that l gives back every event of sstIDs: its record, its
// index entry and its status document.
func checkAllIntact(t *testing.T, l *Log) {
	t.Helper()
	recs, err := l.Read(1, sstEvents+1)
	if err != nil || len(recs) != sstEvents {
		t.Fatalf("Read: %d records, %v; want %d", len(recs), err, sstEvents)
	}
	for i, id := range sstIDs() {
		if recs[i].Event.ID != id || recs[i].Seq != uint64(i+1) {
			t.Fatalf("record %d is %q seq %d", i, recs[i].Event.ID, recs[i].Seq)
		}
		if e, ok, err := l.Lookup(id); err != nil || !ok || e.Seq != uint64(i+1) {
			t.Fatalf("Lookup(%q) = %+v, %v, %v", id, e, ok, err)
		}
		if doc, ok, err := l.Get(Status, id); err != nil || !ok || string(doc) != string(statusDoc(id)) {
			t.Fatalf("Get(status %q) = %q, %v, %v", id, doc, ok, err)
		}
	}
}

func sstFS(t *testing.T, kind string) (vfs.FS, string) {
	if kind == "mem" {
		return vfs.NewMem(), "data"
	}
	return vfs.Default, filepath.Join(t.TempDir(), "data")
}

// A flipped bit in an SST holding one kind of key: the next Open refuses to start
// and names the damaged file (or, where the damage cannot matter, gives everything
// back). Before the fix a flip in the index SST panicked inside Open (exit 2 with a
// stack trace at every start) and one in the status SST panicked at the first read.
func TestSSTBitFlipRecoversOrRefusesNamingIt(t *testing.T) {
	for _, fsKind := range []string{"mem", "disk"} {
		for _, c := range []struct {
			name  string
			split bool // buildSplitSSTStore: every kind in an SST of its own
			block int  // data block flipped: 0 first, -1 last, 1 second
			sst   byte // 'l': the d..l SST (split: the l SST), 'd' (split only), 's': the status SST
		}{
			{"index", false, 0, 'l'},
			{"records", false, -1, 'l'},
			{"status", false, 1, 's'},
			{"index-only-sst", true, 1, 'd'},
			{"records-only-sst", true, 1, 'l'},
			{"status-only-sst", true, 1, 's'},
		} {
			t.Run(fsKind+"/"+c.name, func(t *testing.T) {
				fs, dir := sstFS(t, fsKind)
				var path string
				if c.split {
					path = buildSplitSSTStore(t, fs, dir)[c.sst]
				} else {
					recordSST, statusSST := buildSSTStore(t, fs, dir)
					path = recordSST
					if c.sst == 's' {
						path = statusSST
					}
				}
				flipDataBlockBit(t, fs, path, c.block)
				l, err := Open(Options{Dir: dir, FS: fs})
				if err == nil {
					defer l.Close()
					checkAllIntact(t, l)
					return
				}
				if !errors.Is(err, event.ErrCorrupt) || !strings.Contains(err.Error(), filepath.Base(path)) {
					t.Fatalf("Open = %v; want an error wrapping ErrCorrupt naming %s", err, filepath.Base(path))
				}
				t.Logf("Open refused: %v", err)
			})
		}
	}
}

// Two damaged SSTs: the refusal names both (an operator sees all that is lost at
// once), and CheckSST names each on its own.
func TestOpenNamesEveryDamagedSST(t *testing.T) {
	fs, dir := sstFS(t, "disk")
	recordSST, statusSST := buildSSTStore(t, fs, dir)
	flipDataBlockBit(t, fs, recordSST, 0) // the index: Open's own scan meets it first
	flipDataBlockBit(t, fs, statusSST, 1)
	_, err := Open(Options{Dir: dir, FS: fs})
	for _, p := range []string{recordSST, statusSST} {
		if !strings.Contains(err.Error(), p) {
			t.Fatalf("Open = %v; want it to name %s", err, p)
		}
		var ce *CorruptError
		if cerr := CheckSST(fs, p); !errors.As(cerr, &ce) || ce.File != p {
			t.Fatalf("CheckSST(%s) = %v", p, cerr)
		}
	}
	t.Logf("Open refused: %v", err)
}

// A flip in an L0 SST that the next start compacts: the WAL's flush at Open makes
// a second L0 SST, and Pebble compacts the two. Before the fix the compaction
// panicked on its background goroutine, at every start.
func TestL0CompactionOfDamagedSSTDoesNotCrash(t *testing.T) {
	fs, dir := vfs.NewMem(), "data"
	l, err := Open(Options{Dir: dir, FS: fs})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Append(context.Background(), rec("a")); err != nil {
		t.Fatal(err)
	}
	for round := range 2 {
		var w Write
		for _, id := range sstIDs() {
			w.Set(Status, id, []byte(fmt.Sprintf(`{"event_id":%q,"round":%d}`, id, round)))
		}
		if err := l.Apply(&w); err != nil {
			t.Fatal(err)
		}
		if round == 0 { // the second round stays in the WAL for the next Open to flush
			if err := l.db.Flush(); err != nil {
				t.Fatal(err)
			}
		}
	}
	files := liveSSTs(t, l, dir)
	if len(files) != 1 || files[0].smallest[0] != 'd' || files[0].large[0] != 's' {
		t.Fatalf("SSTs before the flip: %+v, want one L0 SST d..s", files)
	}
	damaged := files[0].path
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	// Its last data block holds status documents only: a key that Open itself
	// does not read, so only the compaction meets it.
	flipDataBlockBit(t, fs, damaged, -1)
	l, err = Open(Options{Dir: dir, FS: fs})
	if err == nil {
		defer l.Close()
		t.Fatalf("Open started a store with a damaged L0 SST %s", damaged)
	}
	if !errors.Is(err, event.ErrCorrupt) || !strings.Contains(err.Error(), filepath.Base(damaged)) {
		t.Fatalf("Open = %v; want an error wrapping ErrCorrupt naming %s", err, filepath.Base(damaged))
	}
	t.Logf("Open refused: %v", err)
}

// Damage found while running (the bit flips after Open, in an SST whose blocks
// are not cached): each read that meets it gets an error naming corruption and the
// file; nothing panics, and what is intact is still served.
func TestReadOfDamagedSSTWhileRunningIsAnError(t *testing.T) {
	newID := func(i int) string { return fmt.Sprintf("nw-%04d", i) }
	for _, fsKind := range []string{"mem", "disk"} {
		for _, kind := range []string{"index", "records", "status"} {
			t.Run(fsKind+"/"+kind, func(t *testing.T) {
				fs, dir := sstFS(t, fsKind)
				buildSSTStore(t, fs, dir) // a healthy store to start from
				l, err := Open(Options{Dir: dir, FS: fs})
				if err != nil {
					t.Fatal(err)
				}
				defer l.Close()
				// Everything into L6 first (Compact waits), so no compaction runs
				// under the test: one L0 SST over L6 is left alone.
				if err := l.db.Compact(context.Background(), []byte{0}, []byte{0xff}, false); err != nil {
					t.Fatal(err)
				}
				// New keys of the kind, flushed into an SST nothing has read yet.
				block := 0
				if kind == "status" {
					var w Write
					for _, id := range sstIDs() {
						w.Set(Status, id, []byte(`{"event_id":"`+id+`","status":"FAILED_FINAL"}`))
					}
					if err := l.Apply(&w); err != nil {
						t.Fatal(err)
					}
				} else {
					var recs []*event.Record
					for i := range sstEvents {
						recs = append(recs, rec(newID(i)))
					}
					if err := l.Append(context.Background(), recs...); err != nil {
						t.Fatal(err)
					}
					if kind == "records" {
						block = -1 // the d..l SST's last block: records only
					}
				}
				if err := l.Flush(); err != nil {
					t.Fatal(err)
				}
				var newest sstFile
				for _, f := range liveSSTs(t, l, dir) {
					if f.level == 0 {
						if newest.path != "" {
							t.Fatalf("two L0 SSTs: %s, %s", newest.path, f.path)
						}
						newest = f
					}
				}
				flipDataBlockBit(t, fs, newest.path, block)
				file := filepath.Base(newest.path)
				var errs []error
				switch kind {
				case "status":
					_, _, err := l.Get(Status, sstIDs()[0])
					errs = append(errs, err)
				case "index":
					_, _, err := l.Lookup(newID(0))
					errs = append(errs, err)
				case "records":
					_, err := l.Read(sstEvents+1, sstEvents)
					_, _, serr := l.ReadSeq(2 * sstEvents)
					errs = append(errs, err, serr)
				}
				for _, err := range errs {
					var ce *CorruptError
					if !errors.As(err, &ce) || !errors.Is(err, event.ErrCorrupt) || filepath.Base(ce.File) != file {
						t.Fatalf("read of damaged %s = %v; want a CorruptError naming %s", kind, err, file)
					}
				}
				t.Logf("%v", errs[0])
				if err := l.Damaged(); err == nil || !strings.Contains(err.Error(), file) {
					t.Fatalf("Damaged = %v", err)
				}
				// What the older SSTs hold is intact and still served.
				if recs, err := l.Read(1, sstEvents); err != nil || len(recs) != sstEvents {
					t.Fatalf("Read of intact records: %d, %v", len(recs), err)
				}
				last := sstIDs()[sstEvents-1]
				if _, ok, err := l.Lookup(last); err != nil || !ok {
					t.Fatalf("Lookup(%q) of an intact entry: %v, %v", last, ok, err)
				}
				if kind != "status" {
					if _, ok, err := l.Get(Status, last); err != nil || !ok {
						t.Fatalf("Get(status %q) of an intact document: %v, %v", last, ok, err)
					}
				}
			})
		}
	}
}

// A compaction that meets damage while the process runs (two L0 SSTs, one with a
// flipped bit in blocks nothing has read) reports it: before the fix its panic on
// Pebble's background goroutine ended the process. Now the log says which file,
// refuses new records, and still serves what is intact.
func TestCompactionMeetingDamageWhileRunning(t *testing.T) {
	fs, dir := vfs.NewMem(), "data"
	l, err := Open(Options{Dir: dir, FS: fs})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Append(context.Background(), rec("a")); err != nil {
		t.Fatal(err)
	}
	write := func(round int) {
		var w Write
		for _, id := range sstIDs() {
			w.Set(Status, id, []byte(fmt.Sprintf(`{"event_id":%q,"round":%d}`, id, round)))
		}
		if err := l.Apply(&w); err != nil {
			t.Fatal(err)
		}
		if err := l.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	write(0)
	files := liveSSTs(t, l, dir)
	if len(files) != 1 || files[0].level != 0 {
		t.Fatalf("SSTs: %+v, want one in L0", files)
	}
	damaged := files[0].path
	flipDataBlockBit(t, fs, damaged, -1) // status documents only: not cached
	write(1)                             // a second L0 SST: Pebble compacts the two
	<-l.Corrupted()
	err = l.Damaged()
	var ce *CorruptError
	if !errors.As(err, &ce) || ce.File != damaged || !errors.Is(err, event.ErrCorrupt) {
		t.Fatalf("Damaged = %v; want a CorruptError naming %s", err, damaged)
	}
	t.Logf("Damaged: %v", err)
	// No more compactions: Pebble would retry the failed one at once and forever
	// (measured ~1,400 attempts a second here without the gate).
	if ok, _ := l.dmg.gate.TrySchedule(); ok {
		t.Fatal("a compaction was granted on a damaged store")
	}
	if df := l.DamagedFiles(); len(df) != 1 || df[0].File != damaged || df[0].Reports == 0 {
		t.Fatalf("DamagedFiles = %+v", df)
	}
	if err := l.Append(context.Background(), rec("b")); !errors.As(err, &ce) || ce.File != damaged {
		t.Fatalf("Append on a damaged store = %v; want the CorruptError", err)
	}
	if recs, err := l.Read(1, 10); err != nil || len(recs) != 1 || recs[0].Event.ID != "a" {
		t.Fatalf("Read of the intact record: %v, %v", recs, err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(Options{Dir: dir, FS: fs}); !errors.As(err, &ce) || ce.File != damaged {
		t.Fatalf("reopen = %v; want a refusal naming %s", err, damaged)
	}
}

// BenchmarkCheckStore is what Open's check of every SST costs, per byte of SST.
func BenchmarkCheckStore(b *testing.B) {
	dir := filepath.Join(b.TempDir(), "data")
	l, err := Open(Options{Dir: dir})
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	const n = 200_000
	for i := 0; i < n; i += 1000 {
		recs := make([]*event.Record, 1000)
		for j := range recs {
			recs[j] = rec(fmt.Sprintf("bench-%08d", i+j))
		}
		if err := l.Append(context.Background(), recs...); err != nil {
			b.Fatal(err)
		}
	}
	if err := l.Flush(); err != nil {
		b.Fatal(err)
	}
	levels, err := l.db.SSTables()
	if err != nil {
		b.Fatal(err)
	}
	var size int64
	for _, lv := range levels {
		for _, f := range lv {
			size += int64(f.Size)
		}
	}
	b.SetBytes(size)
	b.ResetTimer()
	for b.Loop() {
		if err := l.checkStore(dir); err != nil {
			b.Fatal(err)
		}
	}
}
