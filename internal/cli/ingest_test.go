package cli

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/gale-stream/gale/ingest"

	"github.com/gale-stream/gale/internal/testio"
)

// runIngestCmd runs `gale ingest ARGS` in this process, bounded by a minute.
func runIngestCmd(t *testing.T, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := IngestCmd()
	c.SilenceUsage, c.SilenceErrors = true, true
	var out, errb testio.SyncBuffer
	c.SetOut(&out)
	c.SetErr(&errb)
	c.SetArgs(args)
	err = c.ExecuteContext(ctx)
	if ctx.Err() != nil {
		t.Fatalf("gale ingest %v still running after a minute\n%s", args, errb.String())
	}
	return out.String(), errb.String(), err
}

// TestIngestWrongURL: a --url that answers but is no gale serve (a 404, an HTML
// page) fails at the probe, naming the URL and its answer, and nothing is sent.
func TestIngestWrongURL(t *testing.T) {
	file := smallRetail(t, 5)
	for _, tc := range []struct {
		name    string
		handler http.HandlerFunc
		want    string
	}{
		{"404", func(w http.ResponseWriter, r *http.Request) { http.NotFound(w, r) }, "404 Not Found"},
		{"html", func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("<html>hello</html>")) }, "200 OK"},
	} {
		var requests atomic.Int32
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			requests.Add(1)
			tc.handler(w, r)
		}))
		_, stderr, err := runIngestCmd(t, "--url", srv.URL, file)
		srv.Close()
		if err == nil || !strings.Contains(err.Error(), srv.URL+"/healthz answered "+tc.want) || !strings.Contains(err.Error(), "not a gale serve") {
			t.Errorf("%s: %v; want the URL and %q", tc.name, err, tc.want)
		}
		if n := requests.Load(); n != 1 {
			t.Errorf("%s: %d requests reached the server, want the probe only\n%s", tc.name, n, stderr)
		}
	}
}

// TestIngestMissingFileFirst: with no server running, a missing input file is
// reported as a missing file, not as a missing server.
func TestIngestMissingFileFirst(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "2010-12-09.csv")
	_, _, err := runIngestCmd(t, "--url", "http://"+freeAddr(t), smallRetail(t, 5), missing)
	if err == nil || !strings.Contains(err.Error(), missing) || !errors.Is(err, os.ErrNotExist) || strings.Contains(err.Error(), "gale serve") {
		t.Errorf("got %v; want the missing file named", err)
	}
}

// A flag out of SendAll's bounds is refused by its name before any file is
// opened or server asked (SendAll names the option's field, which a user of
// gale ingest never typed).
func TestIngestFlagsOutOfBounds(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "missing.csv")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--workers", "5000"}, "--workers 5000: want 1 to 1024 requests in flight"},
		{[]string{"--batch", "0"}, "--batch 0: want 1 to 100000 events a request"},
		{[]string{"--wait", "11m"}, "--wait 11m0s: want 0 (the server's default) to 10m0s"},
		{[]string{"--give-up-after", "-1s"}, "--give-up-after -1s: want 0 (never) or more"},
	} {
		_, _, err := runIngestCmd(t, append(append([]string{"--url", "http://" + freeAddr(t)}, c.args...), missing)...)
		if err == nil || err.Error() != c.want {
			t.Errorf("%v: %v; want %q", c.args, err, c.want)
		}
	}
}

// TestIngestAgainstServe: the real command against a real gale serve: every event
// PROCESSED, a rate that is a number, no retries.
func TestIngestAgainstServe(t *testing.T) {
	c := startChild(t, "serve", "--pipeline", "orders", "--data", t.TempDir(), "--addr", freeAddr(t), "--log-level", "error")
	defer termChild(t, c)
	stdout, stderr, err := runIngestCmd(t, "--url", c.url, smallRetail(t, 40))
	if err != nil {
		t.Fatalf("%v\n%s%s", err, stdout, stderr)
	}
	if !regexp.MustCompile(`events sent: 40 in [0-9.]+s \([0-9]+/s\)\n  PROCESSED         40\n`).MatchString(stdout) ||
		!strings.Contains(stdout, "retried requests: 0 (0 after the request failed), 0 events re-sent") {
		t.Errorf("report:\n%s", stdout)
	}
	if stderr != "" {
		t.Errorf("stderr of a run without retries on a non-terminal: %q", stderr)
	}
}

func termChild(t *testing.T, c *child) {
	t.Helper()
	if c.cmd.ProcessState != nil {
		return
	}
	if err := c.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Error(err)
	}
	if err := c.cmd.Wait(); err != nil {
		t.Errorf("gale serve: %v\n%s", err, c.stderr.String())
	}
}

