package eventlog

import (
	"fmt"
	"strings"
	"sync/atomic"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// Where the mark rides the WAL's flush (hwm.go), every sync of a Pebble WAL first
// writes the mark file back: a group's slot is written before its WAL write, so
// the sync that makes the group durable begins after the slot reached the device,
// and its cache flush makes the slot durable too. One flush per group commit
// instead of two.

// markFS is the file system Pebble is given: the WALs it creates sync the mark
// first.
type markFS struct {
	vfs.FS
	hook *markHook
}

func (fs markFS) Create(name string, category vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := fs.FS.Create(name, category)
	return fs.wrap(name, f, err)
}

func (fs markFS) ReuseForWrite(oldname, newname string, category vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := fs.FS.ReuseForWrite(oldname, newname, category)
	return fs.wrap(newname, f, err)
}

func (fs markFS) Unwrap() vfs.FS { return fs.FS }

func (fs markFS) wrap(name string, f vfs.File, err error) (vfs.File, error) {
	if err != nil || !strings.HasSuffix(name, ".log") {
		return f, err
	}
	return walFile{File: f, hook: fs.hook}, nil
}

// walFile is a WAL whose syncs write the mark back first.
type walFile struct {
	vfs.File
	hook *markHook
}

func (f walFile) Sync() error {
	if err := f.hook.writeBack(f.File); err != nil {
		return err
	}
	return f.File.Sync()
}

func (f walFile) SyncData() error {
	if err := f.hook.writeBack(f.File); err != nil {
		return err
	}
	return f.File.SyncData()
}

// markHook holds the mark file once Open made it, if it rides the WAL's flush.
type markHook struct {
	h atomic.Pointer[hwm]
}

func (k *markHook) writeBack(wal vfs.File) error {
	h := k.h.Load()
	if h == nil || h.writeBack == nil {
		return nil
	}
	if err := h.writeBack(h.f, wal); err != nil {
		return fmt.Errorf("write back high-water mark %s: %w", h.path, err)
	}
	return nil
}
