package flux_test

import (
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
