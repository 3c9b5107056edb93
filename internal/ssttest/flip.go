// Package ssttest damages Pebble SST files for tests: one flipped bit inside a
// chosen data block, the smallest fault a block checksum must catch.
package ssttest

import (
	"bytes"
	"context"
	"fmt"

	"github.com/cockroachdb/pebble/v2/sstable"
	"github.com/cockroachdb/pebble/v2/sstable/block"
	"github.com/cockroachdb/pebble/v2/sstable/block/blockkind"
	"github.com/cockroachdb/pebble/v2/sstable/colblk"
	"github.com/cockroachdb/pebble/v2/sstable/rowblk"
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

// DataBlockSeparators are the index separators of the data blocks of the SST at
// path, in order: data block i holds the keys k with seps[i-1] < k <= seps[i]. A
// test finds with them which blocks hold keys of one kind only, without flipping
// a bit in each block to see what a check of the store names.
func DataBlockSeparators(fs vfs.FS, path string) (seps [][]byte, err error) {
	r, err := open(fs, path)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	l, err := r.Layout()
	if err != nil {
		return nil, err
	}
	format, err := r.TableFormat()
	if err != nil {
		return nil, err
	}
	for _, bh := range l.Index { // the index block, or the second-level ones
		h, err := r.BlockReader().Read(context.Background(), block.NoReadEnv, nil, bh, blockkind.SSTableIndex,
			func(*block.Metadata, []byte) error { return nil })
		if err != nil {
			return nil, fmt.Errorf("ssttest: index block of %s at %d: %w", path, bh.Offset, err)
		}
		var it block.IndexBlockIterator
		if format.BlockColumnar() {
			it = &colblk.IndexIter{}
		} else {
			it = &rowblk.IndexIter{}
		}
		if err := it.Init(r.Comparer, h.BlockData(), block.NoTransforms); err != nil {
			h.Release()
			return nil, fmt.Errorf("ssttest: index block of %s at %d: %w", path, bh.Offset, err)
		}
		for ok := it.First(); ok; ok = it.Next() {
			seps = append(seps, bytes.Clone(it.Separator()))
		}
		_ = it.Close()
		h.Release()
	}
	if len(seps) != len(l.Data) {
		return nil, fmt.Errorf("ssttest: %s: %d index separators for %d data blocks", path, len(seps), len(l.Data))
	}
	return seps, nil
}

func layout(fs vfs.FS, path string) (*sstable.Layout, error) {
	r, err := open(fs, path)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	return r.Layout()
}

// open opens the SST at path for reading; closing the reader closes the file.
func open(fs vfs.FS, path string) (*sstable.Reader, error) {
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
	return r, nil
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
