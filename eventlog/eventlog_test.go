package eventlog

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"

	"github.com/gale-stream/gale/event"
)

func rec(id string) *event.Record {
	e := event.Event{ID: id, Source: "test", Type: "t", Payload: []byte(`{"n":1}`)}
	return &event.Record{ReceivedAt: 1, Event: e, Hash: e.Hash()}
}

func openT(t *testing.T, fs vfs.FS, opts ...func(*Options)) *Log {
	t.Helper()
	o := Options{Dir: "data", FS: fs}
	for _, f := range opts {
		f(&o)
	}
	l, err := Open(o)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// markModes are the two ways the mark is made durable (hwm.go). In memory, riding
// the WAL's flush is modelled by a sync of the mark at the start of each WAL sync:
// a crash clone then keeps the slot exactly when the WAL's sync began after it
// was written, as the device flush does.
var markModes = []struct {
	name string
	opt  func(*Options)
}{
	{"fdatasync", func(*Options) {}},
	{"wal-flush", func(o *Options) { o.markWriteBack = func(f, _ vfs.File) error { return f.SyncData() } }},
}

func TestAppendGroupCommitContiguous(t *testing.T) {
	l := openT(t, vfs.NewMem())
	defer l.Close()
	const writers, each = 64, 50
	var wg sync.WaitGroup
	seqs := make([][]uint64, writers)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				r := rec(fmt.Sprintf("w%d-%d", w, i))
				if err := l.Append(context.Background(), r); err != nil {
					t.Error(err)
					return
				}
				seqs[w] = append(seqs[w], r.Seq)
			}
		}()
	}
	wg.Wait()
	seen := map[uint64]bool{}
	for _, s := range seqs {
		for _, q := range s {
			if seen[q] {
				t.Fatalf("seq %d given twice", q)
			}
			seen[q] = true
		}
	}
	if got, want := l.Durable(), uint64(writers*each); got != want {
		t.Fatalf("Durable = %d, want %d", got, want)
	}
	recs, err := l.Read(1, 10000)
	if err != nil || len(recs) != writers*each {
		t.Fatalf("Read: %d records, %v", len(recs), err)
	}
	for i, r := range recs {
		if r.Seq != uint64(i+1) {
			t.Fatalf("record %d has seq %d", i, r.Seq)
		}
	}
	e, ok, err := l.Lookup("w3-7")
	if err != nil || !ok || e.Seq != seqs[3][7] || e.Hash != recs[0].Hash {
		t.Fatalf("Lookup = %+v %v %v; want seq %d", e, ok, err, seqs[3][7])
	}
	if _, ok, _ := l.Lookup("nope"); ok {
		t.Fatal("Lookup of an unknown id found it")
	}
}

// Power loss: Pebble's crashable MemFS keeps only synced bytes (plus, at random,
// some unsynced ones) in a crash clone. Every record whose Append returned nil must be
// in the clone, intact, with its index entry; the log must reopen and go on.
func TestPowerLossKeepsEveryPersistedRecord(t *testing.T) {
	for _, mode := range markModes {
		for round := range 5 {
			t.Run(fmt.Sprint(mode.name, "/", round), func(t *testing.T) { powerLossRound(t, round, mode.opt) })
		}
	}
}

func powerLossRound(t *testing.T, round int, mode func(*Options)) {
	fs := vfs.NewCrashableMem()
	l := openT(t, fs, mode)
	var acked sync.Map
	var wg sync.WaitGroup
	stop := make(chan struct{})
	var crashed *vfs.MemFS
	for w := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				r := rec(fmt.Sprintf("r%d-w%d-%d", round, w, i))
				if err := l.Append(context.Background(), r); err != nil {
					return
				}
				acked.Store(r.Event.ID, r.Seq)
			}
		}()
	}
	// Crash while appends are in flight, after some have been acknowledged.
	for n := 0; n < 200; {
		n = 0
		acked.Range(func(any, any) bool { n++; return true })
	}
	// Snapshot the acked set first: an id acked after the clone may be missing.
	want := map[string]uint64{}
	acked.Range(func(k, v any) bool { want[k.(string)] = v.(uint64); return true })
	crashed = fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 30 * round % 101, RNG: rand.New(rand.NewPCG(uint64(round), 1))})
	close(stop)
	wg.Wait()
	l.Close()

	l2 := openT(t, crashed)
	defer l2.Close()
	for id, seq := range want {
		e, ok, err := l2.Lookup(id)
		if err != nil || !ok || e.Seq != seq {
			t.Fatalf("after power loss, acked %s (seq %d): entry %+v found=%v err=%v", id, seq, e, ok, err)
		}
		r, ok, err := l2.ReadSeq(seq)
		if err != nil || !ok || r.Event.ID != id {
			t.Fatalf("after power loss, record seq %d: %+v %v %v", seq, r.Event.ID, ok, err)
		}
	}
	before := l2.Durable()
	if before < uint64(len(want)) {
		t.Fatalf("durable %d < %d acked", before, len(want))
	}
	// A slot written but not synced can survive the cut while the WAL
	// lost its group and the slot before it tore: its seqs are recorded
	// lost (never answered: no acked id among them) and not reused.
	next := before + 1
	for _, lr := range l2.Lost() {
		if lr.From != next {
			t.Fatalf("lost range %+v recorded after a power cut does not start at the log's end %d", lr, next)
		}
		for _, id := range lr.IDs {
			if _, ok := want[id]; ok {
				t.Fatalf("acked %s recorded lost: %+v", id, lr)
			}
		}
		t.Logf("recorded lost: %+v", lr)
		next = lr.To + 1
	}
	r := rec("after")
	if err := l2.Append(context.Background(), r); err != nil || r.Seq != next {
		t.Fatalf("append after recovery: seq %d (want %d), %v", r.Seq, next, err)
	}
}

