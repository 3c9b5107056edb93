package eventlog

import (
	"hash/maphash"
	"math/bits"
	"sync/atomic"
)

// idFilter is an in-memory blocked Bloom filter over every event id in the dedupe
// index, so the common case of a new id (a miss) costs one cache line instead of a
// Pebble Get: with hundreds of thousands of ids in the memtable a miss measured
// ~22µs (BenchmarkLookupMiss), nearly all of it skiplist cache misses. Ids are
// added before their batch is applied, never removed (trimmed ids stay as false
// positives until the next Open rebuilds it), so "absent" is always true. Safe for
// one writer and many readers (atomic words).
type idFilter struct {
	seed   maphash.Seed
	blocks []atomic.Uint64 // 8 words (one 64-byte cache line) per block
	mask   uint64          // number of blocks - 1
}

const filterProbes = 6

// newIDFilter sizes the filter to bytes (rounded up to a power of two, at least 64).
func newIDFilter(bytes int) *idFilter {
	nBlocks := uint64(1)
	for nBlocks*64 < uint64(bytes) {
		nBlocks <<= 1
	}
	return &idFilter{seed: maphash.MakeSeed(), blocks: make([]atomic.Uint64, nBlocks*8), mask: nBlocks - 1}
}

func (f *idFilter) locate(id string) (base uint64, h uint64) {
	h = maphash.String(f.seed, id)
	return (h & f.mask) * 8, bits.RotateLeft64(h, 32)
}

// add records id.
func (f *idFilter) add(id string) {
	base, h := f.locate(id)
	for i := 0; i < filterProbes; i++ {
		bit := (h >> (i * 9)) & 511 // 9 bits pick one of the block's 512 bits
		f.blocks[base+bit/64].Or(1 << (bit % 64))
	}
}

// mayContain is false only if id was never added.
func (f *idFilter) mayContain(id string) bool {
	base, h := f.locate(id)
	for i := 0; i < filterProbes; i++ {
		bit := (h >> (i * 9)) & 511
		if f.blocks[base+bit/64].Load()&(1<<(bit%64)) == 0 {
			return false
		}
	}
	return true
}
