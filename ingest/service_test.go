package ingest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"

	"github.com/gale-stream/gale/engine"
	"github.com/gale-stream/gale/event"
	"github.com/gale-stream/gale/eventlog"
	"github.com/gale-stream/gale/internal/waitfor"
	"github.com/gale-stream/gale/topology"
	"github.com/gale-stream/gale/tuple"
)

// sinkBolt records the event ids it applied (once per id, as an idempotent sink)
// and how many times each was executed; failN decides how many first executions
// of an id fail, with a reason.
type sinkBolt struct {
	mu      sync.Mutex
	applied map[string]int
	execs   map[string]int
	failN   func(id string) int
	out     topology.OutputCollector
}

func newSink(failN func(string) int) *sinkBolt {
	return &sinkBolt{applied: map[string]int{}, execs: map[string]int{}, failN: failN}
}

func (b *sinkBolt) Prepare(_ context.Context, _ topology.TaskContext, out topology.OutputCollector) error {
	b.out = out
	return nil
}
func (b *sinkBolt) Cleanup() error { return nil }
func (b *sinkBolt) Execute(t *tuple.Tuple) {
	id := t.StringByField("event_id")
	rec, err := SpoutRecord(t)
	if err != nil {
		b.out.ReportError(err)
		_ = b.out.Fail(t)
		return
	}
	b.mu.Lock()
	b.execs[id]++
	n := b.execs[id]
	fail := b.failN != nil && n <= b.failN(id)
	if !fail {
		b.applied[id]++
	}
	b.mu.Unlock()
	if fail {
		_ = b.out.FailWith(t, fmt.Errorf("sink: attempt %d of %s (seq %d) refused", n, id, rec.Seq))
		return
	}
	_ = b.out.Ack(t)
}

func (b *sinkBolt) count(id string) (applied, execs int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.applied[id], b.execs[id]
}

type rig struct {
	t    *testing.T
	fs   vfs.FS
	log  *eventlog.Log
	svc  *Service
	rt   *engine.Runtime
	srv  *httptest.Server
	sink *sinkBolt
	// drain bounds the topology's drain at stop (default 5s).
	drain time.Duration
}

func quiet() *slog.Logger { return slog.New(slog.DiscardHandler) }

func startRig(t *testing.T, fs vfs.FS, sink *sinkBolt, cfg Config) *rig {
	t.Helper()
	r := startRigWith(t, fs, sink, cfg, func(tc *topology.Config) { tc.MessageTimeout = 2 * time.Second })
	r.sink = sink
	return r
}

// startRigBolt is startRig with any bolt as the sink, and a short shutdown.
func startRigBolt(t *testing.T, fs vfs.FS, bolt topology.Bolt, cfg Config) *rig {
	t.Helper()
	return startRigWith(t, fs, bolt, cfg, func(tc *topology.Config) { tc.ShutdownTimeout = 100 * time.Millisecond })
}

// startRigWith runs the log (on fs), the service, its HTTP API and a topology of
// the log spout and bolt; tune adjusts the topology's config. The rig stops at the
// test's end.
func startRigWith(t *testing.T, fs vfs.FS, bolt topology.Bolt, cfg Config, tune func(*topology.Config)) *rig {
	t.Helper()
	l, err := eventlog.Open(eventlog.Options{Dir: "data", FS: fs})
	if err != nil {
		t.Fatal(err)
	}
	cfg.Log = rigLog(l)
	cfg.Logger = quiet()
	if cfg.Tracker.BackoffBase == 0 {
		cfg.Tracker.BackoffBase = time.Millisecond
	}
	if cfg.FlushEvery == 0 {
		cfg.FlushEvery = 5 * time.Millisecond
	}
	svc, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	b := topology.NewBuilder()
	b.SetSpout("log", svc.Spout(), 1).Output(SpoutFields...)
	b.SetBolt("sink", func() topology.Bolt { return bolt }, 1).ShuffleGrouping("log")
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	tc := topology.DefaultConfig()
	tc.Logger = quiet()
	tune(&tc)
	rt, err := engine.Start(context.Background(), topo, tc)
	if err != nil {
		t.Fatal(err)
	}
	r := &rig{t: t, fs: fs, log: l, svc: svc, rt: rt}
	r.srv = httptest.NewServer(svc.Handler(HTTPOptions{MaxEventBytes: 4096}))
	t.Cleanup(r.stop)
	return r
}

func (r *rig) stop() {
	if r.srv == nil {
		return
	}
	r.srv.Close()
	if r.drain == 0 {
		r.drain = 5 * time.Second
	}
	ctx, cancel := context.WithTimeout(context.Background(), r.drain)
	defer cancel()
	_ = r.rt.Stop(ctx)
	<-r.rt.Done()
	_ = r.svc.Close()
	_ = r.log.Close()
	r.srv = nil
}

