package eventlog

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// salvageAndCheckAcked salvages the store in "data", reopens it and checks the
// promise for every acknowledged record: readable under its seq and id, or in a
// recorded lost range; the next append gets a seq no acknowledged record had. It
// returns the reopened log and the lost seqs.
func salvageAndCheckAcked(t *testing.T, fs vfs.FS, acked map[string]uint64) (*Log, *SalvageReport, map[uint64]bool) {
	t.Helper()
	sr, err := Salvage("data", fs, time.Unix(1_700_000_000, 0))
	if err != nil {
		t.Fatal(err)
	}
	l, err := Open(Options{Dir: "data", FS: fs})
	if err != nil {
		t.Fatalf("Open after salvage: %v", err)
	}
	lost := map[uint64]bool{}
	for _, r := range l.Lost() {
		for s := r.From; s <= r.To; s++ {
			lost[s] = true
		}
	}
	var top uint64
	for id, seq := range acked {
		top = max(top, seq)
		r, ok, err := l.ReadSeq(seq)
		if err != nil {
			t.Fatal(err)
		}
		if ok && r.Event.ID != id {
			t.Fatalf("seq %d holds %s, acknowledged for %s", seq, r.Event.ID, id)
		}
		if !ok && !lost[seq] {
			t.Errorf("acknowledged %s (seq %d) neither readable nor recorded lost after salvage (lost %+v)", id, seq, l.Lost())
		}
	}
	r := rec("after-salvage")
	if err := l.Append(context.Background(), r); err != nil {
		t.Fatal(err)
	}
	if r.Seq <= top {
		t.Errorf("append after salvage got seq %d: acknowledged seqs go up to %d (a seq given out twice)", r.Seq, top)
	}
	return l, sr, lost
}

// The review's finding A: 50 single appends, the newest WAL cut at half (a lost
// tail). The mark is the floor of the newest slot (49): seq 50 is covered only by
// its own group's replica. Check, the refusal and Salvage must all count it, and
// the next seq must be above 50.
func TestTruncatedWALTailNeverReusesTheNewestGroupsSeq(t *testing.T) {
	fs := vfs.NewCrashableMem()
	l := openT(t, fs)
	acked := appendEach(t, l, "ds", 50)
	crashed := fs.CrashClone(vfs.CrashCloneCfg{})
	l.Close()
	wal := newestWAL(t, crashed, "data")
	end := walEnd(readAll(t, crashed, wal))
	rewriteFile(t, crashed, wal, func(b []byte) { clear(b[end/2:]) })

	_, err := Open(Options{Dir: "data", FS: crashed})
	if !errors.Is(err, ErrDamaged) {
		t.Fatalf("Open of the cut WAL = %v, want ErrDamaged", err)
	}
	if !strings.Contains(err.Error(), "..50") {
		t.Errorf("the refusal does not name seq 50, answered PERSISTED: %v", err)
	}
	rep, err := Check("data", crashed)
	if err != nil {
		t.Fatal(err)
	}
	inReplica := false
	for _, p := range rep.Replica {
		inReplica = inReplica || p[0] <= 50 && 50 <= p[1]
	}
	if !inMissing(rep, 50) && !inReplica {
		t.Errorf("Check: missing %v, replicas %v, records %d..%d: seq 50, answered PERSISTED, neither missing nor held by a replica", rep.Missing, rep.Replica, rep.First, rep.Last)
	}
	t.Logf("check: missing %v, replica %v, records %d..%d, mark %d", rep.Missing, rep.Replica, rep.First, rep.Last, rep.Mark)
	l2, sr, lost := salvageAndCheckAcked(t, crashed, acked)
	defer l2.Close()
	t.Logf("salvage: lost %+v", sr.Lost)
	if _, ok, _ := l2.ReadSeq(50); !ok && !lost[50] {
		t.Errorf("seq 50 neither kept nor recorded lost")
	}
}

func inMissing(rep *CheckReport, s uint64) bool {
	for _, m := range rep.Missing {
		if m[0] <= s && s <= m[1] {
			return true
		}
	}
	return false
}

