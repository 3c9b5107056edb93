package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gale-stream/gale/event"
	"github.com/gale-stream/gale/eventlog"
	"github.com/gale-stream/gale/ingest"
	"github.com/gale-stream/gale/internal/ingesttest"
	"github.com/gale-stream/gale/pipelines/orders"
	. "github.com/gale-stream/gale/server"
)

// retail is the first n order lines of a real retail day.
func retail(t *testing.T, n int) []event.Event {
	t.Helper()
	f, err := os.Open("../testdata/retail/2010-12-01.csv")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var evs []event.Event
	err = orders.ScanCSV(f, f.Name(), func(e event.Event) error {
		if len(evs) < n {
			evs = append(evs, e)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return evs
}

// eventJSON is e as a client writes it, with the payload's text as given and sep
// between members (whitespace a client may put there).
func retailEventJSON(e event.Event, payload []byte, sep string) string {
	return fmt.Sprintf(`{"event_id":%q,%s"source":%q,%s"type":%q,%s"key":%q,%s"payload":%s}`,
		e.ID, sep, e.Source, sep, e.Type, sep, e.Key, sep, payload)
}

// reversed writes the JSON object p with its keys in reverse order, sep around
// every member, each value's text kept.
func reversed(t *testing.T, p []byte, sep string) []byte {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(p))
	if _, err := dec.Token(); err != nil {
		t.Fatal(err)
	}
	var members []string
	for dec.More() {
		k, _ := dec.Token()
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			t.Fatal(err)
		}
		kb, _ := json.Marshal(k)
		members = append([]string{sep + string(kb) + sep + ":" + sep + string(v) + sep}, members...)
	}
	return []byte("{" + strings.Join(members, ",") + "}")
}

func postEvent(t *testing.T, url, body string) (int, ingest.Answer) {
	t.Helper()
	return postAck(t, url, "processed", body)
}

func postAck(t *testing.T, url, ack, body string) (int, ingest.Answer) {
	t.Helper()
	resp, err := http.Post(url+"/v1/events?ack="+ack, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var a ingest.Answer
	if err := json.Unmarshal(b, &a); err != nil {
		t.Fatalf("%d %s: %v", resp.StatusCode, b, err)
	}
	return resp.StatusCode, a
}

func startOrders(t *testing.T, dir string) *Server {
	t.Helper()
	s, err := start(context.Background(), Options{Addr: "127.0.0.1:0", DataDir: dir, Pipeline: orders.Pipeline()})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func shutdown(t *testing.T, s *Server) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := s.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestRetryWithOtherKeyOrderIsDuplicate: over HTTP, real order lines sent again
// with their payload's keys in another order and other whitespace are duplicates
// (200, "duplicate": true), not 409; a changed value is a 409; integers past 2^53
// stay apart.
func TestRetryWithOtherKeyOrderIsDuplicate(t *testing.T) {
	s := startOrders(t, t.TempDir())
	defer shutdown(t, s)
	evs := retail(t, 60)
	for _, e := range evs {
		if code, a := postEvent(t, s.URL(), retailEventJSON(e, e.Payload, "")); code != 200 || a.Status != ingest.Processed || a.Duplicate ||
			!strings.HasPrefix(a.PayloadHash, "c1:sha256:") {
			t.Fatalf("%s: %d %+v", e.ID, code, a)
		}
	}
	for i, e := range evs {
		sep := []string{" ", "\n\t", "\r\n  "}[i%3]
		code, a := postEvent(t, s.URL(), retailEventJSON(e, reversed(t, e.Payload, sep), sep))
		if code != 200 || !a.Duplicate || a.Status != ingest.Processed {
			t.Fatalf("%s with its keys reversed: %d %+v", e.ID, code, a)
		}
	}
	e := evs[0]
	changed := bytes.Replace(e.Payload, []byte(`"quantity":6`), []byte(`"quantity":7`), 1)
	if bytes.Equal(changed, e.Payload) {
		t.Fatalf("no quantity 6 in %s", e.Payload)
	}
	if code, a := postEvent(t, s.URL(), retailEventJSON(e, reversed(t, changed, " "), "")); code != 409 || a.Status != ingest.FailedFinal {
		t.Fatalf("a changed quantity: %d %+v", code, a)
	}
	// (not an order line: the orders pipeline dead-letters it, so ack=persisted)
	big := event.Event{ID: "big", Source: "test", Type: "t"}
	if code, a := postAck(t, s.URL(), "persisted", retailEventJSON(big, []byte(`{"n":9007199254740992}`), "")); code != 200 || a.Duplicate {
		t.Fatalf("big: %d %+v", code, a)
	}
	if code, a := postAck(t, s.URL(), "persisted", retailEventJSON(big, []byte(`{ "n" : 9007199254740992 }`), "")); code != 200 || !a.Duplicate {
		t.Fatalf("big with spaces: %d %+v", code, a)
	}
	if code, a := postAck(t, s.URL(), "persisted", retailEventJSON(big, []byte(`{"n":9007199254740993}`), "")); code != 409 {
		t.Fatalf("2^53+1 after 2^53: %d %+v", code, a)
	}
}

// TestRawHashStillAnswersRetries: an event stored under the raw-byte hash of the
// version before (rule HashRaw, "sha256:") is answered as a duplicate for a
// byte-identical retry, in memory and after a restart (from the log's index and
// the status document); a retry in another key order is a 409 naming both
// hashes under that rule, since the raw rule cannot tell.
func TestRawHashStillAnswersRetries(t *testing.T) {
	dir := t.TempDir()
	evs := retail(t, 2)
	l, err := eventlog.Open(eventlog.Options{Dir: filepath.Join(dir, "log")})
	if err != nil {
		t.Fatal(err)
	}
	for i := range evs {
		if err := l.Append(context.Background(), &event.Record{ReceivedAt: time.Now().UnixNano(), Event: evs[i], Hash: evs[i].HashAs(event.HashRaw)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	raw := evs[0].HashAs(event.HashRaw).String()
	for restart := range 2 {
		s := startOrders(t, dir)
		c := &ingest.Client{URL: s.URL()}
		// Until the topology has processed the stored events.
		ingesttest.WaitProcessed(t, 20*time.Second, ingesttest.OfClient(context.Background(), c), []string{evs[1].ID})
		for _, e := range evs {
			code, a := postEvent(t, s.URL(), retailEventJSON(e, e.Payload, ""))
			if code != 200 || !a.Duplicate || a.Status != ingest.Processed || a.PayloadHash != e.HashAs(event.HashRaw).String() {
				t.Fatalf("restart %d: byte-identical retry of %s: %d %+v", restart, e.ID, code, a)
			}
		}
		code, a := postEvent(t, s.URL(), retailEventJSON(evs[0], reversed(t, evs[0].Payload, ""), ""))
		other := evs[0]
		other.Payload = reversed(t, evs[0].Payload, "")
		if code != 409 || !strings.Contains(a.Error, "stored "+raw+", this request "+other.HashAs(event.HashRaw).String()) {
			t.Fatalf("restart %d: reordered retry under the raw rule: %d %+v", restart, code, a)
		}
		// A new event takes the canonical rule.
		fresh := retail(t, 3)[2]
		if code, a := postEvent(t, s.URL(), retailEventJSON(fresh, fresh.Payload, "")); code != 200 || a.PayloadHash != fresh.Hash().String() {
			t.Fatalf("restart %d: a new event: %d %+v", restart, code, a)
		}
		shutdown(t, s)
	}
}
