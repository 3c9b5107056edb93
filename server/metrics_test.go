package server_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	. "github.com/gale-stream/gale/server"
)

// scrape GETs /metrics over HTTP and returns its text and its families.
func scrape(t *testing.T, url string) (string, map[string]*dto.MetricFamily) {
	t.Helper()
	resp, err := http.Get(url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("GET /metrics: %d %v", resp.StatusCode, err)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(strings.NewReader(string(body)))
	if err != nil {
		t.Fatalf("/metrics does not parse: %v", err)
	}
	return string(body), fams
}

// sample is the value of the one series of name whose labels include want (a
// counter's or gauge's value, a histogram's count); ok is false if there is none.
func sample(fams map[string]*dto.MetricFamily, name string, want ...string) (v float64, ok bool) {
	f := fams[name]
	if f == nil {
		return 0, false
	}
	n := 0
next:
	for _, m := range f.GetMetric() {
		for i := 0; i+1 < len(want); i += 2 {
			found := false
			for _, l := range m.GetLabel() {
				if l.GetName() == want[i] && l.GetValue() == want[i+1] {
					found = true
				}
			}
			if !found {
				continue next
			}
		}
		n++
		switch {
		case m.Counter != nil:
			v += m.GetCounter().GetValue()
		case m.Gauge != nil:
			v += m.GetGauge().GetValue()
		case m.Histogram != nil:
			v += float64(m.GetHistogram().GetSampleCount())
		}
	}
	return v, n > 0
}

// request sends one request and returns its status code.
func request(t *testing.T, method, url, body string) int {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// trafficServe starts gale serve and sends it known traffic: 11 events processed
// (6 of source orders in a batch with 4 of devices and an invalid line, and one
// single event of devices), a duplicate, an invalid single event, two lookups, a
// lookup of an unknown id and a request no route matches.
func trafficServe(t *testing.T) *Server {
	t.Helper()
	s, err := start(context.Background(), Options{Addr: "127.0.0.1:0", DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Shutdown(context.Background()) })
	line := func(id, source string) string {
		return fmt.Sprintf(`{"event_id":%q,"source":%q,"type":"t","payload":{"n":1}}`, id, source)
	}
	var batch []string
	for i := range 6 {
		batch = append(batch, line(fmt.Sprintf("o-%d", i), "orders"))
	}
	for i := range 4 {
		batch = append(batch, line(fmt.Sprintf("d-%d", i), "devices"))
	}
	batch = append(batch, `{"event_id":"no-type","source":"devices","payload":{}}`)
	u := s.URL()
	for _, r := range []struct {
		method, path, body string
		code               int
	}{
		{"POST", "/v1/events:batch?ack=processed", strings.Join(batch, "\n"), 200},
		{"POST", "/v1/events?ack=processed", line("s-1", "devices"), 200},
		{"POST", "/v1/events?ack=persisted", line("s-1", "devices"), 200}, // a duplicate
		{"POST", "/v1/events", `{"event_id":"bad"`, 400},
		{"GET", "/v1/events/s-1", "", 200},
		{"GET", "/v1/events/o-0", "", 200},
		{"GET", "/v1/events/no-such-id", "", 404},
		{"GET", "/nowhere", "", 404},
	} {
		if code := request(t, r.method, u+r.path, r.body); code != r.code {
			t.Fatalf("%s %s: %d, want %d", r.method, r.path, code, r.code)
		}
	}
	return s
}

// TestServeMetricsCountTheIngestPath: after known traffic over real HTTP, /metrics
// gives the exact counts per source and status, per ack level, per route and code,
// the log's group commits consistent with its stats, no committed lag, the sink's
// rows, the topology's split acked counts, and the process's and build's metrics.
func TestServeMetricsCountTheIngestPath(t *testing.T) {
	s := trafficServe(t)
	text, fams := scrape(t, s.URL())
	check := func(want float64, name string, labels ...string) {
		t.Helper()
		if v, ok := sample(fams, name, labels...); !ok || v != want {
			t.Errorf("%s%v = %v (present %v), want %v", name, labels, v, ok, want)
		}
	}
	for src, n := range map[string]float64{"orders": 6, "devices": 5} {
		for status, v := range map[string]float64{"ACCEPTED": n, "PERSISTED": n, "PROCESSED": n, "FAILED_RETRYABLE": 0, "FAILED_FINAL": 0} {
			check(v, "gale_ingest_events_total", "source", src, "status", status)
		}
		check(0, "gale_ingest_attempt_failures_total", "source", src)
	}
	check(11, "gale_ingest_answers_total", "level", "processed", "status", "PROCESSED")
	check(1, "gale_ingest_answers_total", "level", "processed", "status", "FAILED_FINAL") // the invalid line
	check(1, "gale_ingest_answers_total", "level", "persisted", "status", "PROCESSED")    // the duplicate
	check(1, "gale_ingest_answers_total", "level", "persisted", "status", "FAILED_FINAL") // the invalid event
	check(14, "gale_ingest_answers_total")
	check(1, "gale_ingest_duplicates_total")
	check(0, "gale_ingest_dead_letters")
	for _, r := range []struct {
		route, code string
		n           float64
	}{
		{"POST /v1/events:batch", "200", 1}, {"POST /v1/events", "200", 2}, {"POST /v1/events", "400", 1},
		{"GET /v1/events/{id...}", "200", 2}, {"GET /v1/events/{id...}", "404", 1}, {"unmatched", "404", 1},
	} {
		check(r.n, "gale_http_requests_total", "route", r.route, "code", r.code)
	}
	check(3, "gale_http_request_duration_seconds", "route", "GET /v1/events/{id...}")
	check(3, "gale_http_request_duration_seconds", "route", "POST /v1/events")
	if strings.Contains(text, "s-1") || strings.Contains(text, "no-such-id") || strings.Contains(text, "nowhere") {
		t.Error("a raw path or event id is in /metrics: routes must be patterns")
	}

	ls := s.Log.Stats()
	commits, _ := sample(fams, "gale_eventlog_group_commits_total")
	if commits == 0 || commits != float64(ls.Commits) {
		t.Errorf("group commits %v, log says %d", commits, ls.Commits)
	}
	check(commits, "gale_eventlog_sync_duration_seconds")
	check(commits, "gale_eventlog_group_commit_records")
	if sum := fams["gale_eventlog_group_commit_records"].GetMetric()[0].GetHistogram().GetSampleSum(); sum != 11 {
		t.Errorf("records summed over group commits = %v, want 11", sum)
	}
	check(11, "gale_eventlog_records_total")
	if b, _ := sample(fams, "gale_eventlog_record_bytes_total"); b != float64(ls.Bytes) || b < 11*50 {
		t.Errorf("record bytes %v, log says %d (11 records of 50 bytes or more)", b, ls.Bytes)
	}
	check(0, "gale_eventlog_sync_failures_total")
	check(0, "gale_eventlog_failed")
	check(11, "gale_eventlog_dedupe_ids")
	check(11, "gale_eventlog_durable_seq")
	check(12, "gale_eventlog_committed_seq")
	check(0, "gale_eventlog_committed_lag")

	check(1, "gale_sink_available")
	check(11, "gale_sink_rows_total") // the events table; no event has a key and version
	if b, _ := sample(fams, "gale_sink_batches_total"); b < 1 || b > 11 {
		t.Errorf("sink transactions %v, want 1 to 11", b)
	}
	check(0, "gale_sink_failed_transactions_total")

	check(11, "gale_spout_acked_total")
	check(0, "gale_spout_failed_total")
	check(11, "gale_bolt_acked_total", "component", "sink")
	check(0, "gale_bolt_queue_depth_tuples")
	if _, ok := fams["gale_acked_total"]; ok {
		t.Error("gale_acked_total still mixes spout trees and bolt inputs")
	}

	check(1, "gale_build_info", "goversion", runtime.Version())
	for _, name := range []string{"go_goroutines", "go_memstats_heap_inuse_bytes", "process_resident_memory_bytes", "process_cpu_seconds_total"} {
		if v, ok := sample(fams, name); !ok || v <= 0 {
			t.Errorf("%s = %v (present %v), want > 0", name, v, ok)
		}
	}
}
