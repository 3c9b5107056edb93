package eventlog

import (
	"context"
	"fmt"
	"io"
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
	l, err := Open(Options{Dir: "data", FS: fs})
	if err != nil {
		t.Fatal(err)
	}
	const lostN = 600 // one group commit: one WAL batch, lost whole
	recs := make([]*event.Record, lostN)
	for i := range recs {
		e := event.Event{ID: fmt.Sprintf("bulk-%d", i), Source: "s", Type: "t", Payload: []byte(`{"n":1}`)}
		recs[i] = &event.Record{ReceivedAt: time.Now().UnixNano(), Event: e, Hash: e.Hash()}
	}
	if err := l.Append(context.Background(), recs...); err != nil {
		t.Fatal(err)
	}
	after := event.Event{ID: "after", Source: "s", Type: "t", Payload: []byte(`{"n":2}`)}
	if err := l.Append(context.Background(), &event.Record{ReceivedAt: time.Now().UnixNano(), Event: after, Hash: after.Hash()}); err != nil {
		t.Fatal(err)
	}
	crashed := fs.CrashClone(vfs.CrashCloneCfg{})
	_ = l.Close()

	names, _ := crashed.List("data")
	var wal string
	for _, n := range names {
		if strings.HasSuffix(n, ".log") && n > wal {
			wal = n
		}
	}
	wal = crashed.PathJoin("data", wal)
	f, err := crashed.Open(wal)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(f)
	f.Close()
	b[len(b)/3] ^= 1 // inside the big batch
	w, _ := crashed.Create(wal, vfs.WriteCategoryUnspecified)
	_, _ = w.Write(b)
	_ = w.Sync()
	_ = w.Close()
	if _, err := Salvage("data", crashed, time.Now()); err != nil {
		t.Fatal(err)
	}
	l, err = Open(Options{Dir: "data", FS: crashed})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	lost := l.Lost()
	if len(lost) != 1 || lost[0].From != 1 || lost[0].To != lostN {
		t.Fatalf("lost ranges %+v, want seqs 1..%d", lost, lostN)
	}
	got, err := l.Read(l.Committed(), 256)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Seq != lostN+1 || got[0].Event.ID != "after" {
		t.Fatalf("Read(%d, 256) after a lost range of %d seqs = %d records %v, want seq %d (%q)",
			l.Committed(), lostN, len(got), seqsOf(got), lostN+1, "after")
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
	l, err := Open(Options{Dir: "data", FS: fs})
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 3; i++ {
		e := event.Event{ID: fmt.Sprintf("unique-event-%d", i), Source: "s", Type: "t", Payload: []byte(`{"n":1}`)}
		if err := l.Append(context.Background(), &event.Record{ReceivedAt: time.Now().UnixNano(), Event: e, Hash: e.Hash()}); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Apply(&Write{Committed: 4}); err != nil { // all three processed
		t.Fatal(err)
	}
	crashed := fs.CrashClone(vfs.CrashCloneCfg{})
	_ = l.Close()

	names, _ := crashed.List("data")
	var wal string
	for _, n := range names {
		if strings.HasSuffix(n, ".log") && n > wal {
			wal = n
		}
	}
	wal = crashed.PathJoin("data", wal)
	f, err := crashed.Open(wal)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(f)
	f.Close()
	at := strings.Index(string(b), "unique-event-2")
	if at < 0 {
		t.Fatal("record 2 not found in the WAL")
	}
	b[at] ^= 1
	w, _ := crashed.Create(wal, vfs.WriteCategoryUnspecified)
	_, _ = w.Write(b)
	_ = w.Sync()
	_ = w.Close()

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
	l, err = Open(Options{Dir: "data", FS: crashed})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	lost := l.Lost()
	if len(lost) != 1 || lost[0].From != 2 || lost[0].To != 2 {
		t.Fatalf("after salvage (%+v): lost ranges %+v, want seqs 2..2 (check named them MISSING)", rep, lost)
	}
}
