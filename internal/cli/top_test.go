package cli

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/gale-stream/gale/engine"
	"github.com/gale-stream/gale/internal/testtopo"
	"github.com/gale-stream/gale/internal/waitfor"
	"github.com/gale-stream/gale/lineage"
	"github.com/gale-stream/gale/metrics"
	"github.com/gale-stream/gale/topology"
	"github.com/gale-stream/gale/tuple"
	"github.com/gale-stream/gale/ui"
)

func runTop(args ...string) (string, error) {
	cmd := topCmd()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(io.Discard)
	cmd.SetArgs(args)
	err := cmd.Execute()
	return out.String(), err
}

// fields returns the whitespace-separated fields of the line that starts with name.
func fields(out, name string) []string {
	for _, l := range strings.Split(out, "\n") {
		if f := strings.Fields(l); len(f) > 0 && f[0] == name {
			return f
		}
	}
	return nil
}

// TestTopOnce: gale top prints Storm's table of a running topology from its UI.
func TestTopOnce(t *testing.T) {
	c := &testtopo.Counted{Roots: 1000, Fanout: 3, FailEvery: 20, SinkTasks: 2, DropAck: -1}
	rec, _ := lineage.New(lineage.DefaultConfig())
	cfg := topology.DefaultConfig()
	cfg.Logger = slog.New(slog.DiscardHandler)
	rt, err := c.Start(cfg, engine.WithLineage(rec))
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Stop(context.Background())
	u, err := ui.New(ui.Options{Name: "counted", Runtime: rt, Token: "tok"})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := ui.Start(u, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()

	out, err := runTop("--once", "--window", "all", "--token", "tok", srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	// SPOUT TASKS EMITTED TRANSFERRED ACKED FAILED TIMED-OUT PENDING
	if f := fields(out, "src"); len(f) != 8 || f[1] != "1" || f[2] != "1000" || f[3] != "1000" || f[4] != "950" || f[5] != "50" || f[6] != "0" || f[7] != "0" {
		t.Errorf("src row %v in\n%s", f, out)
	}
	// BOLT TASKS EXECUTED ACKED FAILED EMITTED TRANSFERRED QUEUE
	if f := fields(out, "fan"); len(f) != 8 || f[2] != "1000" || f[3] != "950" || f[4] != "50" || f[5] != "2850" || f[6] != "2850" {
		t.Errorf("fan row %v in\n%s", f, out)
	}
	if f := fields(out, "sink"); len(f) != 8 || f[1] != "2" || f[2] != "2850" || f[3] != "2850" {
		t.Errorf("sink row %v in\n%s", f, out)
	}
	if !strings.Contains(out, "acker: 1 task, 0 trees pending, 950 completed, 50 failed") {
		t.Errorf("acker line missing in\n%s", out)
	}
	if _, err := runTop("--once", srv.Addr()); err == nil || !strings.Contains(err.Error(), "--token") {
		t.Errorf("without the token: %v", err)
	}
	if _, err := runTop("--once", "--window", "1h", srv.Addr()); err == nil || !strings.Contains(err.Error(), "--window") {
		t.Errorf("bad window: %v", err)
	}
	// As gale serve mounts it: under /ui/, next to an API that answers 404 elsewhere.
	mux := http.NewServeMux()
	mux.Handle("/ui/", http.StripPrefix("/ui", u))
	served := httptest.NewServer(mux)
	defer served.Close()
	if out, err := runTop("--once", "--window", "all", "--token", "tok", served.URL); err != nil || fields(out, "src") == nil || !strings.Contains(out, served.URL+"/ui/") {
		t.Errorf("top against a /ui/ mount: %v\n%s", err, out)
	}
	// A URL copied from the browser carries the token.
	if out, err := runTop("--once", "http://"+srv.Addr()+"/?token=tok"); err != nil || fields(out, "src") == nil {
		t.Errorf("top with ?token in the URL: %v\n%s", err, out)
	}
	// Something that answers JSON but is no gale UI.
	junk := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte("{}")) }))
	defer junk.Close()
	if _, err := runTop("--once", junk.URL); err == nil || !strings.Contains(err.Error(), "not a gale UI") {
		t.Errorf("top against a non-gale server: %v", err)
	}
	if _, err := runTop("--once", "--interval", "1000h", srv.Addr()); err == nil {
		t.Error("--interval 1000h accepted")
	}
	if _, err := runTop("--once", "127.0.0.1:1"); err == nil || !strings.Contains(err.Error(), "cannot reach") {
		t.Errorf("nothing listening: %v", err)
	}
}

