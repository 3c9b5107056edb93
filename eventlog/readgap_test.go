package eventlog

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/gale-stream/gale/event"
)

// A salvage that loses more seqs than one Read asks for leaves a gap wider than
// max. Read must step over it to the records after it: before, it read seqs
// from..from+max-1 only, found none, and the log spout (which reads from the
// committed offset, inside the gap) never emitted again until a restart, while
// `gale sink rebuild` stopped at the gap and reported nothing missing.
func TestReadStepsOverALostRangeWiderThanMax(t *testing.T) {
	fs := vfs.NewCrashableMem()
	l := openT(t, fs)
	const lostN = 600 // one group commit: one WAL batch, lost whole
	recs := make([]*event.Record, lostN)
	for i := range recs {
		recs[i] = rec(fmt.Sprintf("bulk-%d", i))
	}
	if err := l.Append(context.Background(), recs...); err != nil {
		t.Fatal(err)
	}
	appendEach(t, l, "after", 1)
	crashed := fs.CrashClone(vfs.CrashCloneCfg{})
	_ = l.Close()

	wal := newestWAL(t, crashed, "data")
	flipBit(t, crashed, wal, int64(len(readAll(t, crashed, wal))/3)) // inside the big batch
	if _, err := Salvage("data", crashed, time.Now()); err != nil {
		t.Fatal(err)
	}
	l = openT(t, crashed)
	defer l.Close()
	lost := l.Lost()
	if len(lost) != 1 || lost[0].From != 1 || lost[0].To != lostN {
		t.Fatalf("lost ranges %+v, want seqs 1..%d", lost, lostN)
	}
	got, err := l.Read(l.Committed(), 256)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Seq != lostN+1 || got[0].Event.ID != "after-0" {
		t.Fatalf("Read(%d, 256) after a lost range of %d seqs = %d records %v, want seq %d (%q)",
			l.Committed(), lostN, len(got), seqsOf(got), lostN+1, "after-0")
	}
}

func seqsOf(recs []event.Record) []uint64 {
	out := make([]uint64, len(recs))
	for i, r := range recs {
		out[i] = r.Seq
	}
	return out
}

// A record lost below the committed offset (its event was already processed) is
// still a lost record: `gale log check` names it MISSING, and salvage must record
// it too. Before, salvage counted lost seqs only from the committed offset of the
// salvaged copy, which a later intact batch had moved past the damage: it said
// "nothing acknowledged" lost, and the next check called the log intact.
func TestSalvageRecordsARecordLostBelowTheCommittedOffset(t *testing.T) {
	fs := vfs.NewCrashableMem()
	l := openT(t, fs)
	appendEach(t, l, "unique-event", 3)                   // seqs 1..3, ids unique-event-0..2
	if err := l.Apply(&Write{Committed: 4}); err != nil { // all three processed
		t.Fatal(err)
	}
	crashed := fs.CrashClone(vfs.CrashCloneCfg{})
	_ = l.Close()

	wal := newestWAL(t, crashed, "data")
	at := strings.Index(string(readAll(t, crashed, wal)), "unique-event-1") // seq 2
	if at < 0 {
		t.Fatal("record 2 not found in the WAL")
	}
	flipBit(t, crashed, wal, int64(at))
	dropReplicas(t, crashed, "data") // else the replica of seq 2 restores it

	check, err := Check("data", crashed)
	if err != nil {
		t.Fatal(err)
	}
	if len(check.Missing) != 1 || check.Missing[0] != [2]uint64{2, 2} {
		t.Fatalf("check: missing %v, want seqs 2..2", check.Missing)
	}
	rep, err := Salvage("data", crashed, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	l = openT(t, crashed)
	defer l.Close()
	lost := l.Lost()
	if len(lost) != 1 || lost[0].From != 2 || lost[0].To != 2 {
		t.Fatalf("after salvage (%+v): lost ranges %+v, want seqs 2..2 (check named them MISSING)", rep, lost)
	}
}