func (r *rig) post(path, body string) (int, http.Header, []byte) {
	r.t.Helper()
	resp, err := http.Post(r.srv.URL+path, "application/json", strings.NewReader(body))
	if err != nil {
		r.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, b
}

func (r *rig) get(path string) (int, []byte) {
	r.t.Helper()
	resp, err := http.Get(r.srv.URL + path)
	if err != nil {
		r.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

func ev(id, payload string) string {
	return fmt.Sprintf(`{"event_id":%q,"source":"orders","type":"order_line","payload":%s}`, id, payload)
}

func decode[T any](t *testing.T, b []byte) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("decode %s: %v", b, err)
	}
	return v
}

func TestEveryAckLevelAndTheHistory(t *testing.T) {
	r := startRig(t, vfs.NewMem(), newSink(nil), Config{})
	code, _, b := r.post("/v1/events?ack=processed", ev("p1", `{"qty":1}`))
	a := decode[Answer](t, b)
	if code != 200 || a.Status != Processed || a.Seq != 1 || a.Attempts != 1 || a.Duplicate {
		t.Fatalf("ack=processed: %d %s", code, b)
	}
	code, b = r.get("/v1/events/p1")
	st := decode[EventStatus](t, b)
	if code != 200 || st.Status != Processed || !eqSteps(steps(st), StepReceived, StepPersisted, StepStarted, StepCompleted) {
		t.Fatalf("GET: %d %s", code, b)
	}
	for i := 1; i < len(st.Transitions); i++ {
		if st.Transitions[i].At < st.Transitions[i-1].At {
			t.Fatalf("transition times go backwards: %s", b)
		}
	}
	code, _, b = r.post("/v1/events", ev("p2", `{"qty":2}`)) // default: persisted
	if a := decode[Answer](t, b); code != 200 || (a.Status != Persisted && a.Status != Processed) || a.Seq != 2 {
		t.Fatalf("default level: %d %s", code, b)
	}
	code, _, b = r.post("/v1/events?ack=accepted", ev("p3", `{"qty":3}`))
	if a := decode[Answer](t, b); code != 202 || a.Status != Accepted {
		t.Fatalf("ack=accepted: %d %s", code, b)
	}
	// Both end PROCESSED, each applied once.
	for _, id := range []string{"p2", "p3"} {
		code, _, b = r.post("/v1/events?ack=processed", ev(id, fmt.Sprintf(`{"qty":%s}`, id[1:])))
		if a := decode[Answer](t, b); code != 200 || a.Status != Processed || !a.Duplicate {
			t.Fatalf("retry of %s at ack=processed: %d %s", id, code, b)
		}
		if applied, _ := r.sink.count(id); applied != 1 {
			t.Fatalf("%s applied %d times", id, applied)
		}
	}
}

// A lost response then a retry: the same status, nothing new in the log or the sink.
func TestRetryAfterLostResponseIsADuplicate(t *testing.T) {
	r := startRig(t, vfs.NewMem(), newSink(nil), Config{})
	r.post("/v1/events?ack=processed", ev("o1", `{"a":1}`))
	durable := r.log.Durable()
	code, _, b := r.post("/v1/events?ack=processed", ev("o1", `{"a":1}`))
	a := decode[Answer](t, b)
	if code != 200 || !a.Duplicate || a.Status != Processed || a.Seq != 1 {
		t.Fatalf("retry: %d %s", code, b)
	}
	if r.log.Durable() != durable {
		t.Fatalf("a duplicate was appended: durable %d → %d", durable, r.log.Durable())
	}
	if applied, execs := r.sink.count("o1"); applied != 1 || execs != 1 {
		t.Fatalf("sink applied %d, executed %d", applied, execs)
	}
	code, _, b = r.post("/v1/events", ev("o1", `{"a":2}`))
	a = decode[Answer](t, b)
	want := event.Event{Source: "orders", Type: "order_line", Payload: []byte(`{"a":1}`)}
	other := event.Event{Source: "orders", Type: "order_line", Payload: []byte(`{"a":2}`)}
	if code != 409 || a.Status != FailedFinal || !strings.Contains(a.Error, want.Hash().String()) ||
		!strings.Contains(a.Error, other.Hash().String()) {
		t.Fatalf("conflict: %d %s", code, b)
	}
}

func TestRetriesWithBackoffThenDeadLetterThenResubmit(t *testing.T) {
	var healed atomic.Bool
	sink := newSink(func(id string) int {
		switch {
		case id == "flaky":
			return 2
		case id == "bad" && !healed.Load():
			return 1000
		}
		return 0
	})
	r := startRig(t, vfs.NewMem(), sink, Config{Tracker: TrackerConfig{MaxAttempts: 5, BackoffBase: time.Millisecond}})
	code, _, b := r.post("/v1/events?ack=processed", ev("flaky", `{}`))
	if a := decode[Answer](t, b); code != 200 || a.Status != Processed || a.Attempts != 3 {
		t.Fatalf("flaky: %d %s", code, b)
	}
	code, _, b = r.post("/v1/events?ack=processed", ev("bad", `{}`))
	a := decode[Answer](t, b)
	if code != 422 || a.Status != FailedFinal || a.Attempts != 5 || !strings.Contains(a.Error, "attempt 5 of bad (seq 2) refused") {
		t.Fatalf("bad: %d %s", code, b)
	}
	_, b = r.get("/v1/events/bad")
	st := decode[EventStatus](t, b)
	var retryGaps []int64
	for _, tr := range st.Transitions {
		if tr.Step == StepFailed {
			retryGaps = append(retryGaps, tr.RetryAt-tr.At)
		}
	}
	wantGaps := []int64{1e6, 2e6, 4e6, 8e6}
	if fmt.Sprint(retryGaps) != fmt.Sprint(wantGaps) || st.Transitions[len(st.Transitions)-1].Step != StepDeadLetter {
		t.Fatalf("backoff gaps %v, want %v; history %s", retryGaps, wantGaps, b)
	}
	_, b = r.get("/v1/dead-letters")
	dl := decode[map[string][]DeadLetter](t, b)["dead_letters"]
	if len(dl) != 1 || dl[0].EventID != "bad" || dl[0].Attempts != 5 || !strings.Contains(dl[0].LastError, "refused") {
		t.Fatalf("dead letters: %s", b)
	}
	if code, _, b := r.post("/v1/events/flaky:retry", ""); code != 409 {
		t.Fatalf("retry of a PROCESSED event: %d %s", code, b)
	}
	healed.Store(true)
	code, _, b = r.post("/v1/events/bad:retry", "")
	if code != 200 {
		t.Fatalf(":retry: %d %s", code, b)
	}
	code, _, b = r.post("/v1/events?ack=processed", ev("bad", `{}`))
	a = decode[Answer](t, b)
	if a.Status != Processed || a.Attempts != 6 || !a.Duplicate {
		t.Fatalf("after :retry: %d %s", code, b)
	}
	if applied, _ := r.sink.count("bad"); applied != 1 {
		t.Fatalf("bad applied %d times", applied)
	}
	_, b = r.get("/v1/dead-letters")
	if dl := decode[map[string][]DeadLetter](t, b)["dead_letters"]; len(dl) != 0 {
		t.Fatalf("dead letter still listed after a successful resubmit: %s", b)
	}
}

func TestBadInputNamesTheProblem(t *testing.T) {
	r := startRig(t, vfs.NewMem(), newSink(nil), Config{})
	cases := []struct {
		body, want string
		code       int
	}{
		{`{"event_id":"x","source":"s","type":"t"`, "malformed JSON", 400},
		{`{"source":"s","type":"t","payload":{}}`, `field "event_id": required`, 400},
		{`{"event_id":"x","type":"t","payload":{}}`, `field "source": required`, 400},
		{`{"event_id":"x","source":"s","type":"t","payload":[1]}`, `field "payload": must be a JSON object`, 400},
		{`{"event_id":"x","source":"s","type":"t","payload":{},"version":"7"}`, `field "version"`, 400},
		{`{"event_id":"a b","source":"s","type":"t","payload":{}}`, `not printable ASCII`, 400},
		{`{"eventid":"x","source":"s","type":"t","payload":{}}`, `unknown field "eventid"`, 400},
		{ev(strings.Repeat("x", 129), `{}`), "129 bytes, at most 128", 400},
		{ev("big", `{"pad":"`+strings.Repeat("x", 5000)+`"}`), "larger than 4096 bytes", 413},
	}
	for _, c := range cases {
		code, _, b := r.post("/v1/events", c.body)
		if a := decode[Answer](t, b); code != c.code || a.Status != FailedFinal || !strings.Contains(a.Error, c.want) {
			t.Errorf("%.60s: %d %s, want %d naming %q", c.body, code, b, c.code, c.want)
		}
	}
	if code, _, b := r.post("/v1/events?ack=sometimes", ev("x", `{}`)); code != 400 || !strings.Contains(string(b), "want accepted, persisted or processed") {
		t.Errorf("bad ack: %d %s", code, b)
	}
	if r.log.Durable() != 0 {
		t.Fatalf("bad input reached the log: durable %d", r.log.Durable())
	}
	if code, b := r.get("/healthz"); code != 200 {
		t.Fatalf("server unhealthy after bad input: %d %s", code, b)
	}
}

func TestBatchKeepsGoodLinesAroundABadOne(t *testing.T) {
	r := startRig(t, vfs.NewMem(), newSink(nil), Config{})
	body := ev("b1", `{}`) + "\n" + `{"event_id":"b2","source":"s"}` + "\n\n" + ev("b3", `{}`) + "\n" + ev("b1", `{}`) + "\n"
	code, _, b := r.post("/v1/events:batch?ack=persisted", body)
	out := decode[BatchAnswer](t, b)
	if code != 200 || len(out.Results) != 4 {
		t.Fatalf("batch: %d %s", code, b)
	}
	got := ""
	for _, a := range out.Results {
		got += fmt.Sprintf("%d:%s:%s:%v ", a.Line, a.EventID, a.Status, a.Duplicate)
	}
	if want := "1:b1:PERSISTED:false 2:b2:FAILED_FINAL:false 4:b3:PERSISTED:false 5:b1:PERSISTED:true "; strings.ReplaceAll(got, "PROCESSED", "PERSISTED") != want {
		t.Fatalf("results %q, want %q", got, want)
	}
	if !strings.Contains(out.Results[1].Error, `line 2: field "type": required`) {
		t.Fatalf("bad line error: %q", out.Results[1].Error)
	}
	if out.Counts["FAILED_FINAL"] != 1 || r.log.Durable() != 2 {
		t.Fatalf("counts %v durable %d", out.Counts, r.log.Durable())
	}
}

// fsyncgate at the API: a failed sync answers FAILED_RETRYABLE (503, Retry-After),
// never PERSISTED; readiness turns false; after a restart the retry is taken in
// (the dedupe index never ran ahead of the log) and processed once.
func TestSyncFailureAnswersRetryableAndRestartRecovers(t *testing.T) {
	mem := vfs.NewCrashableMem()
	var failing atomic.Bool
	fs := errorfs.Wrap(mem, errorfs.InjectorFunc(func(op errorfs.Op) error {
		if failing.Load() && strings.HasSuffix(op.Path, ".log") &&
			(op.Kind == errorfs.OpFileSync || op.Kind == errorfs.OpFileSyncData || op.Kind == errorfs.OpFileSyncTo) {
			return syscall.EIO
		}
		return nil
	}))
	r := startRig(t, fs, newSink(nil), Config{})
	if code, _, b := r.post("/v1/events?ack=processed", ev("ok", `{}`)); code != 200 {
		t.Fatalf("before failure: %d %s", code, b)
	}
	failing.Store(true)
	code, hdr, b := r.post("/v1/events", ev("e9", `{}`))
	a := decode[Answer](t, b)
	if code != 503 || a.Status != FailedRetryable || hdr.Get("Retry-After") == "" || !strings.Contains(a.Error, "input/output error") {
		t.Fatalf("during sync failure: %d %v %s", code, hdr, b)
	}
	failing.Store(false)
	if code, _, b := r.post("/v1/events", ev("e10", `{}`)); code != 503 {
		t.Fatalf("after the disk healed, the failed log answered %d %s", code, b)
	}
	if code, b := r.get("/readyz"); code != 503 || !strings.Contains(string(b), "log failed") {
		t.Fatalf("readyz: %d %s", code, b)
	}
	if code, _ := r.get("/v1/events/e9"); code != 404 {
		t.Fatalf("GET of the unpersisted event: %d", code)
	}
	r.stop()

	sink := newSink(nil)
	r2 := startRig(t, mem.CrashClone(vfs.CrashCloneCfg{}), sink, Config{})
	code, _, b = r2.post("/v1/events?ack=processed", ev("e9", `{}`))
	if a := decode[Answer](t, b); code != 200 || a.Status != Processed || a.Duplicate || a.Seq != 2 {
		t.Fatalf("retry after restart: %d %s", code, b)
	}
	if applied, _ := sink.count("e9"); applied != 1 {
		t.Fatalf("e9 applied %d times", applied)
	}
	if code, b := r2.get("/v1/events/ok"); code != 200 || decode[EventStatus](t, b).Status != Processed {
		t.Fatalf("status of the event processed before the restart: %d %s", code, b)
	}
}

// Power loss after PERSISTED answers: every persisted event is processed after
// the restart, and the ones processed before it are not processed again.
func TestPowerLossThenRestartProcessesEveryPersistedEvent(t *testing.T) {
	mem := vfs.NewCrashableMem()
	// A sink that processes 20 events, then leaves every later tree pending.
	blocking := &blockSink{sinkBolt: newSink(nil), after: 20}
	r := startRigBolt(t, mem, blocking, Config{})
	var body bytes.Buffer
	for i := range 100 {
		body.WriteString(ev(fmt.Sprintf("k%d", i), `{}`) + "\n")
	}
	code, _, b := r.post("/v1/events:batch", body.String())
	if out := decode[BatchAnswer](t, b); code != 200 || out.Counts["PERSISTED"]+out.Counts["PROCESSED"] != 100 {
		t.Fatalf("batch: %d %s", code, b)
	}
	// The 20 processed events' statuses are durable once a flush has written the
	// committed offset past them (the same write).
	waitfor.Until(t, 10*time.Second, func() error {
		if c := r.log.Committed(); c < 21 {
			return fmt.Errorf("the log's committed offset is %d, want 21 (service: %d)", c, r.svc.Stats().Committed)
		}
		return nil
	})
	crashed := mem.CrashClone(vfs.CrashCloneCfg{})
	r.drain = 100 * time.Millisecond // 80 trees stay pending: don't wait for them
	r.stop()

	sink := newSink(nil)
	r2 := startRig(t, crashed, sink, Config{})
	for i := range 100 {
		id := fmt.Sprintf("k%d", i)
		code, _, b := r2.post("/v1/events?ack=processed", ev(id, `{}`))
		if a := decode[Answer](t, b); code != 200 || a.Status != Processed {
			t.Fatalf("%s after power loss: %d %s", id, code, b)
		}
		applied, _ := sink.count(id)
		if i < 20 && applied != 0 {
			t.Fatalf("%s was processed before the crash and again after it", id)
		}
		if i >= 20 && applied != 1 {
			t.Fatalf("%s applied %d times after the restart", id, applied)
		}
	}
}

// blockSink applies the first `after` events and never acks the later ones: their
// trees are pending when the power goes.
type blockSink struct {
	*sinkBolt
	after int
	n     atomic.Int64
}

func (b *blockSink) Execute(t *tuple.Tuple) {
	if b.n.Add(1) > int64(b.after) {
		return
	}
	b.sinkBolt.Execute(t)
}

// The dedupe window: a finished event is remembered until it is older than the
// window, then trimmed; its id is then a new event. Unfinished ones are kept.
func TestDedupeWindowTrim(t *testing.T) {
	var now atomic.Int64
	now.Store(time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC).UnixNano())
	clock := func() time.Time { return time.Unix(0, now.Load()) }
	r := startRig(t, vfs.NewMem(), newSink(nil), Config{DedupeWindow: time.Hour, Now: clock})
	r.post("/v1/events?ack=processed", ev("old", `{}`))
	now.Add(int64(30 * time.Minute))
	r.post("/v1/events?ack=processed", ev("young", `{}`))
	waitfor.Until(t, 10*time.Second, func() error { // a flush
		if c := r.log.Committed(); c < 3 {
			return fmt.Errorf("committed offset %d, want 3", c)
		}
		return nil
	})
	now.Add(int64(45 * time.Minute)) // old is 75 min old, young 45
	if ids := r.log.Stats().IDs; ids != 2 {
		t.Fatalf("dedupe index holds %d ids before the trim, want 2", ids)
	}
	n, err := r.svc.Trim()
	if err != nil || n != 1 {
		t.Fatalf("Trim = %d, %v; want 1", n, err)
	}
	if ids := r.log.Stats().IDs; ids != 1 {
		t.Fatalf("dedupe index holds %d ids after trimming one, want 1", ids)
	}
	if code, _ := r.get("/v1/events/old"); code != 404 {
		t.Fatalf("trimmed event: GET %d, want 404", code)
	}
	if code, b := r.get("/v1/events/young"); code != 200 || decode[EventStatus](t, b).Status != Processed {
		t.Fatalf("event inside the window: %d %s", code, b)
	}
	code, _, b := r.post("/v1/events?ack=processed", ev("old", `{"again":true}`))
	if a := decode[Answer](t, b); code != 200 || a.Duplicate || a.Status != Processed || a.Seq != 3 {
		t.Fatalf("an id past the window is a new event: %d %s", code, b)
	}
	if ids := r.log.Stats().IDs; ids != 2 {
		t.Fatalf("dedupe index holds %d ids after the id came back, want 2", ids)
	}
}

