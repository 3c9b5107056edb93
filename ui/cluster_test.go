package ui_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gale-stream/gale/engine"
	"github.com/gale-stream/gale/internal/testtopo"
	"github.com/gale-stream/gale/internal/waitfor"
	"github.com/gale-stream/gale/topology"
	"github.com/gale-stream/gale/transport"
	"github.com/gale-stream/gale/ui"
)

// fakeCluster is a ui.Cluster with a fixed view that records the actions asked.
type fakeCluster struct {
	mu     sync.Mutex
	view   ui.ClusterView
	acts   []string
	refuse error
}

func (f *fakeCluster) Status(context.Context) (ui.ClusterView, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.view, nil
}

func (f *fakeCluster) Act(_ context.Context, action string, workers int) (ui.ActionResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.acts = append(f.acts, fmt.Sprintf("%s %d", action, workers))
	if f.refuse != nil {
		return ui.ActionResult{}, f.refuse
	}
	return ui.ActionResult{Action: action, Topology: f.view.Topology, Generation: f.view.Generation + 1, State: "active", Workers: []string{"w1", "w2"}}, nil
}

func (f *fakeCluster) asked() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.acts...)
}

// countedView is the cluster of the counted topology on two workers: src[1] and
// sink[3] on w1, fan[2] and sink[4] on w2, the acker[5] on w1.
func countedView() ui.ClusterView {
	return ui.ClusterView{
		Topology: "counted", Topologies: []string{"counted", "other"}, Self: "w1", State: "active", Generation: 3, Want: 2,
		Scheduler: &ui.SchedulerView{Holder: "w2", Since: 1000},
		Workers: []ui.WorkerView{
			{Name: "w1", Host: "h1", PID: 11, Live: true, UptimeSeconds: 60, HeartbeatAgeSeconds: 0.4, Slots: 1,
				Tasks: []int{1, 3, 5}, Generation: 3, Running: map[string]uint64{"counted": 3}, Self: true},
			{Name: "w2", Host: "h2", PID: 22, Live: true, UptimeSeconds: 61, HeartbeatAgeSeconds: 0.9, Slots: 2,
				Tasks: []int{2, 4}, Generation: 3, Running: map[string]uint64{"counted": 3, "other": 1}, Scheduler: true},
			{Name: "w3", Host: "h3", PID: 33, Live: true, Slots: 1, Refused: "not in this build"},
		},
		Components: []ui.ClusterComponent{
			{ID: "src", Tasks: []ui.TaskPlace{{Task: 1, Worker: "w1"}}},
			{ID: "fan", Tasks: []ui.TaskPlace{{Task: 2, Worker: "w2"}}},
			{ID: "sink", Tasks: []ui.TaskPlace{{Task: 3, Worker: "w1"}, {Task: 4, Worker: "w2"}}},
			{ID: "__acker", Tasks: []ui.TaskPlace{{Task: 5, Worker: "w1"}}},
		},
	}
}

func post(t *testing.T, url, token string, into any) int {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if into != nil {
		if err := json.Unmarshal(body, into); err != nil {
			t.Fatalf("POST %s: %v in %s", url, err, body)
		}
	}
	return resp.StatusCode
}

// GET /api/cluster answers the Cluster's view; without a token the actions are
// closed: every POST /api/cluster/{action} answers 403 naming --ui-token, and the
// Cluster is never asked.
func TestUIClusterWithoutToken(t *testing.T) {
	fc := &fakeCluster{view: countedView()}
	srv, _, _ := startCountedWith(t, ui.Options{Cluster: fc})
	var v ui.ClusterView
	if code := get(t, srv.URL+"/api/cluster", &v); code != http.StatusOK {
		t.Fatalf("GET /api/cluster: %d", code)
	}
	if v.Topology != "counted" || v.Self != "w1" || v.Generation != 3 || v.Scheduler == nil || v.Scheduler.Holder != "w2" ||
		len(v.Workers) != 3 || v.Workers[1].PID != 22 || v.Workers[1].HeartbeatAgeSeconds != 0.9 || v.Workers[2].Refused != "not in this build" {
		t.Errorf("cluster view %+v", v)
	}
	if v.Workers[2].Tasks == nil || v.Workers[2].Running == nil {
		t.Errorf("a worker without tasks must list none, not null: %+v", v.Workers[2])
	}
	if len(v.Components) != 4 || v.Components[2].ID != "sink" || v.Components[2].Tasks[1] != (ui.TaskPlace{Task: 4, Worker: "w2"}) {
		t.Errorf("components %+v", v.Components)
	}
	if v.Actions || !strings.Contains(v.ActionsNote, "--ui-token") {
		t.Errorf("without a token: actions %v, note %q", v.Actions, v.ActionsNote)
	}
	var topo ui.TopologyView
	if get(t, srv.URL+"/api/topology", &topo); !topo.Cluster || topo.Idle {
		t.Errorf("topology view: cluster %v idle %v", topo.Cluster, topo.Idle)
	}
	for _, a := range []string{"kill", "deactivate", "activate", "rebalance?workers=2"} {
		var e map[string]string
		if code := post(t, srv.URL+"/api/cluster/"+a, "", &e); code != http.StatusForbidden || !strings.Contains(e["error"], "--ui-token") {
			t.Errorf("POST %s without a token: %d %v, want 403 naming --ui-token", a, code, e)
		}
	}
	if got := fc.asked(); len(got) != 0 {
		t.Errorf("the cluster was asked %v", got)
	}
	// The rest stays read-only.
	if code := post(t, srv.URL+"/api/stats", "", nil); code != http.StatusMethodNotAllowed {
		t.Errorf("POST /api/stats: %d, want 405", code)
	}
}

