package eventlog

import (
	"context"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// lastBatchOffset is where the WAL's last batch starts.
func lastBatchOffset(t *testing.T, fs vfs.FS, wal string) int64 {
	t.Helper()
	ws, err := scanWALs(fs, "data")
	if err != nil {
		t.Fatal(err)
	}
	off := int64(-1)
	for _, w := range ws {
		if fs.PathJoin("data", w.Name) == wal || w.Name == wal {
			for _, b := range w.Batches {
				off = max(off, b.off)
			}
		}
	}
	if off < 0 {
		t.Fatalf("no batch in %s", wal)
	}
	return off
}

// A flipped bit in the WAL's last record, or a last group cut off, used to be
// refused (records ended below the mark): the group is in its replica in the
// mark file, so Open restores it and every acknowledged record is there.
func TestLastGroupRestoredFromReplica(t *testing.T) {
	for _, mode := range markModes {
		for _, how := range []string{"flip", "truncate"} {
			t.Run(mode.name+"/"+how, func(t *testing.T) { lastGroupRestored(t, how, mode.opt) })
		}
	}
}

func lastGroupRestored(t *testing.T, how string, mode func(*Options)) {
	fs := vfs.NewCrashableMem()
	l := openT(t, fs, mode)
	acked := appendEach(t, l, how, 300)
	crashed := fs.CrashClone(vfs.CrashCloneCfg{}) // kill -9
	l.Close()
	wal := newestWAL(t, crashed, "data")
	end := walEnd(readAll(t, crashed, wal))
	last := lastBatchOffset(t, crashed, wal)
	rewriteFile(t, crashed, wal, func(b []byte) {
		if how == "flip" {
			b[end-8] ^= 0x10
		} else {
			clear(b[last:])
		}
	})
	l2, err := Open(Options{Dir: "data", FS: crashed})
	if err != nil {
		t.Fatalf("Open after the last group was damaged (%s; last batch at %d of %d): %v", how, last, end, err)
	}
	l2.Close()
	if err := checkRecoveredOrRefused(t, func() (*Log, error) { return Open(Options{Dir: "data", FS: crashed}) }, acked); err != nil {
		t.Fatalf("reopen refused: %v", err)
	}
}

// A power cut during the last group: its slot in the mark file torn (its sync had
// not returned) and its WAL batch torn too. Nothing was answered for it, so
// nothing is claimed: Open is clean, the group is gone and its seq is given out
// again; every answered record is there.
func TestTornSlotAndTornWALTailOpenClean(t *testing.T) {
	fs := vfs.NewCrashableMem()
	l := openT(t, fs)
	acked := appendEach(t, l, "torn", 5)
	crashed := fs.CrashClone(vfs.CrashCloneCfg{})
	l.Close()
	_, reps, _, err := readSide(crashed, "data")
	if err != nil {
		t.Fatal(err)
	}
	slot := -1
	for _, s := range reps {
		if s.first == 5 {
			slot = s.index
		}
	}
	if slot < 0 {
		t.Fatalf("no replica of seq 5 in %+v", reps)
	}
	delete(acked, "torn-4") // seq 5: the power cut came before its answer
	wal := newestWAL(t, crashed, "data")
	last := lastBatchOffset(t, crashed, wal)
	rewriteFile(t, crashed, wal, func(b []byte) { clear(b[last:]) })
	rewriteFile(t, crashed, crashed.PathJoin("data", hwmFile), func(b []byte) {
		b[slot*hwmSlotSize+hwmHeader+3] ^= 0x10
	})
	l2, err := Open(Options{Dir: "data", FS: crashed})
	if err != nil {
		t.Fatalf("Open after a torn last slot and WAL tail: %v", err)
	}
	if d := l2.Durable(); d != 4 {
		t.Fatalf("Durable = %d, want 4 (seq 5 was never answered)", d)
	}
	if _, ok, err := l2.ReadSeq(5); ok || err != nil {
		t.Fatalf("seq 5 found=%v err=%v, want it gone", ok, err)
	}
	r := rec("next")
	if err := l2.Append(context.Background(), r); err != nil || r.Seq != 5 {
		t.Fatalf("append: seq %d, %v; want 5", r.Seq, err)
	}
	l2.Close()
	if err := checkRecoveredOrRefused(t, func() (*Log, error) { return Open(Options{Dir: "data", FS: crashed}) }, acked); err != nil {
		t.Fatalf("reopen refused: %v", err)
	}
}