// Per-source defaults (seed 004's table) when the request names no level.
func TestSourceDefaultLevels(t *testing.T) {
	r := startRig(t, vfs.NewMem(), newSink(nil), Config{SourceLevels: map[string]Level{"debug": LevelAccepted, "orders": LevelProcessed}})
	code, _, b := r.post("/v1/events", `{"event_id":"d1","source":"debug","type":"log","payload":{}}`)
	if a := decode[Answer](t, b); code != 202 || a.Status != Accepted {
		t.Fatalf("debug source: %d %s", code, b)
	}
	code, _, b = r.post("/v1/events", `{"event_id":"o1","source":"orders","type":"order_line","payload":{}}`)
	if a := decode[Answer](t, b); code != 200 || a.Status != Processed {
		t.Fatalf("orders source: %d %s", code, b)
	}
	code, _, b = r.post("/v1/events?ack=persisted", `{"event_id":"o2","source":"orders","type":"order_line","payload":{}}`)
	if a := decode[Answer](t, b); code != 200 || (a.Status != Persisted && a.Status != Processed) {
		t.Fatalf("a request's level beats the source's: %d %s", code, b)
	}
}

func TestOverloadIs429WithRetryAfter(t *testing.T) {
	a := answerOf(Result{Status: EventStatus{EventID: "x"}, Err: fmt.Errorf("append: %w", eventlog.ErrOverloaded)})
	rec := httptest.NewRecorder()
	writeAnswer(rec, a)
	if rec.Code != 429 || rec.Header().Get("Retry-After") != "1" || !strings.Contains(rec.Body.String(), "FAILED_RETRYABLE") {
		t.Fatalf("overload: %d %v %s", rec.Code, rec.Header(), rec.Body)
	}
}

