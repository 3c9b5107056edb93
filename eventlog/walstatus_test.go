package eventlog

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/gale-stream/gale/internal/testio"
)

// The newest WAL damaged in a batch of status documents whose sync no later chunk
// vouches for, with intact batches after it that hold no record (status
// documents, the committed offset; written without a sync of their own here, as
// group commits pipelined behind another's sync are): a torn tail to Open, which
// starts, since no acknowledged record is missing, but Pebble's replay drops
// those batches, so the committed offset goes back and their events are processed
// again. Open must say so (a WARN), and Check must report those writes as lost
// at a start, not as kept by a salvage that refuses an intact log.
func TestStatusWritesAfterTornNewestWALReported(t *testing.T) {
	fs := vfs.NewMem()
	l := openT(t, fs)
	acked := appendEach(t, l, "st", 20)
	ids := map[uint64]string{}
	for id, seq := range acked {
		ids[seq] = id
	}
	var w Write
	for s := uint64(1); s <= 20; s++ {
		w.Set(Status, ids[s], []byte(fmt.Sprintf(`{"event_id":%q,"status":"PERSISTED","seq":%d}`, ids[s], s)))
	}
	if err := l.Apply(&w); err != nil {
		t.Fatal(err)
	}
	// Three batches without their own sync; Close syncs them.
	unsynced := func(from, to, committed uint64) {
		b := l.db.NewBatch()
		for s := from; s <= to; s++ {
			_ = b.Set(nsKey(byte(Status), ids[s]), []byte(fmt.Sprintf(`{"event_id":%q,"status":"PROCESSED","seq":%d}`, ids[s], s)), nil)
		}
		if committed != 0 {
			_ = b.Set(committedKey, binary.BigEndian.AppendUint64(nil, committed), nil)
		}
		if err := l.db.Apply(b, pebble.NoSync); err != nil {
			t.Fatal(err)
		}
	}
	unsynced(1, 10, 11) // the batch to damage
	unsynced(11, 20, 21)
	unsynced(20, 20, 0)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	wal := newestWAL(t, fs, "data")
	overwrite4(t, fs, wal, statusBatchOffset(t, fs, wal, 1))

	rep, err := Check("data", fs)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Damaged() || len(rep.Missing) != 0 {
		t.Fatalf("Check: damaged=%v missing %v; want no acknowledged record missing (a torn tail to Open)", rep.Damaged(), rep.Missing)
	}
	if rep.AfterDamage != 2 || rep.AfterStatus != 11 || rep.AfterCommitted != 21 || rep.Committed != 1 {
		t.Fatalf("Check: %d batches after the damage with %d status documents and committed offset %d (intact part: %d); want 2, 11, 21 and 1",
			rep.AfterDamage, rep.AfterStatus, rep.AfterCommitted, rep.Committed)
	}

	var logs testio.SyncBuffer
	l2, err := Open(Options{Dir: "data", FS: fs, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer l2.Close()
	if l2.Committed() != 1 || l2.Durable() != 20 {
		t.Fatalf("after Open committed=%d durable=%d, want 1 (the offset before the damage) and 20", l2.Committed(), l2.Durable())
	}
	warn := logs.Lines("level=WARN", "dropped")
	if len(warn) != 1 || !strings.Contains(warn[0], wal) || !strings.Contains(warn[0], "batches=2") ||
		!strings.Contains(warn[0], "status_documents=11") || !strings.Contains(warn[0], "committed_offset_lost=21") ||
		!strings.Contains(warn[0], "committed_offset=1") {
		t.Fatalf("Open's log, want one WARN naming %s, the 2 dropped batches, their 11 status documents and committed offset 21 (now 1):\n%s", wal, logs.String())
	}
	t.Logf("Open: %s", warn[0])
}

// The last batch before the newest WAL's EOF trailer damaged (status documents
// and the committed offset, no sync of their own): the scan finds no intact
// chunk after it, so Open takes it for a torn tail and Pebble drops it, but the
// trailer shows the WAL was closed (and synced) after it: not a torn write. The
// start must say what it dropped (a WARN), and Check must mark the damage.
func TestDamagedLastBatchBeforeEOFTrailerReported(t *testing.T) {
	fs := vfs.NewMem()
	l := openT(t, fs)
	acked := appendEach(t, l, "tr", 20)
	ids := map[uint64]string{}
	for id, seq := range acked {
		ids[seq] = id
	}
	// This write carries the groups' sync times, so Close writes no batch
	// after the ones below.
	if err := l.Apply(&Write{}); err != nil {
		t.Fatal(err)
	}
	unsynced := func(from, to, committed uint64) {
		b := l.db.NewBatch()
		for s := from; s <= to; s++ {
			_ = b.Set(nsKey(byte(Status), ids[s]), []byte(fmt.Sprintf(`{"event_id":%q,"status":"PROCESSED","seq":%d}`, ids[s], s)), nil)
		}
		_ = b.Set(committedKey, binary.BigEndian.AppendUint64(nil, committed), nil)
		if err := l.db.Apply(b, pebble.NoSync); err != nil {
			t.Fatal(err)
		}
	}
	unsynced(1, 10, 11)
	unsynced(11, 20, 21) // the batch to damage: the last one
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	wal := newestWAL(t, fs, "data")
	overwrite4(t, fs, wal, statusBatchOffset(t, fs, wal, 11))

	rep, err := Check("data", fs)
	if err != nil {
		t.Fatal(err)
	}
	var d []WALDamage
	for _, x := range rep.WAL {
		if x.Name == wal {
			d = x.Damage
		}
	}
	if rep.Damaged() || len(d) != 1 || d[0].Resync >= 0 || !d[0].Closed {
		t.Fatalf("Check: damaged=%v, damage of %s %+v; want one, with no intact chunk after it but the EOF trailer (Closed)", rep.Damaged(), wal, d)
	}

	var logs testio.SyncBuffer
	l2, err := Open(Options{Dir: "data", FS: fs, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer l2.Close()
	if l2.Committed() != 11 || l2.Durable() != 20 {
		t.Fatalf("after Open committed=%d durable=%d, want 11 and 20", l2.Committed(), l2.Durable())
	}
	warn := logs.Lines("level=WARN", "dropped")
	if len(warn) != 1 || !strings.Contains(warn[0], wal) || !strings.Contains(warn[0], "EOF trailer") ||
		!strings.Contains(warn[0], "committed_offset=11") {
		t.Fatalf("Open's log, want one WARN naming %s, its EOF trailer after the damage and the committed offset it starts from:\n%s", wal, logs.String())
	}
	t.Logf("Open: %s", warn[0])
}

// statusBatchOffset is an offset 40 bytes into the batch of wal that holds the
// PROCESSED status document of seq: inside the batch, so that damage there cuts it.
func statusBatchOffset(t *testing.T, fs vfs.FS, wal string, seq int) int64 {
	t.Helper()
	ws, err := scanWALs(fs, "data")
	if err != nil {
		t.Fatal(err)
	}
	needle := []byte(fmt.Sprintf(`"PROCESSED","seq":%d}`, seq))
	off := int64(-1)
	for _, x := range ws {
		for _, b := range x.Batches {
			if x.Name == wal && b.min == 0 && bytes.Contains(b.repr, needle) {
				off = b.off + 40 // the last such batch
			}
		}
	}
	if off < 0 {
		t.Fatalf("no batch of %s holds the status of seq %d", wal, seq)
	}
	return off
}
