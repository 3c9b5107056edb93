package cli

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/gale-stream/gale/event"
	"github.com/gale-stream/gale/ingest"

	"github.com/gale-stream/gale/internal/testio"
	"github.com/gale-stream/gale/internal/waitfor"
)

// TestMain lets a test run this binary as a gale child process (GALE_TEST_CHILD
// holds its arguments, one per line), so kill -9 hits a real separate process.
func TestMain(m *testing.M) {
	if args := os.Getenv("GALE_TEST_CHILD"); args != "" {
		if os.Getenv("GALE_TEST_BUILD") == "bare" { // another build: no topology, no pipeline
			os.Exit((&App{Name: "gale"}).Run(context.Background(), strings.Split(args, "\n"), os.Stdout, os.Stderr))
		}
		if os.Getenv("GALE_TEST_BUILD") == "run" { // gale with run_test.go's classes
			os.Exit(runTestApp().Run(context.Background(), strings.Split(args, "\n"), os.Stdout, os.Stderr))
		}
		os.Exit(run(strings.Split(args, "\n")))
	}
	os.Exit(m.Run())
}

func retailFiles(t *testing.T) []string {
	files, err := filepath.Glob("../../testdata/retail/*.csv")
	if err != nil || len(files) != 3 {
		t.Fatalf("testdata/retail: %v %v", files, err)
	}
	return files
}

// retailDay is one day of the retail testdata, 1 December 2010 (3,108 order
// lines, the largest day), for tests whose assertions hold line by line and need
// no more than a day: the shared-log and SIGSTOP tests have their fault after
// 2,000 lines and a thousand to go (ingestRetail: 1,000 and 500 of its first
// 1,500 under the race detector). TestOrdersOneCommand and
// TestOrdersOnWorkersOneKilled ingest the three days through the Pebble log
// (retailSample: a thousand lines of each under the race detector).
const (
	retailDay      = "../../testdata/retail/2010-12-01.csv"
	retailDayLines = 3108
)