// B3 (NATS #6415): the dedupe entry and the record are one atomic batch, so a write
// that fails between "index the id" and "append the record" leaves neither behind;
// the retry after a restart is taken in as a new event, not answered "duplicate".
func TestWriteFailureDoesNotSwallowTheRetry(t *testing.T) {
	mem := vfs.NewCrashableMem()
	var failing atomic.Bool
	fs := errorfs.Wrap(mem, errorfs.InjectorFunc(func(op errorfs.Op) error {
		if failing.Load() && strings.HasSuffix(op.Path, ".log") && op.Kind == errorfs.OpFileWrite {
			return syscall.EIO
		}
		return nil
	}))
	r := startRig(t, fs, newSink(nil), Config{})
	failing.Store(true)
	code, _, b := r.post("/v1/events?ack=persisted", ev("b3", `{"n":1}`))
	if a := decode[Answer](t, b); code != 503 || a.Status != FailedRetryable {
		t.Fatalf("write failure: %d %s", code, b)
	}
	// The same process refuses everything now (sticky), without calling it a duplicate.
	code, _, b = r.post("/v1/events?ack=persisted", ev("b3", `{"n":1}`))
	if a := decode[Answer](t, b); code != 503 || a.Duplicate {
		t.Fatalf("retry on the failed log: %d %s", code, b)
	}
	failing.Store(false)
	r.stop()
	sink := newSink(nil)
	r2 := startRig(t, mem.CrashClone(vfs.CrashCloneCfg{}), sink, Config{})
	code, _, b = r2.post("/v1/events?ack=processed", ev("b3", `{"n":1}`))
	if a := decode[Answer](t, b); code != 200 || a.Duplicate || a.Status != Processed {
		t.Fatalf("retry after restart: %d %s", code, b)
	}
	if applied, _ := sink.count("b3"); applied != 1 {
		t.Fatalf("b3 applied %d times", applied)
	}
}

