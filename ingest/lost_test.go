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

// After a salvage recorded seq 5 lost (its WAL record was damaged), the service
// lists it at GET /v1/lost, processes the records around it, and the committed
// offset passes it (no record will ever finish it); a new event gets seq 6.
func TestSalvagedLogListsLostAndCommitsPastThem(t *testing.T) {
	fs := vfs.NewCrashableMem()
	l, err := eventlog.Open(eventlog.Options{Dir: "data", FS: fs})
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 5; i++ {
		e := event.Event{ID: fmt.Sprintf("e%d", i), Source: "orders", Type: "order_line", Payload: []byte(`{"n":1}`)}
		if err := l.Append(context.Background(), &event.Record{ReceivedAt: time.Now().UnixNano(), Event: e, Hash: e.Hash()}); err != nil {
			t.Fatal(err)
		}
	}
	crashed := fs.CrashClone(vfs.CrashCloneCfg{})
	_ = l.Close()
	// Flip a bit in the last record (seq 5), the end of the newest WAL.
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
	end := len(b)
	for end > 0 && b[end-1] == 0 {
		end--
	}
	b[end-8] ^= 1
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
	if code != 200 || len(lost.Lost) != 1 || lost.Lost[0].From != 5 || lost.Lost[0].To != 5 {
		t.Fatalf("GET /v1/lost = %d %s, want seq 5..5", code, body)
	}
	code, _, body = r.post("/v1/events?ack=processed", ev("e6", `{"n":6}`))
	a := decode[Answer](t, body)
	if code != 200 || a.Seq != 6 || a.Status != Processed {
		t.Fatalf("new event after salvage: %d %s, want PROCESSED at seq 6", code, body)
	}
	for i := 0; r.svc.Stats().Committed != 7; i++ {
		if i > 5000 {
			t.Fatalf("committed offset stuck at %d, want 7 (past the lost seq 5)", r.svc.Stats().Committed)
		}
		time.Sleep(time.Millisecond)
	}
	for i := 1; i <= 4; i++ {
		if applied, _ := r.sink.count(fmt.Sprintf("e%d", i)); applied != 1 {
			t.Fatalf("e%d applied %d times, want 1", i, applied)
		}
	}
}
