package eventlog

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// A salvage killed between moving the damaged store aside and moving its copy in
// leaves no log at dir. Before, Open made a fresh empty log there and gave out
// seq 1 again (the sink then held two events with seq 1), and a second salvage
// said the dir "holds no log". Now Open refuses naming the leftovers, and Salvage
// finishes the move.
func TestInterruptedSalvageIsFinishedNotStartedOver(t *testing.T) {
	fs := vfs.NewMem()
	// The state a salvage leaves when killed between its renames: the damaged
	// store aside, the complete copy at data.salvage, nothing at data.
	l, err := Open(Options{Dir: "data.salvage", FS: fs})
	if err != nil {
		t.Fatal(err)
	}
	appendEach(t, l, "kept", 3)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if err := fs.MkdirAll("data.damaged-20261201T000000Z", 0o755); err != nil {
		t.Fatal(err)
	}

	_, err = Open(Options{Dir: "data", FS: fs})
	if !errors.Is(err, ErrSalvageInterrupted) {
		t.Fatalf("Open with an interrupted salvage beside it: %v, want ErrSalvageInterrupted", err)
	}
	rep, err := Salvage("data", fs, time.Now())
	if err != nil || !rep.Finished {
		t.Fatalf("second salvage: %+v %v, want it to finish the first", rep, err)
	}
	l = openT(t, fs)
	defer l.Close()
	if d := l.Durable(); d != 3 {
		t.Fatalf("durable %d after finishing the salvage, want 3", d)
	}
	r := rec("new")
	if err := l.Append(context.Background(), r); err != nil || r.Seq != 4 {
		t.Fatalf("next append: seq %d %v, want 4", r.Seq, err)
	}
}

// Damaged stores moved aside with no log beside them: a new log would reuse their
// seqs, so Open refuses until the operator moves them away.
func TestOpenRefusesANewLogBesideDamagedStores(t *testing.T) {
	fs := vfs.NewMem()
	if err := fs.MkdirAll("data.damaged-20261201T000000Z", 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(Options{Dir: "data", FS: fs}); !errors.Is(err, ErrDamaged) {
		t.Fatalf("Open of a new log beside a damaged store: %v, want ErrDamaged", err)
	}
	if err := fs.RemoveAll("data.damaged-20261201T000000Z"); err != nil {
		t.Fatal(err)
	}
	_ = openT(t, fs).Close()
}