// TestIngestServerKilled: gale serve is killed (SIGKILL, by pid) in the middle of a
// run. Every retry of the requests it no longer answers is printed as it happens
// and counted, and the run stops after --give-up-after with an error saying why.
func TestIngestServerKilled(t *testing.T) {
	c := startChild(t, "serve", "--pipeline", "orders", "--data", t.TempDir(), "--addr", freeAddr(t), "--log-level", "error")
	type result struct {
		stdout, stderr string
		err            error
	}
	done := make(chan result, 1)
	go func() {
		files := retailFiles(t)
		o, e, err := runIngestCmd(t, append([]string{"--url", c.url, "--batch", "10", "--workers", "1",
			"--retries", "1000", "--give-up-after", "3s"}, files...)...)
		done <- result{o, e, err}
	}()
	// Until the first event is PROCESSED.
	waitProcessed(t, context.Background(), time.Minute, &ingest.Client{URL: c.url}, []string{"2010-12-01:1"}, nil)
	if err := syscall.Kill(c.cmd.Process.Pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = c.cmd.Wait()
	r := <-done
	if !errors.Is(r.err, ingest.ErrNoProgress) || !strings.Contains(r.err.Error(), "--give-up-after") || !strings.Contains(r.err.Error(), "connection refused") {
		t.Errorf("error %v; want no progress after --give-up-after, naming the last error", r.err)
	}
	retries := regexp.MustCompile(`(?m)^gale ingest: retry (\d+): request for \S+ \(10 events\) failed: .*; sending again in `).FindAllStringSubmatch(r.stderr, -1)
	if !strings.Contains(r.stderr, "connect: connection refused; sending again in") {
		t.Errorf("no retry after connection refused printed:\n%s", r.stderr)
	}
	m := regexp.MustCompile(`retried requests: (\d+) \((\d+) after the request failed\), (\d+) events re-sent`).FindStringSubmatch(r.stdout)
	if len(retries) == 0 || m == nil {
		t.Fatalf("no retry printed or no count in the report\nstdout:\n%s\nstderr:\n%s", r.stdout, r.stderr)
	}
	n, _ := strconv.Atoi(m[1])
	failed, _ := strconv.Atoi(m[2])
	resent, _ := strconv.Atoi(m[3])
	last, _ := strconv.Atoi(retries[len(retries)-1][1])
	if n != len(retries) || failed != n || last != n || resent != 10*n {
		t.Errorf("report says %d retried requests (%d after a failure, %d events re-sent); stderr printed %d, the last numbered %d\n%s",
			n, failed, resent, len(retries), last, r.stderr)
	}
	if strings.Contains(r.stdout, "NaN") || strings.Contains(r.stdout, "Inf") {
		t.Errorf("report:\n%s", r.stdout)
	}
}

// TestIngestProgressLine: on a terminal the status line is rewritten in place and
// cleared before a line that stays; elsewhere only the lines that stay are written.
func TestIngestProgressLine(t *testing.T) {
	var b bytes.Buffer
	p := &IngestProgress{w: &b, prefix: "gale ingest", tty: true}
	p.status(true, "sent %d events", 500)
	p.say("retry %d", 1)
	p.status(true, "sent %d events", 1000)
	p.end()
	want := "\rgale ingest: sent 500 events\033[K\r\033[Kgale ingest: retry 1\n\rgale ingest: sent 1000 events\033[K\r\033[K"
	if b.String() != want {
		t.Errorf("terminal output %q, want %q", b.String(), want)
	}
	b.Reset()
	p = &IngestProgress{w: &b, prefix: "gale ingest"}
	p.status(true, "sent %d events", 500)
	p.say("retry %d", 1)
	p.end()
	if b.String() != "gale ingest: retry 1\n" {
		t.Errorf("plain output %q", b.String())
	}
	null, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer null.Close()
	if IsTerminal(null) {
		t.Errorf("%s taken for a terminal", os.DevNull)
	}
}

// TestIngestReportRate: a report over no time, or of no events, prints no rate
// rather than NaN/s or +Inf/s.
func TestIngestReportRate(t *testing.T) {
	for _, r := range []ingest.Report{{}, {Sent: 5}, {Sent: 0, Elapsed: time.Second}} {
		var b bytes.Buffer
		PrintIngestReport(&b, &r)
		if first, _, _ := strings.Cut(b.String(), "\n"); strings.Contains(first, "NaN") || strings.Contains(first, "Inf") || strings.Contains(first, "/s") {
			t.Errorf("%+v: %q", r, first)
		}
	}
	var b bytes.Buffer
	PrintIngestReport(&b, &ingest.Report{Sent: 500, Elapsed: 2 * time.Second})
	if !strings.HasPrefix(b.String(), "events sent: 500 in 2.00s (250/s)\n") {
		t.Errorf("%q", b.String())
	}
}
