package ingest

import (
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/gale-stream/gale/internal/ssttest"
)

// A bad block under status documents, met while serving (§3). Before the fix the
// read panicked inside Pebble (its DataCorruption default is Logger.Fatalf), so
// GET /v1/events/{id} and a resend of the id got their connection closed with no
// answer while /readyz stayed 200. Now: FAILED_RETRYABLE naming the corruption
// and the file, /readyz 503 with the reason, and what is intact is still served.
func TestDamagedStatusBlockIsRetryableAndNotReady(t *testing.T) {
	fs := vfs.NewMem()
	r := startRig(t, fs, newSink(nil), Config{})
	const n = 400
	var batch strings.Builder
	for i := range n {
		fmt.Fprintln(&batch, ev(fmt.Sprintf("c%04d", i), `{"qty":1}`))
	}
	code, _, b := r.post("/v1/events:batch?ack=processed", batch.String())
	if ba := decode[BatchAnswer](t, b); code != 200 || ba.Counts["PROCESSED"] != n {
		t.Fatalf("batch: %d %v", code, ba.Counts)
	}
	// Everything (records, index, status documents) into one SST, nothing read
	// from it yet; its last data block holds the newest ids' status documents.
	if err := r.log.Flush(); err != nil {
		t.Fatal(err)
	}
	names, err := fs.List("data")
	if err != nil {
		t.Fatal(err)
	}
	var ssts []string
	for _, name := range names {
		if strings.HasSuffix(name, ".sst") {
			ssts = append(ssts, filepath.Join("data", name))
		}
	}
	if len(ssts) != 1 {
		t.Fatalf("SSTs: %v, want one", ssts)
	}
	if _, err := ssttest.FlipDataBlockBit(fs, ssts[0], -1); err != nil {
		t.Fatal(err)
	}
	file := filepath.Base(ssts[0])
	damagedID := fmt.Sprintf("c%04d", n-1)

	code, b = r.get("/v1/events/" + damagedID)
	a := decode[Answer](t, b)
	if code != http.StatusServiceUnavailable || a.Status != FailedRetryable ||
		!strings.Contains(a.Error, "corruption") || !strings.Contains(a.Error, file) {
		t.Fatalf("GET of a damaged status: %d %s", code, b)
	}
	t.Logf("GET: %d %s", code, b)
	code, hdr, b := r.post("/v1/events?ack=persisted", ev(damagedID, `{"qty":1}`))
	a = decode[Answer](t, b)
	if code != http.StatusServiceUnavailable || a.Status != FailedRetryable || hdr.Get("Retry-After") == "" ||
		!strings.Contains(a.Error, "corruption") {
		t.Fatalf("resend of a damaged id: %d %s", code, b)
	}
	code, _, b = r.post("/v1/events/"+damagedID+":retry", "")
	if a := decode[Answer](t, b); code != http.StatusServiceUnavailable || a.Status != FailedRetryable ||
		!strings.Contains(a.Error, "corruption") {
		t.Fatalf(":retry of a damaged id: %d %s", code, b)
	}
	code, b = r.get("/readyz")
	if code != http.StatusServiceUnavailable || !strings.Contains(string(b), "corruption") || !strings.Contains(string(b), file) {
		t.Fatalf("/readyz: %d %s", code, b)
	}
	t.Logf("/readyz: %d %s", code, b)
	// What is intact is still served; nothing new is taken onto a damaged store.
	code, b = r.get("/v1/events/c0000")
	if st := decode[EventStatus](t, b); code != 200 || st.Status != Processed {
		t.Fatalf("GET of an intact status: %d %s", code, b)
	}
	code, _, b = r.post("/v1/events?ack=persisted", ev("new-1", `{"qty":1}`))
	if a := decode[Answer](t, b); code != http.StatusServiceUnavailable || a.Status != FailedRetryable ||
		!strings.Contains(a.Error, "corruption") {
		t.Fatalf("new event on a damaged store: %d %s", code, b)
	}
}