// TestWordcountFollowRootInLogs: with --log-level debug and JSON logs, one tree can be
// followed by its root id: its start, its tuples and its failure all carry it.
func TestWordcountFollowRootInLogs(t *testing.T) {
	src, err := os.Open("../../testdata/books/105.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	var text strings.Builder
	sc := bufio.NewScanner(src)
	for i := 0; i < 300 && sc.Scan(); i++ {
		text.WriteString(sc.Text() + "\n")
	}
	file := filepath.Join(t.TempDir(), "small.txt")
	if err := os.WriteFile(file, []byte(text.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	_, stderr, err := runGale(t, "--log-level", "debug", "--log-format", "json", "--lineage-sample", "1",
		"--fail-rate", "0.05", "--ui", "127.0.0.1:0", file)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(stderr, "gale: web UI on http://127.0.0.1:") {
		t.Errorf("no UI address printed")
	}
	byRoot := map[string][]string{}
	failedRoot, doneRoot := "", ""
	for _, l := range strings.Split(stderr, "\n") {
		if !strings.HasPrefix(l, "{") {
			continue
		}
		var rec map[string]any
		if err := json.Unmarshal([]byte(l), &rec); err != nil {
			t.Fatalf("not a JSON log line: %v: %s", err, l)
		}
		root, _ := rec["root"].(string)
		if root == "" {
			continue
		}
		msg := rec["msg"].(string)
		byRoot[root] = append(byRoot[root], msg)
		if msg == "tree failed" && failedRoot == "" {
			failedRoot = root
		}
	}
	// A completed tree of a line with words: its split emitted tuples under its root.
	for root, msgs := range byRoot {
		all := strings.Join(msgs, "|")
		if strings.Contains(all, "tree completed") && strings.Contains(all, "tuple emitted") {
			doneRoot = root
			break
		}
	}
	if failedRoot == "" || doneRoot == "" {
		t.Fatalf("no failed or no completed tree logged; %d roots seen", len(byRoot))
	}
	for root, wants := range map[string][]string{
		failedRoot: {"tree started (sampled)", "tuple failed", "tree failed"},
		doneRoot:   {"tree started (sampled)", "tuple emitted", "tuple acked", "tree completed"},
	} {
		got := strings.Join(byRoot[root], "|")
		for _, want := range wants {
			if !strings.Contains(got, want) {
				t.Errorf("root %s: logs %q lack %q", root, got, want)
			}
		}
	}
}

// TestWordcountUIPortTaken: a taken --ui port fails before the job runs.
func TestWordcountUIPortTaken(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	stdout, _, err := runGale(t, "--ui", ln.Addr().String(), "../../testdata/books/105.txt")
	if err == nil || !strings.Contains(err.Error(), "--ui "+ln.Addr().String()) || strings.Contains(stdout, "distinct words") {
		t.Errorf("err %v, stdout %q: want a --ui error and no job summary", err, stdout)
	}
}

// TestTopTokenUnderUI: against gale serve's layout (the UI under /ui/, the API
// answering 404 elsewhere), a missing or refused token is named as such, not as
// a 404 from the API root.
func TestTopTokenUnderUI(t *testing.T) {
	c := &testtopo.Counted{Roots: 10, Fanout: 1, SinkTasks: 1, DropAck: -1}
	cfg := topology.DefaultConfig()
	cfg.Logger = slog.New(slog.DiscardHandler)
	rt, err := c.Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Stop(context.Background())
	u, err := ui.New(ui.Options{Name: "counted", Runtime: rt, Token: "tok"})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/ui/", http.StripPrefix("/ui", u))
	mux.HandleFunc("/forbidden/", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusForbidden) })
	served := httptest.NewServer(mux)
	defer served.Close()
	for _, tc := range []struct{ name, url, token, want string }{
		{"no token", served.URL, "", "the UI needs a token: --token"},
		{"wrong token", served.URL, "nope", "the UI refused the token given with --token"},
		{"403", served.URL + "/forbidden/", "x", "the UI refused the token given with --token"},
	} {
		_, err := runTop("--once", "--token", tc.token, tc.url)
		if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "404") {
			t.Errorf("%s: %v; want %q and no 404", tc.name, err, tc.want)
		}
	}
}

