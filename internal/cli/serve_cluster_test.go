package cli

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/gale-stream/gale/cluster"
	"github.com/gale-stream/gale/cluster/natsnode"
	"github.com/gale-stream/gale/event"
	"github.com/gale-stream/gale/ingest"
	"github.com/gale-stream/gale/internal/testio"

	"github.com/gale-stream/gale/internal/pgtest"
	"github.com/gale-stream/gale/lineage"
	"github.com/gale-stream/gale/pipelines/orders"
	serve "github.com/gale-stream/gale/server"
	"github.com/gale-stream/gale/sink"
)

// testSinkURL is the sink of a test: a fresh PostgreSQL schema when
// GALE_TEST_POSTGRES_URL is set (the sink then runs on the workers), else SQLite
// in dir (its tasks pinned to serve). The PostgreSQL URL holds a password, so it
// goes by reference, as a user's must with --nats: env:GALE_TEST_SERVE_SINK, set
// here for this process and the workers it starts after.
func testSinkURL(t *testing.T, dir string) string {
	url := os.Getenv("GALE_TEST_POSTGRES_URL")
	if url == "" {
		return dir + "/sink.db"
	}
	t.Setenv("GALE_TEST_SERVE_SINK", pgtest.Schema(t, url, "gale_serve_cluster"))
	return "env:GALE_TEST_SERVE_SINK"
}

// The orders pipeline through gale serve with its bolts on two gale worker
// processes, one of them kill -9'd mid-ingest: every event answered PERSISTED ends
// PROCESSED, and the sink holds each order line exactly once.
func TestOrdersOnWorkersOneKilled(t *testing.T) {
	dir := t.TempDir()
	node, err := natsnode.Start(context.Background(), natsnode.Config{DataDir: dir + "/nats", Host: "127.0.0.1", Port: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { node.Shutdown(); node.WaitForShutdown() })
	cf := ClusterFlags{url: node.ClientURL(), natsData: node.DataDir(), prefix: cluster.DefaultPrefix, hbTTL: time.Second, leaseTTL: time.Second, timeout: 30 * time.Second}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	nc, st, err := cf.Connect(ctx, "test")
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	sinkURL := testSinkURL(t, dir) // before the workers start: they read its variable
	var children []*childWorker
	t.Cleanup(func() { stopChildren(children, os.Stderr) })
	for i := 1; i <= 2; i++ {
		c, err := startWorkerChild(childSpawner, dir, fmt.Sprintf("w%d", i), node.ClientURL(), node.DataDir())
		if err != nil {
			t.Fatal(err)
		}
		children = append(children, c)
	}
	if err := waitWorkers(ctx, st, 2, children); err != nil {
		t.Fatal(err)
	}

	var f ServeFlags
	f.Register(&cobra.Command{}, "127.0.0.1:0")
	f.timeout = 5 * time.Second // replays of the trees the killed worker held come sooner
	f.lineageSample = 1         // every tree, for the lineage check
	o, err := f.Options(galeApp().pipeline)
	if err != nil {
		t.Fatal(err)
	}
	o.DataDir, o.Logger, o.SinkURL = dir+"/data", nil, sinkURL
	o.Cluster = &serve.Cluster{Conn: nc, Store: st, Name: "serve", Workers: 2}
	// Kill a worker as soon as the pipeline runs on both (the ingest starts then):
	// events go to its tasks until the scheduler moves them, and their trees are
	// replayed from the log.
	failover := make(chan string, 1)
	go func() {
		rctx, rcancel := context.WithTimeout(ctx, time.Minute)
		defer rcancel()
		recs, err := st.WatchRecords(rctx)
		if err != nil {
			return
		}
		var gen uint64
		for r := range recs {
			if r.Topology != "orders" || r.Assignment == nil || r.Killed {
				continue
			}
			if gen == 0 && len(r.Assignment.Workers) == 3 {
				gen = r.Generation()
				_ = children[0].cmd.Process.Signal(syscall.SIGKILL)
			} else if gen != 0 && r.Generation() > gen {
				failover <- fmt.Sprintf("killed %s; generation %d -> %d on %v", children[0].name, gen, r.Generation(), r.Assignment.Workers)
				return
			}
		}
	}()
	files, lines, _ := retailSample(t)
	res, err := runOrders(ctx, o, files, ingest.DefaultSendOptions(), nil)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case what := <-failover:
		t.Logf("%s; ingest took %v", what, res.Ingest.Elapsed)
	default:
		t.Fatalf("no failover while the ingest ran (%v)", res.Ingest.Elapsed)
	}
	// What the cluster's KV holds of the submission names the sink, never its
	// password: the workers read the URL themselves.
	if rec, err := st.Record(ctx, "orders"); err != nil {
		t.Fatal(err)
	} else if !slices.Contains(rec.Args, "--sink="+sinkURL) || slices.ContainsFunc(rec.Args, func(a string) bool { return sink.HoldsSecret(strings.TrimPrefix(a, "--sink=")) }) {
		t.Errorf("submit arguments in the KV: %q, want --sink=%s and no password", rec.Args, sinkURL)
	}
	r := res.Ingest
	if r.Sent != lines || r.Final["PROCESSED"] != lines || len(r.Final) != 1 || r.Broken() != 0 || res.OrderLines != int64(lines) {
		t.Fatalf("report %+v, %d order lines; want %d", r, res.OrderLines, lines)
	}

	// serve runs the spout, so its recorder keeps the trees whole: the tuples that
	// parse, risk, stock and decision emitted and acked on the workers are in them.
	whole := 0
	for _, tv := range o.Lineage.Recent("", 500) {
		tree, _ := o.Lineage.Lookup(tv.MsgID)
		if tree.Outcome != lineage.Completed {
			continue
		}
		from := map[string]bool{}
		acked := true
		for _, n := range tree.Nodes {
			from[n.Component] = true
			acked = acked && n.State == lineage.NodeAcked
		}
		if acked && from[orders.SpoutID] && from[orders.ParseID] && from[orders.RiskID] && from[orders.StockID] && from[orders.DecisionID] {
			whole++
		}
	}
	if whole == 0 {
		t.Errorf("no completed tree of %d kept has the workers' tuples, all acked", len(o.Lineage.Recent("", 500)))
	}
	t.Logf("%d trees kept whole across processes", whole)
}