// Concurrent duplicates of the same ids, across requests and while their first
// copies are being synced and forgotten from memory, append each id exactly once.
func TestConcurrentDuplicatesAppendOnce(t *testing.T) {
	r := startRig(t, vfs.NewMem(), newSink(nil), Config{})
	const ids, posters = 40, 16
	var wg sync.WaitGroup
	for p := range posters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range ids {
				id := fmt.Sprintf("dup-%d", (i+p)%ids)
				code, _, b := r.post("/v1/events?ack=persisted", ev(id, `{"same":true}`))
				if a := decode[Answer](t, b); code != 200 || (a.Status != Persisted && a.Status != Processed) {
					t.Errorf("%s: %d %s", id, code, b)
				}
			}
		}()
	}
	wg.Wait()
	if got := r.log.Durable(); got != ids {
		t.Fatalf("%d records for %d distinct ids", got, ids)
	}
}

// An event refused by the log at once (here: failed) is never answered ACCEPTED.
func TestAcceptedOnlyWhenTheLogTookIt(t *testing.T) {
	mem := vfs.NewMem()
	var failing atomic.Bool
	fs := errorfs.Wrap(mem, errorfs.InjectorFunc(func(op errorfs.Op) error {
		if failing.Load() && strings.HasSuffix(op.Path, ".log") && op.Kind == errorfs.OpFileWrite {
			return syscall.EIO
		}
		return nil
	}))
	r := startRig(t, fs, newSink(nil), Config{})
	failing.Store(true)
	r.post("/v1/events", ev("first", `{}`)) // fails the log
	code, _, b := r.post("/v1/events?ack=accepted", ev("second", `{}`))
	if a := decode[Answer](t, b); code != 503 || a.Status != FailedRetryable {
		t.Fatalf("ack=accepted on a failed log: %d %s", code, b)
	}
}

