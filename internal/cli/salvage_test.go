package cli

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gale-stream/gale/event"
	"github.com/gale-stream/gale/eventlog"
)

// gale log salvage on a healthy log used to move it aside as log.damaged-<time>
// with no word: it refuses now, changing nothing, unless --force.
func TestLogSalvageRefusesAnIntactLogWithoutForce(t *testing.T) {
	dir := t.TempDir()
	l, err := eventlog.Open(eventlog.Options{Dir: filepath.Join(dir, "log")})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		e := event.Event{ID: fmt.Sprintf("ok-%d", i), Source: "test", Type: "t", Payload: []byte(`{}`)}
		if err := l.Append(context.Background(), &event.Record{ReceivedAt: 1, Event: e, Hash: e.Hash()}); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	before := treeHash(t, filepath.Join(dir, "log"))
	out, errOut, code := runToEnd(t, "log", "salvage", "--data", dir)
	if code != 2 || !strings.Contains(errOut, "is intact") || !strings.Contains(errOut, "--force") {
		t.Fatalf("gale log salvage of an intact log: exit %d, want 2 saying it is intact and naming --force:\n%s%s", code, out, errOut)
	}
	if after := treeHash(t, filepath.Join(dir, "log")); after != before {
		t.Fatal("the refused salvage changed the log")
	}
	if aside, _ := filepath.Glob(filepath.Join(dir, "log.damaged-*")); len(aside) != 0 {
		t.Fatalf("the refused salvage moved the log aside: %v", aside)
	}
	out, errOut, code = runToEnd(t, "log", "salvage", "--data", dir, "--force")
	if code != 0 || !strings.Contains(out, "lost: nothing acknowledged") {
		t.Fatalf("gale log salvage --force: exit %d:\n%s%s", code, out, errOut)
	}
	if aside, _ := filepath.Glob(filepath.Join(dir, "log.damaged-*")); len(aside) != 1 {
		t.Fatalf("--force: the old log is not kept aside: %v", aside)
	}
	if _, err := os.Stat(filepath.Join(dir, "log")); err != nil {
		t.Fatal(err)
	}
}

// gale log check exits 0 on an intact log, and 2, naming why, on one it cannot
// read: locked by a running gale, or not there (and it creates nothing). gale serve
// and gale sink rebuild name the lock too.
func TestLogCheckExitCodes(t *testing.T) {
	dir := t.TempDir()
	l, err := eventlog.Open(eventlog.Options{Dir: filepath.Join(dir, "log")})
	if err != nil {
		t.Fatal(err)
	}
	e := event.Event{ID: "ok-1", Source: "test", Type: "t", Payload: []byte(`{}`)}
	if err := l.Append(context.Background(), &event.Record{ReceivedAt: 1, Event: e, Hash: e.Hash()}); err != nil {
		t.Fatal(err)
	}
	out, errOut, code := runToEnd(t, "log", "check", "--data", dir)
	if code != 2 || !strings.Contains(errOut, "locked by another process") || !strings.Contains(errOut, "stop gale serve first") {
		t.Fatalf("gale log check of a log held open: exit %d, want 2 naming the lock:\n%s%s", code, out, errOut)
	}
	if out, errOut, code := runToEnd(t, "serve", "--data", dir, "--addr", freeAddr(t)); code == 0 || !strings.Contains(errOut, "is locked: is another gale using --data") {
		t.Fatalf("gale serve on a log held open: exit %d, want it to name the lock:\n%s%s", code, out, errOut)
	}
	if out, errOut, code := runToEnd(t, "sink", "rebuild", "--data", dir, "--sink", filepath.Join(t.TempDir(), "r.db")); code == 0 || !strings.Contains(errOut, "is locked: stop gale serve") {
		t.Fatalf("gale sink rebuild on a log held open: exit %d, want it to name the lock:\n%s%s", code, out, errOut)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	out, errOut, code = runToEnd(t, "log", "check", "--data", dir)
	if code != 0 || !strings.Contains(out, "result: intact") {
		t.Fatalf("gale log check of an intact log: exit %d, want 0 and result: intact:\n%s%s", code, out, errOut)
	}
	missing := filepath.Join(dir, "nothing-here")
	out, errOut, code = runToEnd(t, "log", "check", "--data", missing)
	if code != 2 || !strings.Contains(errOut, filepath.Join(missing, "log")) {
		t.Fatalf("gale log check of a missing log: exit %d, want 2 naming %s:\n%s%s", code, filepath.Join(missing, "log"), out, errOut)
	}
	if _, err := os.Stat(missing); !os.IsNotExist(err) {
		t.Fatalf("gale log check of a missing log created %s (%v)", missing, err)
	}
}