// fsyncgate: once a sync fails, the batch it covered is not durable, every later
// append fails too (even if the disk recovers), and a reopen recovers the durable
// prefix and accepts appends again.
func TestSyncErrorIsSticky(t *testing.T) {
	mem := vfs.NewCrashableMem()
	var failing atomic.Bool
	inj := errorfs.InjectorFunc(func(op errorfs.Op) error {
		if failing.Load() && strings.HasSuffix(op.Path, ".log") &&
			(op.Kind == errorfs.OpFileSync || op.Kind == errorfs.OpFileSyncData || op.Kind == errorfs.OpFileSyncTo) {
			return syscall.EIO
		}
		return nil
	})
	l := openT(t, errorfs.Wrap(mem, inj))
	ctx := context.Background()
	if err := l.Append(ctx, rec("a"), rec("b")); err != nil {
		t.Fatal(err)
	}
	failing.Store(true)
	err := l.Append(ctx, rec("c"))
	if !errors.Is(err, ErrFailed) || !errors.Is(err, syscall.EIO) {
		t.Fatalf("append during sync failure: %v, want ErrFailed wrapping EIO", err)
	}
	failing.Store(false)
	if err := l.Append(ctx, rec("d")); !errors.Is(err, ErrFailed) {
		t.Fatalf("append after the disk recovered: %v, want the sticky ErrFailed", err)
	}
	if l.Durable() != 2 {
		t.Fatalf("Durable = %d after a failed sync, want 2", l.Durable())
	}
	if _, ok, _ := l.Lookup("c"); ok {
		t.Fatal("the index answers for a record whose sync failed")
	}
	select {
	case <-l.Failed():
	default:
		t.Fatal("Failed() not closed")
	}
	if err := l.Apply(&Write{Committed: 2}); !errors.Is(err, ErrFailed) {
		t.Fatalf("Apply on a failed log: %v", err)
	}
	_ = l.Close()

	l2 := openT(t, mem.CrashClone(vfs.CrashCloneCfg{}))
	defer l2.Close()
	if l2.Durable() != 2 {
		t.Fatalf("after reopen Durable = %d, want 2", l2.Durable())
	}
	r := rec("c")
	if err := l2.Append(ctx, r); err != nil || r.Seq != 3 {
		t.Fatalf("retry after reopen: seq %d, %v", r.Seq, err)
	}
}

func TestCorruptRecordStopsOpenNamingIt(t *testing.T) {
	fs := vfs.NewMem()
	l := openT(t, fs)
	ctx := context.Background()
	for _, id := range []string{"a", "b", "c"} {
		if err := l.Append(ctx, rec(id)); err != nil {
			t.Fatal(err)
		}
	}
	l.Close()
	// Flip one byte of record 2's payload behind the log's back.
	db, err := pebble.Open("data", &pebble.Options{FS: fs, Logger: pebbleLogger{}})
	if err != nil {
		t.Fatal(err)
	}
	v, closer, err := db.Get(logKey(2))
	if err != nil {
		t.Fatal(err)
	}
	bad := append([]byte(nil), v...)
	closer.Close()
	bad[len(bad)-3] ^= 0x20
	if err := db.Set(logKey(2), bad, pebble.Sync); err != nil {
		t.Fatal(err)
	}
	db.Close()

	_, err = Open(Options{Dir: "data", FS: fs})
	if !errors.Is(err, event.ErrCorrupt) || !strings.Contains(err.Error(), "seq 2") {
		t.Fatalf("Open = %v, want ErrCorrupt naming seq 2", err)
	}
}

func TestCommittedOffsetAndDocsSurviveReopen(t *testing.T) {
	fs := vfs.NewMem()
	l := openT(t, fs)
	for _, id := range []string{"a", "b", "c"} {
		if err := l.Append(context.Background(), rec(id)); err != nil {
			t.Fatal(err)
		}
	}
	var w Write
	w.Committed = 3
	w.Set(Status, "a", []byte(`{"status":"PROCESSED"}`))
	if err := l.Apply(&w); err != nil {
		t.Fatal(err)
	}
	if err := l.Apply(&Write{Committed: 2}); err != nil || l.Committed() != 3 {
		t.Fatalf("committed moved backwards to %d (%v)", l.Committed(), err)
	}
	l.Close()
	l = openT(t, fs)
	defer l.Close()
	if l.Committed() != 3 || l.Durable() != 3 {
		t.Fatalf("after reopen committed=%d durable=%d, want 3 and 3", l.Committed(), l.Durable())
	}
	doc, ok, err := l.Get(Status, "a")
	if err != nil || !ok || string(doc) != `{"status":"PROCESSED"}` {
		t.Fatalf("status doc: %q %v %v", doc, ok, err)
	}
	recs, _ := l.Read(3, 10)
	if len(recs) != 1 || recs[0].Event.ID != "c" {
		t.Fatalf("Read(3) = %+v", recs)
	}
}