// The one-command form on the real testdata (retailSample): every order line is
// PROCESSED and written once, and every invoice is summarised.
func TestOrdersOneCommand(t *testing.T) {
	var f ServeFlags
	f.Register(&cobra.Command{}, "127.0.0.1:0") // the defaults of the flags
	o, err := f.Options(galeApp().pipeline)
	if err != nil {
		t.Fatal(err)
	}
	o.DataDir = t.TempDir()
	o.Logger = nil
	files, lines, invoices := retailSample(t)
	res, err := runOrders(context.Background(), o, files, ingest.DefaultSendOptions(), nil)
	if err != nil {
		t.Fatal(err)
	}
	r := res.Ingest
	if r.Sent != lines || r.Final["PROCESSED"] != lines || len(r.Final) != 1 || r.Broken() != 0 || len(r.Problems) != 0 {
		t.Fatalf("report %+v, want %d lines PROCESSED", r, lines)
	}
	if res.OrderLines != int64(lines) || res.Invoices != int64(invoices) {
		t.Fatalf("sink: %d order_lines, %d invoices; want %d and %d", res.OrderLines, res.Invoices, lines, invoices)
	}
	// Ingesting the same files again writes nothing new: every id is a duplicate.
	o.DataDir = res.DataDir
	res2, err := runOrders(context.Background(), o, files, ingest.DefaultSendOptions(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if res2.Ingest.Duplicates != lines || res2.Ingest.Final["PROCESSED"] != lines || res2.OrderLines != int64(lines) || res2.SinkBatches != 0 {
		t.Fatalf("second run: %+v, %d rows, %d sink batches", res2.Ingest, res2.OrderLines, res2.SinkBatches)
	}
}

func freeAddr(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

type child struct {
	cmd    *exec.Cmd
	stderr testio.SyncBuffer
	url    string
}

// spawnChild starts this test binary as gale with args (TestMain's
// GALE_TEST_CHILD), its stderr kept, and shown if the test fails; its url is
// from --addr. It does not wait for anything.
func spawnChild(t *testing.T, args ...string) *child {
	t.Helper()
	c := &child{cmd: childSpawner(args)}
	c.cmd.Stderr = &c.stderr
	if err := c.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// A failed test shows what each child said last: a CI run is seen once.
	t.Cleanup(func() {
		if t.Failed() {
			out := c.stderr.String()
			if len(out) > 6000 {
				out = "..." + out[len(out)-6000:]
			}
			t.Logf("child pid %d (%s) stderr:\n%s", c.cmd.Process.Pid, strings.Join(args, " "), out)
		}
	})
	for i, a := range args {
		if a == "--addr" {
			c.url = "http://" + args[i+1]
		}
	}
	return c
}

// startChild starts a gale child (spawnChild) and waits until its /readyz
// answers 200; one that does not within 30 s is killed and fails the test.
func startChild(t *testing.T, args ...string) *child {
	t.Helper()
	c := spawnChild(t, args...)
	if err := waitfor.Err(context.Background(), 30*time.Second, func() error { return readyz(c.url) }); err != nil {
		_ = c.cmd.Process.Kill()
		_ = c.cmd.Wait()
		t.Fatalf("child pid %d never became ready: %v", c.cmd.Process.Pid, err)
	}
	return c
}

// readyz is nil once GET url/readyz answers 200, else what it answered.
func readyz(url string) error {
	resp, err := http.Get(url + "/readyz")
	if err != nil {
		return err
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return &readyzError{code: resp.StatusCode, body: strings.TrimSpace(string(b))}
	}
	return nil
}

// readyzError is a /readyz answer other than 200.
type readyzError struct {
	code int
	body string
}

func (e *readyzError) Error() string { return fmt.Sprintf("/readyz %d: %s", e.code, e.body) }

// kill -9 of a gale serve child right after PERSISTED answers, then a restart:
// every event answered PERSISTED ends PROCESSED, exactly once in the sink.
func TestKill9AfterPersistedAnswers(t *testing.T) {
	dir := t.TempDir()
	addr := freeAddr(t)
	args := []string{"serve", "--data", dir, "--addr", addr, "--log-level", "error"}
	c := startChild(t, args...)
	client := &ingest.Client{URL: c.url}

	var mu sync.Mutex
	var persisted []string
	stop := make(chan struct{})
	enough := make(chan struct{}) // closed once 3,000 are answered PERSISTED
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for b := 0; ; b++ {
				select {
				case <-stop:
					return
				default:
				}
				evs := make([]event.Event, 50)
				for i := range evs {
					evs[i] = event.Event{ID: fmt.Sprintf("k%d-%d-%d", w, b, i), Source: "test", Type: "t",
						Payload: []byte(fmt.Sprintf(`{"w":%d,"b":%d,"i":%d}`, w, b, i))}
				}
				answers, _, err := client.Send(context.Background(), evs, ingest.LevelPersisted, 0)
				if err != nil {
					return // the child is gone
				}
				mu.Lock()
				n := len(persisted)
				for _, a := range answers {
					if a.Status == ingest.Persisted || a.Status == ingest.Processed {
						persisted = append(persisted, a.EventID)
					}
				}
				if n < 3000 && len(persisted) >= 3000 {
					close(enough)
				}
				mu.Unlock()
			}
		}()
	}
	enoughBefore := true
	select {
	case <-enough:
	case <-time.After(time.Minute):
		enoughBefore = false
	}
	if err := c.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = c.cmd.Wait()
	close(stop)
	wg.Wait()
	if !enoughBefore {
		t.Fatalf("%d events answered PERSISTED in a minute, want 3000", len(persisted))
	}
	mu.Lock()
	ids := append([]string(nil), persisted...)
	mu.Unlock()

	c2 := startChild(t, args...)
	client.URL = c2.url
	waitProcessed(t, context.Background(), time.Minute, client, ids, nil) // each answered PERSISTED before kill -9
	if err := c2.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := c2.cmd.Wait(); err != nil {
		t.Fatalf("graceful stop: %v\n%s", err, c2.stderr.String())
	}
	db, err := sql.Open("sqlite", filepath.Join(dir, "sink.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows := map[string]int{}
	q, err := db.Query("SELECT event_id FROM events")
	if err != nil {
		t.Fatal(err)
	}
	for q.Next() {
		var id string
		_ = q.Scan(&id)
		rows[id]++
	}
	q.Close()
	for _, id := range ids {
		if rows[id] != 1 {
			t.Fatalf("%s: %d rows in the sink, want 1", id, rows[id])
		}
	}
	t.Logf("%d events answered PERSISTED before kill -9, all PROCESSED once after restart; %d rows in the sink", len(ids), len(rows))
}

// TestServeHelpListsEndpoints: gale serve --help lists every endpoint of the HTTP
// API, as ingest/server.go's Handler documents them, and the UI's.
func TestServeHelpListsEndpoints(t *testing.T) {
	src, err := os.ReadFile("../../ingest/server.go")
	if err != nil {
		t.Fatal(err)
	}
	_, doc, _ := strings.Cut(string(src), "// Handler returns the HTTP API of s:")
	doc, _, _ = strings.Cut(doc, "func (s *Service) Handler")
	var endpoints []string
	for _, l := range strings.Split(doc, "\n") {
		f := strings.Fields(strings.TrimPrefix(l, "//"))
		if len(f) >= 2 && (f[0] == "GET" || f[0] == "POST") {
			for _, p := range strings.Split(strings.Join(f[1:], " "), ",") {
				if p = strings.Fields(p)[0]; strings.HasPrefix(p, "/") {
					endpoints = append(endpoints, f[0]+" "+p)
				}
			}
		}
	}
	if len(endpoints) < 8 {
		t.Fatalf("found only %v in Handler's doc", endpoints)
	}
	root := newRoot()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetArgs([]string{"serve", "--help"})
	if err := root.Execute(); err != nil {
		t.Fatal(err)
	}
	for _, e := range append(endpoints, "GET /ui/", "GET /metrics") {
		method, path, _ := strings.Cut(e, " ")
		found := false
		for _, l := range strings.Split(out.String(), "\n") {
			if f := strings.Fields(l); len(f) >= 2 && f[0] == method && f[1] == path {
				found = true
			}
		}
		if !found {
			t.Errorf("serve --help has no line for %s:\n%s", e, out.String())
		}
	}
}

// TestServeStartLineNamesLog: the start line names the log's own directory.
func TestServeStartLineNamesLog(t *testing.T) {
	dir := t.TempDir()
	c := startChild(t, "serve", "--data", dir, "--addr", freeAddr(t), "--log-level", "error")
	if err := c.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := c.cmd.Wait(); err != nil {
		t.Fatalf("stop: %v\n%s", err, c.stderr.String())
	}
	want := "; log in " + filepath.Join(dir, "log") + ";"
	if !strings.Contains(c.stderr.String(), want) {
		t.Errorf("start line lacks %q:\n%s", want, c.stderr.String())
	}
	// And how the mark is made durable, and why (which file systems get which
	// is eventlog's TestMarkSyncModeOnRealFiles and TestMarkSyncOnFastCommitExt4).
	mark := "copy in " + filepath.Join(dir, "log", "GALE-HWM") + " is made durable by "
	if out := c.stderr.String(); !strings.Contains(out, mark+"wal-flush: ") && !strings.Contains(out, mark+"fdatasync: ") {
		t.Errorf("start lines lack %q followed by wal-flush: or fdatasync::\n%s", mark, out)
	}
	// --separate-mark-sync asks for the mark's own fdatasync on any file system.
	c = startChild(t, "serve", "--data", dir, "--addr", freeAddr(t), "--log-level", "error", "--separate-mark-sync")
	if err := c.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := c.cmd.Wait(); err != nil {
		t.Fatalf("stop: %v\n%s", err, c.stderr.String())
	}
	if want := "is made durable by fdatasync: Options.SeparateMarkSync"; !strings.Contains(c.stderr.String(), want) {
		t.Errorf("with --separate-mark-sync the start lines lack %q:\n%s", want, c.stderr.String())
	}
}
