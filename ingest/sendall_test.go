package ingest

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/gale-stream/gale/event"
)

// fakeServe is a gale serve whose answers a test scripts: batch answers the n-th
// batch request (1-based) of evs with an HTTP status and a body (a BatchAnswer,
// or a string for an answer no gale serve gives); status answers the n-th poll of
// an event id. It records each batch's ids and when it came.
type fakeServe struct {
	t      *testing.T
	batch  func(n int, evs []event.Event) (int, any)
	status func(id string, n int) (int, any)

	mu       sync.Mutex
	requests [][]string
	at       []time.Time
	polls    map[string]int
}

func startFake(t *testing.T, f *fakeServe) *Client {
	t.Helper()
	f.t, f.polls = t, map[string]int{}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	return &Client{URL: srv.URL}
}

func (f *fakeServe) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var code int
	var body any
	switch {
	case r.Method == http.MethodPost && r.URL.Path == "/v1/events:batch":
		var evs []event.Event
		var ids []string
		sc := bufio.NewScanner(r.Body)
		for sc.Scan() {
			var e event.Event
			if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
				f.t.Errorf("batch line %q: %v", sc.Bytes(), err)
			}
			evs, ids = append(evs, e), append(ids, e.ID)
		}
		f.mu.Lock()
		f.requests = append(f.requests, ids)
		f.at = append(f.at, time.Now())
		n := len(f.requests)
		f.mu.Unlock()
		code, body = f.batch(n, evs)
	case r.Method == http.MethodGet && strings.HasPrefix(r.URL.Path, "/v1/events/"):
		id := strings.TrimPrefix(r.URL.Path, "/v1/events/")
		f.mu.Lock()
		f.polls[id]++
		n := f.polls[id]
		f.mu.Unlock()
		code, body = f.status(id, n)
	default:
		code, body = http.StatusNotFound, "no such route"
	}
	w.WriteHeader(code)
	if s, ok := body.(string); ok {
		fmt.Fprint(w, s)
		return
	}
	_ = json.NewEncoder(w).Encode(body)
}

// sent is the ids of every batch request, in order.
func (f *fakeServe) sent() [][]string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.requests)
}

// answerAll answers every event of evs with status st.
func answerAll(evs []event.Event, st Status) BatchAnswer {
	var ba BatchAnswer
	for i, e := range evs {
		ba.Results = append(ba.Results, Answer{Line: i + 1, EventID: e.ID, Status: st})
	}
	return ba
}

// someEvents are n valid events e1..en.
func someEvents(n int) []event.Event {
	var evs []event.Event
	for i := 1; i <= n; i++ {
		evs = append(evs, event.Event{ID: fmt.Sprintf("e%d", i), Source: "orders", Type: "order_line", Payload: json.RawMessage(`{}`)})
	}
	return evs
}

// eventsOf yields evs, then err if not nil.
func eventsOf(evs []event.Event, err error) iter.Seq2[event.Event, error] {
	return func(yield func(event.Event, error) bool) {
		for _, e := range evs {
			if !yield(e, nil) {
				return
			}
		}
		if err != nil {
			yield(event.Event{}, err)
		}
	}
}

// progressLog keeps every Progress a run reports.
type progressLog struct {
	mu sync.Mutex
	ps []Progress
}

func (l *progressLog) add(p Progress) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.ps = append(l.ps, p)
}

func (l *progressLog) of(k ProgressKind) []Progress {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []Progress
	for _, p := range l.ps {
		if p.Kind == k {
			out = append(out, p)
		}
	}
	return out
}

func sendOptions(l *progressLog) SendOptions {
	o := DefaultSendOptions()
	o.Batch, o.Workers = 3, 1
	if l != nil {
		o.Progress = l.add
	}
	return o
}

