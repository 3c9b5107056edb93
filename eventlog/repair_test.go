package eventlog

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// After a WAL bit flip that Open refuses, Check names the damage without changing
// a byte, and Salvage starts the log again from what is intact: every acknowledged
// record still readable is there, the rest is recorded lost (with the ids some copy
// still names), and new records get seqs above every acknowledged one.
func TestCheckAndSalvageAfterWALBitFlip(t *testing.T) {
	for _, where := range []string{"start", "middle", "last"} {
		t.Run(where, func(t *testing.T) {
			fs := vfs.NewCrashableMem()
			l := openT(t, fs)
			acked := appendEach(t, l, where, 300)
			// Status documents for the first 200, in their own batches, as the
			// ingest service writes them: a copy of the id outside the record's batch.
			for id, seq := range acked {
				if seq <= 200 {
					var w Write
					w.Set(Status, id, []byte(fmt.Sprintf(`{"event_id":%q,"status":"PERSISTED","seq":%d}`, id, seq)))
					if err := l.Apply(&w); err != nil {
						t.Fatal(err)
					}
				}
			}
			crashed := fs.CrashClone(vfs.CrashCloneCfg{})
			l.Close()
			wal := newestWAL(t, crashed, "data")
			// A bit inside the batch of record 1, 150 or 300 (the status
			// documents' batches follow the records').
			target := map[string]uint64{"start": 1, "middle": 150, "last": 300}[where]
			off := int64(-1)
			ws, err := scanWALs(crashed, "data")
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range ws {
				for _, b := range w.Batches {
					if w.Name == wal && b.min == target {
						off = b.off + 30
					}
				}
			}
			flipBit(t, crashed, wal, off)
			_, err = Open(Options{Dir: "data", FS: crashed})
			if err == nil {
				t.Fatal("Open accepted the damaged log")
			}
			t.Logf("Open: %v", err)

			before := snapshot(t, crashed, "data")
			rep, err := Check("data", crashed)
			if err != nil {
				t.Fatal(err)
			}
			if !rep.Damaged() {
				t.Fatalf("Check found no damage: %+v", rep)
			}
			if after := snapshot(t, crashed, "data"); after != before {
				t.Fatalf("Check modified the store:\n%s\nafter:\n%s", before, after)
			}
			t.Logf("check: missing %v, bad keys %v, %d intact batches after the damage, WAL %v", rep.Missing, rep.BadKeys, rep.AfterDamage, rep.WAL[len(rep.WAL)-1].Damage)

			sr, err := Salvage("data", crashed, time.Unix(1_700_000_000, 0))
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("salvage: %d keys, %d batches after the damage, lost %+v, old store in %s", sr.Keys, sr.Batches, sr.Lost, sr.OldDir)
			// Record 300's group is the newest: its replica in the mark file
			// keeps it, so only there does the salvage lose nothing.
			if (len(sr.Lost) == 0) != (where == "last") {
				t.Fatalf("salvage recorded lost %+v", sr.Lost)
			}
			if _, err := crashed.Stat(sr.OldDir); err != nil {
				t.Fatalf("damaged store not kept aside: %v", err)
			}
			l2 := openT(t, crashed)
			lost := map[uint64]bool{}
			for _, r := range l2.Lost() {
				for s := r.From; s <= r.To; s++ {
					lost[s] = true
				}
			}
			for id, seq := range acked {
				_, ok, err := l2.ReadSeq(seq)
				if err != nil {
					t.Fatal(err)
				}
				if ok == lost[seq] {
					t.Fatalf("seq %d (%s): readable=%v, recorded lost=%v", seq, id, ok, lost[seq])
				}
				if lost[seq] {
					if _, found, _ := l2.Get(Status, id); found {
						t.Fatalf("status document of lost %s still there", id)
					}
					named := false
					for _, r := range l2.Lost() {
						for _, x := range r.IDs {
							named = named || x == id
						}
					}
					if named != (seq <= 200) {
						t.Fatalf("lost %s (seq %d): named=%v, want %v (a status document survives for seqs <= 200)", id, seq, named, seq <= 200)
					}
				}
			}
			r := rec("after-salvage")
			if err := l2.Append(context.Background(), r); err != nil || r.Seq != 301 {
				t.Fatalf("append after salvage: seq %d, %v; want 301", r.Seq, err)
			}
			l2.Close()
			rep2, err := Check("data", crashed)
			if err != nil || rep2.Damaged() {
				t.Fatalf("Check after salvage: err %v, missing %v, bad keys %v, mark %v, open %v", err, rep2.Missing, rep2.BadKeys, rep2.MarkErr, rep2.OpenErr)
			}
		})
	}
}

