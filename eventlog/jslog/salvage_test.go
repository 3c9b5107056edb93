package jslog

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/gale-stream/gale/event"
	"github.com/gale-stream/gale/eventlog"
	"github.com/gale-stream/gale/ingest"
	"github.com/gale-stream/gale/internal/natstest"
	"github.com/gale-stream/gale/internal/waitfor"
	"github.com/gale-stream/gale/topology"
	"github.com/gale-stream/gale/tuple"
)

// loseTail makes stream t-log hold only its first keep of n records, the mark
// staying at n (nats-server#7567).
func loseTail(t *testing.T, js jetstream.JetStream, keep int) {
	t.Helper()
	ctx := context.Background()
	if err := js.DeleteStream(ctx, "t-log"); err != nil {
		t.Fatal(err)
	}
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "t-log", Subjects: []string{"t.log.>"}, Storage: jetstream.FileStorage}); err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= keep; i++ {
		r := rec(fmt.Sprintf("e%d", i), 0, `{}`)
		if _, err := js.PublishMsg(ctx, &nats.Msg{Subject: "t.log." + base64.RawURLEncoding.EncodeToString([]byte(r.Event.ID)), Data: r.Encode(nil)}); err != nil {
			t.Fatal(err)
		}
	}
}

// A salvage cut off while it fills a lost tail (the cluster unreachable, the
// tool killed) and run again: every filler's seq ends up recorded lost. A
// filler no lost range covers is skipped by Read but never finished by the
// ingest service, so its committed offset would stop there for good.
func TestSalvageInterruptedWhileFilling(t *testing.T) {
	url := natstest.Run(t, natstest.JetStream(t, "")).ClientURL()
	js := openJS(t, url)
	l := open(t, js)
	appendN(t, l, 1, 5)
	if err := l.Apply(&eventlog.Write{Committed: 3}); err != nil { // e1, e2 processed; the mark at 5
		t.Fatal(err)
	}
	_ = l.Close()
	loseTail(t, js, 2)
	ctx := context.Background()
	cut := errors.New("cut off")
	beforeFiller = func(seq uint64) error {
		if seq == 4 {
			return cut
		}
		return nil
	}
	_, err := Salvage(ctx, Config{JS: js, Prefix: "t"}, false)
	beforeFiller = nil
	if !errors.Is(err, cut) {
		t.Fatalf("the first salvage: %v, want it cut off", err)
	}
	rep, err := Salvage(ctx, Config{JS: js, Prefix: "t"}, false)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("second salvage: %+v", rep)
	l2 := open(t, js)
	if !l2.lostCovers(3, 5) {
		t.Fatalf("lost ranges after the two salvages: %+v, want 3..5 covered (the fillers)", l2.Lost())
	}
	svc, _ := startServe(t, l2)
	if r := svc.Submit(ctx, orderEvents(0, 1), ingest.LevelProcessed, 10*time.Second)[0]; r.Err != nil || r.Status.Status != ingest.Processed || r.Status.Seq != 6 {
		t.Fatalf("a new event after the salvages: %+v", r)
	}
	waitCommitted(t, svc, 7, "past the fillers and the new event")
}

