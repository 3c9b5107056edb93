package ui_test

import (
	"context"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gale-stream/gale/engine"
	"github.com/gale-stream/gale/metrics"
	"github.com/gale-stream/gale/ui"
)

// TestBrowserFinishedJob: once the job has finished the header says so and shows how
// long it ran (from the runtime's start to its end, the same at every load), not
// "live" and a running uptime.
func TestBrowserFinishedJob(t *testing.T) {
	srv, _, rt := startCountedWith(t, ui.Options{})
	if err := rt.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	<-rt.Done()
	var topo ui.TopologyView
	get(t, srv.URL+"/api/topology", &topo)
	ran := rt.Finished().Sub(rt.Started())
	if !topo.Finished || topo.FinishedAt != rt.Finished().UnixMilli() || topo.UptimeSeconds != ran.Seconds() {
		t.Errorf("topology: finished %v at %d, uptime %v s; want true at %d, %v s",
			topo.Finished, topo.FinishedAt, topo.UptimeSeconds, rt.Finished().UnixMilli(), ran.Seconds())
	}
	for _, url := range []string{srv.URL + "/?window=all", srv.URL + "/#/tree/7"} {
		dom := page(t, url, `data-state="finished"`)
		if live := element(t, dom, "live", "</span>"); !strings.Contains(live, `data-state="finished">finished at `) {
			t.Errorf("%s: header %s, want finished at ...", url, live)
		}
		if up, want := element(t, dom, "uptime", "</span>"), fmt.Sprintf(`id="uptime" class="muted">ran %.1f s`, ran.Seconds()); up != want {
			t.Errorf("%s: %s, want %s", url, up, want)
		}
	}
}

// spoutStats builds a snapshot of the counted topology's components in which src has
// acked n trees, each taking 5 ms (a bucket's own value: the quantiles are exactly 5).
func spoutStats(n uint64) engine.Stats {
	lat := &engine.Histogram{}
	for range n {
		lat.Record(int64(5 * time.Millisecond))
	}
	s := engine.Stats{Order: []string{"src", "fan", "sink"}, Components: map[string]*engine.ComponentStats{}}
	for i, id := range s.Order {
		task := &engine.ComponentStats{ID: id, Tasks: 1, Task: i + 1, Misuse: map[string]uint64{}}
		if id == "src" {
			task.Spout, task.Emitted, task.Acked, task.CompleteLatency = true, n, n, lat
		}
		c := *task
		c.Task, c.ByTask = 0, []*engine.ComponentStats{task}
		s.Components[id] = &c
	}
	return s
}

// seriesValues returns the data-values of a chart's series: the values drawn, with a
// "|" where the line has a gap.
func seriesValues(t *testing.T, dom, chart, series string) string {
	t.Helper()
	c := element(t, dom, chart, "</svg>")
	m := regexp.MustCompile(`<path[^>]*data-series="` + series + `"[^>]*data-values="([^"]*)"`).FindStringSubmatch(c)
	if m == nil {
		t.Fatalf("#%s has no %s line with data-values: %.1500s", chart, series, c)
	}
	return m[1]
}

