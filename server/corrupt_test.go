package server_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/gale-stream/gale/event"
	"github.com/gale-stream/gale/eventlog"
	"github.com/gale-stream/gale/ingest"
	"github.com/gale-stream/gale/internal/ssttest"
	"github.com/gale-stream/gale/internal/testio"
	. "github.com/gale-stream/gale/server"
)

func httpGet(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err) // a dropped connection, as before the fix
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// gale serve on real files meets a flipped bit under its status documents while
// running (§3): the GET gets FAILED_RETRYABLE naming the corruption, /readyz turns
// 503 with the reason, /metrics and the log name the file, the server stays up
// and shuts down cleanly, and the next start refuses the store naming the file
// instead of crash-looping.
func TestCorruptionWhileServingIsReportedAndRefusedAtRestart(t *testing.T) {
	dir := t.TempDir()
	var logs testio.SyncBuffer
	o := Options{Addr: "127.0.0.1:0", DataDir: dir, Logger: slog.New(slog.NewTextHandler(&logs, nil))}
	s, err := start(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	c := &ingest.Client{URL: s.URL()}
	const n = 400
	evs := make([]event.Event, n)
	for i := range evs {
		evs[i] = event.Event{ID: fmt.Sprintf("k%04d", i), Source: "t", Type: "t", Payload: []byte(`{"n":1}`)}
	}
	answers, _, err := c.Send(context.Background(), evs, ingest.LevelProcessed, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range answers {
		if a.Status != ingest.Processed {
			t.Fatalf("answer: %+v", a)
		}
	}
	// Records, index and status documents into one SST nothing has read yet.
	if err := s.Log.Flush(); err != nil {
		t.Fatal(err)
	}
	ssts, _ := filepath.Glob(filepath.Join(dir, "log", "*.sst"))
	if len(ssts) != 1 {
		t.Fatalf("SSTs: %v, want one", ssts)
	}
	damaged := ssts[0]
	if _, err := ssttest.FlipDataBlockBit(vfs.Default, damaged, -1); err != nil { // the newest ids' status documents
		t.Fatal(err)
	}

	code, body := httpGet(t, s.URL()+"/v1/events/"+evs[n-1].ID)
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "FAILED_RETRYABLE") ||
		!strings.Contains(body, "corruption") || !strings.Contains(body, damaged) {
		t.Fatalf("GET of a damaged status: %d %s", code, body)
	}
	t.Logf("GET: %d %s", code, body)
	code, body = httpGet(t, s.URL()+"/readyz")
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "corruption") {
		t.Fatalf("/readyz: %d %s", code, body)
	}
	code, body = httpGet(t, s.URL()+"/metrics")
	want := fmt.Sprintf(`gale_eventlog_corruption_reports_total{file=%q}`, damaged)
	if code != 200 || !strings.Contains(body, want) || !strings.Contains(body, "gale_eventlog_damaged_files 1") {
		t.Fatalf("/metrics lacks %s and gale_eventlog_damaged_files 1:\n%s", want, body)
	}
	if l := logs.String(); !strings.Contains(l, "on-disk corruption") || !strings.Contains(l, damaged) {
		t.Fatalf("the log does not name %s:\n%s", damaged, l)
	}
	// Still up: what is intact is served.
	if code, body = httpGet(t, s.URL()+"/v1/events/"+evs[0].ID); code != 200 || !strings.Contains(body, "PROCESSED") {
		t.Fatalf("GET of an intact status: %d %s", code, body)
	}
	if err := s.Shutdown(context.Background()); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}

	_, err = start(context.Background(), o)
	var ce *eventlog.CorruptError
	if !errors.As(err, &ce) || ce.File != damaged || !errors.Is(err, event.ErrCorrupt) {
		t.Fatalf("restart = %v; want a refusal naming %s", err, damaged)
	}
	t.Logf("restart refused: %v", err)
	if _, err := os.Stat(damaged); err != nil {
		t.Fatalf("the damaged file must stay for gale log check: %v", err)
	}
}