// The stream loses its tail while serve runs (a server restarted without it,
// nats-server#7567; or deleted and made again by a serve process starting,
// whose Open then refuses it). The running process must not answer PERSISTED
// for a record the stream put at a seq it had given out before: the log spout
// reads past those seqs, so the event would never be processed, and its resend
// would be a duplicate of it.
func TestStreamLosesItsTailWhileServing(t *testing.T) {
	url := natstest.Run(t, natstest.JetStream(t, "")).ClientURL()
	js := openJS(t, url)
	la := openLeased(t, url, "a")
	a, rta := startServeWith(t, la, ingest.Config{FlushEvery: 5 * time.Millisecond}, newCtlSink())
	ctx := context.Background()
	for i, r := range a.Submit(ctx, orderEvents(0, 5), ingest.LevelProcessed, 10*time.Second) {
		if r.Err != nil || r.Status.Status != ingest.Processed {
			t.Fatalf("o%d: %+v", i, r)
		}
	}
	// A tool's log (no lease, so no look at the stream's end but its own acks).
	n, err := Open(ctx, Config{JS: openJS(t, url), Prefix: "t", NoLease: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = n.Close() })
	if err := js.DeleteStream(ctx, "t-log"); err != nil {
		t.Fatal(err)
	}
	// Another serve process starts: its Open makes the stream again, empty, and
	// refuses it (below the mark).
	if _, err := Open(ctx, Config{JS: js, Prefix: "t", LeaseTTL: time.Second, Holder: "c"}); !errors.Is(err, ErrLost) {
		t.Fatalf("Open of the emptied stream: %v", err)
	}
	// Its acks tell a process that sends: the record is taken back out.
	if err := n.Append(ctx, rec("n6", 0, `{}`)); !errors.Is(err, ErrLost) {
		t.Fatalf("append once the stream lost its tail: %v, want ErrLost", err)
	}
	if _, ok, err := n.Lookup("n6"); err != nil || ok {
		t.Fatalf("n6 in the stream: %v %v; want it taken back out (it sits below the committed offset)", ok, err)
	}
	if err := n.Append(ctx, rec("n7", 0, `{}`)); !errors.Is(err, ErrLost) {
		t.Fatalf("the next append: %v, want ErrLost (refused)", err)
	}
	// The lease loop tells an idle one.
	waitfor.True(t, 10*time.Second, "a to be unready once its stream lost its tail", func() bool { return a.Ready() != nil })
	if err := a.Ready(); !errors.Is(err, ErrLost) {
		t.Fatalf("Ready: %v, want ErrLost", err)
	}
	r := a.Submit(ctx, orderEvents(5, 6), ingest.LevelProcessed, 3*time.Second)[0]
	if r.Err == nil || r.Status.Status != ingest.FailedRetryable {
		t.Fatalf("o5, sent once the stream lost its tail: %+v (seq %d), want FAILED_RETRYABLE", r, r.Status.Seq)
	}
	// Stopped and salvaged, the log takes events again, at new seqs.
	_ = rta.Stop(ctx)
	_ = a.Close()
	_ = la.Close()
	rep, err := Salvage(ctx, Config{JS: js, Prefix: "t"}, false)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("salvage: %+v", rep)
	b, _ := startServe(t, openLeased(t, url, "b"))
	if r := b.Submit(ctx, orderEvents(5, 6), ingest.LevelProcessed, 10*time.Second)[0]; r.Err != nil || r.Status.Status != ingest.Processed || r.Status.Seq != 6 {
		t.Fatalf("o5 after the salvage: %+v, want PROCESSED at seq 6", r)
	}
}

// A process that never saw the upper records itself (idle, or taking events in
// through another while it holds the lease) learns of a lost tail too: the
// mark it compares the stream's end with is the stored one, raised by the
// others, not only its own.
func TestLostTailSeenByAnIdleProcess(t *testing.T) {
	url := natstest.Run(t, natstest.JetStream(t, "")).ClientURL()
	js := openJS(t, url)
	la := openLeased(t, url, "a")
	lb := openLeased(t, url, "b")
	appendN(t, lb, 1, 5)
	if err := lb.Apply(&eventlog.Write{}); err != nil { // b writes the mark: 5
		t.Fatal(err)
	}
	if lb.Mark() != 5 {
		t.Fatalf("mark %d, want 5", lb.Mark())
	}
	loseTail(t, js, 2)
	waitfor.Until(t, 10*time.Second, func() error {
		if la.Damaged() == nil {
			return fmt.Errorf("a does not see the stream ending at 2, below the mark 5 (a's mark %d)", la.Mark())
		}
		return nil
	})
	if err := la.Append(context.Background(), rec("x", 0, `{}`)); !errors.Is(err, ErrLost) {
		t.Fatalf("a's append once the tail is lost: %v, want ErrLost", err)
	}
}

// consumerCounter counts the consumers asked of JetStream through it.
type consumerCounter struct {
	jetstream.JetStream
	n atomic.Int64
}

func (c *consumerCounter) OrderedConsumer(ctx context.Context, stream string, cfg jetstream.OrderedConsumerConfig) (jetstream.Consumer, error) {
	c.n.Add(1)
	return c.JetStream.OrderedConsumer(ctx, stream, cfg)
}