// TestBrowserChartGaps: a chart draws what History measured, point by point; an
// interval without completed trees is a gap in the latency chart, not 0 ms; a
// missing sample (6 s between two, the interval being 2 s) breaks every line; the
// numbers have thousands separators.
func TestBrowserChartGaps(t *testing.T) {
	h := metrics.NewHistory(metrics.HistoryConfig{Interval: 2 * time.Second})
	t0 := time.Now().Add(-time.Minute)
	for _, o := range []struct {
		at    time.Duration
		acked uint64
	}{{0, 0}, {2 * time.Second, 20000}, {4 * time.Second, 20000}, {6 * time.Second, 30000}, {12 * time.Second, 30000}, {14 * time.Second, 40000}} {
		h.Observe(t0.Add(o.at), spoutStats(o.acked))
	}
	srv, _, _ := startCountedWith(t, ui.Options{History: h})
	dom := page(t, srv.URL+"/", `id="chart-latency"`)
	for _, c := range []struct{ chart, series, want string }{
		{"chart-throughput", "acked", "10000,0,5000|0,5000"},
		{"chart-throughput", "failed", "0,0,0|0,0"},
		{"chart-latency", "p50", "5|5|5"},
		{"chart-latency", "p99", "5|5|5"},
		{"chart-capacity", "fan", "0,0,0|0,0"},
	} {
		if got := seriesValues(t, dom, c.chart, c.series); got != c.want {
			t.Errorf("#%s %s: %q, want %q", c.chart, c.series, got, c.want)
		}
	}
	throughput := element(t, dom, "chart-throughput", "</figure>")
	for _, want := range []string{`>2,500<`, `>7,500<`, `>10k<`, `<li data-series="acked">`, `> 5,000/s<`} {
		if !strings.Contains(throughput, want) {
			t.Errorf("the throughput chart lacks %s: %.3000s", want, throughput)
		}
	}
	latency := element(t, dom, "chart-latency", "</figure>")
	if !strings.Contains(latency, `> 5 ms<`) {
		t.Errorf("the latency legend lacks the last p50, 5 ms: %.3000s", latency)
	}
	// Each p50 segment is one point: drawn as a dot, or it would not show at all.
	if n := strings.Count(latency, `<circle class="dot"`); n != 6 {
		t.Errorf("%d dots in the latency chart, want 3 for p50 and 3 for p99: %.3000s", n, latency)
	}
	if n := strings.Count(throughput, `<circle class="dot"`); n != 0 {
		t.Errorf("%d dots in the throughput chart, whose segments are lines", n)
	}
}

// fakeIngest answers the first IngestStats with first and every later one with
// later; Event knows the events in events.
type fakeIngest struct {
	mu           sync.Mutex
	calls        int
	first, later ui.IngestStats
	events       map[string]ui.EventView
}

func (f *fakeIngest) IngestStats(limit int) (ui.IngestStats, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	s := f.later
	if f.calls == 1 {
		s = f.first
	}
	if len(s.DeadLetters) > limit {
		s.DeadLetters = s.DeadLetters[:limit]
	}
	return s, nil
}

func (f *fakeIngest) Event(id string) (ui.EventView, error) {
	if ev, ok := f.events[id]; ok {
		return ev, nil
	}
	return ui.EventView{}, fmt.Errorf("event %q: %w", id, ui.ErrNoEvent)
}

func newFakeIngest() *fakeIngest {
	t0 := time.Unix(1_700_000_000, 0)
	return &fakeIngest{
		first: ui.IngestStats{At: t0, Steps: map[string]uint64{"received": 1000, "persisted": 1000, "completed": 900, "failed": 10},
			Held: 100, Durable: 1000, Committed: 901, Records: 1000, Commits: 100, CommitTime: 100 * time.Millisecond},
		later: ui.IngestStats{At: t0.Add(2 * time.Second),
			Steps: map[string]uint64{"received": 6000, "persisted": 5998, "completed": 5500, "failed": 30, "dead_letter": 2},
			Held:  496, Durable: 5998, Committed: 5501, Records: 5998, Commits: 600,
			CommitTime: 100*time.Millisecond + 500*1500*time.Microsecond,
			CommitP50:  512 * time.Microsecond, CommitP99: 2048 * time.Microsecond,
			DeadLetters: []ui.DeadLetterView{
				{EventID: "evt-bad-1", Seq: 17, Attempts: 5, Reason: "sink: column amount: not a number", At: t0.UnixMilli()},
				{EventID: "evt-bad-2", Seq: 1234, Attempts: 5, Reason: "orders: unknown sku \"X-1\"", At: t0.UnixMilli()},
			}},
		events: map[string]ui.EventView{"evt-7": {
			EventID: "evt-7", Status: "PERSISTED", Seq: 7, Attempts: 1, MsgIDs: []string{"7"},
			Transitions: []ui.TransitionView{
				{Step: "received", Status: "ACCEPTED", At: 1_700_000_000_000},
				{Step: "persisted", Status: "PERSISTED", At: 1_700_000_000_002},
				{Step: "started", At: 1_700_000_000_003, Attempt: 1},
				{Step: "failed", At: 1_700_000_000_310, Attempt: 1, Error: "tree not complete after 300ms"},
			}},
		},
	}
}