// TestTopFits80Columns: gale top's table fits an 80-column terminal for a real
// topology with long component names, and for counts in the billions.
func TestTopFits80Columns(t *testing.T) {
	b := topology.NewBuilder()
	b.SetSpout("a-spout-with-a-rather-long-name", func() topology.Spout { return &nSpout{n: 500} }, 1).Output("i")
	b.SetBolt("the-bolt-that-acks-everything-it-gets", func() topology.Bolt { return &ackBolt{} }, 2).
		ShuffleGrouping("a-spout-with-a-rather-long-name")
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	cfg := topology.DefaultConfig()
	cfg.Logger = slog.New(slog.DiscardHandler)
	rt, err := engine.Start(context.Background(), topo, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Stop(context.Background())
	u, err := ui.New(ui.Options{Name: "a-topology-whose-name-is-long-too", Runtime: rt})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := ui.Start(u, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	// spoutValues is the line after the long spout name: its row's values.
	spoutValues := func(out string) []string {
		lines := strings.Split(out, "\n")
		for i, l := range lines[:len(lines)-1] {
			if l == "a-spout-with-a-rather-long-name" {
				return strings.Fields(lines[i+1])
			}
		}
		return nil
	}
	var out string
	waitfor.Until(t, 30*time.Second, func() error { // until the spout has its 500 trees acked
		if out, err = runTop("--once", "--window", "all", srv.Addr()); err != nil {
			t.Fatal(err)
		}
		if f := spoutValues(out); len(f) != 7 || f[3] != "500" {
			return fmt.Errorf("spout values %v, waiting for 500 acked", f)
		}
		return nil
	})
	checkWidth(t, out)
	// The long name is on a line of its own, its values on the next:
	// TASKS EMITTED TRANSFERRED ACKED FAILED TIMED-OUT PENDING.
	if f := spoutValues(out); len(f) != 7 || f[0] != "1" || f[1] != "500" || f[2] != "500" || f[3] != "500" || f[4] != "0" {
		t.Errorf("spout values %v in\n%s", f, out)
	}
	var big bytes.Buffer
	lat := &metrics.Latency{Count: 1, P50: 1234.5, P99: 98765.4}
	renderTop(&big, "big", "http://127.0.0.1:8080/ui/", metrics.Table{Window: "all", Seconds: 86400,
		Spouts: []metrics.Spout{{ID: "spout", Tasks: 1000, Emitted: 9_876_543_210, Transferred: 98_765_432_109, Acked: 9_876_543_000,
			Failed: 123_456_789, TimedOut: 4_000_000_000, Pending: 50000, CompleteLatency: lat,
			LastError: strings.Repeat("a long error message ", 10)}},
		Bolts: []metrics.Bolt{{ID: "bolt", Tasks: 1000, Executed: 9_876_543_210, Capacity: 1.5, ExecuteLatency: lat, ProcessLatency: lat,
			Acked: 9_876_543_210, Failed: 999_999, Emitted: 99_999_999_999, Transferred: 999_999_999_999, QueueDepth: 123456}},
		Acker: metrics.Acker{Tasks: 16, Pending: 5_000_000, Completed: 9_876_543_210, Failed: 123_456_789, Expired: 123_456_789,
			Unmatched: 1_000_000, Orphans: 123_456_789},
	}, time.Now())
	checkWidth(t, big.String())
	if f := fields(big.String(), "spout"); len(f) != 8 || f[2] != "9.88G" || f[5] != "123M" {
		t.Errorf("big spout row %v in\n%s", f, big.String())
	}
	if f := fields(big.String(), "bolt"); len(f) != 8 || f[4] != "999999" {
		t.Errorf("big bolt row %v in\n%s", f, big.String())
	}
}

func checkWidth(t *testing.T, out string) {
	t.Helper()
	for _, l := range strings.Split(out, "\n") {
		if n := utf8.RuneCountInString(l); n > 80 {
			t.Errorf("%d columns: %q in\n%s", n, l, out)
		}
	}
}

// nSpout emits n tracked tuples.
type nSpout struct {
	topology.BaseSpout
	n, next int
}

func (s *nSpout) NextTuple() {
	if s.next < s.n {
		s.Out.Emit(tuple.Values{s.next}, s.next)
		s.next++
	}
}

type ackBolt struct{ topology.BaseBolt }

func (b *ackBolt) Execute(t *tuple.Tuple) { b.Out.Ack(t) }

// topCluster is a ui.Cluster with a fixed view, as a worker's UI has.
type topCluster struct{ view ui.ClusterView }

func (c topCluster) Status(context.Context) (ui.ClusterView, error) { return c.view, nil }
func (c topCluster) Act(context.Context, string, int) (ui.ActionResult, error) {
	return ui.ActionResult{}, nil
}

// TestTopWorkers: against a worker's UI, gale top prints the cluster's workers
// above the component tables, and the worker of each component's tasks; a worker
// that runs no generation of the topology shows the workers and says so.
func TestTopWorkers(t *testing.T) {
	c := &testtopo.Counted{Roots: 100, Fanout: 2, SinkTasks: 2, DropAck: -1}
	cfg := topology.DefaultConfig()
	cfg.Logger = slog.New(slog.DiscardHandler)
	rt, err := c.Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Stop(context.Background())
	view := ui.ClusterView{Topology: "counted", Self: "w1", State: "active", Generation: 3,
		Scheduler: &ui.SchedulerView{Holder: "w2"},
		Workers: []ui.WorkerView{
			{Name: "w1", Host: "host-one.example.internal", PID: 11, Live: true, UptimeSeconds: 3725, HeartbeatAgeSeconds: 0.42,
				Slots: 1, Tasks: []int{1, 3, 5}, Generation: 3, Self: true},
			{Name: "w2", Host: "h2", PID: 22, Live: true, UptimeSeconds: 65, HeartbeatAgeSeconds: 0.9, Slots: 2,
				Tasks: []int{2, 4}, Generation: 3, Scheduler: true},
			{Name: "w3", Host: "h3", PID: 33, Live: true, UptimeSeconds: 5, Slots: 1, Refused: "not in this build"},
			{Name: "w4", Tasks: []int{6}},
		},
		Components: []ui.ClusterComponent{
			{ID: "src", Tasks: []ui.TaskPlace{{Task: 1, Worker: "w1"}}},
			{ID: "fan", Tasks: []ui.TaskPlace{{Task: 2, Worker: "w2"}}},
			{ID: "sink", Tasks: []ui.TaskPlace{{Task: 3, Worker: "w1"}, {Task: 4, Worker: "w2"}, {Task: 6, Worker: "w4"}}},
		},
	}
	u, err := ui.New(ui.Options{Name: "counted", Runtime: rt, Token: "tok", Cluster: topCluster{view}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(u)
	defer srv.Close()
	out, err := runTop("--once", "--window", "all", "--token", "tok", srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	checkWidth(t, out)
	if !strings.Contains(out, "cluster: counted active, generation 3, scheduler w2, UI of worker w1") {
		t.Errorf("no cluster line in\n%s", out)
	}
	// WORKER HOST PID UPTIME BEAT SLOTS RUNNING TASKS
	for name, want := range map[string]string{
		"w1*": "w1* host-one.exampl… 11 1h02m 0.4s 1 g3 1 3 5",
		"w2":  "w2 h2 22 1m05s 0.9s 2 g3 2 4",
		"w3":  "w3 h3 33 5s 0.0s 1 - -",
		"w4":  "w4 lost - - expired - - 6",
	} {
		if got := strings.Join(fields(out, name), " "); got != want {
			t.Errorf("worker row %q, want %q in\n%s", got, want, out)
		}
	}
	if !strings.Contains(out, "refused by w3: not in this build") {
		t.Errorf("no refusal line in\n%s", out)
	}
	if got := strings.Join(fields(out, "sink"), " "); got != "sink w1[3] w2[4] w4[6]" {
		t.Errorf("sink's placement %q in\n%s", got, out)
	}
	// The workers come above the component tables, which are as before.
	if w, s := strings.Index(out, "WORKER"), strings.Index(out, "SPOUT"); w < 0 || s < w {
		t.Errorf("the workers table is not above the components in\n%s", out)
	}
	var src []string
	for _, l := range strings.Split(out, "\n") {
		if f := strings.Fields(l); len(f) == 8 && f[0] == "src" {
			src = f
		}
	}
	if src == nil || src[2] != "100" || src[4] != "100" {
		t.Errorf("src row %v in\n%s", src, out)
	}

	// A worker that runs no generation of the topology now.
	idle, err := ui.New(ui.Options{Name: "counted", Token: "tok", Cluster: topCluster{view}})
	if err != nil {
		t.Fatal(err)
	}
	isrv := httptest.NewServer(idle)
	defer isrv.Close()
	out, err = runTop("--once", "--token", "tok", isrv.URL)
	if err != nil {
		t.Fatalf("top against an idle worker: %v", err)
	}
	if !strings.Contains(out, "runs no generation of counted") || fields(out, "w2") == nil || strings.Contains(out, "SPOUT") {
		t.Errorf("idle worker:\n%s", out)
	}
}