// walBatchOf is the offset of the WAL batch in wal holding record seq.
func walBatchOf(t *testing.T, fs vfs.FS, wal string, seq uint64) int64 {
	t.Helper()
	ws, err := scanWALs(fs, "data")
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range ws {
		for _, b := range w.Batches {
			if (fs.PathJoin("data", w.Name) == wal || w.Name == wal) && b.min != 0 && b.min <= seq && seq <= b.max {
				return b.off
			}
		}
	}
	t.Fatalf("no batch of seq %d in %s", seq, wal)
	return -1
}

// The review's finding B: a flip in the WAL batch of seq 296, whose group's
// replica is intact in the mark file (the newest eight groups are). Open refuses
// (corrupt before the synced offset); a salvage must keep the record from the
// replica (its dedupe entry too), not record it lost with no id. After a cut of
// the WAL's second half, the replicas of 293..300 are kept the same way.
func TestSalvageKeepsIntactReplicas(t *testing.T) {
	for _, how := range []string{"flip", "truncate"} {
		t.Run(how, func(t *testing.T) {
			fs := vfs.NewCrashableMem()
			l := openT(t, fs)
			acked := appendEach(t, l, "w", 300)
			crashed := fs.CrashClone(vfs.CrashCloneCfg{})
			l.Close()
			wal := newestWAL(t, crashed, "data")
			if how == "flip" {
				flipBit(t, crashed, wal, walBatchOf(t, crashed, wal, 296)+30)
			} else {
				end := walEnd(readAll(t, crashed, wal))
				rewriteFile(t, crashed, wal, func(b []byte) { clear(b[end/2:]) })
			}
			if _, err := Open(Options{Dir: "data", FS: crashed}); !errors.Is(err, ErrDamaged) {
				t.Fatalf("Open = %v, want ErrDamaged", err)
			}
			l2, sr, lost := salvageAndCheckAcked(t, crashed, acked)
			defer l2.Close()
			t.Logf("salvage: %d keys, %d batches, lost %+v", sr.Keys, sr.Batches, sr.Lost)
			for s := uint64(293); s <= 300; s++ {
				id := fmt.Sprintf("w-%d", s-1)
				if lost[s] {
					t.Errorf("seq %d (%s) recorded lost, though its group's replica is intact", s, id)
					continue
				}
				e, ok, err := l2.Lookup(id)
				if err != nil || !ok || e.Seq != s {
					t.Errorf("dedupe entry of %s after salvage: %+v %v %v, want seq %d", id, e, ok, err, s)
				}
			}
			if how == "flip" && len(sr.Lost) != 0 {
				t.Errorf("salvage recorded lost %+v; the one damaged batch is in its replica", sr.Lost)
			}
		})
	}
}

// The minor finding: a flip in the batch of seq 1 leaves no record of it in the
// intact part; Check counted the records after the damage but printed "seqs
// 0..300". The first record is seq 2.
func TestCheckFirstSeqCountsBatchesAfterTheDamage(t *testing.T) {
	fs := vfs.NewCrashableMem()
	l := openT(t, fs)
	appendEach(t, l, "f", 30)
	crashed := fs.CrashClone(vfs.CrashCloneCfg{})
	l.Close()
	wal := newestWAL(t, crashed, "data")
	flipBit(t, crashed, wal, walBatchOf(t, crashed, wal, 1)+30)
	rep, err := Check("data", crashed)
	if err != nil {
		t.Fatal(err)
	}
	if rep.First != 2 || rep.Last != 30 || len(rep.Missing) != 1 || rep.Missing[0] != [2]uint64{1, 1} {
		t.Fatalf("Check: records %d..%d (%d), missing %v; want 2..30 and 1 missing", rep.First, rep.Last, rep.Records, rep.Missing)
	}
}

// dropReplicas rewrites the mark file as an Open leaves it (every slot the mark
// only, no replica), keeping the highest seq it named: for tests of damage whose
// only copy is the WAL or an SST, as it is for any group older than the newest
// eight, or written before the last restart.
func dropReplicas(t *testing.T, fs vfs.FS, dir string) {
	t.Helper()
	mark, reps, _, err := readSide(fs, dir)
	if err != nil {
		t.Fatal(err)
	}
	h, err := createHWM(fs, dir, max(mark, namedTop(reps, nil)))
	if err != nil {
		t.Fatal(err)
	}
	_ = h.close()
}