// With a token, POST /api/cluster/{action} carries the action to the Cluster (the
// token acts as the admin scope); every route still needs the token.
func TestUIClusterActionsWithToken(t *testing.T) {
	fc := &fakeCluster{view: countedView()}
	srv, _, _ := startCountedWith(t, ui.Options{Cluster: fc, Token: "s3cret"})
	if code := get(t, srv.URL+"/api/cluster", nil); code != http.StatusUnauthorized {
		t.Errorf("GET /api/cluster without the token: %d, want 401", code)
	}
	if code := post(t, srv.URL+"/api/cluster/kill", "", nil); code != http.StatusUnauthorized {
		t.Errorf("POST kill without the token: %d, want 401", code)
	}
	if code := post(t, srv.URL+"/api/cluster/kill", "wrong", nil); code != http.StatusUnauthorized {
		t.Errorf("POST kill with a wrong token: %d, want 401", code)
	}
	var v ui.ClusterView
	if get(t, srv.URL+"/api/cluster?token=s3cret", &v); !v.Actions || v.ActionsNote != "" {
		t.Errorf("with a token: actions %v, note %q", v.Actions, v.ActionsNote)
	}
	var res ui.ActionResult
	if code := post(t, srv.URL+"/api/cluster/rebalance?workers=2", "s3cret", &res); code != http.StatusOK ||
		res.Action != "rebalance" || res.Generation != 4 || res.State != "active" || len(res.Workers) != 2 {
		t.Errorf("rebalance: %d %+v", code, res)
	}
	if code := post(t, srv.URL+"/api/cluster/deactivate", "s3cret", &res); code != http.StatusOK || res.Action != "deactivate" {
		t.Errorf("deactivate: %d %+v", code, res)
	}
	for _, c := range []struct {
		path string
		want int
	}{
		{"explode", http.StatusNotFound},
		{"kill?workers=2", http.StatusBadRequest},
		{"rebalance?workers=-1", http.StatusBadRequest},
		{"rebalance?workers=two", http.StatusBadRequest},
	} {
		if code := post(t, srv.URL+"/api/cluster/"+c.path, "s3cret", nil); code != c.want {
			t.Errorf("POST %s: %d, want %d", c.path, code, c.want)
		}
	}
	if got := fc.asked(); strings.Join(got, ",") != "rebalance 2,deactivate 0" {
		t.Errorf("the cluster was asked %v", got)
	}
	fc.mu.Lock()
	fc.refuse = fmt.Errorf("%w: rebalance counted: not enough workers", ui.ErrActionRefused)
	fc.mu.Unlock()
	var e map[string]string
	if code := post(t, srv.URL+"/api/cluster/rebalance?workers=9", "s3cret", &e); code != http.StatusConflict || !strings.Contains(e["error"], "not enough workers") {
		t.Errorf("a refused rebalance: %d %v, want 409 with the reason", code, e)
	}
	if code := post(t, srv.URL+"/api/stats", "s3cret", nil); code != http.StatusMethodNotAllowed {
		t.Errorf("POST /api/stats with the token: %d, want 405", code)
	}
}

// A UI without a Cluster has no cluster routes.
func TestUIClusterAbsent(t *testing.T) {
	srv, _ := startCounted(t, "tok")
	if code := get(t, srv.URL+"/api/cluster?token=tok", nil); code != http.StatusNotFound {
		t.Errorf("GET /api/cluster: %d, want 404", code)
	}
	if code := post(t, srv.URL+"/api/cluster/kill", "tok", nil); code != http.StatusMethodNotAllowed {
		t.Errorf("POST /api/cluster/kill: %d, want 405", code)
	}
	var topo ui.TopologyView
	if get(t, srv.URL+"/api/topology?token=tok", &topo); topo.Cluster || topo.Idle {
		t.Errorf("topology view: cluster %v idle %v", topo.Cluster, topo.Idle)
	}
}

