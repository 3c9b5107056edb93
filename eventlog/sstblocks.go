package eventlog

import (
	"bytes"
	"context"
	"fmt"
	"slices"

	"github.com/cockroachdb/pebble/v2/sstable"
	"github.com/cockroachdb/pebble/v2/sstable/block"
	"github.com/cockroachdb/pebble/v2/sstable/block/blockkind"
	"github.com/cockroachdb/pebble/v2/sstable/colblk"
	"github.com/cockroachdb/pebble/v2/sstable/rowblk"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// damagedBlock is the key range of the first data block of the SST at path, from
// the one that may hold key on, that fails to read (its checksum, or a read
// error): from just after the previous block's separator (nil for the first
// block) to the block's separator. It is an error if the index cannot be read or
// every block from key on reads fine.
func damagedBlock(fs vfs.FS, path string, key []byte) (from, to []byte, err error) {
	defer recoverPebble(&err)
	r, err := openSST(fs, path)
	if err != nil {
		return nil, nil, err
	}
	defer r.Close()
	seps, handles, err := dataBlocks(r, path)
	if err != nil {
		return nil, nil, err
	}
	// key may lie after the last key of block i (before its separator): then
	// the damage is further on, so each block is read by its handle.
	i, _ := slices.BinarySearchFunc(seps, key, bytes.Compare)
	for ; i < len(seps); i++ {
		if err := readBlock(r, handles[i], blockkind.SSTableData); err != nil {
			if i > 0 {
				from = append(slices.Clone(seps[i-1]), 0)
			}
			return from, seps[i], nil
		}
	}
	return nil, nil, fmt.Errorf("%s: every data block from %q on reads fine", path, key)
}

func openSST(fs vfs.FS, path string) (*sstable.Reader, error) {
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
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	return r, nil
}

func noMetadata(*block.Metadata, []byte) error { return nil }

// readBlock reads (and so checksums) the block at bh.
func readBlock(r *sstable.Reader, bh block.Handle, kind blockkind.Kind) error {
	h, err := r.BlockReader().Read(context.Background(), block.NoReadEnv, nil, bh, kind, noMetadata)
	if err != nil {
		return err
	}
	h.Release()
	return nil
}

// dataBlocks are the index separators and handles of the data blocks of r, in
// order: data block i holds the keys k with sep[i-1] < k <= sep[i].
func dataBlocks(r *sstable.Reader, path string) (seps [][]byte, handles []block.Handle, err error) {
	l, err := r.Layout()
	if err != nil {
		return nil, nil, fmt.Errorf("layout of %s: %w", path, err)
	}
	format, err := r.TableFormat()
	if err != nil {
		return nil, nil, err
	}
	for _, bh := range l.Index { // the second-level index blocks of a two-level index
		h, err := r.BlockReader().Read(context.Background(), block.NoReadEnv, nil, bh, blockkind.SSTableIndex, noMetadata)
		if err != nil {
			return nil, nil, fmt.Errorf("index block of %s at %d: %w", path, bh.Offset, err)
		}
		var it block.IndexBlockIterator
		if format.BlockColumnar() {
			it = &colblk.IndexIter{}
		} else {
			it = &rowblk.IndexIter{}
		}
		if err := it.Init(r.Comparer, h.BlockData(), block.NoTransforms); err != nil {
			h.Release()
			return nil, nil, fmt.Errorf("index block of %s at %d: %w", path, bh.Offset, err)
		}
		for ok := it.First(); ok; ok = it.Next() {
			seps = append(seps, bytes.Clone(it.Separator()))
		}
		_ = it.Close()
		h.Release()
	}
	if len(seps) != len(l.Data) {
		return nil, nil, fmt.Errorf("%s: %d index separators for %d data blocks", path, len(seps), len(l.Data))
	}
	for _, d := range l.Data {
		handles = append(handles, d.Handle)
	}
	return seps, handles, nil
}

// blockSeparators are the index separators of the data blocks of the SST at path.
func blockSeparators(fs vfs.FS, path string) (seps [][]byte, err error) {
	defer recoverPebble(&err)
	r, err := openSST(fs, path)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	seps, _, err = dataBlocks(r, path)
	return seps, err
}
