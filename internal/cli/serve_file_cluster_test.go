package cli

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/spf13/cobra"

	"github.com/gale-stream/gale/cluster"
	"github.com/gale-stream/gale/cluster/natsnode"
	"github.com/gale-stream/gale/flux"
	"github.com/gale-stream/gale/ingest"
	"github.com/gale-stream/gale/internal/testio"
	"github.com/gale-stream/gale/internal/waitfor"
	"github.com/gale-stream/gale/pipelines/orders"
	serve "github.com/gale-stream/gale/server"
	"github.com/gale-stream/gale/sink"
)

// fileCluster is an embedded NATS node with a worker child per spawn, for a
// pipeline file through gale serve --nats.
type fileCluster struct {
	nc       *nats.Conn
	st       *cluster.Store
	children []*childWorker
}

func startFileCluster(t *testing.T, ctx context.Context, spawns ...func([]string) *exec.Cmd) *fileCluster {
	t.Helper()
	dir := t.TempDir()
	node, err := natsnode.Start(context.Background(), natsnode.Config{DataDir: dir + "/nats", Host: "127.0.0.1", Port: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { node.Shutdown(); node.WaitForShutdown() })
	cf := ClusterFlags{url: node.ClientURL(), natsData: node.DataDir(), prefix: cluster.DefaultPrefix, hbTTL: time.Second, leaseTTL: time.Second, timeout: 30 * time.Second}
	nc, st, err := cf.Connect(ctx, "test")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	fc := &fileCluster{nc: nc, st: st}
	t.Cleanup(func() { stopChildren(fc.children, os.Stderr) })
	for i, spawn := range spawns {
		c, err := startWorkerChild(spawn, dir, fmt.Sprintf("w%d", i+1), node.ClientURL(), node.DataDir())
		if err != nil {
			t.Fatal(err)
		}
		fc.children = append(fc.children, c)
	}
	if err := waitWorkers(ctx, st, len(spawns), fc.children); err != nil {
		t.Fatal(err)
	}
	return fc
}

// orderLinesFile is testdata/flux/order-lines.yaml as serve reads it, its
// ${table} from a --filter file.
func orderLinesFile(t *testing.T, dir, table string) serve.Pipeline {
	t.Helper()
	props := filepath.Join(dir, "lines.properties")
	if err := os.WriteFile(props, []byte("table: "+table+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	p, err := serve.FilePipeline("../../testdata/flux/order-lines.yaml", flux.Options{Filter: props}, &galeApp().Components)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// gale serve --nats --pipeline order-lines.yaml with its parse bolts on two gale
// worker processes, which build the pipeline from the resolved document serve put
// in the object store; one of them is kill -9'd mid-ingest. Every retail order
// line sent with ack=processed ends PROCESSED once, and the sink (SQLite pinned to
// serve, or PostgreSQL written from the workers) holds one row per line.
func TestServePipelineFileOnWorkersOneKilled(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	dir := t.TempDir()
	sinkURL := testSinkURL(t, dir) // before the workers start: they read its variable
	fc := startFileCluster(t, ctx, childSpawner, childSpawner)
	st := fc.st

	var f ServeFlags
	f.Register(&cobra.Command{}, "127.0.0.1:0")
	f.timeout = 5 * time.Second // replays of the trees the killed worker held come sooner
	p := orderLinesFile(t, dir, "order_lines_file")
	o, err := f.Options(func(string) (serve.Pipeline, error) { return p, nil })
	if err != nil {
		t.Fatal(err)
	}
	o.DataDir, o.Logger, o.SinkURL = dir+"/data", nil, sinkURL
	o.Cluster = &serve.Cluster{Conn: fc.nc, Store: st, Name: "serve", Workers: 2}
	s, err := serve.Start(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	stopped := false
	defer func() {
		if !stopped {
			sctx, scancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer scancel()
			_ = s.Shutdown(sctx)
		}
	}()
	rec, err := st.Record(ctx, "order-lines")
	if err != nil {
		t.Fatal(err)
	}
	if rec.Source == nil || rec.Source.Digest != cluster.Digest(p.File.Resolved) || !slices.Contains(rec.Args, "--pipeline-file") {
		t.Fatalf("record: source %+v, args %q; want the document's digest and --pipeline-file", rec.Source, rec.Args)
	}
	running := 0
	for _, w := range rec.Assignment.Workers {
		if w != "serve" {
			running++
		}
	}
	if running != 2 {
		t.Fatalf("placement %v: want serve and both workers", rec.Assignment.Workers)
	}

	db, err := openTestSink(ctx, sinkURL)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	files, lines, _ := retailSample(t)
	// Kill w1 once a fifth of the lines are written: mid-ingest, whatever the
	// machine's speed.
	killed := make(chan string, 1)
	go func() {
		_ = waitfor.Err(ctx, 2*time.Minute, func() error {
			var n int
			if err := db.SQL.QueryRowContext(ctx, "SELECT count(*) FROM order_lines_file").Scan(&n); err != nil {
				return err
			}
			if n < lines/5 {
				return fmt.Errorf("%d rows", n)
			}
			_ = fc.children[0].cmd.Process.Signal(syscall.SIGKILL)
			killed <- fmt.Sprintf("killed %s at %d rows of %d", fc.children[0].name, n, lines)
			return nil
		})
	}()
	in, err := OpenInputs(files)
	if err != nil {
		t.Fatal(err)
	}
	begin := time.Now()
	rep, err := RunIngest(ctx, &ingest.Client{URL: s.URL()}, in, ingest.DefaultSendOptions(), NewIngestProgress(nil, "test"))
	if err != nil {
		t.Fatal(err)
	}
	took := time.Since(begin)
	select {
	case what := <-killed:
		t.Logf("%s; ingest took %v", what, took)
	default:
		t.Fatalf("no worker killed while the ingest ran (%v)", took)
	}
	if rep.Sent != lines || rep.Final["PROCESSED"] != lines || len(rep.Final) != 1 || rep.Broken() != 0 || rep.Duplicates != 0 {
		t.Fatalf("report %+v; want all %d lines PROCESSED once", rep, lines)
	}
	// The kill mattered: the scheduler moved w1's tasks off it (a new generation).
	if err := waitfor.Err(ctx, time.Minute, func() error {
		rec, err := st.Record(ctx, "order-lines")
		if err != nil {
			return err
		}
		if rec.Assignment == nil || slices.Contains(rec.Assignment.Workers, "w1") {
			return fmt.Errorf("w1 still in the placement %v after its kill", rec.Assignment)
		}
		t.Logf("generation %d on %v", rec.Generation(), rec.Assignment.Workers)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	sctx, scancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer scancel()
	stopped = true
	if err := s.Shutdown(sctx); err != nil {
		t.Fatal(err)
	}
	var rows, ids int
	if err := db.SQL.QueryRowContext(ctx, "SELECT count(*), count(DISTINCT event_id) FROM order_lines_file").Scan(&rows, &ids); err != nil {
		t.Fatal(err)
	}
	if rows != lines || ids != lines {
		t.Errorf("sink: %d rows, %d distinct event ids; want %d each", rows, ids, lines)
	}
}

// openTestSink opens a test's sink (testSinkURL) to read it.
func openTestSink(ctx context.Context, url string) (*sink.DB, error) {
	u, err := sink.ResolveURL(url)
	if err != nil {
		return nil, err
	}
	return sink.Open(ctx, u)
}

// A worker whose build lacks a class the pipeline file names (gale.orders.Parse:
// the bare build has no classes) refuses it naming the class; serve says so and
// runs it on the other.
func TestServePipelineFileRefusedByAWorkerWithoutItsClass(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	bare := func(args []string) *exec.Cmd {
		cmd := childSpawner(args)
		cmd.Env = append(cmd.Env, "GALE_TEST_BUILD=bare") // TestMain: a build without gale's classes
		return cmd
	}
	fc := startFileCluster(t, ctx, bare, childSpawner)
	st := fc.st
	dir := t.TempDir()
	var f ServeFlags
	f.Register(&cobra.Command{}, "127.0.0.1:0")
	p := orderLinesFile(t, dir, "order_lines_refused")
	o, err := f.Options(func(string) (serve.Pipeline, error) { return p, nil })
	if err != nil {
		t.Fatal(err)
	}
	var logs testio.SyncBuffer
	o.DataDir, o.SinkURL = dir+"/data", dir+"/sink.db"
	o.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
	o.Cluster = &serve.Cluster{Conn: fc.nc, Store: st, Name: "serve", Workers: 2, Timeout: 15 * time.Second}
	s, err := serve.Start(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		sctx, scancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer scancel()
		_ = s.Shutdown(sctx)
	}()
	ws, err := st.Workers(ctx)
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(ws, func(wi cluster.WorkerInfo) bool { return wi.Name == "w1" })
	if i < 0 || !strings.Contains(ws[i].Refused["order-lines"].Reason, `"gale.orders.Parse"`) {
		t.Errorf("w1's refusals: %+v; want order-lines refused naming gale.orders.Parse", ws)
	} else {
		t.Logf("w1 refused: %s", ws[i].Refused["order-lines"].Reason)
	}
	if got := logs.String(); !strings.Contains(got, "refused") || !strings.Contains(got, "w1") || !strings.Contains(got, "gale.orders.Parse") {
		t.Errorf("serve's WARN lines at start:\n%s\nwant worker w1's refusal naming gale.orders.Parse", got)
	}
	rec, err := st.Record(ctx, "order-lines")
	if err != nil {
		t.Fatal(err)
	}
	if slices.Contains(rec.Assignment.Workers, "w1") || !slices.Contains(rec.Assignment.Workers, "w2") {
		t.Errorf("placement %v: want w2 and not the refusing w1", rec.Assignment.Workers)
	}
	// The pipeline runs on serve and w2: order lines sent after start are written.
	fh, err := os.Open(retailDay)
	if err != nil {
		t.Fatal(err)
	}
	evs, err := orders.ReadCSV(fh, filepath.Base(retailDay))
	fh.Close()
	if err != nil {
		t.Fatal(err)
	}
	evs = evs[:20]
	c := &ingest.Client{URL: s.URL()}
	ans, code, err := c.Send(ctx, evs, ingest.LevelProcessed, 20*time.Second)
	if err != nil || len(ans) != len(evs) || slices.ContainsFunc(ans, func(a ingest.Answer) bool { return a.Status != ingest.Processed }) {
		t.Errorf("%d order lines after start: %d %+v, %v; want each PROCESSED", len(evs), code, ans, err)
	}
}
