package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gale-stream/gale/internal/testtopo"
	"github.com/gale-stream/gale/lineage"
	"github.com/gale-stream/gale/runtime"
	"github.com/gale-stream/gale/topology"
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
	rt, err := c.Start(cfg, runtime.WithLineage(rec))
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
	// SPOUT TASKS EMITTED TRANSFERRED ACKED FAILED TIMED-OUT PENDING COMPLETE
	if f := fields(out, "src"); len(f) != 9 || f[1] != "1" || f[2] != "1000" || f[3] != "1000" || f[4] != "950" || f[5] != "50" || f[6] != "0" || f[7] != "0" {
		t.Errorf("src row %v in\n%s", f, out)
	}
	// BOLT TASKS EXECUTED CAPACITY EXECUTE PROCESS ACKED FAILED EMITTED TRANSFERRED QUEUE
	if f := fields(out, "fan"); len(f) != 11 || f[2] != "1000" || f[6] != "950" || f[7] != "50" || f[8] != "2850" || f[9] != "2850" {
		t.Errorf("fan row %v in\n%s", f, out)
	}
	if f := fields(out, "sink"); len(f) != 11 || f[1] != "2" || f[2] != "2850" || f[6] != "2850" {
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