func TestClosedAndOverloaded(t *testing.T) {
	l := openT(t, vfs.NewMem())
	l.Close()
	if err := l.Append(context.Background(), rec("x")); !errors.Is(err, ErrClosed) {
		t.Fatalf("append after Close: %v", err)
	}
	if _, err := Open(Options{}); err == nil {
		t.Fatal("Open without Dir succeeded")
	}
}

// The id filter never says absent for an id it holds, and says it for most others.
func TestIDFilter(t *testing.T) {
	f := newIDFilter(1 << 16) // 64 KiB: ~8 bits per id below
	for i := range 60000 {
		f.add(fmt.Sprintf("2010-12-01:%d", i))
	}
	for i := range 60000 {
		if !f.mayContain(fmt.Sprintf("2010-12-01:%d", i)) {
			t.Fatalf("id %d added but reported absent", i)
		}
	}
	fp := 0
	for i := range 100000 {
		if f.mayContain(fmt.Sprintf("2010-12-02:%d", i)) {
			fp++
		}
	}
	if fp > 10000 {
		t.Fatalf("%d%% false positives at 8.7 bits per id", fp/1000)
	}
}

// Ids in the index before a reopen are found after it (the filter is rebuilt).
func TestLookupAfterReopen(t *testing.T) {
	fs := vfs.NewMem()
	l := openT(t, fs)
	if err := l.Append(context.Background(), rec("kept")); err != nil {
		t.Fatal(err)
	}
	l.Close()
	l = openT(t, fs)
	defer l.Close()
	if e, ok, err := l.Lookup("kept"); !ok || err != nil || e.Seq != 1 {
		t.Fatalf("Lookup after reopen: %+v %v %v", e, ok, err)
	}
}

// TestStatsAndOnCommit: Stats count the records, their encoded bytes, the ids in the
// dedupe index and the failed group commits, and OnCommit reports each group once,
// with its error; a reopen counts the index's ids again.
func TestStatsAndOnCommit(t *testing.T) {
	mem := vfs.NewCrashableMem()
	var failing atomic.Bool
	inj := errorfs.InjectorFunc(func(op errorfs.Op) error {
		if failing.Load() && strings.HasSuffix(op.Path, ".log") &&
			(op.Kind == errorfs.OpFileSync || op.Kind == errorfs.OpFileSyncData || op.Kind == errorfs.OpFileSyncTo) {
			return syscall.EIO
		}
		return nil
	})
	commits := make(chan Commit, 10)
	l, err := Open(Options{Dir: "data", FS: errorfs.Wrap(mem, inj), OnCommit: func(c Commit) { commits <- c }})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	size := 0
	for _, group := range [][]*event.Record{{rec("a"), rec("b")}, {rec("c")}} {
		if err := l.Append(ctx, group...); err != nil {
			t.Fatal(err)
		}
		gsize := 0
		for _, r := range group {
			gsize += len(r.Encode(nil))
		}
		size += gsize
		if c := <-commits; c.Records != len(group) || c.Bytes != gsize || c.Err != nil || c.Elapsed <= 0 {
			t.Errorf("OnCommit got %+v, want %d records of %d bytes, no error, a positive time", c, len(group), gsize)
		}
	}
	st := l.Stats()
	if st.Commits != 2 || st.Records != 3 || st.Bytes != uint64(size) || st.IDs != 3 || st.CommitFailures != 0 || st.CommitTime <= 0 {
		t.Errorf("Stats = %+v, want 2 commits, 3 records, %d bytes, 3 ids, no failures", st, size)
	}
	failing.Store(true)
	if err := l.Append(ctx, rec("d")); !errors.Is(err, ErrFailed) {
		t.Fatalf("append during a sync failure: %v", err)
	}
	if c := <-commits; c.Records != 1 || !errors.Is(c.Err, syscall.EIO) {
		t.Errorf("OnCommit of the failed group got %+v, want 1 record and the EIO", c)
	}
	if st := l.Stats(); st.CommitFailures != 1 || st.IDs != 3 {
		t.Errorf("after the failed sync Stats = %+v, want 1 commit failure and still 3 ids", st)
	}
	_ = l.Close()
	l2 := openT(t, mem.CrashClone(vfs.CrashCloneCfg{}))
	defer l2.Close()
	if st := l2.Stats(); st.IDs != 3 || st.Records != 0 {
		t.Errorf("after reopen Stats = %+v, want the 3 durable ids and no records committed yet", st)
	}
}