// A poison event that stops the process each time it runs (here: a crash while its
// tree is pending) is not retried forever: every attempt after a restart is recorded
// durably before it runs, and when all are used up it is dead-lettered.
func TestCrashLoopingEventIsDeadLettered(t *testing.T) {
	mem := vfs.NewCrashableMem()
	cfg := Config{Tracker: TrackerConfig{MaxAttempts: 3}}
	bs := &blockSink{sinkBolt: newSink(nil)}
	r := startRigBolt(t, mem, bs, cfg)
	r.post("/v1/events?ack=persisted", ev("poison", `{}`))
	r.post("/v1/events?ack=persisted", ev("fine", `{}`))
	for crash := 1; ; crash++ {
		// Both events reached the sink in this run: after a restart, their attempt
		// was durable before they were emitted.
		waitfor.True(t, 10*time.Second, "the events running", func() bool { return bs.n.Load() == 2 })
		fs := mem.CrashClone(vfs.CrashCloneCfg{})
		r.drain = 50 * time.Millisecond
		r.stop()
		mem = fs
		if crash == 4 {
			break
		}
		bs = &blockSink{sinkBolt: newSink(nil)}
		r = startRigBolt(t, mem, bs, cfg)
	}
	// The fourth start finds both events with 3 attempts started and none finished.
	sink := newSink(nil)
	r = startRig(t, mem, sink, cfg)
	var b []byte
	waitfor.True(t, 10*time.Second, "both dead-lettered", func() bool {
		_, fb := r.get("/v1/events/fine")
		_, b = r.get("/v1/events/poison")
		return decode[EventStatus](t, b).Status == FailedFinal && decode[EventStatus](t, fb).Status == FailedFinal
	})
	st := decode[EventStatus](t, b)
	if st.Status != FailedFinal || st.Attempts != 3 || !strings.Contains(st.LastError, "3 attempts started and none finished") {
		t.Fatalf("after 4 crashes: %s", b)
	}
	if applied, _ := sink.count("poison"); applied != 0 {
		t.Fatal("the dead-lettered event ran again")
	}
	_, b = r.get("/v1/dead-letters")
	if dl := decode[map[string][]DeadLetter](t, b)["dead_letters"]; len(dl) != 2 {
		t.Fatalf("dead letters: %s", b)
	}
}

