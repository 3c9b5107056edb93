package eventlog

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
)

// appendEach appends n records one Append each (as --max-pending 1 with one event
// per request does) and returns the seq each id was acknowledged with.
func appendEach(t *testing.T, l *Log, prefix string, n int) map[string]uint64 {
	t.Helper()
	acked := map[string]uint64{}
	for i := range n {
		r := rec(fmt.Sprintf("%s-%d", prefix, i))
		if err := l.Append(context.Background(), r); err != nil {
			t.Fatal(err)
		}
		acked[r.Event.ID] = r.Seq
	}
	return acked
}

// newestWAL is the path of the highest-numbered *.log file in dir.
func newestWAL(t *testing.T, fs vfs.FS, dir string) string {
	t.Helper()
	names, err := fs.List(dir)
	if err != nil {
		t.Fatal(err)
	}
	var logs []string
	for _, n := range names {
		if strings.HasSuffix(n, ".log") {
			logs = append(logs, n)
		}
	}
	if len(logs) == 0 {
		t.Fatalf("no WAL in %s: %v", dir, names)
	}
	sort.Strings(logs)
	return fs.PathJoin(dir, logs[len(logs)-1])
}

// readAll reads a whole file through fs.
func readAll(t *testing.T, fs vfs.FS, path string) []byte {
	t.Helper()
	f, err := fs.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b, err := io.ReadAll(f)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// rewriteFile replaces a file's content with edit's change of it, through fs
// (synced, so a crash clone keeps it).
func rewriteFile(t *testing.T, fs vfs.FS, path string, edit func([]byte)) {
	t.Helper()
	b := readAll(t, fs, path)
	edit(b)
	f, err := fs.Create(path, vfs.WriteCategoryUnspecified)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// flipBit flips one bit of the file at off.
func flipBit(t *testing.T, fs vfs.FS, path string, off int64) {
	t.Helper()
	rewriteFile(t, fs, path, func(b []byte) {
		if off < 0 || off >= int64(len(b)) {
			t.Fatalf("offset %d outside %s (%d bytes)", off, path, len(b))
		}
		b[off] ^= 0x10
	})
}

// walEnd is the length of the WAL's written part: Pebble preallocates and recycles
// WAL files, so the bytes past the last chunk are zeros (or an old log's).
func walEnd(b []byte) int64 {
	end := len(b)
	for end > 0 && b[end-1] == 0 {
		end--
	}
	return int64(end)
}

// checkRecoveredOrRefused is the promise: either every acknowledged record is
// there (by id and by seq) and the next append gets a new seq, or Open refuses
// with ErrDamaged.
func checkRecoveredOrRefused(t *testing.T, open func() (*Log, error), acked map[string]uint64) (refused error) {
	t.Helper()
	l, err := open()
	if err != nil {
		if !errors.Is(err, ErrDamaged) {
			t.Fatalf("Open refused with %v, want an error wrapping ErrDamaged", err)
		}
		return err
	}
	defer l.Close()
	var lost []uint64
	var maxSeq uint64
	for id, seq := range acked {
		maxSeq = max(maxSeq, seq)
		e, ok, err := l.Lookup(id)
		r, rok, rerr := l.ReadSeq(seq)
		if err != nil || !ok || e.Seq != seq || rerr != nil || !rok || r.Event.ID != id {
			lost = append(lost, seq)
		}
	}
	r := rec("after-restart")
	aerr := l.Append(context.Background(), r)
	if len(lost) > 0 || aerr != nil || r.Seq <= maxSeq {
		sort.Slice(lost, func(i, j int) bool { return lost[i] < lost[j] })
		span := "none"
		if len(lost) > 0 {
			span = fmt.Sprintf("%d..%d", lost[0], lost[len(lost)-1])
		}
		t.Fatalf("Open succeeded but %d of %d acknowledged records are gone (seqs %s); next append got seq %d (acknowledged up to %d), err %v",
			len(lost), len(acked), span, r.Seq, maxSeq, aerr)
	}
	return nil
}

// The reproduction (nats-server#7549) on Pebble's in-memory FS: 300 records
// acknowledged one by one, a crash, one bit flipped in the newest WAL at its start,
// middle and last record; reopen must recover all 300 or refuse naming the damage.
func TestWALBitFlipNeverLosesAcknowledgedSilently(t *testing.T) {
	for _, mode := range markModes {
		for _, where := range []string{"start", "middle", "last"} {
			t.Run(mode.name+"/"+where, func(t *testing.T) { walBitFlip(t, where, mode.opt) })
		}
	}
}

func walBitFlip(t *testing.T, where string, mode func(*Options)) {
	fs := vfs.NewCrashableMem()
	l := openT(t, fs, mode)
	acked := appendEach(t, l, where, 300)
	crashed := fs.CrashClone(vfs.CrashCloneCfg{}) // kill -9: only synced bytes count
	l.Close()
	wal := newestWAL(t, crashed, "data")
	end := walEnd(readAll(t, crashed, wal))
	off := map[string]int64{"start": 40, "middle": end / 2, "last": end - 8}[where]
	flipBit(t, crashed, wal, off)
	err := checkRecoveredOrRefused(t, func() (*Log, error) { return Open(Options{Dir: "data", FS: crashed}) }, acked)
	t.Logf("flip at %s+%d of %d: %v", wal, off, end, err)
}

// The same on real files in a temporary directory (the process is not killed, but
// the log is not closed either before the flip: its WAL is as a kill -9 left it).
func TestWALBitFlipRealFiles(t *testing.T) {
	for _, where := range []string{"start", "middle", "last"} {
		t.Run(where, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "log")
			l, err := Open(Options{Dir: dir})
			if err != nil {
				t.Fatal(err)
			}
			acked := appendEach(t, l, where, 300)
			// Copy the store as it is now (every acknowledged record synced), as a
			// kill -9 would leave it, then close the original.
			cp := filepath.Join(t.TempDir(), "log")
			copyDir(t, dir, cp)
			l.Close()
			fs := vfs.Default
			wal := newestWAL(t, fs, cp)
			end := walEnd(readAll(t, fs, wal))
			off := map[string]int64{"start": 40, "middle": end / 2, "last": end - 8}[where]
			flipBit(t, fs, wal, off)
			err = checkRecoveredOrRefused(t, func() (*Log, error) { return Open(Options{Dir: cp}) }, acked)
			t.Logf("flip at %s+%d of %d: %v", wal, off, end, err)
		})
	}
}

