package flux_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gale-stream/gale/flux"
)

// TestLoadRefusesSpecialFiles: a topology file, an include or a --filter file that
// is a FIFO or a device is refused at once; reading one blocked for good (a FIFO)
// or until memory ran out (/dev/zero).
func TestLoadRefusesSpecialFiles(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo.yaml")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skip("mkfifo:", err)
	}
	top := filepath.Join(dir, "top.yaml")
	os.WriteFile(top, []byte("name: x\nincludes:\n  - file: fifo.yaml\n"), 0o644)
	for _, c := range []struct {
		path string
		o    flux.Options
		want string
	}{
		{fifo, flux.Options{}, fifo + ":1:1: not a regular file (a FIFO)"},
		{top, flux.Options{}, top + `:3:11: include "fifo.yaml": not a regular file (a FIFO)`},
		{top, flux.Options{Filter: fifo}, fifo + ":1:1: --filter: not a regular file (a FIFO)"},
		{top, flux.Options{Filter: "/dev/zero"}, "/dev/zero:1:1: --filter: not a regular file (a device)"},
	} {
		done := make(chan error, 1)
		go func() { _, err := flux.Load(c.path, c.o); done <- err }()
		select {
		case err := <-done:
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("Load(%s, %+v): %v, want %s", c.path, c.o, err, c.want)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("Load(%s, %+v) still reading after 5s", c.path, c.o)
		}
	}
}

// TestLoadBoundsAliases: aliases may not expand a file without bound. Each value
// is decoded apart, so the decoder's own bound (per decoded value) let 20,000
// config keys, each an alias of ~900 nodes, take gigabytes.
func TestLoadBoundsAliases(t *testing.T) {
	var b strings.Builder
	b.WriteString("name: lol\nconfig:\n  a0: &a0 [l, l, l, l, l, l, l, l, l, l]\n")
	b.WriteString("  a1: &a1 [*a0, *a0, *a0, *a0, *a0, *a0, *a0, *a0, *a0, *a0]\n")
	b.WriteString("  a2: &a2 [*a1, *a1, *a1, *a1, *a1, *a1, *a1, *a1]\n")
	for i := range 20000 {
		fmt.Fprintf(&b, "  k%d: *a2\n", i)
	}
	path := filepath.Join(t.TempDir(), "lol.yaml")
	os.WriteFile(path, []byte(b.String()), 0o644)
	_, err := flux.Load(path, flux.Options{})
	// a2 holds 889 nodes: with a1's and a2's own aliases (998 nodes), the 112th
	// alias of a2 (k111, line 117) passes 100,000.
	want := path + ":117:9: aliases expand to more than 100000 nodes"
	if err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Fatalf("Load: %v, want %s...", err, want)
	}
}
