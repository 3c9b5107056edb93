package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gale-stream/gale/event"
	"github.com/gale-stream/gale/ingest"
	"github.com/gale-stream/gale/internal/waitfor"
)

// runToEnd runs a gale child to its exit (bounded by two minutes) and returns
// its output and exit status.
func runToEnd(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	stdout, stderr, code, _ = runChild(t, 2*time.Minute, args...)
	return stdout, stderr, code
}

// runChild runs a gale child (childSpawner) to its exit, bounded by within, and
// returns its output, exit status and duration.
func runChild(t *testing.T, within time.Duration, args ...string) (stdout, stderr string, code int, took time.Duration) {
	t.Helper()
	cmd := childSpawner(args)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	begin := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	var err error
	select {
	case err = <-exited:
	case <-time.After(within):
		_ = cmd.Process.Kill()
		<-exited
		t.Fatalf("gale %v did not end within %v\nstdout: %s\nstderr: %s", args, within, o.String(), e.String())
	}
	took = time.Since(begin)
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		code = ee.ExitCode()
	default:
		t.Fatalf("gale %v: %v", args, err)
	}
	return o.String(), e.String(), code, took
}

// startRefused starts gale serve, which must exit (not 0) without ever becoming
// ready, and returns its stderr.
func startRefused(t *testing.T, args ...string) string {
	t.Helper()
	c := spawnChild(t, args...)
	exited := make(chan error, 1)
	go func() { exited <- c.cmd.Wait() }()
	var exitErr error
	gone, ready := false, false
	err := waitfor.Err(context.Background(), 30*time.Second, func() error {
		select {
		case exitErr = <-exited:
			gone = true
			return nil
		default:
		}
		err := readyz(c.url)
		if ready = err == nil; ready {
			return nil
		}
		return fmt.Errorf("gale serve has neither exited nor become ready (%v)", err)
	})
	if !gone {
		_ = c.cmd.Process.Kill()
		<-exited
	}
	switch {
	case err != nil:
		t.Fatal(err)
	case ready:
		t.Fatalf("gale serve became ready on a damaged log:\n%s", c.stderr.String())
	case exitErr == nil:
		t.Fatalf("gale serve exited 0 on a damaged log:\n%s", c.stderr.String())
	}
	return c.stderr.String()
}

