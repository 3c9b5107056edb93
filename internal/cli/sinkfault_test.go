package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/gale-stream/gale/event"
	"github.com/gale-stream/gale/ingest"
	"github.com/gale-stream/gale/pipelines/events"

	"github.com/gale-stream/gale/internal/mounttest"
	serve "github.com/gale-stream/gale/server"
)

// servedLog runs gale serve on a fresh data directory, has it process n events of
// about pad bytes each, stops it and returns the directory.
func servedLog(t *testing.T, n, pad int) string {
	t.Helper()
	dir := t.TempDir()
	s, err := serve.Start(context.Background(), serve.Options{Addr: "127.0.0.1:0", DataDir: dir, Pipeline: events.Pipeline()})
	if err != nil {
		t.Fatal(err)
	}
	var evs []event.Event
	for i := range n {
		evs = append(evs, event.Event{ID: fmt.Sprintf("f%04d", i), Source: "test", Type: "t",
			Payload: []byte(`{"pad":"` + strings.Repeat("x", pad) + `"}`)})
	}
	for i := 0; i < n; i += 100 {
		for _, r := range s.Service.Submit(context.Background(), evs[i:min(i+100, n)], ingest.LevelProcessed, time.Minute) {
			if r.Err != nil || r.Status.Status != ingest.Processed {
				t.Fatalf("%s: %v %v", r.Status.EventID, r.Status.Status, r.Err)
			}
		}
	}
	if err := s.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	return dir
}

// rebuildBounded runs `gale sink rebuild` with args and returns its error and
// output; a rebuild still running after a minute (the fault: it hung) fails the
// test, after cancelling it.
func rebuildBounded(t *testing.T, args ...string) (error, string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out bytes.Buffer
	cmd := newRoot()
	cmd.SetOut(&out)
	cmd.SetArgs(append([]string{"sink", "rebuild"}, args...))
	done := make(chan error, 1)
	go func() { done <- cmd.ExecuteContext(ctx) }()
	select {
	case err := <-done:
		return err, out.String()
	case <-time.After(time.Minute):
		cancel()
		err := <-done
		t.Fatalf("gale sink rebuild %s still running after a minute: it hangs (after cancelling: %v; output %q)", strings.Join(args, " "), err, out.String())
		return nil, ""
	}
}

// checkGaveUp checks a rebuild that stopped at a sink-wide error: exit 2 (a plain
// error), naming the database, its error and the records not written.
func checkGaveUp(t *testing.T, err error, out, db, dbErr string, n int) {
	t.Helper()
	if err == nil {
		t.Fatalf("rebuild into a failing database succeeded: %s", out)
	}
	var ee ExitError
	if errors.As(err, &ee) {
		t.Fatalf("rebuild exit %d, want 2 (a message naming the database error): %v\n%s", ee.Code, err, out)
	}
	msg := err.Error()
	t.Logf("rebuild: %s\n%s", msg, out)
	for _, want := range []string{db, dbErr, "not written", "run it again"} {
		if !strings.Contains(msg, want) {
			t.Errorf("rebuild error %q does not say %q", msg, want)
		}
	}
	if !strings.Contains(msg, fmt.Sprintf("of %d records", n)) {
		t.Errorf("rebuild error %q does not say how many of the %d records were written", msg, n)
	}
}

// Issue 9's review, finding E: a rebuild into a damaged SQLite database (garbage
// over its pages, as a failing disk leaves it) hung forever with no output: the
// sink held the batch and retried the outage without end, as gale serve must, but
// no one repairs a database during a rebuild. Now the outage ends the rebuild after
// --give-up-after with exit 2 and a message naming the database error and what was
// not written; no record is charged for it.
func TestSinkRebuildIntoADamagedDatabaseEnds(t *testing.T) {
	const n = 300
	dir := servedLog(t, n, 2000)
	// gale serve's own sink.db, damaged: garbage over every page but the first
	// (the header and the schema, so the tables are found and their b-trees are not).
	path := filepath.Join(dir, "sink.db")
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	fi, _ := f.Stat()
	if fi.Size() < 8*4096 {
		t.Fatalf("sink.db is only %d bytes", fi.Size())
	}
	if _, err := f.WriteAt(bytes.Repeat([]byte{0xa5}, int(fi.Size())-4096), 4096); err != nil {
		t.Fatal(err)
	}
	f.Close()
	err, out := rebuildBounded(t, "--data", dir, "--sink", path, "--give-up-after", "1s")
	checkGaveUp(t, err, out, path, "malformed", n)
}