// TestBrowserIngestPanel: with an ingest path, the overview shows the events by
// status with their rates, the log's sequence numbers and commit (fsync) latency,
// and the dead letters with their reasons; the rates are those between the two
// samples (2 s apart).
func TestBrowserIngestPanel(t *testing.T) {
	srv, _, _ := startCountedWith(t, ui.Options{Ingest: newFakeIngest()})
	if code := get(t, srv.URL+"/api/ingest", nil); code != http.StatusOK { // the first sample
		t.Fatalf("GET /api/ingest: %d", code)
	}
	dom := page(t, srv.URL+"/", `id="ingest-statuses"`)
	if box := element(t, dom, "ingest-box", ">"); strings.Contains(box, "hidden") {
		t.Errorf("the ingest section is hidden: %s", box)
	}
	for status, want := range map[string][2]string{
		"ACCEPTED": {"6,000", "2,500.0"}, "PERSISTED": {"5,998", "2,499.0"}, "PROCESSED": {"5,500", "2,300.0"},
		"FAILED_RETRYABLE": {"30", "10.0"}, "FAILED_FINAL": {"2", "1.0"},
	} {
		row := rowOf(t, dom, "ingest-statuses", status)
		if n, r := cell(t, row, "count"), cell(t, row, "per_s"); n != want[0] || r != want[1] {
			t.Errorf("%s: %s events, %s/s; want %s, %s", status, n, r, want[0], want[1])
		}
	}
	for id, want := range map[string]string{
		"durable": "5998", "committed": "5501", "lag": "498", "records": "5,998", "records_per_s": "2,499.0",
		"commits": "600", "commits_per_s": "250.0", "commit_mean_ms": "1.500", "commit_p50_ms": "0.512", "commit_p99_ms": "2.048",
	} {
		if got := cell(t, rowOf(t, dom, "ingest-log", id), "value"); got != want {
			t.Errorf("log %s = %q, want %s", id, got, want)
		}
	}
	if held := element(t, dom, "ingest-held", "</p>"); !strings.Contains(held, ">496 events in progress (held in memory) · rates over the last 2.0 s") {
		t.Errorf("held: %s", held)
	}
	dl := element(t, dom, "dead-letters", "</table>")
	for id, want := range map[string][3]string{
		"evt-bad-1": {"17", "5", "sink: column amount: not a number"},
		"evt-bad-2": {"1234", "5", `orders: unknown sku "X-1"`},
	} {
		row := rowOf(t, dom, "dead-letters", id)
		if s, a, r := cell(t, row, "seq"), cell(t, row, "attempts"), cell(t, row, "reason"); s != want[0] || a != want[1] || r != strings.ReplaceAll(want[2], `"`, "&quot;") && r != want[2] {
			t.Errorf("dead letter %s: seq %s, attempts %s, reason %s; want %v", id, s, a, r, want)
		}
		if !strings.Contains(row, `href="#/event/`+id+`"`) {
			t.Errorf("dead letter %s does not link to its event: %s", id, row)
		}
	}
	if n := strings.Count(dl, "<tr data-id="); n != 2 {
		t.Errorf("%d dead letters listed, want 2", n)
	}
}