// A worker whose build lacks the pipeline refuses it. gale serve --nats used to
// say nothing of it and report ready as soon as its own part ran: the refusal is
// now a WARN naming the worker and its reason, and serve is ready only once the
// pipeline runs on every worker the scheduler then placed it on; the refused
// generation stops at once, not after a drain waiting for the refusing worker.
func TestServeOnClusterSaysAWorkerRefusedThePipeline(t *testing.T) {
	dir := t.TempDir()
	node, err := natsnode.Start(context.Background(), natsnode.Config{DataDir: dir + "/nats", Host: "127.0.0.1", Port: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { node.Shutdown(); node.WaitForShutdown() })
	cf := ClusterFlags{url: node.ClientURL(), natsData: node.DataDir(), prefix: cluster.DefaultPrefix, hbTTL: time.Second, leaseTTL: time.Second, timeout: 30 * time.Second}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	nc, st, err := cf.Connect(ctx, "test")
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	var children []*childWorker
	t.Cleanup(func() { stopChildren(children, os.Stderr) })
	bare := func(args []string) *exec.Cmd {
		cmd := childSpawner(args)
		cmd.Env = append(cmd.Env, "GALE_TEST_BUILD=bare") // TestMain: a build without gale's pipelines
		return cmd
	}
	for i, spawn := range []func([]string) *exec.Cmd{bare, childSpawner} {
		c, err := startWorkerChild(spawn, dir, fmt.Sprintf("w%d", i+1), node.ClientURL(), node.DataDir())
		if err != nil {
			t.Fatal(err)
		}
		children = append(children, c)
	}
	if err := waitWorkers(ctx, st, 2, children); err != nil {
		t.Fatal(err)
	}
	var f ServeFlags
	f.Register(&cobra.Command{}, "127.0.0.1:0")
	o, err := f.Options(galeApp().pipeline)
	if err != nil {
		t.Fatal(err)
	}
	var logs testio.SyncBuffer
	o.DataDir, o.SinkURL = dir+"/data", dir+"/sink.db"
	o.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
	// Placed on all three, w1 included. The old generation then stops with no
	// drain (w1 never ran its part to join one): within 15 s, not after the 30 s
	// of --shutdown-timeout a drain waiting for w1 took (and serve gave up first).
	o.Cluster = &serve.Cluster{Conn: nc, Store: st, Name: "serve", Workers: 3, Timeout: 15 * time.Second}
	s, err := serve.Start(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		sctx, scancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer scancel()
		_ = s.Shutdown(sctx)
	}()
	if got := logs.String(); !strings.Contains(got, "refused") || !strings.Contains(got, "w1") || !strings.Contains(got, "pipeline=events") {
		t.Errorf("serve's WARN lines at start:\n%s\nwant worker w1's refusal of the events pipeline", got)
	}
	// Ready means running: every worker of the placement runs the generation.
	rec, err := st.Record(ctx, "events")
	if err != nil {
		t.Fatal(err)
	}
	ws, err := st.Workers(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range rec.Assignment.Workers {
		i := slices.IndexFunc(ws, func(wi cluster.WorkerInfo) bool { return wi.Name == w })
		if i < 0 || ws[i].Running["events"] != rec.Generation() {
			t.Errorf("ready, but worker %s of generation %d does not run it (%+v)", w, rec.Generation(), ws)
		}
	}
	if slices.Contains(rec.Assignment.Workers, "w1") {
		t.Errorf("the refusing worker w1 is in the placement %v", rec.Assignment.Workers)
	}
	c := &ingest.Client{URL: s.URL()}
	ans, code, err := c.Send(ctx, []event.Event{{ID: "refused-1", Source: "test", Type: "t", Payload: []byte(`{}`)}}, ingest.LevelProcessed, 20*time.Second)
	if err != nil || len(ans) != 1 || ans[0].Status != ingest.Processed {
		t.Errorf("an event after start: %d %+v, %v; want PROCESSED", code, ans, err)
	}
}