func copyDir(t *testing.T, from, to string) {
	t.Helper()
	if err := os.MkdirAll(to, 0o755); err != nil {
		t.Fatal(err)
	}
	ents, err := os.ReadDir(from)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if e.IsDir() {
			continue
		}
		b, err := os.ReadFile(filepath.Join(from, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(to, e.Name()), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// A store made before the mark existed (Pebble's default format, no GALE-HWM) is
// ratcheted to formatVersion and given a mark at Open; a store at formatVersion
// whose mark went missing refuses, since it cannot tell what was acknowledged.
func TestOldStoreRatchetedAndMarkMissingRefused(t *testing.T) {
	fs := vfs.NewMem()
	db, err := pebble.Open("data", &pebble.Options{FS: fs, Logger: pebbleLogger{}})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	l := openT(t, fs)
	appendEach(t, l, "old", 3)
	if got := l.db.FormatMajorVersion(); got != formatVersion {
		t.Fatalf("format %s after Open, want %s", got, formatVersion)
	}
	l.Close()
	// The newest answered group is kept by its replica; the floor of its slot
	// claims the one before.
	if seq, reps, found, err := readSide(fs, "data"); seq != 2 || !found || err != nil || len(reps) == 0 || reps[len(reps)-1].last != 3 {
		t.Fatalf("mark = %d %v %v, replicas %+v, want 2 and a replica of seq 3", seq, found, err, reps)
	}
	if err := fs.Remove(fs.PathJoin("data", hwmFile)); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(Options{Dir: "data", FS: fs}); !errors.Is(err, ErrDamaged) || !strings.Contains(err.Error(), hwmFile) {
		t.Fatalf("Open without the mark = %v, want ErrDamaged naming %s", err, hwmFile)
	}
}

// One flipped bit in the mark file leaves the other slots; all damaged refuses.
func TestMarkFileBitFlip(t *testing.T) {
	fs := vfs.NewMem()
	l := openT(t, fs)
	appendEach(t, l, "m", 5)
	l.Close()
	path := fs.PathJoin("data", hwmFile)
	flipBit(t, fs, path, 6)
	l = openT(t, fs)
	if l.Durable() != 5 {
		t.Fatalf("Durable = %d, want 5", l.Durable())
	}
	l.Close()
	for i := range hwmSlots {
		flipBit(t, fs, path, int64(i)*hwmSlotSize+6)
	}
	_, err := Open(Options{Dir: "data", FS: fs})
	if !errors.Is(err, ErrDamaged) || !strings.Contains(err.Error(), "no intact slot") {
		t.Fatalf("Open with every slot damaged = %v, want ErrDamaged naming the mark", err)
	}
}

// The mark is synced after the WAL and before the answer: if its sync fails, the
// append is answered with the sticky ErrFailed (never PERSISTED), and a restart
// from what is durable opens cleanly, the record being in the WAL or not.
func TestMarkSyncFailureIsStickyAndRestartOpens(t *testing.T) {
	mem := vfs.NewCrashableMem()
	var failing atomic.Bool
	inj := errorfs.InjectorFunc(func(op errorfs.Op) error {
		if failing.Load() && strings.HasSuffix(op.Path, hwmFile) &&
			(op.Kind == errorfs.OpFileSync || op.Kind == errorfs.OpFileSyncData) {
			return syscall.EIO
		}
		return nil
	})
	l := openT(t, errorfs.Wrap(mem, inj))
	markFailureIsSticky(t, mem, l, &failing)
}

// markFailureIsSticky appends two records to l, sets failing, and checks that the
// next append is refused with the sticky ErrFailed wrapping EIO and naming the
// mark file, that the log stays failed once the disk recovers, and that a restart
// from what mem had made durable opens and takes new records.
func markFailureIsSticky(t *testing.T, mem *vfs.MemFS, l *Log, failing *atomic.Bool) {
	t.Helper()
	appendEach(t, l, "ok", 2)
	failing.Store(true)
	err := l.Append(context.Background(), rec("c"))
	if !errors.Is(err, ErrFailed) || !errors.Is(err, syscall.EIO) || !strings.Contains(err.Error(), hwmFile) {
		t.Fatalf("append whose mark failed: %v, want ErrFailed wrapping EIO naming %s", err, hwmFile)
	}
	if l.Durable() != 2 {
		t.Fatalf("Durable = %d, want 2", l.Durable())
	}
	failing.Store(false)
	if err := l.Append(context.Background(), rec("d")); !errors.Is(err, ErrFailed) {
		t.Fatalf("append after the disk recovered: %v, want the sticky ErrFailed", err)
	}
	crashed := mem.CrashClone(vfs.CrashCloneCfg{})
	_ = l.Close()
	l2 := openT(t, crashed)
	defer l2.Close()
	if d := l2.Durable(); d < 2 {
		t.Fatalf("after restart Durable = %d, want at least 2", d)
	}
	r := rec("e")
	if err := l2.Append(context.Background(), r); err != nil || r.Seq != l2.Durable() {
		t.Fatalf("append after restart: seq %d, %v", r.Seq, err)
	}
}

// A one-bit flip at offsets all through the WAL (every 509th byte, so chunk
// headers, payloads and block ends are all hit): each start either recovers every
// acknowledged record or refuses with ErrDamaged naming the WAL file.
func TestWALBitFlipSweep(t *testing.T) {
	fs := vfs.NewCrashableMem()
	l := openT(t, fs)
	acked := appendEach(t, l, "sweep", 300)
	base := fs.CrashClone(vfs.CrashCloneCfg{})
	l.Close()
	wal := newestWAL(t, base, "data")
	end := walEnd(readAll(t, base, wal))
	refused, recovered, lostSeqs := 0, 0, 0
	for off := int64(0); off < end; off += 509 {
		crashed := base.CrashClone(vfs.CrashCloneCfg{})
		flipBit(t, crashed, wal, off)
		err := checkRecoveredOrRefused(t, func() (*Log, error) { return Open(Options{Dir: "data", FS: crashed}) }, acked)
		if err == nil {
			recovered++
			continue
		}
		refused++
		if !strings.Contains(err.Error(), wal) {
			t.Fatalf("flip at %d: refusal does not name %s: %v", off, wal, err)
		}
		// The way out: after a salvage every acknowledged record is readable or
		// recorded lost, and the next seq is new.
		if _, err := Salvage("data", crashed, time.Unix(0, 0)); err != nil {
			t.Fatalf("flip at %d: salvage: %v", off, err)
		}
		l, err := Open(Options{Dir: "data", FS: crashed})
		if err != nil {
			t.Fatalf("flip at %d: Open after salvage: %v", off, err)
		}
		lost := &Log{lost: l.Lost()}
		before := lostSeqs
		for id, seq := range acked {
			r, ok, err := l.ReadSeq(seq)
			if err != nil || ok && r.Event.ID != id || !ok && !lost.lostCovers(seq, seq) {
				t.Fatalf("flip at %d: after salvage seq %d (%s): found=%v err=%v, recorded lost=%v", off, seq, id, ok, err, lost.lostCovers(seq, seq))
			}
			if !ok {
				lostSeqs++
			}
		}
		if lostSeqs-before > 1 {
			// One flipped bit damages one batch (one record here): the intact
			// batches after it must survive the refusal for the salvage to keep.
			t.Fatalf("flip at %d: salvage lost %d records, want at most the one in the damaged batch", off, lostSeqs-before)
		}
		r := rec("next")
		if err := l.Append(context.Background(), r); err != nil || r.Seq != 301 {
			t.Fatalf("flip at %d: append after salvage: seq %d, %v", off, r.Seq, err)
		}
		l.Close()
	}
	t.Logf("%d flips in %s (%d bytes): %d refused naming it (salvage then kept all but %d acknowledged records, recorded lost), %d recovered everything",
		refused+recovered, wal, end, refused, lostSeqs, recovered)
}

// A log closed cleanly ends its WAL with Pebble's EOF trailer (a chunk of the next
// log number, checksum 0): the scan takes it for the end, not for damage.
func TestWALScanEOFTrailerIsNotDamage(t *testing.T) {
	fs := vfs.NewMem()
	l := openT(t, fs)
	appendEach(t, l, "eof", 3)
	l.Close()
	l = openT(t, fs) // replays, flushes, starts a new WAL
	l.Close()
	ws, err := scanWALs(fs, "data")
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range ws {
		if len(w.Damage) != 0 {
			t.Fatalf("%s (%d bytes): damage %v in a cleanly closed log", w.Name, w.Size, w.Damage)
		}
	}
}

// A store written by a gale from before the WAL sync chunks and the mark (Pebble's
// default format, no GALE-HWM), holding events: Open ratchets its format, keeps
// every record and index entry, makes the mark, and gives out the next seq.
func TestOldStoreWithEventsUpgrades(t *testing.T) {
	scratch := openT(t, vfs.NewMem())
	acked := appendEach(t, scratch, "old", 20)
	var kvs [][2][]byte
	it, err := scratch.db.NewIter(&pebble.IterOptions{LowerBound: []byte{'d'}, UpperBound: []byte{'l' + 1}})
	if err != nil {
		t.Fatal(err)
	}
	for it.First(); it.Valid(); it.Next() {
		kvs = append(kvs, [2][]byte{append([]byte(nil), it.Key()...), append([]byte(nil), it.Value()...)})
	}
	if err := it.Close(); err != nil {
		t.Fatal(err)
	}
	scratch.Close()

	fs := vfs.NewMem()
	db, err := pebble.Open("data", &pebble.Options{FS: fs, Logger: pebbleLogger{}})
	if err != nil {
		t.Fatal(err)
	}
	if v := db.FormatMajorVersion(); v >= pebble.FormatWALSyncChunks {
		t.Fatalf("the old store's format %s already has WAL sync chunks", v)
	}
	b := db.NewBatch()
	for _, kv := range kvs {
		if err := b.Set(kv[0], kv[1], nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Apply(b, pebble.Sync); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := fs.Stat(fs.PathJoin("data", hwmFile)); err == nil {
		t.Fatal("the old store has a mark file")
	}

	l := openT(t, fs)
	if got := l.db.FormatMajorVersion(); got != formatVersion {
		t.Fatalf("format %s after Open, want %s", got, formatVersion)
	}
	if d := l.Durable(); d != uint64(len(acked)) {
		t.Fatalf("Durable = %d after the upgrade, want %d", d, len(acked))
	}
	for id, seq := range acked {
		if e, ok, err := l.Lookup(id); err != nil || !ok || e.Seq != seq {
			t.Fatalf("Lookup(%s) after the upgrade = %+v %v %v, want seq %d", id, e, ok, err, seq)
		}
	}
	r := rec("new")
	if err := l.Append(context.Background(), r); err != nil || r.Seq != uint64(len(acked))+1 {
		t.Fatalf("append after the upgrade: seq %d (want %d), %v", r.Seq, len(acked)+1, err)
	}
	l.Close()
	// The mark now exists: the next Open checks the records against it.
	if seq, _, found, err := readSide(fs, "data"); !found || err != nil || seq < uint64(len(acked)) {
		t.Fatalf("mark after the upgrade = %d %v %v, want at least %d", seq, found, err, len(acked))
	}
	l = openT(t, fs)
	if d := l.Durable(); d != uint64(len(acked))+1 {
		t.Fatalf("Durable = %d at the second Open, want %d", d, len(acked)+1)
	}
	l.Close()
}
