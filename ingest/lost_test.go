package ingest

import (
	"context"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/gale-stream/gale/event"
	"github.com/gale-stream/gale/eventlog"
)

// After a salvage recorded seq 3 lost (its WAL record was damaged), the service
// lists it at GET /v1/lost, processes the records around it, and the committed
// offset passes it (no record will ever finish it); a new event gets seq 13.
func TestSalvagedLogListsLostAndCommitsPastThem(t *testing.T) {
	fs := vfs.NewCrashableMem()
	l, err := eventlog.Open(eventlog.Options{Dir: "data", FS: fs})
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 12; i++ { // 12 groups: seq 3's slot in the mark file is reused, so no replica keeps it
		e := event.Event{ID: fmt.Sprintf("event-number-%d", i), Source: "orders", Type: "order_line", Payload: []byte(`{"n":1}`)}
		if err := l.Append(context.Background(), &event.Record{ReceivedAt: time.Now().UnixNano(), Event: e, Hash: e.Hash()}); err != nil {
			t.Fatal(err)
		}
	}
	crashed := fs.CrashClone(vfs.CrashCloneCfg{})
	_ = l.Close()
	// Flip a bit in a middle record (seq 3): the last group's replica in the mark
	// file would restore a damaged last record, so it would not be lost.
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
	at := strings.Index(string(b), "event-number-3")
	if at < 0 {
		t.Fatal("record 3 not in the WAL")
	}
	b[at] ^= 1
	w, _ := crashed.Create(wal, vfs.WriteCategoryUnspecified)
	_, _ = w.Write(b)
	_ = w.Sync()
	_ = w.Close()
	if _, err := eventlog.Salvage("data", crashed, time.Now()); err != nil {
		t.Fatal(err)
	}

	r := startRig(t, crashed, newSink(nil), Config{})
	code, body := r.get("/v1/lost")
	lost := decode[struct {
		Lost []eventlog.LostRange `json:"lost"`
	}](t, body)
	if code != 200 || len(lost.Lost) != 1 || lost.Lost[0].From != 3 || lost.Lost[0].To != 3 {
		t.Fatalf("GET /v1/lost = %d %s, want seq 3..3", code, body)
	}
	code, _, body = r.post("/v1/events?ack=processed", ev("e6", `{"n":6}`))
	a := decode[Answer](t, body)
	if code != 200 || a.Seq != 13 || a.Status != Processed {
		t.Fatalf("new event after salvage: %d %s, want PROCESSED at seq 13", code, body)
	}
	waitFor(t, "the committed offset to reach 14 (past the lost seq 3)", func() bool { return r.svc.Stats().Committed == 14 })
	for _, i := range []int{1, 2, 4, 5, 6, 7, 8, 9, 10, 11, 12} { // every record but the lost one
		id := fmt.Sprintf("event-number-%d", i)
		if applied, _ := r.sink.count(id); applied != 1 {
			t.Fatalf("%s applied %d times, want 1", id, applied)
		}
	}
}
