package ingest

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/gale-stream/gale/event"
	"github.com/gale-stream/gale/eventlog"
	"github.com/gale-stream/gale/internal/ssttest"
	"github.com/gale-stream/gale/internal/waitfor"
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
	// Its id was in the lost batch with its record: no copy names it. A GET of
	// it, or of any unknown id, is a 404 that says such lost seqs exist.
	for _, id := range []string{"event-number-3", "never-sent"} {
		code, body := r.get("/v1/events/" + id)
		a := decode[Answer](t, body)
		if code != 404 || !strings.Contains(a.Error, "no event with this event_id") ||
			!strings.Contains(a.Error, "1 acknowledged seq whose event_id is unknown") || !strings.Contains(a.Error, "/v1/lost") {
			t.Fatalf("GET %s: %d %s; want 404 saying a lost seq with an unknown id exists (see /v1/lost)", id, code, body)
		}
	}
	waitfor.True(t, 10*time.Second, "the committed offset to reach 14 (past the lost seq 3)", func() bool { return r.svc.Stats().Committed == 14 })
	for _, i := range []int{1, 2, 4, 5, 6, 7, 8, 9, 10, 11, 12} { // every record but the lost one
		id := fmt.Sprintf("event-number-%d", i)
		if applied, _ := r.sink.count(id); applied != 1 {
			t.Fatalf("%s applied %d times, want 1", id, applied)
		}
	}
}

// flipRecordsBlock flips a bit in a data block of the log's SST (in data on fs)
// that holds records only, as gale log check names it, and returns its seqs.
func flipRecordsBlock(t *testing.T, fs vfs.FS) [2]uint64 {
	t.Helper()
	names, err := fs.List("data")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range names {
		if !strings.HasSuffix(name, ".sst") {
			continue
		}
		p := filepath.Join("data", name)
		blocks, err := ssttest.DataBlocks(fs, p)
		if err != nil {
			t.Fatal(err)
		}
		for i := 1; i < blocks-1; i++ {
			if _, err := ssttest.FlipDataBlockBit(fs, p, i); err != nil {
				t.Fatal(err)
			}
			rep, err := eventlog.Check("data", fs)
			if err != nil {
				t.Fatal(err)
			}
			if len(rep.BadKeys) == 1 && len(rep.Missing) == 1 && strings.HasPrefix(rep.BadKeys[0].String(), "records seq ") {
				return rep.Missing[0]
			}
			if _, err := ssttest.FlipDataBlockBit(fs, p, i); err != nil { // the same bit again: undone
				t.Fatal(err)
			}
		}
	}
	t.Fatalf("no SST block in %v holds records only", names)
	return [2]uint64{}
}

// lostAnswer is GET /v1/events/{id}'s 410.
type lostAnswer struct {
	EventID string `json:"event_id"`
	Status  string `json:"status"`
	LostSeq uint64 `json:"lost_seq"`
	See     string `json:"see"`
	Error   string `json:"error"`
}

