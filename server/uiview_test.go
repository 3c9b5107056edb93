package server_test

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gale-stream/gale/event"
	"github.com/gale-stream/gale/ingest"
	"github.com/gale-stream/gale/internal/waitfor"
	"github.com/gale-stream/gale/pipelines/orders"
	. "github.com/gale-stream/gale/server"
	"github.com/gale-stream/gale/ui"
)

// TestUIShowsIngestPath: gale serve's UI, over real HTTP, shows the ingest path as
// the service and the log count it (events by status, offsets, commits, the dead
// letter with its reason), and an event id opens the event's status and its tree,
// found by its seq, the log spout's message id.
func TestUIShowsIngestPath(t *testing.T) {
	o := Options{Addr: "127.0.0.1:0", DataDir: t.TempDir(), Pipeline: orders.Pipeline()}
	o.Ingest.Tracker.MaxAttempts = 1 // a bad event is dead-lettered at its first failure
	s, err := start(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if err := s.Shutdown(ctx); err != nil {
			t.Error(err)
		}
	}()
	line := `{"invoice_no":"536365","stock_code":"85123A","description":"WHITE HANGING HEART T-LIGHT HOLDER","quantity":6,"invoice_date":"2010-12-01 08:26:00","unit_price":2.55,"customer_id":17850,"country":"United Kingdom"}`
	c := &ingest.Client{URL: s.URL()}
	answers, _, err := c.Send(context.Background(), []event.Event{
		{ID: "ok-1", Source: "shop", Type: "order_line", Payload: []byte(line)},
		{ID: "bad-1", Source: "shop", Type: "click", Payload: []byte(`{"x":1}`)},
	}, ingest.LevelProcessed, 10*time.Second)
	if err != nil || len(answers) != 2 || answers[0].Status != ingest.Processed || answers[1].Status != ingest.FailedFinal {
		t.Fatalf("answers %+v, %v; want PROCESSED and FAILED_FINAL", answers, err)
	}
	badSeq := answers[1].Seq
	var p ui.IngestPanel
	waitfor.Until(t, 10*time.Second, func() error {
		if code := getJSON(t, s, "/ui/api/ingest", &p); code != http.StatusOK {
			t.Fatalf("GET /ui/api/ingest: %d", code)
		}
		if len(p.DeadLetters) == 0 {
			return fmt.Errorf("the dead letter never showed: %+v", p)
		}
		return nil
	})
	counts := map[string]uint64{}
	for _, st := range p.Statuses {
		counts[st.Status] = st.Count
	}
	want := map[string]uint64{"ACCEPTED": 2, "PERSISTED": 2, "PROCESSED": 1, "FAILED_RETRYABLE": 0, "FAILED_FINAL": 1}
	for st, n := range want {
		if counts[st] != n {
			t.Errorf("%s: %d events, want %d (all %v)", st, counts[st], n, counts)
		}
	}
	if l := p.Log; l.Durable != 2 || l.Committed != 3 || l.Lag != 0 || l.Records != 2 || l.Commits < 1 || l.CommitP99Ms <= 0 || p.Held < 0 {
		t.Errorf("log %+v", l)
	}
	dl := p.DeadLetters[0]
	if len(p.DeadLetters) != 1 || dl.EventID != "bad-1" || dl.Seq != badSeq || dl.Attempts != 1 || !strings.Contains(dl.Reason, "orders: not an order line") {
		t.Errorf("dead letters %+v, want bad-1 (seq %d) for not being an order line", p.DeadLetters, badSeq)
	}

	var ev ui.EventPage
	if code := getJSON(t, s, "/ui/api/events/bad-1", &ev); code != http.StatusOK {
		t.Fatalf("GET /ui/api/events/bad-1: %d", code)
	}
	seq := strconv.FormatUint(badSeq, 10)
	if e := ev.Event; e.Status != "FAILED_FINAL" || e.Seq != badSeq || len(e.MsgIDs) != 1 || e.MsgIDs[0] != seq ||
		!strings.Contains(e.LastError, "not an order line") || e.Transitions[len(e.Transitions)-1].Step != "dead_letter" {
		t.Errorf("event bad-1: %+v", e)
	}
	if len(ev.Trees) != 1 || ev.Trees[0].MsgID != seq || ev.Trees[0].Outcome != "failed" || !strings.Contains(ev.Trees[0].Reason, "not an order line") {
		t.Errorf("bad-1's trees: %+v (note %q)", ev.Trees, ev.Note)
	}
	var ok ui.EventPage
	if getJSON(t, s, "/ui/api/events/ok-1", &ok); ok.Event.Status != "PROCESSED" || ok.Event.Seq != answers[0].Seq || ok.Event.Attempts != 1 {
		t.Errorf("event ok-1: %+v", ok.Event)
	}
	var nf map[string]string
	if code := getJSON(t, s, "/ui/api/events/nope", &nf); code != http.StatusNotFound || !strings.Contains(nf["error"], `"nope"`) {
		t.Errorf("unknown event: %d %v", code, nf)
	}
}
