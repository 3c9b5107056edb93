package ui_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gale-stream/gale/engine"
	"github.com/gale-stream/gale/internal/testtopo"
	"github.com/gale-stream/gale/internal/waitfor"
	"github.com/gale-stream/gale/lineage"
	"github.com/gale-stream/gale/metrics"
	"github.com/gale-stream/gale/topology"
	"github.com/gale-stream/gale/ui"
)

// startCounted runs 1,000 roots (fan-out 3, 5% failed, root 7's ack dropped) and keeps
// the topology running; the UI is served by an httptest server.
func startCounted(t *testing.T, token string) (*httptest.Server, *testtopo.Counted) {
	t.Helper()
	srv, c, _ := startCountedWith(t, ui.Options{Token: token})
	return srv, c
}

// startCountedWith is startCounted with more options (Name, Runtime and, unless
// set, History are filled in) and the runtime.
func startCountedWith(t *testing.T, o ui.Options) (*httptest.Server, *testtopo.Counted, *engine.Runtime) {
	t.Helper()
	c := &testtopo.Counted{Roots: 1000, Fanout: 3, FailEvery: 20, SinkTasks: 2, DropAck: 7}
	rec, err := lineage.New(lineage.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	cfg := topology.DefaultConfig()
	cfg.MessageTimeout = 300 * time.Millisecond
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	rt, err := c.Start(cfg, engine.WithLineage(rec))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rt.Stop(context.Background()) })
	waitfor.True(t, 20*time.Second, "root 7's holders to be reported", func() bool { return holdersIn(rec) })
	if o.History == nil {
		// Three observations 2 s apart make two chart points (the run itself took less).
		o.History = metrics.NewHistory(metrics.HistoryConfig{})
		now := time.Now()
		for i := 2; i >= 0; i-- {
			o.History.Observe(now.Add(-time.Duration(2*i)*time.Second), rt.Stats())
		}
	}
	o.Name, o.Runtime = "counted", rt
	u, err := ui.New(o)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(u)
	t.Cleanup(srv.Close)
	return srv, c, rt
}

// holdersIn says root 7's three holders were reported by the tasks holding them:
// at the timeout the recorder first guesses them from the lineage (FromLineage),
// and the tasks' own reports replace the guesses a moment later; waiting for three
// holders alone let a loaded CI run see the guesses (Source "lineage").
func holdersIn(rec *lineage.Recorder) bool {
	tr, ok := rec.Lookup("7")
	if !ok || len(tr.Holders) != 3 {
		return false
	}
	for _, h := range tr.Holders {
		if h.FromLineage {
			return false
		}
	}
	return true
}

func get(t *testing.T, url string, into any) int {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if into != nil {
		if err := json.Unmarshal(body, into); err != nil {
			t.Fatalf("GET %s: %v in %s", url, err, body)
		}
	}
	return resp.StatusCode
}