// needRootWith skips unless the test runs as root with every tool in PATH (what
// says what for); GALE_TEST_LOOP=1 (.ci/run sets it) makes that a failure. It
// returns the skip, or failure, for a further check of the caller's.
func needRootWith(t *testing.T, what string, tools ...string) func(string, ...any) {
	t.Helper()
	skip := t.Skipf
	if os.Getenv("GALE_TEST_LOOP") == "1" {
		skip = t.Fatalf
	}
	if why := mounttest.Missing(); why != "" {
		skip("%s (%s)", why, what)
	}
	for _, tool := range tools {
		if _, err := exec.LookPath(tool); err != nil {
			skip("needs %s in PATH: %v", tool, err)
		}
	}
	return skip
}

// Finding E on a full filesystem: a rebuild into a fresh database on a 300 KiB
// tmpfs hung forever ("database or disk is full" retried without end); now it ends
// with exit 2 naming the error and what was not written.
func TestSinkRebuildOntoAFullDiskEnds(t *testing.T) {
	needRootWith(t, "to mount a small tmpfs", "mount", "umount")
	const n = 300
	dir := servedLog(t, n, 2000)
	mnt := t.TempDir()
	sh(t, "mount", "-t", "tmpfs", "-o", "size=300k", "gale-test-sink", mnt)
	t.Cleanup(func() {
		if err := exec.Command("umount", mnt).Run(); err != nil {
			_ = exec.Command("umount", "-l", mnt).Run()
		}
	})
	path := filepath.Join(mnt, "rebuilt.db")
	err, out := rebuildBounded(t, "--data", dir, "--sink", path, "--give-up-after", "1s")
	checkGaveUp(t, err, out, path, "full", n)
}

// A --timeout too short for the sink's transaction bound (a third of it) is refused
// with the reason, before anything starts (review finding F).
func TestSinkServeRefusesATimeoutTooShortForTheSink(t *testing.T) {
	var f ServeFlags
	c := &cobra.Command{}
	f.Register(c, "127.0.0.1:0")
	if err := c.Flags().Parse([]string{"--timeout", "100ms"}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Options(galeApp().pipeline); err == nil || !strings.Contains(err.Error(), "--timeout 100ms: at least 300ms") {
		t.Fatalf("--timeout 100ms: %v, want it refused naming the sink's bound", err)
	}
	if err := c.Flags().Parse([]string{"--timeout", "2s"}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Options(galeApp().pipeline); err != nil {
		t.Fatalf("--timeout 2s: %v", err)
	}
}

// --data ” was taken as ./log; now gale serve and gale sink rebuild refuse it.
func TestSinkEmptyDataIsRefused(t *testing.T) {
	var f ServeFlags
	c := &cobra.Command{}
	f.Register(c, "127.0.0.1:0")
	if err := c.Flags().Parse([]string{"--data", ""}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Options(galeApp().pipeline); err == nil || !strings.Contains(err.Error(), "--data is empty") {
		t.Fatalf("serve --data '': %v", err)
	}
	_, err := galeApp().rebuildSink(context.Background(), rebuildOptions{sinkURL: filepath.Join(t.TempDir(), "x.db"), from: 1})
	if err == nil || !strings.Contains(err.Error(), "--data is empty") {
		t.Fatalf("rebuild --data '': %v", err)
	}
}