func bounded(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// TestSendAllResendsAFailedRequest: a request with no answer per event (a proxy's
// 502 page) is sent again, whole and with the same ids, after 50 ms, then 100 ms;
// each retry is told as it happens and counted as a failed request.
func TestSendAllResendsAFailedRequest(t *testing.T) {
	f := &fakeServe{batch: func(n int, evs []event.Event) (int, any) {
		if n <= 2 {
			return http.StatusBadGateway, "<html>bad gateway</html>"
		}
		return http.StatusOK, answerAll(evs, Processed)
	}}
	c := startFake(t, f)
	var l progressLog
	rep, err := c.SendAll(bounded(t), eventsOf(someEvents(3), nil), sendOptions(&l))
	if err != nil {
		t.Fatal(err)
	}
	if rep.Sent != 3 || rep.Final["PROCESSED"] != 3 || len(rep.Final) != 1 || rep.Retries != 2 || rep.Failed != 2 || rep.Resent != 6 || rep.Broken() != 0 || len(rep.Problems) != 0 {
		t.Errorf("report %+v", rep)
	}
	want := []string{"e1", "e2", "e3"}
	if s := f.sent(); len(s) != 3 || !slices.Equal(s[0], want) || !slices.Equal(s[1], want) || !slices.Equal(s[2], want) {
		t.Errorf("requests %v; want %v three times", s, want)
	}
	rs := l.of(ProgressRetryRequest)
	if len(rs) != 2 {
		t.Fatalf("retries told: %+v", rs)
	}
	for i, p := range rs {
		if p.Retry != i+1 || p.Wait != 50*time.Millisecond<<i || p.Request != 3 || p.FirstID != "e1" || p.LastID != "e3" ||
			p.Err == nil || !strings.Contains(p.Err.Error(), "HTTP 502") {
			t.Errorf("retry %d told %+v", i+1, p)
		}
	}
	if bs := l.of(ProgressBatch); len(bs) != 1 || bs[0].Batch != 3 || bs[0].Sent != 3 || bs[0].Answered != 3 || bs[0].Retries != 2 || bs[0].Resent != 6 {
		t.Errorf("batches told: %+v", bs)
	}
}

// TestSendAllResendsOnlyTheRetryableEvents: of a batch, only the event answered
// FAILED_RETRYABLE is sent again, and after a second at least when the server
// said 429 (overloaded); the others are final at once.
func TestSendAllResendsOnlyTheRetryableEvents(t *testing.T) {
	f := &fakeServe{batch: func(n int, evs []event.Event) (int, any) {
		ba := answerAll(evs, Processed)
		if n == 1 {
			ba.Results[1].Status, ba.Results[1].Error = FailedRetryable, "log overloaded"
			return http.StatusTooManyRequests, ba
		}
		return http.StatusOK, ba
	}}
	c := startFake(t, f)
	var l progressLog
	rep, err := c.SendAll(bounded(t), eventsOf(someEvents(3), nil), sendOptions(&l))
	if err != nil {
		t.Fatal(err)
	}
	if rep.Final["PROCESSED"] != 3 || rep.Retries != 1 || rep.Failed != 0 || rep.Resent != 1 || rep.Broken() != 0 {
		t.Errorf("report %+v", rep)
	}
	s := f.sent()
	if len(s) != 2 || !slices.Equal(s[1], []string{"e2"}) {
		t.Fatalf("requests %v; want e2 alone sent again", s)
	}
	f.mu.Lock()
	gap := f.at[1].Sub(f.at[0])
	f.mu.Unlock()
	if gap < time.Second {
		t.Errorf("sent again after %v; want a second at least after a 429", gap)
	}
	rs := l.of(ProgressRetryEvents)
	if len(rs) != 1 || rs[0].Events != 1 || rs[0].Request != 3 || rs[0].HTTPStatus != 429 || rs[0].Reason != "log overloaded" ||
		rs[0].Wait != time.Second || rs[0].Retry != 1 {
		t.Errorf("retries told: %+v", rs)
	}
}

// TestSendAllGivesUp: after Retries re-sends, a request that still got no answer
// per event is given up (told, its events FAILED_RETRYABLE with the error), and an
// event still answered FAILED_RETRYABLE ends so, while its batch's others are final.
func TestSendAllGivesUp(t *testing.T) {
	t.Run("request", func(t *testing.T) {
		f := &fakeServe{batch: func(int, []event.Event) (int, any) { return http.StatusInternalServerError, "oops" }}
		c := startFake(t, f)
		var l progressLog
		o := sendOptions(&l)
		o.Retries = 2
		rep, err := c.SendAll(bounded(t), eventsOf(someEvents(3), nil), o)
		if err != nil {
			t.Fatal(err)
		}
		if len(f.sent()) != 3 || rep.Final["FAILED_RETRYABLE"] != 3 || rep.Broken() != 3 || len(rep.Problems) != 3 || !strings.Contains(rep.Problems[0].Error, "HTTP 500") {
			t.Errorf("%d requests, report %+v", len(f.sent()), rep)
		}
		if g := l.of(ProgressGaveUp); len(g) != 1 || g[0].Tries != 2 || g[0].Request != 3 || g[0].Err == nil {
			t.Errorf("gave up told: %+v", g)
		}
	})
	t.Run("event", func(t *testing.T) {
		f := &fakeServe{batch: func(_ int, evs []event.Event) (int, any) {
			ba := answerAll(evs, Processed)
			ba.Results[0].Status, ba.Results[0].Error = FailedRetryable, "fsync failed"
			return http.StatusOK, ba
		}}
		c := startFake(t, f)
		var l progressLog
		o := sendOptions(&l)
		o.Batch, o.Retries = 2, 2
		rep, err := c.SendAll(bounded(t), eventsOf(someEvents(2), nil), o)
		if err != nil {
			t.Fatal(err)
		}
		s := f.sent()
		if len(s) != 3 || !slices.Equal(s[1], []string{"e1"}) || !slices.Equal(s[2], []string{"e1"}) {
			t.Errorf("requests %v", s)
		}
		if rep.Final["PROCESSED"] != 1 || rep.Final["FAILED_RETRYABLE"] != 1 || rep.Broken() != 1 || rep.Retries != 2 || rep.Resent != 2 ||
			len(rep.Problems) != 1 || rep.Problems[0].EventID != "e1" || rep.Problems[0].Error != "fsync failed" {
			t.Errorf("report %+v", rep)
		}
		rs := l.of(ProgressRetryEvents)
		if len(rs) != 2 || rs[0].Wait != 50*time.Millisecond || rs[1].Wait != 100*time.Millisecond {
			t.Errorf("retries told: %+v", rs)
		}
	})
}

// TestSendAllPollsUntilFinal: events answered PERSISTED (the request's wait ran
// out) are polled until PROCESSED or FAILED_FINAL, an unknown id (404) and a
// PERSISTED status polled again; past the deadline they end as they last read.
func TestSendAllPollsUntilFinal(t *testing.T) {
	t.Run("final", func(t *testing.T) {
		f := &fakeServe{
			batch: func(_ int, evs []event.Event) (int, any) { return http.StatusOK, answerAll(evs, Persisted) },
			status: func(id string, n int) (int, any) {
				switch {
				case id == "e1" && n <= 2:
					return http.StatusOK, EventStatus{EventID: id, Status: Persisted}
				case id == "e2":
					return http.StatusOK, EventStatus{EventID: id, Status: FailedFinal, Attempts: 5, LastError: "sink refused"}
				case id == "e3" && n == 1:
					return http.StatusNotFound, `{"error":"not found"}`
				}
				return http.StatusOK, EventStatus{EventID: id, Status: Processed, Attempts: 1}
			},
		}
		c := startFake(t, f)
		var l progressLog
		rep, err := c.SendAll(bounded(t), eventsOf(someEvents(3), nil), sendOptions(&l))
		if err != nil {
			t.Fatal(err)
		}
		if rep.Final["PROCESSED"] != 2 || rep.Final["FAILED_FINAL"] != 1 || len(rep.Final) != 2 || rep.Broken() != 0 ||
			len(rep.Problems) != 1 || rep.Problems[0].EventID != "e2" || rep.Problems[0].Error != "sink refused" || rep.Problems[0].Attempts != 5 {
			t.Errorf("report %+v", rep)
		}
		f.mu.Lock()
		polls := fmt.Sprint(f.polls)
		f.mu.Unlock()
		if polls != "map[e1:3 e2:1 e3:2]" {
			t.Errorf("polls %s", polls)
		}
		if ps := l.of(ProgressPoll); len(ps) != 3 || ps[0].Events != 2 || ps[2].Events != 0 || ps[2].Answered != 3 {
			t.Errorf("polls told: %+v", ps)
		}
	})
	t.Run("deadline", func(t *testing.T) {
		f := &fakeServe{
			batch: func(_ int, evs []event.Event) (int, any) { return http.StatusOK, answerAll(evs, Persisted) },
			status: func(id string, _ int) (int, any) {
				return http.StatusOK, EventStatus{EventID: id, Status: Persisted, Seq: 7}
			},
		}
		c := startFake(t, f)
		o := sendOptions(nil)
		o.Deadline = 300 * time.Millisecond
		start := time.Now()
		rep, err := c.SendAll(bounded(t), eventsOf(someEvents(1), nil), o)
		if err != nil {
			t.Fatal(err)
		}
		if took := time.Since(start); took < o.Deadline || took > 10*time.Second {
			t.Errorf("polling took %v with a deadline of %v", took, o.Deadline)
		}
		if rep.Final["PERSISTED"] != 1 || rep.Broken() != 1 || len(rep.Problems) != 1 || rep.Problems[0].Seq != 7 {
			t.Errorf("report %+v", rep)
		}
	})
}

// TestSendAllStopsWithoutProgress: when nothing but failures comes back for GiveUp,
// the run stops with an error wrapping ErrNoProgress that names the last error,
// though retries were left.
func TestSendAllStopsWithoutProgress(t *testing.T) {
	f := &fakeServe{batch: func(int, []event.Event) (int, any) { return http.StatusBadGateway, "upstream down" }}
	c := startFake(t, f)
	o := sendOptions(nil)
	o.Retries, o.GiveUp = 1000, 300*time.Millisecond
	start := time.Now()
	rep, err := c.SendAll(bounded(t), eventsOf(someEvents(6), nil), o)
	if !errors.Is(err, ErrNoProgress) || !strings.Contains(err.Error(), "HTTP 502: upstream down") {
		t.Fatalf("error %v; want no progress, naming the last error", err)
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("stopped after %v, with GiveUp %v", took, o.GiveUp)
	}
	if rep.Sent != 3 || rep.Unsent != 3 || rep.Final["FAILED_RETRYABLE"] != 3 || rep.Broken() != 3 {
		t.Errorf("report %+v; want the first batch given up, the second read but not sent", rep)
	}
}

// TestSendAllProgressKeepsItGoing: GiveUp counts from the last answer other than
// FAILED_RETRYABLE, not from the start: a run longer than GiveUp whose answers keep
// coming (a request every 150 ms, GiveUp 400 ms) goes to its end.
func TestSendAllProgressKeepsItGoing(t *testing.T) {
	f := &fakeServe{batch: func(_ int, evs []event.Event) (int, any) {
		time.Sleep(150 * time.Millisecond) // a slow server: the time between answers is the scenario
		return http.StatusOK, answerAll(evs, Processed)
	}}
	c := startFake(t, f)
	o := sendOptions(nil)
	o.Batch, o.GiveUp = 1, 400*time.Millisecond
	rep, err := c.SendAll(bounded(t), eventsOf(someEvents(6), nil), o)
	if err != nil || rep.Final["PROCESSED"] != 6 || rep.Elapsed < 2*o.GiveUp {
		t.Errorf("report %+v, %v; want 6 PROCESSED over more than %v", rep, err, 2*o.GiveUp)
	}
}

// TestSendAllReadError: an error reading the events stops the reading; every
// event yielded before it is still sent, the partial batch too, and followed to
// its end (the ones answered PERSISTED polled), so that each is in the report;
// the error is returned with it.
func TestSendAllReadError(t *testing.T) {
	f := &fakeServe{
		batch: func(_ int, evs []event.Event) (int, any) { return http.StatusOK, answerAll(evs, Persisted) },
		status: func(id string, _ int) (int, any) {
			return http.StatusOK, EventStatus{EventID: id, Status: Processed, Attempts: 1}
		},
	}
	c := startFake(t, f)
	bad := errors.New("day.csv: line 5: bad quote")
	rep, err := c.SendAll(bounded(t), eventsOf(someEvents(4), bad), sendOptions(nil))
	if !errors.Is(err, bad) {
		t.Fatalf("error %v", err)
	}
	if rep.Sent != 4 || rep.Unsent != 0 || rep.Final["PROCESSED"] != 4 || len(rep.Final) != 1 || rep.Broken() != 0 {
		t.Errorf("report %+v; want e1..e4 sent and PROCESSED", rep)
	}
	if s := f.sent(); len(s) != 2 || !slices.Equal(s[1], []string{"e4"}) {
		t.Errorf("requests %v; want e1..e3, then e4", s)
	}
}

// TestSendAllRefusesBadOptions: a batch of no events, no request in flight or
// negative retries are refused before anything is read; so are values too large
// to run with (1<<40 requests in flight made a channel of that size: the process
// died out of memory) and negative or out-of-range durations and levels; each
// error names the field.
func TestSendAllRefusesBadOptions(t *testing.T) {
	c := &Client{URL: "http://127.0.0.1:1"}
	read := false
	events := func(func(event.Event, error) bool) { read = true }
	for _, tc := range []struct {
		field string
		tune  func(*SendOptions)
	}{
		{"Batch", func(o *SendOptions) { o.Batch = 0 }},
		{"Batch", func(o *SendOptions) { o.Batch = -5 }},
		{"Batch", func(o *SendOptions) { o.Batch = 1 << 40 }},
		{"Workers", func(o *SendOptions) { o.Workers = 0 }},
		{"Workers", func(o *SendOptions) { o.Workers = -1 }},
		{"Workers", func(o *SendOptions) { o.Workers = 1 << 40 }},
		{"Workers", func(o *SendOptions) { o.Workers = 1 << 62 }},
		{"Retries", func(o *SendOptions) { o.Retries = -1 }},
		{"Retries", func(o *SendOptions) { o.Retries = 1 << 40 }},
		{"Wait", func(o *SendOptions) { o.Wait = -time.Second }},
		{"Wait", func(o *SendOptions) { o.Wait = time.Hour }},
		{"Deadline", func(o *SendOptions) { o.Deadline = -time.Second }},
		{"GiveUp", func(o *SendOptions) { o.GiveUp = -time.Second }},
		{"Level", func(o *SendOptions) { o.Level = 9 }},
	} {
		o := DefaultSendOptions()
		tc.tune(&o)
		func() {
			defer func() {
				if p := recover(); p != nil {
					t.Errorf("%+v: panic %v", o, p)
				}
			}()
			_, err := c.SendAll(context.Background(), events, o)
			if err == nil || !strings.Contains(err.Error(), "SendOptions."+tc.field) {
				t.Errorf("%+v: error %v; want one naming SendOptions.%s", o, err, tc.field)
			}
		}()
	}
	if read {
		t.Error("events read")
	}
	for _, o := range []SendOptions{DefaultSendOptions(), {Batch: 1, Workers: 1}, {Batch: maxSendBatch, Workers: maxSendWorkers, Retries: maxSendRetries, Wait: maxSendWait}} {
		if err := checkSendOptions(o); err != nil {
			t.Errorf("%+v refused: %v", o, err)
		}
	}
}

// TestSendAllAgainstTheService: against a real service (log, topology, sink), every
// event ends PROCESSED but the one the sink always refuses, which is dead-lettered
// FAILED_FINAL with the sink's reason (not broken); at ack=persisted every event
// is polled to its end; sent again, every answer is a duplicate.
func TestSendAllAgainstTheService(t *testing.T) {
	sink := newSink(func(id string) int {
		if id == "e13" {
			return 1000
		}
		return 0
	})
	r := startRig(t, vfs.NewMem(), sink, Config{Tracker: TrackerConfig{MaxAttempts: 2, BackoffBase: time.Millisecond}})
	c := &Client{URL: r.srv.URL}
	evs := someEvents(50)
	check := func(what string, rep *Report, dups int) {
		t.Helper()
		if rep.Sent != 50 || rep.Final["PROCESSED"] != 49 || rep.Final["FAILED_FINAL"] != 1 || len(rep.Final) != 2 || rep.Broken() != 0 ||
			len(rep.Problems) != 1 || rep.Problems[0].EventID != "e13" || !strings.Contains(rep.Problems[0].Error, "refused") || rep.Duplicates != dups {
			t.Errorf("%s: report %+v", what, rep)
		}
	}
	o := DefaultSendOptions()
	o.Batch, o.Workers, o.Level = 7, 3, LevelPersisted
	rep, err := c.SendAll(bounded(t), eventsOf(evs, nil), o)
	if err != nil {
		t.Fatal(err)
	}
	check("ack=persisted", rep, 0)
	for _, e := range evs {
		if applied, _ := sink.count(e.ID); applied != 1 && e.ID != "e13" {
			t.Errorf("%s applied %d times", e.ID, applied)
		}
	}
	o.Level = LevelProcessed
	rep, err = c.SendAll(bounded(t), eventsOf(evs, nil), o)
	if err != nil {
		t.Fatal(err)
	}
	check("sent again", rep, 50)
}

// Found by a breaker: a GiveUp under 10 ns made the watchdog's ticker interval
// zero, a panic in its goroutine. The run now just gives up at once.
func TestSendAllTinyGiveUpDoesNotPanic(t *testing.T) {
	f := &fakeServe{batch: func(int, []event.Event) (int, any) { return http.StatusBadGateway, "upstream down" }}
	c := startFake(t, f)
	o := sendOptions(nil)
	o.Retries, o.GiveUp = 1000, 5*time.Nanosecond
	_, err := c.SendAll(bounded(t), eventsOf(someEvents(2), nil), o)
	if !errors.Is(err, ErrNoProgress) {
		t.Fatalf("error %v; want ErrNoProgress", err)
	}
}

// TestSendAllCancelWhileTheEventsBlock: a ctx cancelled while the iterator waits (a
// producer blocked on a channel) ends the run at once with ctx's error and the
// report of what was sent; the iterator, once it yields again, is told to stop.
func TestSendAllCancelWhileTheEventsBlock(t *testing.T) {
	f := &fakeServe{batch: func(_ int, evs []event.Event) (int, any) { return http.StatusOK, answerAll(evs, Processed) }}
	c := startFake(t, f)
	release, stopped := make(chan struct{}), make(chan bool, 1)
	events := func(yield func(event.Event, error) bool) {
		for _, e := range someEvents(3) {
			if !yield(e, nil) {
				return
			}
		}
		<-release // the producer waits for more
		stopped <- !yield(someEvents(4)[3], nil)
	}
	batchDone := make(chan struct{}, 1)
	o := sendOptions(nil)
	o.Progress = func(p Progress) {
		if p.Kind == ProgressBatch {
			batchDone <- struct{}{}
		}
	}
	ctx, cancel := context.WithCancel(bounded(t))
	type result struct {
		rep *Report
		err error
	}
	done := make(chan result, 1)
	go func() {
		rep, err := c.SendAll(ctx, events, o)
		done <- result{rep, err}
	}()
	<-batchDone // e1..e3 answered; the iterator now blocks
	cancel()
	var res result
	select {
	case res = <-done:
	case <-time.After(30 * time.Second): // a hang guard, not a measure
		close(release)
		t.Fatal("SendAll still blocked with the iterator, 30 s after its ctx was cancelled")
	}
	if !errors.Is(res.err, context.Canceled) {
		t.Errorf("error %v; want context.Canceled", res.err)
	}
	if res.rep.Sent != 3 || res.rep.Final["PROCESSED"] != 3 {
		t.Errorf("report %+v", res.rep)
	}
	close(release)
	if !<-stopped {
		t.Error("the iterator's next yield returned true after the run ended")
	}
}

// TestSendAllSlowEventsAreNotAStall: GiveUp measures the server, not the input:
// a producer that takes several GiveUps between events, while every request is
// answered, goes to its end.
func TestSendAllSlowEventsAreNotAStall(t *testing.T) {
	f := &fakeServe{batch: func(_ int, evs []event.Event) (int, any) { return http.StatusOK, answerAll(evs, Processed) }}
	c := startFake(t, f)
	answered := make(chan struct{}, 3)
	o := sendOptions(nil)
	o.Batch, o.GiveUp = 1, 100*time.Millisecond
	o.Progress = func(p Progress) {
		if p.Kind == ProgressBatch {
			answered <- struct{}{}
		}
	}
	events := func(yield func(event.Event, error) bool) {
		for i, e := range someEvents(3) {
			if i > 0 {
				<-answered                 // the last event is answered...
				<-time.After(5 * o.GiveUp) // ...and the producer takes its time: the scenario
			}
			if !yield(e, nil) {
				return
			}
		}
	}
	rep, err := c.SendAll(bounded(t), events, o)
	if err != nil || rep.Final["PROCESSED"] != 3 || rep.Broken() != 0 {
		t.Errorf("report %+v, %v; want 3 PROCESSED and no error", rep, err)
	}
}

// TestSendAllRefusesAnswersForOtherIDs: an answer whose line names another event_id
// than the one sent on it, a line answered twice or a line missing is no answer:
// the request is a protocol violation (ErrProtocol), sent again whole, and its
// events are not counted done on it; still so after every retry, they end
// FAILED_RETRYABLE. A FAILED_FINAL line with no event_id (the server could not read
// the line's id: too large) is its line's event's answer.
func TestSendAllRefusesAnswersForOtherIDs(t *testing.T) {
	wrong := map[string]func(ba *BatchAnswer){
		"other id":      func(ba *BatchAnswer) { ba.Results[1].EventID = "e9" },
		"line twice":    func(ba *BatchAnswer) { ba.Results[1] = ba.Results[0] },
		"line missing":  func(ba *BatchAnswer) { ba.Results = slices.Delete(ba.Results, 1, 2) },
		"lines swapped": func(ba *BatchAnswer) { ba.Results[0], ba.Results[1] = ba.Results[1], ba.Results[0] },
		"line numbers":  func(ba *BatchAnswer) { ba.Results[0].Line, ba.Results[1].Line = 2, 1 },
		"no status":     func(ba *BatchAnswer) { ba.Results[2].Status = 0 },
	}
	for name, spoil := range wrong {
		t.Run(name, func(t *testing.T) {
			f := &fakeServe{batch: func(n int, evs []event.Event) (int, any) {
				ba := answerAll(evs, Processed)
				if n == 1 {
					spoil(&ba)
				}
				return http.StatusOK, ba
			}}
			c := startFake(t, f)
			var l progressLog
			rep, err := c.SendAll(bounded(t), eventsOf(someEvents(3), nil), sendOptions(&l))
			if err != nil {
				t.Fatal(err)
			}
			if len(f.sent()) != 2 || rep.Final["PROCESSED"] != 3 || len(rep.Final) != 1 || rep.Failed != 1 || rep.Resent != 3 {
				t.Errorf("%d requests, report %+v; want the request sent again whole", len(f.sent()), rep)
			}
			if rs := l.of(ProgressRetryRequest); len(rs) != 1 || !errors.Is(rs[0].Err, ErrProtocol) {
				t.Errorf("retries told: %+v; want one for ErrProtocol", rs)
			}
		})
	}
	t.Run("always", func(t *testing.T) {
		f := &fakeServe{batch: func(_ int, evs []event.Event) (int, any) {
			ba := answerAll(evs, Processed)
			ba.Results[1].EventID = "e9"
			return http.StatusOK, ba
		}}
		c := startFake(t, f)
		o := sendOptions(nil)
		o.Retries = 1
		rep, err := c.SendAll(bounded(t), eventsOf(someEvents(3), nil), o)
		if err != nil {
			t.Fatal(err)
		}
		if rep.Final["FAILED_RETRYABLE"] != 3 || len(rep.Final) != 1 || rep.Broken() != 3 || !strings.Contains(rep.Problems[1].Error, `"e9"`) {
			t.Errorf("report %+v; want every event unresolved, naming the wrong id", rep)
		}
	})
	t.Run("line with no id", func(t *testing.T) {
		f := &fakeServe{batch: func(_ int, evs []event.Event) (int, any) {
			ba := answerAll(evs, Processed)
			ba.Results[1] = Answer{Line: 2, Status: FailedFinal, Error: "line 2: 2000000 bytes, larger than the 1048576 allowed for one event"}
			return http.StatusOK, ba
		}}
		c := startFake(t, f)
		rep, err := c.SendAll(bounded(t), eventsOf(someEvents(3), nil), sendOptions(nil))
		if err != nil {
			t.Fatal(err)
		}
		if len(f.sent()) != 1 || rep.Final["PROCESSED"] != 2 || rep.Final["FAILED_FINAL"] != 1 || len(rep.Problems) != 1 ||
			rep.Problems[0].EventID != "e2" || !strings.Contains(rep.Problems[0].Error, "larger than") {
			t.Errorf("%d requests, report %+v", len(f.sent()), rep)
		}
	})
}

// wholeAnswer is a gale serve's answer to a batch as a whole (one error body, not
// one answer per line).
func wholeAnswer(st Status, why string) Answer { return Answer{Status: st, Error: why} }

// TestSendAllWholeBatchAnswers: an answer to the batch as a whole is no event's
// own answer. A batch too large (413) or refused for one bad line (400) is split in
// halves sent on their own until each request goes in, or one event alone is
// refused, which is then that event's answer; 429 and 503 send the batch again
// later whatever their body says; 401 and 403 (the token) stop the run with the
// events unresolved, not FAILED_FINAL with a reason.
func TestSendAllWholeBatchAnswers(t *testing.T) {
	t.Run("413", func(t *testing.T) {
		f := &fakeServe{batch: func(_ int, evs []event.Event) (int, any) {
			if len(evs) > 2 {
				return http.StatusRequestEntityTooLarge, wholeAnswer(FailedFinal, "batch of more than 2 events (line 3): send at most 2 per request")
			}
			return http.StatusOK, answerAll(evs, Processed)
		}}
		c := startFake(t, f)
		var l progressLog
		o := sendOptions(&l)
		o.Batch = 6
		rep, err := c.SendAll(bounded(t), eventsOf(someEvents(6), nil), o)
		if err != nil {
			t.Fatal(err)
		}
		if rep.Sent != 6 || rep.Final["PROCESSED"] != 6 || len(rep.Final) != 1 || rep.Broken() != 0 {
			t.Errorf("report %+v; want 6 PROCESSED in smaller batches", rep)
		}
		var got []string
		for _, ids := range f.sent() {
			if len(ids) <= 2 {
				got = append(got, ids...)
			}
		}
		if slices.Sort(got); !slices.Equal(got, []string{"e1", "e2", "e3", "e4", "e5", "e6"}) {
			t.Errorf("requests %v; want every event once in a batch of at most 2", f.sent())
		}
		if rs := l.of(ProgressRetryRequest); len(rs) == 0 || !strings.Contains(rs[0].Err.Error(), "HTTP 413") {
			t.Errorf("retries told: %+v", rs)
		}
	})
	t.Run("400 for one line", func(t *testing.T) {
		f := &fakeServe{batch: func(_ int, evs []event.Event) (int, any) {
			for i, e := range evs {
				if e.ID == "e2" {
					return http.StatusBadRequest, wholeAnswer(FailedFinal, fmt.Sprintf("line %d: payload: unexpected end of JSON", i+1))
				}
			}
			return http.StatusOK, answerAll(evs, Processed)
		}}
		c := startFake(t, f)
		o := sendOptions(nil)
		o.Batch = 5
		rep, err := c.SendAll(bounded(t), eventsOf(someEvents(5), nil), o)
		if err != nil {
			t.Fatal(err)
		}
		if rep.Final["PROCESSED"] != 4 || rep.Final["FAILED_FINAL"] != 1 || len(rep.Problems) != 1 ||
			rep.Problems[0].EventID != "e2" || !strings.Contains(rep.Problems[0].Error, "unexpected end") {
			t.Errorf("report %+v; want e2 alone FAILED_FINAL", rep)
		}
	})
	for _, code := range []int{http.StatusTooManyRequests, http.StatusServiceUnavailable} {
		t.Run(fmt.Sprint(code), func(t *testing.T) {
			f := &fakeServe{batch: func(n int, evs []event.Event) (int, any) {
				if n == 1 { // a proxy's refusal, saying FAILED_FINAL
					return code, wholeAnswer(FailedFinal, "slow down")
				}
				return http.StatusOK, answerAll(evs, Processed)
			}}
			c := startFake(t, f)
			var l progressLog
			rep, err := c.SendAll(bounded(t), eventsOf(someEvents(3), nil), sendOptions(&l))
			if err != nil {
				t.Fatal(err)
			}
			if s := f.sent(); len(s) != 2 || !slices.Equal(s[0], s[1]) || rep.Final["PROCESSED"] != 3 || len(rep.Final) != 1 || rep.Failed != 1 {
				t.Errorf("requests %v, report %+v; want the batch sent again whole, then PROCESSED", s, rep)
			}
			if rs := l.of(ProgressRetryRequest); len(rs) != 1 || rs[0].Wait < time.Second {
				t.Errorf("retries told: %+v; want one after a second at least", rs)
			}
		})
	}
	t.Run("401", func(t *testing.T) {
		f := &fakeServe{batch: func(int, []event.Event) (int, any) {
			return http.StatusUnauthorized, wholeAnswer(FailedFinal, "token required: send Authorization: Bearer TOKEN")
		}}
		c := startFake(t, f)
		rep, err := c.SendAll(bounded(t), eventsOf(someEvents(6), nil), sendOptions(nil))
		if err == nil || !strings.Contains(err.Error(), "HTTP 401") || !strings.Contains(err.Error(), "token required") {
			t.Fatalf("error %v; want the run stopped naming the 401", err)
		}
		if len(f.sent()) != 1 || rep.Final["FAILED_FINAL"] != 0 || rep.Final["FAILED_RETRYABLE"] != 3 || rep.Broken() != 3 || rep.Unsent != 3 {
			t.Errorf("%d requests, report %+v; want the first batch unresolved, the second not sent", len(f.sent()), rep)
		}
	})
}
