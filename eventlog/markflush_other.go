//go:build !linux

package eventlog

import "github.com/cockroachdb/pebble/v2/vfs"

// walFlushable: only Linux's ext4 is known to make the mark durable with the
// WAL's flush (markflush_linux.go); elsewhere the mark gets its own fdatasync.
func walFlushable(vfs.File, string) (bool, string) { return false, "not Linux" }

func writeBack(mark, _ vfs.File) error { return mark.SyncData() }