// snapshot lists every file under dir with its size and SHA-256, one a line.
func snapshot(t *testing.T, fs vfs.FS, dir string) string {
	t.Helper()
	names, err := fs.List(dir)
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(names)
	var out []string
	for _, n := range names {
		p := fs.PathJoin(dir, n)
		if st, err := fs.Stat(p); err == nil && st.IsDir() {
			continue
		}
		b := readAll(t, fs, p)
		out = append(out, fmt.Sprintf("%s %d %x", n, len(b), sha256.Sum256(b)))
	}
	return strings.Join(out, "\n")
}

// A flip in a batch of status documents (PROCESSED for seqs 6..10, committed 11)
// loses no record, but later batches moved the committed offset past those events:
// Salvage moves it back to seq 6, so the events whose final status was in the
// damage are processed again rather than left PERSISTED for ever.
func TestSalvageReplaysEventsWhoseStatusWasLost(t *testing.T) {
	fs := vfs.NewCrashableMem()
	l := openT(t, fs)
	acked := appendEach(t, l, "r", 10)
	ids := map[uint64]string{}
	for id, seq := range acked {
		ids[seq] = id
	}
	processed := func(from, to, committed uint64) {
		var w Write
		for s := from; s <= to; s++ {
			w.Set(Status, ids[s], []byte(fmt.Sprintf(`{"event_id":%q,"status":"PROCESSED","seq":%d}`, ids[s], s)))
		}
		w.Committed = committed
		if err := l.Apply(&w); err != nil {
			t.Fatal(err)
		}
	}
	processed(1, 5, 6)
	processed(6, 10, 11) // the batch to damage
	for id, seq := range appendEach(t, l, "later", 5) {
		ids[seq] = id
	}
	processed(11, 15, 16)
	crashed := fs.CrashClone(vfs.CrashCloneCfg{})
	l.Close()
	wal := newestWAL(t, crashed, "data")
	ws, err := scanWALs(crashed, "data")
	if err != nil {
		t.Fatal(err)
	}
	off := int64(-1)
	for _, w := range ws {
		if w.Name != wal {
			continue
		}
		for _, b := range w.Batches {
			if b.min == 0 && bytes.Contains(b.repr, []byte(ids[6])) {
				off = b.off + 40
			}
		}
	}
	if off < 0 {
		t.Fatal("status batch not found in the WAL")
	}
	flipBit(t, crashed, wal, off)
	if _, err := Open(Options{Dir: "data", FS: crashed}); !errors.Is(err, ErrDamaged) {
		t.Fatalf("Open = %v, want ErrDamaged", err)
	}
	sr, err := Salvage("data", crashed, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if len(sr.Lost) != 0 || sr.Replay != 6 {
		t.Fatalf("salvage: lost %+v, replay from %d; want nothing lost and replay from 6", sr.Lost, sr.Replay)
	}
	l2 := openT(t, crashed)
	defer l2.Close()
	if l2.Committed() != 6 || l2.Durable() != 15 {
		t.Fatalf("after salvage committed=%d durable=%d, want 6 and 15", l2.Committed(), l2.Durable())
	}
}

// Check reads SST-held data too: records flushed into an SST whose data block has
// a flipped bit are reported with the SST and key range, and the scan goes on.
func TestCheckReportsDamagedSSTWithKeyRange(t *testing.T) {
	fs := vfs.NewMem()
	l := openT(t, fs)
	appendEach(t, l, "sst", 200)
	if err := l.db.Flush(); err != nil {
		t.Fatal(err)
	}
	l.Close()
	names, _ := fs.List("data")
	var sst string
	for _, n := range names {
		if strings.HasSuffix(n, ".sst") {
			sst = fs.PathJoin("data", n)
		}
	}
	if sst == "" {
		t.Fatalf("no SST after a flush: %v", names)
	}
	flipBit(t, fs, sst, 100) // inside the first data block
	rep, err := Check("data", fs)
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Damaged() || len(rep.BadKeys) == 0 {
		t.Fatalf("Check missed the damaged SST: bad keys %v, open %v", rep.BadKeys, rep.OpenErr)
	}
	for _, k := range rep.BadKeys {
		if !strings.Contains(k.String(), ".sst") || !strings.Contains(k.String(), "..") {
			t.Fatalf("bad key range does not name the SST and the range: %s", k)
		}
		t.Logf("check: %s", k)
	}
	t.Logf("%d records readable", rep.Records)
}