func TestAPI(t *testing.T) {
	srv, _ := startCounted(t, "")
	var topo ui.TopologyView
	get(t, srv.URL+"/api/topology", &topo)
	if len(topo.Components) != 3 || len(topo.Edges) != 2 || topo.Edges[1].From != "fan" || topo.Edges[1].To != "sink" ||
		topo.Edges[1].Grouping != "shuffle" || topo.Layout["sink"].Layer != 2 || topo.Components[2].Parallelism != 2 {
		t.Errorf("topology = %+v", topo)
	}
	var tab metrics.Table
	get(t, srv.URL+"/api/stats?window=all", &tab)
	if len(tab.Spouts) != 1 || len(tab.Bolts) != 2 {
		t.Fatalf("table = %+v", tab)
	}
	sp, fan, sink := tab.Spouts[0], tab.Bolts[0], tab.Bolts[1]
	if sp.Emitted != 1000 || sp.Acked != 949 || sp.Failed != 50 || sp.TimedOut != 1 || sp.CompleteLatency.Count != 949 {
		t.Errorf("spout row %+v", sp)
	}
	if fan.Executed != 1000 || fan.Emitted != 2850 || fan.Acked != 950 || fan.Failed != 50 || len(fan.ByTask) != 1 {
		t.Errorf("fan row %+v", fan)
	}
	// Root 7's three tuples reached sink and were never acked.
	if sink.Executed != 2850 || sink.Acked != 2847 || len(sink.ByTask) != 2 || sink.ByTask[0].Executed+sink.ByTask[1].Executed != 2850 {
		t.Errorf("sink row %+v", sink)
	}
	if code := get(t, srv.URL+"/api/stats?window=1h", nil); code != http.StatusBadRequest {
		t.Errorf("window=1h: %d", code)
	}
	var trees struct{ Trees []ui.TreeView }
	get(t, srv.URL+"/api/trees?kind=timed_out", &trees)
	if len(trees.Trees) != 1 || trees.Trees[0].MsgID != "7" || trees.Trees[0].Outcome != "timed_out" {
		t.Errorf("timed out trees = %+v", trees.Trees)
	}
	get(t, srv.URL+"/api/trees?kind=failed&limit=100", &trees)
	if len(trees.Trees) != 50 {
		t.Errorf("%d failed trees, want 50", len(trees.Trees))
	}
	var tv ui.TreeView
	get(t, srv.URL+"/api/trees/7", &tv)
	if tv.Outcome != "timed_out" || len(tv.Pending) != 3 {
		t.Fatalf("tree 7 = %+v", tv)
	}
	for _, p := range tv.Pending {
		if p.Component != "sink" || (p.Task != 3 && p.Task != 4) || p.From != "fan" || p.Source != "task" {
			t.Errorf("pending %+v", p)
		}
	}
	var byRoot ui.TreeView
	if get(t, srv.URL+"/api/trees/"+tv.Root, &byRoot); byRoot.MsgID != "7" {
		t.Errorf("lookup by root %s = %+v", tv.Root, byRoot)
	}
	var nf map[string]string
	if code := get(t, srv.URL+"/api/trees/no-such", &nf); code != http.StatusNotFound || !strings.Contains(nf["error"], "no-such") {
		t.Errorf("unknown id: %d %v", code, nf)
	}
	resp, err := http.Get(srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{
		`gale_spout_acked_total{component="src",task="1",topology="counted"} 949`,
		`gale_bolt_acked_total{component="sink",task="3",topology="counted"} `,
		`gale_spout_timed_out_total{component="src",task="1",topology="counted"} 1`,
		`gale_bolt_process_latency_seconds_count{component="fan",task="2",topology="counted"} 1000`,
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	page, _ := http.Get(srv.URL + "/")
	html, _ := io.ReadAll(page.Body)
	page.Body.Close()
	if page.StatusCode != 200 || !strings.Contains(string(html), "app.js") {
		t.Errorf("GET / = %d %.200s", page.StatusCode, html)
	}
	post, _ := http.Post(srv.URL+"/api/stats", "text/plain", nil)
	post.Body.Close()
	if post.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST = %d, want 405 (read-only)", post.StatusCode)
	}
}

func TestToken(t *testing.T) {
	srv, _ := startCounted(t, "s3cret")
	for _, u := range []string{"/metrics", "/api/stats", "/api/trees/7", "/api/stats?token=wrong"} {
		if code := get(t, srv.URL+u, nil); code != http.StatusUnauthorized {
			t.Errorf("GET %s without the token: %d, want 401", u, code)
		}
	}
	if code := get(t, srv.URL+"/", nil); code != 200 {
		t.Errorf("the page itself (no data) without the token: %d, want 200", code)
	}
	if code := get(t, srv.URL+"/api/stats?token=s3cret", nil); code != 200 {
		t.Errorf("with ?token: %d", code)
	}
	for _, c := range []struct {
		header, query string
		want          int
	}{
		{"Bearer s3cret", "", 200},
		{"bearer s3cret", "", 200}, // the scheme is case-insensitive (RFC 7235)
		{"Bearer wrong", "?token=s3cret", 200},
		{"Bearer ", "", 401},
		{"Basic s3cret", "", 401},
	} {
		req, _ := http.NewRequest("GET", srv.URL+"/metrics"+c.query, nil)
		req.Header.Set("Authorization", c.header)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != c.want {
			t.Errorf("Authorization %q%s: %d, want %d", c.header, c.query, resp.StatusCode, c.want)
		}
	}
}
