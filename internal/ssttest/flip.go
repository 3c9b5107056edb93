// Package ssttest damages Pebble SST files for tests: one flipped bit inside a
// chosen data block, the smallest fault a block checksum must catch.
package ssttest

import (
	"context"
	"fmt"

	"github.com/cockroachdb/pebble/v2/sstable"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// DataBlocks is the number of data blocks of the SST at path.
func DataBlocks(fs vfs.FS, path string) (int, error) {
	l, err := layout(fs, path)
	if err != nil {
		return 0, err
	}
	return len(l.Data), nil
}

func layout(fs vfs.FS, path string) (*sstable.Layout, error) {
	f, err := fs.Open(path)
	if err != nil {
		return nil, err
	}
	readable, err := sstable.NewSimpleReadable(f)
	if err != nil {
		_ = f.Close()
		return nil, err
	}
	r, err := sstable.NewReader(context.Background(), readable, sstable.ReaderOptions{})
	if err != nil {
		_ = readable.Close()
		return nil, fmt.Errorf("ssttest: %s: %w", path, err)
	}
	defer r.Close()
	return r.Layout()
}

// FlipDataBlockBit flips one bit in the middle of data block i of the SST at path
// (i < 0 counts from the end: -1 is the block of the largest keys) and syncs the
// file. It returns the offset flipped.
func FlipDataBlockBit(fs vfs.FS, path string, i int) (int64, error) {
	l, err := layout(fs, path)
	if err != nil {
		return 0, err
	}
	if i < 0 {
		i += len(l.Data)
	}
	if i < 0 || i >= len(l.Data) {
		return 0, fmt.Errorf("ssttest: %s has %d data blocks, no block %d", path, len(l.Data), i)
	}
	h := l.Data[i].Handle
	off := int64(h.Offset + h.Length/2)
	rw, err := fs.OpenReadWrite(path, vfs.WriteCategoryUnspecified)
	if err != nil {
		return 0, err
	}
	b := make([]byte, 1)
	if _, err := rw.ReadAt(b, off); err != nil {
		_ = rw.Close()
		return 0, err
	}
	b[0] ^= 0x10
	if _, err := rw.WriteAt(b, off); err != nil {
		_ = rw.Close()
		return 0, err
	}
	if err := rw.Sync(); err != nil {
		_ = rw.Close()
		return 0, err
	}
	return off, rw.Close()
}