// After a salvage, an event whose record was lost says so (issue 25 §5): the
// bit flipped in a block of records, gale log salvage recorded their seqs lost
// with the ids their dedupe entries named, and a GET of such an id answered
// 404 "never persisted, or past the dedupe window" though it was PROCESSED and
// in the sink. Now: 410 LOST with its seq; with its status document (one that
// survived its record) that document, "record_lost": true; an unknown id a plain
// 404. A resend of a lost id is a new event, at a new seq.
func TestLostEventSaysSo(t *testing.T) {
	fs := vfs.NewMem()
	r := startRig(t, fs, newSink(nil), Config{})
	// 20 group commits: the mark file's replicas (8 slots) keep only the
	// newest groups' records, so the oldest blocks of records have no copy.
	const n = 400
	for g := range 20 {
		var batch strings.Builder
		for i := g * 20; i < (g+1)*20; i++ {
			fmt.Fprintln(&batch, ev(fmt.Sprintf("c%04d", i), `{"qty":1}`))
		}
		code, _, b := r.post("/v1/events:batch?ack=processed", batch.String())
		if ba := decode[BatchAnswer](t, b); code != 200 || ba.Counts["PROCESSED"] != 20 {
			t.Fatalf("batch: %d %v", code, ba.Counts)
		}
	}
	waitfor.True(t, 10*time.Second, "every status synced", func() bool { return r.log.Committed() == n+1 })
	docs := map[string]EventStatus{} // what GET said before the damage
	for i := range n {
		id := fmt.Sprintf("c%04d", i)
		st, err := r.svc.Status(id)
		if err != nil || st.Status != Processed || st.Seq != uint64(i+1) {
			t.Fatalf("%s: %+v %v", id, st, err)
		}
		docs[id] = st
	}
	if err := r.log.Flush(); err != nil { // records, index and documents into one SST
		t.Fatal(err)
	}
	r.stop()
	lost := flipRecordsBlock(t, fs)
	t.Logf("flipped a block of records seq %d..%d", lost[0], lost[1])
	rep, err := eventlog.Salvage("data", fs, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Lost) != 1 || rep.Lost[0].From != lost[0] || rep.Lost[0].To != lost[1] || uint64(len(rep.Lost[0].IDs)) != lost[1]-lost[0]+1 {
		t.Fatalf("salvage recorded lost %+v, want seqs %d..%d with every id", rep.Lost, lost[0], lost[1])
	}
	idOf := func(seq uint64) string { return fmt.Sprintf("c%04d", seq-1) }
	gone, kept, dead := idOf(lost[0]), idOf(lost[0]+1), idOf(lost[0]+2)
	// The salvage removed the lost ids' status documents (a Pebble salvage
	// does; a JetStream log keeps them apart from the stream): put two back,
	// as documents that survived their records, one of them a dead letter's.
	l, err := eventlog.Open(eventlog.Options{Dir: "data", FS: fs})
	if err != nil {
		t.Fatal(err)
	}
	var w eventlog.Write
	doc, _ := json.Marshal(docs[kept])
	w.Set(eventlog.Status, kept, doc)
	dd := docs[dead]
	dd.Status, dd.LastError = FailedFinal, "the sink refused it"
	dd.Transitions = append(dd.Transitions[:len(dd.Transitions)-1:len(dd.Transitions)-1],
		Transition{Step: StepDeadLetter, Status: FailedFinal, At: dd.Transitions[len(dd.Transitions)-1].At, Attempt: 1, Error: dd.LastError})
	doc, _ = json.Marshal(dd)
	w.Set(eventlog.Status, dead, doc)
	if err := l.Apply(&w); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}

	r = startRig(t, fs, newSink(nil), Config{})
	code, b := r.get("/v1/events/" + gone)
	la := decode[lostAnswer](t, b)
	if code != 410 || la.EventID != gone || la.Status != "LOST" || la.LostSeq != lost[0] || la.See != "/v1/lost" {
		t.Fatalf("GET of a lost id: %d %s; want 410 LOST at seq %d, see /v1/lost", code, b, lost[0])
	}
	t.Logf("GET %s: %d %s", gone, code, b)
	code, b = r.get("/v1/events/" + kept)
	var st struct {
		EventStatus
		RecordLost bool   `json:"record_lost"`
		LostSeq    uint64 `json:"lost_seq"`
	}
	if err := json.Unmarshal(b, &st); err != nil {
		t.Fatal(err)
	}
	if code != 200 || st.Status != Processed || !st.RecordLost || st.LostSeq != lost[0]+1 || st.Seq != lost[0]+1 ||
		len(st.Transitions) != len(docs[kept].Transitions) {
		t.Fatalf("GET of a lost id whose status document survived: %d %s; want it PROCESSED, record_lost, lost_seq %d", code, b, lost[0]+1)
	}
	t.Logf("GET %s: %d %s", kept, code, b)
	code, b = r.get("/v1/events/never-sent")
	if a := decode[Answer](t, b); code != 404 || strings.Contains(a.Error, "lost") {
		t.Fatalf("GET of an unknown id, every lost seq's id known: %d %s; want a plain 404", code, b)
	}
	code, b = r.get("/v1/lost")
	ll := decode[struct {
		Lost []eventlog.LostRange `json:"lost"`
	}](t, b)
	if code != 200 || len(ll.Lost) != 1 || len(ll.Lost[0].Seqs) != len(ll.Lost[0].IDs) || ll.Lost[0].IDs[0] != gone || ll.Lost[0].Seqs[0] != lost[0] {
		t.Fatalf("GET /v1/lost: %d %s; want the ids with their seqs", code, b)
	}
	// A resend is a new event: a new seq, processed.
	code, _, b = r.post("/v1/events?ack=processed", ev(gone, `{"qty":1}`))
	if a := decode[Answer](t, b); code != 200 || a.Duplicate || a.Status != Processed || a.Seq <= n {
		t.Fatalf("resend of a lost id: %d %s; want PROCESSED as a new event, at a seq above %d", code, b, n)
	}
	if code, b := r.get("/v1/events/" + gone); code != 200 || decode[EventStatus](t, b).Seq <= n || strings.Contains(string(b), "record_lost") {
		t.Fatalf("GET of the resent id: %d %s", code, b)
	}
	// A resend of a lost id whose PROCESSED document survived: with the same
	// payload its duplicate (the sink has its row), nothing stored; with
	// another, a conflict, as for any id reused with other content. Either
	// used to be a new event, the other payload processed as if the first had
	// never been.
	type lostDup struct {
		Answer
		RecordLost bool   `json:"record_lost"`
		LostSeq    uint64 `json:"lost_seq"`
	}
	code, _, b = r.post("/v1/events?ack=processed", ev(kept, `{"qty":1}`))
	t.Logf("resend of %s, same payload: %d %s", kept, code, b)
	if a := decode[lostDup](t, b); code != 200 || !a.Duplicate || a.Status != Processed || a.Seq != lost[0]+1 || !a.RecordLost || a.LostSeq != lost[0]+1 {
		t.Fatalf("resend of %s (PROCESSED, its record lost), same payload: %d %s; want its duplicate, record_lost", kept, code, b)
	}
	code, _, b = r.post("/v1/events?ack=processed", ev(kept, `{"qty":2}`))
	t.Logf("resend of %s, another payload: %d %s", kept, code, b)
	if a := decode[lostDup](t, b); code != 409 || a.Status != FailedFinal || a.PayloadHash != docs[kept].PayloadHash {
		t.Fatalf("resend of %s with another payload: %d %s; want 409 with the stored payload_hash", kept, code, b)
	}
	if _, ok, err := r.log.Lookup(kept); err != nil || ok {
		t.Fatalf("%s stored again (%v, %v): its resends are a duplicate and a conflict", kept, ok, err)
	}
	// A dead letter's: a new event, processed, its document about the new seq.
	code, _, b = r.post("/v1/events?ack=processed", ev(dead, `{"qty":1}`))
	t.Logf("resend of %s (FAILED_FINAL, its record lost): %d %s", dead, code, b)
	if a := decode[lostDup](t, b); code != 200 || a.Duplicate || a.Status != Processed || a.Seq <= n || a.RecordLost {
		t.Fatalf("resend of %s (FAILED_FINAL, its record lost): %d %s; want PROCESSED as a new event", dead, code, b)
	}
	if applied, _ := r.sink.count(dead); applied != 1 {
		t.Fatalf("%s applied %d times after its resend, want 1", dead, applied)
	}
	if applied, _ := r.sink.count(kept); applied != 0 {
		t.Fatalf("%s applied %d times after its resends, want 0", kept, applied)
	}
	// Past the dedupe window of the loss, the id is new, as any id past it.
	r.stop()
	r = startRig(t, fs, newSink(nil), Config{DedupeWindow: time.Nanosecond})
	code, _, b = r.post("/v1/events?ack=processed", ev(kept, `{"qty":2}`))
	if a := decode[lostDup](t, b); code != 200 || a.Duplicate || a.Status != Processed || a.Seq <= n || a.RecordLost {
		t.Fatalf("resend of %s past the dedupe window: %d %s; want PROCESSED as a new event", kept, code, b)
	}
}