func (c *consumerCounter) CreateConsumer(ctx context.Context, stream string, cfg jetstream.ConsumerConfig) (jetstream.Consumer, error) {
	c.n.Add(1)
	return c.JetStream.CreateConsumer(ctx, stream, cfg)
}

func (c *consumerCounter) CreateOrUpdateConsumer(ctx context.Context, stream string, cfg jetstream.ConsumerConfig) (jetstream.Consumer, error) {
	c.n.Add(1)
	return c.JetStream.CreateOrUpdateConsumer(ctx, stream, cfg)
}

// A salvage reads the stream through one consumer, whatever its length, and
// deletes it when done: it used to make an ordered consumer per 1,024 records
// and leave each on the server.
func TestSalvageScansWithOneConsumer(t *testing.T) {
	js := openJS(t, natstest.Run(t, natstest.JetStream(t, "")).ClientURL())
	l := open(t, js)
	ctx := context.Background()
	const n = 2500 // three scans of 1,024
	for i := 0; i < n; i += 500 {
		var recs []*event.Record
		for j := i; j < i+500; j++ {
			recs = append(recs, rec(fmt.Sprintf("e%d", j), 0, `{}`))
		}
		if err := l.Append(ctx, recs...); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.stream.DeleteMsg(ctx, 1500); err != nil { // JetStream loses seq 1500
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	cc := &consumerCounter{JetStream: js}
	rep, err := Salvage(ctx, Config{JS: cc, Prefix: "t"}, false)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Lost) != 1 || rep.Lost[0].From != 1500 || rep.Lost[0].To != 1500 {
		t.Fatalf("salvage report %+v, want seq 1500 lost", rep)
	}
	if got := cc.n.Load(); got != 1 {
		t.Errorf("the salvage asked for %d consumers, want 1", got)
	}
	info, err := js.Stream(ctx, "t-log")
	if err != nil {
		t.Fatal(err)
	}
	if c := info.CachedInfo().State.Consumers; c != 0 {
		t.Errorf("%d consumers left on the stream after the salvage, want none", c)
	}
}

// failSink acks every input but those of the ids in fail, which it fails.
type failSink struct {
	out  topology.OutputCollector
	fail map[string]bool
}

func (b *failSink) Prepare(_ context.Context, _ topology.TaskContext, out topology.OutputCollector) error {
	b.out = out
	return nil
}
func (b *failSink) Cleanup() error { return nil }
func (b *failSink) Execute(in *tuple.Tuple) {
	if id := in.StringByField("event_id"); b.fail[id] {
		_ = b.out.FailWith(in, fmt.Errorf("the sink refuses %s", id))
		return
	}
	_ = b.out.Ack(in)
}

// resendAnswer is the fields of a POST's answer that a resend of a lost id is
// judged by.
type resendAnswer struct {
	EventID     string        `json:"event_id"`
	Status      ingest.Status `json:"status"`
	Duplicate   bool          `json:"duplicate"`
	Seq         uint64        `json:"seq"`
	PayloadHash string        `json:"payload_hash"`
	Error       string        `json:"error"`
	RecordLost  bool          `json:"record_lost"`
	LostSeq     uint64        `json:"lost_seq"`
}

// After a salvage of the stream, a lost event says so (issue 25 §5). JetStream
// keeps the status documents apart from the stream, so an event finished before
// its record was lost still has its document: GET answers it, with
// "record_lost": true and its seq; an unknown id is a 404 that says lost seqs of
// unknown ids exist (this salvage cannot name them).
//
// And a resend of a lost id. It used to be stored at a new seq, and when the
// surviving document said PROCESSED or FAILED_FINAL the log spout took the new
// record for done and skipped it, and the answer was the old document: a
// resend with another payload was dropped without a word, and a dead letter
// could be neither retried (its record gone) nor sent again. Now, as an
// idempotent producer expects: the same payload of a PROCESSED event is its
// duplicate (nothing stored, the sink not run again), another payload a
// conflict (409); a resend of a FAILED_FINAL one is a new event at a new seq,
// processed once, with a history of its own (docs/repair.md, "Lost records
// in JetStream").
func TestLostEventWithItsStatusDocument(t *testing.T) {
	url := natstest.Run(t, natstest.JetStream(t, "")).ClientURL()
	js := openJS(t, url)
	ctx := context.Background()
	la := openLeased(t, url, "a")
	a, rta := startServeWith(t, la, ingest.Config{FlushEvery: 5 * time.Millisecond, Tracker: ingest.TrackerConfig{MaxAttempts: 1}},
		&failSink{fail: map[string]bool{"o4": true}})
	for i, r := range a.Submit(ctx, orderEvents(0, 5), ingest.LevelProcessed, 10*time.Second) {
		want := ingest.Processed
		if i == 4 {
			want = ingest.FailedFinal
		}
		if r.Status.Status != want || r.Status.Seq != uint64(i+1) {
			t.Fatalf("o%d: %+v, want %s", i, r, want)
		}
	}
	_ = rta.Stop(ctx)
	_ = a.Close()
	_ = la.Close()
	// The stream comes back with o0 and o1 only (nats-server#7567); the mark
	// and the documents (another stream) are intact.
	if err := js.DeleteStream(ctx, "t-log"); err != nil {
		t.Fatal(err)
	}
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "t-log", Subjects: []string{"t.log.>"}, Storage: jetstream.FileStorage}); err != nil {
		t.Fatal(err)
	}
	for _, e := range orderEvents(0, 2) {
		r := event.Record{ReceivedAt: time.Now().UnixNano(), Hash: e.Hash(), Event: e}
		if _, err := js.PublishMsg(ctx, &nats.Msg{Subject: "t.log." + base64.RawURLEncoding.EncodeToString([]byte(e.ID)), Data: r.Encode(nil)}); err != nil {
			t.Fatal(err)
		}
	}
	rep, err := Salvage(ctx, Config{JS: js, Prefix: "t"}, false)
	if err != nil || len(rep.Lost) != 1 || rep.Lost[0].From != 3 || rep.Lost[0].To != 5 {
		t.Fatalf("salvage: %+v %v; want seqs 3..5 lost", rep, err)
	}
	sink := &ackSink{seen: map[string]int{}}
	lb := openLeased(t, url, "b")
	b, _ := startServeWith(t, lb, ingest.Config{FlushEvery: 5 * time.Millisecond}, sink)
	srv := httptest.NewServer(b.Handler(ingest.HTTPOptions{}))
	defer srv.Close()
	get := func(id string) (int, []byte) {
		t.Helper()
		resp, err := http.Get(srv.URL + "/v1/events/" + id)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, body
	}
	post := func(id, payload string) (int, resendAnswer, []byte) {
		t.Helper()
		resp, err := http.Post(srv.URL+"/v1/events?ack=processed", "application/json", strings.NewReader(
			fmt.Sprintf(`{"event_id":%q,"source":"orders","type":"order_line","payload":%s}`, id, payload)))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		var a resendAnswer
		if err := json.Unmarshal(body, &a); err != nil {
			t.Fatalf("answer %s: %v", body, err)
		}
		return resp.StatusCode, a, body
	}
	code, body := get("o3")
	var st ingest.EventStatus
	if err := json.Unmarshal(body, &st); err != nil {
		t.Fatal(err)
	}
	if code != 200 || st.Status != ingest.Processed || !st.RecordLost || st.LostSeq != 4 || st.Seq != 4 {
		t.Fatalf("GET o3: %d %s; want its document, PROCESSED, record_lost at seq 4", code, body)
	}
	t.Logf("GET o3: %d %s", code, body)
	code, body = get("never-sent")
	if code != 404 || !strings.Contains(string(body), "3 acknowledged seqs whose event_id is unknown") {
		t.Fatalf("GET never-sent: %d %s; want 404 saying 3 lost seqs have unknown ids", code, body)
	}
	t.Logf("GET never-sent: %d %s", code, body)
	notStored := func(id string) {
		t.Helper()
		if r, ok, err := lb.Lookup(id); err != nil || ok {
			t.Fatalf("%s stored again: %+v %v %v; want no record of it", id, r, ok, err)
		}
	}

	// The same payload as the PROCESSED event: its duplicate, nothing stored.
	code, ans, body := post("o3", `{"n":3}`)
	t.Logf("resend of o3 (PROCESSED, its record lost), same payload: %d %s", code, body)
	if code != 200 || ans.Status != ingest.Processed || !ans.Duplicate || ans.Seq != 4 || !ans.RecordLost || ans.LostSeq != 4 ||
		ans.PayloadHash != st.PayloadHash {
		t.Fatalf("resend of o3: %d %s; want PROCESSED, duplicate, record_lost at seq 4", code, body)
	}
	notStored("o3")
	// Another payload: a conflict, as for any id reused with other content.
	code, ans, body = post("o2", `{"n":"other"}`)
	t.Logf("resend of o2 (PROCESSED, its record lost), another payload: %d %s", code, body)
	if code != 409 || ans.Status != ingest.FailedFinal || ans.Duplicate || ans.PayloadHash == "" ||
		!strings.Contains(ans.Error, "event_id already used with a different payload") {
		t.Fatalf("resend of o2 with another payload: %d %s; want 409, the stored payload_hash", code, body)
	}
	notStored("o2")
	// A dead letter whose record is lost: :retry cannot resend it, so it is
	// sent again, a new event, processed once, and its dead letter goes.
	if dl, err := b.DeadLetters(10); err != nil || len(dl) != 1 || dl[0].EventID != "o4" || dl[0].Seq != 5 {
		t.Fatalf("dead letters before o4's resend: %+v %v; want o4's, at seq 5", dl, err)
	}
	resp, err := http.Post(srv.URL+"/v1/events/o4:retry", "application/json", nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 409 || !strings.Contains(string(body), "send the event again") {
		t.Fatalf("POST o4:retry: %d %s; want 409 saying to send it again", resp.StatusCode, body)
	}
	code, ans, body = post("o4", `{"n":4}`)
	t.Logf("resend of o4 (FAILED_FINAL, its record lost): %d %s", code, body)
	if code != 200 || ans.Status != ingest.Processed || ans.Duplicate || ans.Seq != 6 || ans.RecordLost {
		t.Fatalf("resend of o4: %d %s; want PROCESSED as a new event at seq 6", code, body)
	}
	waitStored(t, lb, "o4", ingest.Processed, 10*time.Second)
	if d := storedStatus(t, lb, "o4"); d.Seq != 6 || d.Attempts != 1 {
		t.Fatalf("o4's stored document: %+v; want PROCESSED at seq 6 after 1 attempt", d)
	}
	code, body = get("o4")
	t.Logf("GET o4 after its resend: %d %s", code, body)
	var h ingest.EventStatus
	if err := json.Unmarshal(body, &h); err != nil {
		t.Fatal(err)
	}
	var steps []ingest.Step
	for _, tr := range h.Transitions {
		steps = append(steps, tr.Step)
	}
	if code != 200 || h.Status != ingest.Processed || h.Seq != 6 || h.RecordLost || fmt.Sprint(steps) != "[received persisted started completed]" {
		t.Fatalf("GET o4 after its resend: %d %s; want its own history at seq 6: received, persisted, started, completed", code, body)
	}
	dl, err := b.DeadLetters(10)
	if err != nil || len(dl) != 0 {
		t.Fatalf("dead letters after o4 was processed: %+v %v; want none", dl, err)
	}
	// Once more: now a plain duplicate of the new record.
	code, ans, body = post("o4", `{"n":4}`)
	if code != 200 || !ans.Duplicate || ans.Seq != 6 || ans.RecordLost {
		t.Fatalf("second resend of o4: %d %s; want a duplicate of seq 6", code, body)
	}
	waitCommitted(t, b, 7, "past o4's new record")
	sink.mu.Lock()
	defer sink.mu.Unlock()
	if sink.seen["o2"] != 0 || sink.seen["o3"] != 0 || sink.seen["o4"] != 1 {
		t.Fatalf("the sink ran o2 %d, o3 %d, o4 %d times; want 0, 0 and 1", sink.seen["o2"], sink.seen["o3"], sink.seen["o4"])
	}
}