// The reproduction end to end (nats-server#7549): gale serve with
// --max-pending 1, 300 events answered PERSISTED one request each, kill -9, one bit
// flipped in the middle of the newest WAL file, restart. The restart must refuse,
// naming the damage; gale log check must say what is damaged (exit 1) without
// changing the log; gale log salvage must start it again from what is intact; then
// every acknowledged event is either there (and ends PROCESSED) or listed at
// GET /v1/lost, and a new event gets a seq above every acknowledged one. A GET of
// a lost event says so: 410 LOST with its seq if /v1/lost names its id, else a
// 404 that says lost seqs of unknown ids exist.
func TestWALBitFlipAfterKill9(t *testing.T) {
	dir := t.TempDir()
	addr := freeAddr(t)
	args := []string{"serve", "--data", dir, "--addr", addr, "--log-level", "error", "--max-pending", "1"}
	c := startChild(t, args...)
	client := &ingest.Client{URL: c.url}
	acked := map[string]uint64{}
	var top uint64
	for i := range 300 {
		ev := event.Event{ID: fmt.Sprintf("flip-%d", i), Source: "test", Type: "t", Payload: []byte(fmt.Sprintf(`{"i":%d}`, i))}
		answers, _, err := client.Send(context.Background(), []event.Event{ev}, ingest.LevelPersisted, 0)
		if err != nil || len(answers) != 1 || answers[0].Status != ingest.Persisted && answers[0].Status != ingest.Processed {
			t.Fatalf("event %d: %+v %v", i, answers, err)
		}
		acked[ev.ID] = answers[0].Seq
		top = max(top, answers[0].Seq)
	}
	if err := c.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = c.cmd.Wait()

	logs, _ := filepath.Glob(filepath.Join(dir, "log", "*.log"))
	if len(logs) == 0 {
		t.Fatal("no WAL file")
	}
	sort.Strings(logs)
	wal := logs[len(logs)-1]
	b, err := os.ReadFile(wal)
	if err != nil {
		t.Fatal(err)
	}
	end := len(b)
	for end > 0 && b[end-1] == 0 {
		end--
	}
	b[end/2] ^= 0x10
	if err := os.WriteFile(wal, b, 0o644); err != nil {
		t.Fatal(err)
	}

	stderr := startRefused(t, args...)
	if !strings.Contains(stderr, "acknowledged records missing") || !strings.Contains(stderr, filepath.Base(wal)) ||
		!strings.Contains(stderr, "gale log salvage") {
		t.Fatalf("the refused start does not name the damage (WAL %s) and the way out:\n%s", filepath.Base(wal), stderr)
	}
	t.Logf("restart refused: %s", firstLine(stderr))

	before := treeHash(t, filepath.Join(dir, "log"))
	out, errOut, code := runToEnd(t, "log", "check", "--data", dir)
	if code != 1 || !strings.Contains(out, "DAMAGED at offset") {
		t.Fatalf("gale log check: exit %d, want 1 naming the damaged offset:\n%s%s", code, out, errOut)
	}
	if after := treeHash(t, filepath.Join(dir, "log")); after != before {
		t.Fatal("gale log check changed the log")
	}
	t.Logf("gale log check (exit %d):\n%s", code, out)

	out, errOut, code = runToEnd(t, "log", "salvage", "--data", dir)
	if code != 0 {
		t.Fatalf("gale log salvage: exit %d:\n%s%s", code, out, errOut)
	}
	t.Logf("gale log salvage:\n%s", out)
	if out, _, code := runToEnd(t, "log", "check", "--data", dir); code != 0 {
		t.Fatalf("gale log check after salvage: exit %d:\n%s", code, out)
	}

	c2 := startChild(t, args...)
	defer func() {
		_ = c2.cmd.Process.Kill()
		_ = c2.cmd.Wait()
	}()
	client.URL = c2.url
	resp, err := http.Get(c2.url + "/v1/lost")
	if err != nil {
		t.Fatal(err)
	}
	var lost struct {
		Lost []struct {
			From uint64   `json:"from_seq"`
			To   uint64   `json:"to_seq"`
			IDs  []string `json:"ids"`
		} `json:"lost"`
	}
	err = json.NewDecoder(resp.Body).Decode(&lost)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	listed := func(id string, seq uint64) (inRange, named bool) {
		for _, r := range lost.Lost {
			if seq >= r.From && seq <= r.To {
				for _, n := range r.IDs {
					named = named || n == id
				}
				return true, named
			}
		}
		return false, false
	}
	nLost, nNamed := 0, 0
	var kept []string // not listed lost: each must end PROCESSED, at its seq
	for id, seq := range acked {
		if inRange, named := listed(id, seq); inRange {
			nLost++
			resp, err := http.Get(c2.url + "/v1/events/" + id)
			if err != nil {
				t.Fatal(err)
			}
			var a struct {
				Status  string `json:"status"`
				LostSeq uint64 `json:"lost_seq"`
				See     string `json:"see"`
				Error   string `json:"error"`
			}
			err = json.NewDecoder(resp.Body).Decode(&a)
			resp.Body.Close()
			switch {
			case err != nil:
				t.Fatal(err)
			case named && (resp.StatusCode != http.StatusGone || a.Status != "LOST" || a.LostSeq != seq || a.See != "/v1/lost"):
				t.Fatalf("GET of %s, lost at seq %d and named at /v1/lost: %d %+v; want 410 LOST with its seq", id, seq, resp.StatusCode, a)
			case !named && (resp.StatusCode != http.StatusNotFound || !strings.Contains(a.Error, "event_id is unknown")):
				t.Fatalf("GET of %s, lost at seq %d with its id unknown: %d %+v; want a 404 saying such seqs exist", id, seq, resp.StatusCode, a)
			}
			if named {
				nNamed++
			}
			continue
		}
		kept = append(kept, id)
	}
	waitProcessed(t, context.Background(), time.Minute, client, kept, func(id string, st ingest.EventStatus) error {
		if st.Seq != acked[id] {
			return fmt.Errorf("answered PERSISTED at seq %d, not listed lost; after salvage at seq %d", acked[id], st.Seq)
		}
		return nil
	})
	ev := event.Event{ID: "after-salvage", Source: "test", Type: "t", Payload: []byte(`{}`)}
	answers, _, err := client.Send(context.Background(), []event.Event{ev}, ingest.LevelPersisted, 0)
	if err != nil || len(answers) != 1 || answers[0].Seq <= top {
		t.Fatalf("new event after salvage: %+v %v; want a seq above %d", answers, err, top)
	}
	t.Logf("%d acknowledged: %d listed at /v1/lost %+v (%d with their id: GET 410), the rest PROCESSED; a new event got seq %d", len(acked), nLost, lost.Lost, nNamed, answers[0].Seq)
}

func firstLine(s string) string {
	l, _, _ := strings.Cut(s, "\n")
	return l
}

// treeHash is the names, sizes and contents of every file under dir.
func treeHash(t *testing.T, dir string) string {
	t.Helper()
	var sb strings.Builder
	err := filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil || fi.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		fmt.Fprintf(&sb, "%s %d %x\n", p, len(b), b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return sb.String()
}