// TestBrowserLookupEvent: the lookup takes an event id and opens the event's status,
// its history and its trees (found by its message id, the seq); an id that is no
// event opens the tree of that message id or root.
func TestBrowserLookupEvent(t *testing.T) {
	srv, _, _ := startCountedWith(t, ui.Options{Ingest: newFakeIngest()})
	dom := page(t, srv.URL+"/#/find/evt-7", `id="transitions"`)
	ev := element(t, dom, "tree", "<script")
	for _, want := range []string{`data-col="status">PERSISTED<`, `data-col="seq">7<`, `data-col="attempts">1<`,
		`data-col="step">failed<`, `data-col="error" class="reason">tree not complete after 300ms<`, `id="topo-name">counted<`} {
		if !strings.Contains(dom, want) {
			t.Errorf("the event page lacks %s: %.3000s", want, ev)
		}
	}
	trees := element(t, dom, "event-trees", "</ul>")
	if strings.Count(trees, "<li") != 1 || !strings.Contains(trees, "#/tree/") || !strings.Contains(trees, "msg 7") || !strings.Contains(trees, "timed_out") {
		t.Errorf("the event's trees: %s", trees)
	}
	if n := strings.Count(element(t, dom, "transitions", "</table>"), "<tr data-id="); n != 4 {
		t.Errorf("%d transitions shown, want 4", n)
	}
	// Not an event: the tree of message id 7.
	page(t, srv.URL+"/#/find/7", "outcome-timed_out")
	var nf map[string]string
	if code := get(t, srv.URL+"/api/events/nope", &nf); code != http.StatusNotFound || !strings.Contains(nf["error"], `"nope"`) {
		t.Errorf("unknown event: %d %v", code, nf)
	}
}

// TestLookupWithoutIngest: without an ingest path (gale wordcount --ui) the page has
// no ingest section, the lookup opens trees, and the ingest API says why it is absent.
func TestLookupWithoutIngest(t *testing.T) {
	srv, _ := startCounted(t, "")
	for _, path := range []string{"/api/ingest", "/api/events/evt-7"} {
		var e map[string]string
		if code := get(t, srv.URL+path, &e); code != http.StatusNotFound || !strings.Contains(e["error"], "no ingest path") {
			t.Errorf("GET %s: %d %v", path, code, e)
		}
	}
	dom := page(t, srv.URL+"/#/find/7", "outcome-timed_out")
	if !strings.Contains(dom, `id="ingest-box" hidden`) {
		t.Errorf("the ingest section shows without an ingest path")
	}
}

// TestBrowserIngestWording: the counts by status are cumulative (an event counts in
// every status it reached), and the page says so rather than showing them as
// separate groups; an event's resubmission generation shows only for an event that
// was resubmitted, so an ordinary event (and a single-process serve) shows no
// "Generation 0".
func TestBrowserIngestWording(t *testing.T) {
	fi := newFakeIngest()
	resent := fi.events["evt-7"]
	resent.EventID, resent.Generation = "evt-9", 2
	fi.events["evt-9"] = resent
	srv, _, _ := startCountedWith(t, ui.Options{Ingest: fi})
	dom := page(t, srv.URL+"/", `id="ingest-statuses"`)
	if h := element(t, dom, "ingest-statuses-title", "</h3>"); !strings.Contains(h, ">Events by status reached, since the start") {
		t.Errorf("the statuses' heading: %s", h)
	}
	if n := element(t, dom, "ingest-statuses-note", "</p>"); !strings.Contains(n, ">Each event counts in every status it has reached: a PROCESSED event is also counted as ACCEPTED and PERSISTED, so the rows overlap and do not add up. FAILED_RETRYABLE counts failed attempts.") {
		t.Errorf("the statuses' note: %s", n)
	}
	if th := element(t, dom, "ingest-statuses", "</thead>"); !strings.Contains(th, ">Reached<") || !strings.Contains(th, ">Events<") {
		t.Errorf("the statuses' columns: %s", th)
	}

	dom = page(t, srv.URL+"/#/event/evt-7", `id="transitions"`)
	if ev := element(t, dom, "tree", "<script"); strings.Contains(ev, "Generation") || strings.Contains(ev, `data-col="generation"`) || strings.Contains(ev, "Resubmission") {
		t.Errorf("an event never resubmitted shows a generation: %.2000s", ev)
	}
	dom = page(t, srv.URL+"/#/event/evt-9", `id="transitions"`)
	if ev := element(t, dom, "tree", "<script"); !strings.Contains(ev, `>Resubmission</dt><dd data-col="generation">2</dd>`) {
		t.Errorf("a resubmitted event does not say which resubmission it is: %.2000s", ev)
	}
}
