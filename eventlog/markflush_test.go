package eventlog

import (
	"os"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// syncOrder records, in order, the mark's write-backs and the WAL file's syncs.
type syncOrder struct {
	vfs.File
	ops *[]string
}

func (f syncOrder) Sync() error     { *f.ops = append(*f.ops, "wal sync"); return nil }
func (f syncOrder) SyncData() error { *f.ops = append(*f.ops, "wal syncdata"); return nil }

// A WAL sync writes the mark back before it syncs the WAL: the WAL's flush must
// begin after the slot reached the device, or it does not cover the slot.
func TestWALSyncWritesMarkBackFirst(t *testing.T) {
	var ops []string
	hook := &markHook{}
	fs := markFS{FS: vfs.NewMem(), hook: hook}
	f, err := fs.Create("000001.log", "pebble-wal")
	if err != nil {
		t.Fatal(err)
	}
	w, ok := f.(walFile)
	if !ok {
		t.Fatalf("Create of a WAL returned %T, want walFile", f)
	}
	w.File = syncOrder{File: w.File, ops: &ops}
	if err := w.SyncData(); err != nil { // before Open made the mark: nothing to write back
		t.Fatal(err)
	}
	hook.h.Store(&hwm{path: "GALE-HWM", writeBack: func(_, _ vfs.File) error { ops = append(ops, "mark write-back"); return nil }})
	if err := w.SyncData(); err != nil {
		t.Fatal(err)
	}
	if err := w.Sync(); err != nil {
		t.Fatal(err)
	}
	want := []string{"wal syncdata", "mark write-back", "wal syncdata", "mark write-back", "wal sync"}
	if strings.Join(ops, ",") != strings.Join(want, ",") {
		t.Fatalf("order %q, want %q", ops, want)
	}
	other, err := fs.Create("000002.sst", "pebble-sst")
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := other.(walFile); ok {
		t.Fatal("an SST's syncs write the mark back too")
	}
}

// Riding the WAL's flush, a failed write-back of the mark fails the WAL's sync:
// the append is answered with the sticky ErrFailed naming the mark file, never
// PERSISTED, and a restart from what is durable opens cleanly.
func TestMarkWriteBackFailureIsSticky(t *testing.T) {
	mem := vfs.NewCrashableMem()
	var failing atomic.Bool
	l := openT(t, mem, func(o *Options) {
		o.markWriteBack = func(f, _ vfs.File) error {
			if failing.Load() {
				return syscall.EIO
			}
			return f.SyncData()
		}
	})
	if s := l.Stats().MarkSync; !strings.HasPrefix(s, "wal-flush") {
		t.Fatalf("MarkSync = %q, want wal-flush", s)
	}
	markFailureIsSticky(t, mem, l, &failing)
}

// On real files the mode follows the file system: ext4 rides the WAL's flush,
// tmpfs and Options.SeparateMarkSync get the mark's own fdatasync.
func TestMarkSyncModeOnRealFiles(t *testing.T) {
	cases := []struct {
		name, dir string
		separate  bool
	}{
		{"tempdir", t.TempDir(), false},
		{"separate", t.TempDir(), true},
	}
	if shm := "/dev/shm"; isTmpfs(shm) {
		d, err := os.MkdirTemp(shm, "gale-mark")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = os.RemoveAll(d) })
		cases = append(cases, struct {
			name, dir string
			separate  bool
		}{"tmpfs", d, false})
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			l, err := Open(Options{Dir: c.dir + "/log", SeparateMarkSync: c.separate})
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			got := l.Stats().MarkSync
			var want string
			switch {
			case c.separate:
				want = "fdatasync: Options.SeparateMarkSync"
			case isExt4(c.dir) && ext4FallsBack(t, c.dir):
				want = "fdatasync: ext4 on " // e.g. a root file system made with fast_commit
			case isExt4(c.dir):
				want = "wal-flush: ext4 on "
			default:
				want = "fdatasync: "
			}
			if !strings.HasPrefix(got, want) {
				t.Fatalf("MarkSync = %q, want it to start with %q", got, want)
			}
			acked := appendEach(t, l, c.name, 50)
			if l.Durable() != uint64(len(acked)) {
				t.Fatalf("Durable = %d, want %d", l.Durable(), len(acked))
			}
			t.Logf("%s: %s", c.dir, got)
		})
	}
}