// Shutdown does not wait out long ack=processed waits: Drain answers them at once
// with the status reached.
func TestDrainAnswersWaitingRequests(t *testing.T) {
	r := startRigBolt(t, vfs.NewMem(), &blockSink{sinkBolt: newSink(nil)}, Config{})
	r.drain = 50 * time.Millisecond // its tree never completes
	done := make(chan Answer, 1)
	go func() {
		_, _, b := r.post("/v1/events?ack=processed&wait=60s", ev("slow", `{}`))
		var a Answer
		_ = json.Unmarshal(b, &a)
		done <- a
	}()
	waitfor.True(t, 10*time.Second, "the event started and its request waiting", func() bool {
		st := r.svc.Stats()
		return st.Held == 1 && st.Waiters == 1
	})
	r.svc.Drain()
	select {
	case a := <-done:
		if a.Status != Persisted {
			t.Fatalf("answer after Drain: %+v", a)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Drain did not answer the waiting request")
	}
	code, _, b := r.post("/v1/events", ev("late", `{}`))
	if a := decode[Answer](t, b); code != 503 || a.Status != FailedRetryable {
		t.Fatalf("after Drain: %d %s", code, b)
	}
}

// Regression (adversarial review): two flushes at once (the ticker's and
// DeadLetters') wrote an older status document over a newer one.
func TestConcurrentFlushesKeepNewestStatus(t *testing.T) {
	l, err := eventlog.Open(eventlog.Options{Dir: "data", FS: vfs.NewMem()})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	svc, _ := New(Config{Log: l, Logger: quiet(), FlushEvery: time.Hour})
	defer svc.Close()
	e, _ := event.Parse([]byte(ev("x", `{}`)))
	r := svc.Submit(context.Background(), []event.Event{e}, LevelPersisted, 0)[0]
	s1 := EventStatus{EventID: "x", Status: Persisted, Seq: r.Status.Seq, PayloadHash: r.Status.PayloadHash, Attempts: 1}
	s2 := s1
	s2.Status, s2.Attempts = Processed, 2
	svc.mu.Lock()
	svc.tr.m["x"] = &entry{st: s1}
	svc.docs["x"] = s1 // the failed attempt's document
	for i := 0; i < 50000; i++ {
		id := fmt.Sprint("other", i)
		svc.docs[id] = EventStatus{EventID: id, Status: Processed}
	}
	svc.mu.Unlock()
	aDone := make(chan struct{})
	go func() { svc.flush(); close(aDone) }() // the ticker's flush
	for {
		svc.mu.Lock()
		n := len(svc.docs)
		svc.mu.Unlock()
		if n == 0 {
			break
		}
	}
	svc.mu.Lock() // the second attempt completes
	svc.tr.m["x"].st, svc.docs["x"], svc.finished["x"] = s2, s2, true
	svc.mu.Unlock()
	svc.flush() // GET /v1/dead-letters' flush
	<-aDone
	if st, _ := svc.Status("x"); st.Status != Processed {
		t.Fatalf("x reads %s attempts %d after both flushes", st.Status, st.Attempts)
	}
}

// Stats.Flushes counts every flush done, one with nothing to write included.
func TestStatsCountFlushes(t *testing.T) {
	l, err := eventlog.Open(eventlog.Options{Dir: "data", FS: vfs.NewMem()})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	svc, _ := New(Config{Log: l, Logger: quiet(), FlushEvery: time.Hour})
	defer svc.Close()
	if n := svc.Stats().Flushes; n != 0 {
		t.Fatalf("%d flushes before any", n)
	}
	svc.flush() // nothing to write
	e, _ := event.Parse([]byte(ev("x", `{}`)))
	svc.Submit(context.Background(), []event.Event{e}, LevelPersisted, 0)
	svc.flush() // x's PERSISTED document
	if n := svc.Stats().Flushes; n != 2 {
		t.Fatalf("%d flushes, want 2", n)
	}
}

// Regression (adversarial review): PROCESSED was answered before its status
// document was durable, so a power cut right after showed it PERSISTED again.
func TestProcessedSurvivesPowerCut(t *testing.T) {
	mem := vfs.NewCrashableMem()
	r := startRig(t, mem, newSink(nil), Config{FlushEvery: time.Hour}) // only kicks flush
	if code, _, b := r.post("/v1/events?ack=processed", ev("p", `{}`)); code != 200 || decode[Answer](t, b).Status != Processed {
		t.Fatal(code, string(b))
	}
	crashed := mem.CrashClone(vfs.CrashCloneCfg{})
	l, err := eventlog.Open(eventlog.Options{Dir: "data", FS: crashed})
	if err != nil {
		t.Fatal(err)
	}
	svc, _ := New(Config{Log: l, Logger: quiet()})
	st, _ := svc.Status("p")
	svc.Close()
	l.Close()
	if st.Status != Processed {
		t.Fatalf("answered PROCESSED, after the cut: %s", st.Status)
	}
}

// Regression (second review): a flush that wrote an older document of an event
// (its failed attempt) woke a waiter whose PROCESSED document was still pending, so
// PROCESSED was answered before it was durable.
func TestProcessedAfterARetryIsAnsweredOnlyWhenDurable(t *testing.T) {
	var slow atomic.Bool
	fs := errorfs.Wrap(vfs.NewMem(), errorfs.InjectorFunc(func(op errorfs.Op) error {
		if slow.Load() && (op.Kind == errorfs.OpFileSync || op.Kind == errorfs.OpFileSyncData || op.Kind == errorfs.OpFileSyncTo) {
			time.Sleep(40 * time.Millisecond) // the fault: a slow disk, whose syncs take this long
		}
		return nil
	}))
	r := startRig(t, fs, newSink(func(string) int { return 1 }), // every first attempt fails
		Config{Tracker: TrackerConfig{BackoffBase: 5 * time.Millisecond}})
	slow.Store(true)
	var wg sync.WaitGroup
	for i := range 60 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			id := fmt.Sprintf("x%d", i)
			code, _, b := r.post("/v1/events?ack=processed&wait=30s", ev(id, `{}`))
			if a := decode[Answer](t, b); code != 200 || a.Status != Processed {
				t.Errorf("%s: %d %s", id, code, b)
				return
			}
			doc, err := r.svc.statusDoc(id)
			if err != nil || doc == nil || doc.Status != Processed {
				t.Errorf("%s answered PROCESSED, stored document: %+v %v", id, doc, err)
			}
		}()
	}
	wg.Wait()
}

// Regression (second review): records read but held back by max spout pending were
// charged a recovered attempt at every restart and dead-lettered without ever
// running. Only records actually emitted are charged now.
func TestRestartsDoNotChargeRecordsThatNeverRan(t *testing.T) {
	mem := vfs.NewMem()
	var sink *blockSink
	start := func() *rig {
		sink = &blockSink{sinkBolt: newSink(nil)}
		r := startRigWith(t, mem, sink, Config{Tracker: TrackerConfig{MaxAttempts: 3}},
			func(tc *topology.Config) { tc.MaxSpoutPending, tc.MessageTimeout = 2, time.Minute })
		r.drain = 50 * time.Millisecond
		return r
	}
	// A run has charged what it will once its first emits reach the sink: the
	// recovered chunk's attempts are synced before it is emitted, and max spout
	// pending holds back the rest (the trees never complete).
	emitted := func() {
		t.Helper()
		waitfor.True(t, 10*time.Second, "the run's first two emits at the sink", func() bool { return sink.n.Load() >= 2 })
	}
	r := start()
	for i := range 100 {
		r.post("/v1/events?ack=persisted", ev(fmt.Sprintf("e%02d", i), `{}`))
	}
	for range 4 {
		emitted()
		r.stop()
		r = start()
	}
	emitted()
	defer r.stop()
	dl, err := r.svc.DeadLetters(1000)
	if err != nil {
		t.Fatal(err)
	}
	// Each run emits one chunk of recovered records (they never complete); after
	// 3 charged runs those are dead-lettered. The rest never ran and must not be.
	if len(dl) > recoveredChunk {
		t.Fatalf("%d dead letters after 4 restarts, at most one chunk (%d) ran", len(dl), recoveredChunk)
	}
	st, _ := r.svc.Status("e99")
	if st.Status != Persisted || st.Attempts != 0 {
		t.Fatalf("e99 never ran: %+v", st)
	}
}

