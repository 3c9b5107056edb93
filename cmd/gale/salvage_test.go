package main

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