// A worker's UI follows the generations: without a runtime it is idle (the cluster
// section only), SetRuntime gives it one, and nil takes it away; its metrics carry
// the worker's label.
func TestUIClusterFollowsRuntime(t *testing.T) {
	fc := &fakeCluster{view: countedView()}
	u, err := ui.New(ui.Options{Name: "counted", Cluster: fc, ConstLabels: map[string]string{"worker": "w1"}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(u)
	defer srv.Close()
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan struct{})
	go func() { defer close(ran); u.Run(ctx) }()
	defer func() { cancel(); <-ran }()

	var topo ui.TopologyView
	if get(t, srv.URL+"/api/topology", &topo); !topo.Idle || !topo.Cluster || topo.Name != "counted" || !strings.Contains(topo.Note, "no generation of counted") {
		t.Errorf("idle topology view %+v", topo)
	}
	var e map[string]string
	if code := get(t, srv.URL+"/api/stats", &e); code != http.StatusServiceUnavailable || !strings.Contains(e["error"], "no generation") {
		t.Errorf("idle stats: %d %v", code, e)
	}
	var trees map[string]any
	if get(t, srv.URL+"/api/trees", &trees); !strings.Contains(fmt.Sprint(trees["note"]), "no generation") {
		t.Errorf("idle trees: %v", trees)
	}
	if code := get(t, srv.URL+"/api/cluster", nil); code != http.StatusOK {
		t.Errorf("idle cluster: %d", code)
	}

	c := &testtopo.Counted{Roots: 100, Fanout: 2, SinkTasks: 2, DropAck: -1}
	cfg := topology.DefaultConfig()
	cfg.Logger = slog.New(slog.DiscardHandler)
	rt, err := c.Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Stop(context.Background())
	u.SetRuntime(rt)
	var running ui.TopologyView
	if get(t, srv.URL+"/api/topology", &running); running.Idle || len(running.Components) != 3 {
		t.Errorf("running topology view %+v", running)
	}
	var tab ui.StatsView
	if code := get(t, srv.URL+"/api/stats?window=all", &tab); code != 200 || tab.Partial || len(tab.Spouts) != 1 || tab.Spouts[0].Acked != 100 {
		t.Errorf("stats %d %+v", code, tab)
	}
	body := getText(t, srv.URL+"/metrics")
	if want := `gale_spout_acked_total{component="src",task="1",topology="counted",worker="w1"} 100`; !strings.Contains(body, want) {
		t.Errorf("/metrics lacks %s:\n%.2000s", want, body)
	}
	u.SetRuntime(nil)
	var idle ui.TopologyView
	if get(t, srv.URL+"/api/topology", &idle); !idle.Idle {
		t.Errorf("after SetRuntime(nil): %+v", idle)
	}
	if body := getText(t, srv.URL+"/metrics"); strings.Contains(body, "gale_spout_acked_total") {
		t.Errorf("/metrics of an idle UI still has the topology's:\n%.1000s", body)
	}
}

func getText(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// The stats of a topology on two engines (hosts) are every host's, gathered by
// message; once a host has left, the page says the counts are this host's only.
func TestUIStatsAcrossHosts(t *testing.T) {
	c := &testtopo.Counted{Roots: 200, Fanout: 3, SinkTasks: 2, DropAck: -1}
	topo, err := c.Topology()
	if err != nil {
		t.Fatal(err)
	}
	cfg := topology.DefaultConfig()
	cfg.Logger = slog.New(slog.DiscardHandler)
	// src[1] and sink[3] and the acker[5] on host 1, fan[2] and sink[4] on host 2.
	as, err := engine.Spread(topo, cfg, 2)
	if err != nil {
		t.Fatal(err)
	}
	tr := transport.NewLocal()
	var rts []*engine.Runtime
	var cancels []context.CancelFunc
	for _, a := range as {
		ctx, cancel := context.WithCancel(context.Background())
		rt, err := engine.Start(ctx, topo, cfg, engine.WithTransport(tr), engine.WithAssignment(a))
		if err != nil {
			cancel()
			t.Fatal(err)
		}
		rts, cancels = append(rts, rt), append(cancels, cancel)
	}
	defer func() {
		for i, rt := range rts {
			cancels[i]()
			<-rt.Done()
		}
	}()
	u, err := ui.New(ui.Options{Name: "counted", Runtime: rts[0]})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(u)
	defer srv.Close()
	// Counters are as of each task's last flush: ask until every ack is in.
	var tab ui.StatsView
	waitfor.Until(t, 30*time.Second, func() error {
		get(t, srv.URL+"/api/stats?window=all", &tab)
		if len(tab.Bolts) == 2 && tab.Bolts[1].Acked == 600 && tab.Spouts[0].Acked == 200 {
			return nil
		}
		return fmt.Errorf("stats never reached every ack: %+v", tab)
	})
	fan, sink := tab.Bolts[0], tab.Bolts[1]
	if tab.Partial || fan.Executed != 200 || len(fan.ByTask) != 1 || fan.ByTask[0].Task != 2 || sink.Executed != 600 || len(sink.ByTask) != 2 {
		t.Errorf("both hosts' stats: partial %v, fan %+v, sink %+v", tab.Partial, fan, sink)
	}
	// Host 2 stops (it says goodbye): host 1's page shows its own tasks, and says so.
	cancels[1]()
	<-rts[1].Done()
	get(t, srv.URL+"/api/stats?window=10m", &tab)
	if !tab.Partial || !strings.Contains(tab.Note, "this process's tasks only") || tab.Window != "10m" {
		t.Errorf("after host 2 left: partial %v, window %q, note %q", tab.Partial, tab.Window, tab.Note)
	}
	if fan, sink := tab.Bolts[0], tab.Bolts[1]; fan.Executed != 0 || len(sink.ByTask) != 1 || sink.ByTask[0].Task != 3 {
		t.Errorf("host 1's own stats: fan %+v, sink %+v", fan, sink)
	}
}

// TestBrowserClusterSection loads a worker's page in headless Chromium: the
// workers table, each task's worker in the component rows, the placement, and the
// actions (open: the UI has a token).
func TestBrowserClusterSection(t *testing.T) {
	fc := &fakeCluster{view: countedView()}
	srv, _, _ := startCountedWith(t, ui.Options{Cluster: fc, Token: "tok"})
	dom := page(t, srv.URL+"/?token=tok&window=all", `id="workers"`)
	w2 := rowOf(t, dom, "workers", "w2")
	for col, want := range map[string]string{"name": "w2 (scheduler)", "host": "h2", "pid": "22", "slots": "2",
		"tasks": "2 4", "generation": "g3", "others": "other@g1", "heartbeat_age": "0.9 s"} {
		if got := cell(t, w2, col); got != want {
			t.Errorf("worker w2 %s = %q, want %q", col, got, want)
		}
	}
	if got := cell(t, rowOf(t, dom, "workers", "w1"), "name"); got != "w1 (this UI)" {
		t.Errorf("worker w1 = %q", got)
	}
	if got := cell(t, rowOf(t, dom, "workers", "w3"), "refused"); got != "not in this build" {
		t.Errorf("w3 refused = %q", got)
	}
	if got := cell(t, rowOf(t, dom, "bolts", "sink"), "worker"); got != "w1, w2" {
		t.Errorf("sink's workers = %q, want w1, w2", got)
	}
	if got := cell(t, rowOf(t, dom, "bolts", "fan"), "worker"); got != "w2" {
		t.Errorf("fan's worker = %q, want w2", got)
	}
	if got := cell(t, rowOf(t, dom, "placement", "sink"), "workers"); got != "3 → w1 · 4 → w2" {
		t.Errorf("sink's placement = %q", got)
	}
	summary := element(t, dom, "cluster-summary", "</p>")
	for _, want := range []string{"topology counted: active", "generation 3", "scheduler: w2", "served by worker w1"} {
		if !strings.Contains(summary, want) {
			t.Errorf("the summary lacks %q: %s", want, summary)
		}
	}
	if actions := element(t, dom, "actions", "</div>"); strings.Contains(actions, "hidden") || !strings.Contains(actions, `data-action="kill"`) {
		t.Errorf("the actions are not shown: %s", actions)
	}
	if nav := element(t, dom, "topologies", "</nav>"); !strings.Contains(nav, `href="?token=tok&amp;window=all&amp;topology=other"`) {
		t.Errorf("the topology selector: %s", nav)
	}
}

// TestBrowserClusterIdle: a worker that runs no generation of the topology shows
// the cluster section and says so; without a token the actions say what opens them.
func TestBrowserClusterIdle(t *testing.T) {
	v := countedView()
	v.State = "inactive"
	u, err := ui.New(ui.Options{Name: "counted", Cluster: &fakeCluster{view: v}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(u)
	defer srv.Close()
	dom := page(t, srv.URL+"/", `id="workers"`)
	if idle := element(t, dom, "idle", "</p>"); !strings.Contains(idle, "runs no generation of counted") {
		t.Errorf("the idle note: %s", idle)
	}
	sec := dom[strings.LastIndex(dom[:strings.Index(dom, `id="dag"`)], "<section"):]
	if sec = sec[:strings.Index(sec, ">")]; !strings.Contains(sec, "hidden") {
		t.Errorf("the topology's section is shown while idle: %s", sec)
	}
	if note := element(t, dom, "actions-note", "</p>"); !strings.Contains(note, "--ui-token") {
		t.Errorf("the actions' note: %s", note)
	}
	if rowOf(t, dom, "workers", "w2") == "" {
		t.Error("no w2 row")
	}
}