// Dead letters outlive the dedupe window: they wait for an operator's :retry.
func TestTrimKeepsDeadLetters(t *testing.T) {
	var now atomic.Int64
	now.Store(time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC).UnixNano())
	clock := func() time.Time { return time.Unix(0, now.Load()) }
	sink := newSink(func(id string) int {
		if id == "dead" {
			return 1000
		}
		return 0
	})
	r := startRig(t, vfs.NewMem(), sink, Config{DedupeWindow: time.Hour, Now: clock, Tracker: TrackerConfig{MaxAttempts: 1}}) // no retry: the fake clock does not move
	if code, _, b := r.post("/v1/events?ack=processed", ev("dead", `{}`)); code != 422 {
		t.Fatalf("dead: %d %s", code, b)
	}
	r.post("/v1/events?ack=processed", ev("done", `{}`))
	waitfor.True(t, 10*time.Second, "both finished", func() bool { return r.log.Committed() >= 3 })
	now.Add(int64(2 * time.Hour))
	if n, err := r.svc.Trim(); err != nil || n != 1 {
		t.Fatalf("Trim = %d, %v; want 1 (the processed one)", n, err)
	}
	if code, _ := r.get("/v1/events/done"); code != 404 {
		t.Fatalf("processed event past the window: GET %d", code)
	}
	if code, _, b := r.post("/v1/events/dead:retry", ""); code != 200 {
		t.Fatalf(":retry of a dead letter past the window: %d %s", code, b)
	}
}

// An event's answer says what PERSISTED meant (Config.Durability) exactly when
// it names a seq: "fsync" by default on the Pebble log, the configured word
// otherwise; single and batch, duplicates too, and the Go client reads it. An
// ACCEPTED answer, an invalid line and a refused request name no seq, and say
// nothing of it.
func TestAnswersSayTheDurability(t *testing.T) {
	r := startRig(t, vfs.NewMem(), newSink(nil), Config{})
	code, _, b := r.post("/v1/events", ev("d1", `{}`))
	if a := decode[Answer](t, b); code != 200 || a.Seq == 0 || a.Durability != "fsync" || !strings.Contains(string(b), `"durability":"fsync"`) {
		t.Fatalf("single: %d %s", code, b)
	}
	r.stop()

	r = startRig(t, vfs.NewMem(), newSink(nil), Config{Durability: "replicated:3+fsync"})
	code, _, b = r.post("/v1/events:batch", ev("d1", `{}`)+"\n{nope\n"+ev("d2", `{}`)+"\n")
	ba := decode[BatchAnswer](t, b)
	if code != 200 || len(ba.Results) != 3 {
		t.Fatalf("batch: %d %s", code, b)
	}
	for _, a := range ba.Results {
		want := "replicated:3+fsync"
		if a.Seq == 0 {
			want = "" // the invalid line
		}
		if a.Durability != want {
			t.Errorf("batch line %d (%s, seq %d): durability %q, want %q", a.Line, a.Status, a.Seq, a.Durability, want)
		}
	}
	code, _, b = r.post("/v1/events", ev("d1", `{}`))
	if a := decode[Answer](t, b); code != 200 || !a.Duplicate || a.Seq == 0 || a.Durability != "replicated:3+fsync" {
		t.Fatalf("duplicate: %d %s", code, b)
	}
	c := &Client{URL: r.srv.URL}
	as, _, err := c.Send(context.Background(), []event.Event{{ID: "d3", Source: "s", Type: "t", Payload: []byte(`{}`)}}, LevelPersisted, 0)
	if err != nil || len(as) != 1 || as[0].Durability != "replicated:3+fsync" {
		t.Fatalf("client: %+v %v", as, err)
	}
	// No seq, no durability: ACCEPTED (single and batch), an invalid event, a
	// refused parameter.
	for _, c := range []struct {
		what, path, body string
		code             int
	}{
		{"accepted", "/v1/events?ack=accepted", ev("d4", `{}`), 202},
		{"accepted batch", "/v1/events:batch?ack=accepted", ev("d5", `{}`) + "\n", 200},
		{"invalid event", "/v1/events", `{"event_id":"d6","source":"s"}`, 400},
		{"invalid batch", "/v1/events:batch", "{nope\n", 400},
		{"bad ack", "/v1/events?ack=maybe", ev("d7", `{}`), 400},
	} {
		code, _, b := r.post(c.path, c.body)
		if code != c.code || strings.Contains(string(b), "durability") || strings.Contains(string(b), `"seq"`) {
			t.Errorf("%s: %d %s; want %d without seq or durability", c.what, code, b, c.code)
		}
	}
}
