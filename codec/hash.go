package codec

import (
	"math"
	"sync"
	"time"

	"github.com/gale-stream/gale/tuple"
)

// FNV-1a, 64 bits.
const (
	// FNVOffset is the FNV-1a 64-bit offset basis: the hash of nothing, where a
	// HashValue chain starts.
	FNVOffset uint64 = 14695981039346656037
	fnvPrime  uint64 = 1099511628211
)

// fieldSep is folded after each field by FieldsHash.
const fieldSep = 0xff

// HashValue folds into h (FNV-1a 64) exactly the bytes AppendValue produces for v,
// with one change: a float -0.0 anywhere in v is hashed as +0.0, so that the keys
// -0.0 and 0.0, equal in Go, go to one task. The hash is therefore the same in every
// process and every release that keeps the encoding of v's type: a codec version that
// changes the encoding of a type must keep the old bytes for the hash, or it is a
// breaking change (it moves keys between tasks).
//
// Strings, byte slices, integers, bools and floats are hashed in place without
// allocating; other values are encoded into a pooled buffer first. An unencodable
// value is an error matching ErrUnencodable.
func HashValue(h uint64, v any) (uint64, error) {
	switch x := v.(type) {
	case string:
		h = hashByte(h, tagString)
		h = hashUvarint(h, uint64(len(x)))
		for i := 0; i < len(x); i++ {
			h = (h ^ uint64(x[i])) * fnvPrime
		}
		return h, nil
	case []byte:
		h = hashByte(h, tagBytes)
		if x == nil {
			return hashByte(h, 0), nil
		}
		h = hashUvarint(h, uint64(len(x))+1)
		for _, b := range x {
			h = (h ^ uint64(b)) * fnvPrime
		}
		return h, nil
	case int:
		return hashVarint(hashByte(h, tagInt), int64(x)), nil
	case int64:
		return hashVarint(hashByte(h, tagInt64), x), nil
	case int32:
		return hashVarint(hashByte(h, tagInt32), int64(x)), nil
	case int16:
		return hashVarint(hashByte(h, tagInt16), int64(x)), nil
	case int8:
		return hashVarint(hashByte(h, tagInt8), int64(x)), nil
	case uint:
		return hashUvarint(hashByte(h, tagUint), uint64(x)), nil
	case uint64:
		return hashUvarint(hashByte(h, tagUint64), x), nil
	case uint32:
		return hashUvarint(hashByte(h, tagUint32), uint64(x)), nil
	case uint16:
		return hashUvarint(hashByte(h, tagUint16), uint64(x)), nil
	case uint8:
		return hashUvarint(hashByte(h, tagUint8), uint64(x)), nil
	case bool:
		return hashByte(hashByte(h, tagBool), b2u8(x)), nil
	case float64:
		if x == 0 {
			x = 0
		}
		return hashLE(hashByte(h, tagFloat64), math.Float64bits(x), 8), nil
	case float32:
		if x == 0 {
			x = 0
		}
		return hashLE(hashByte(h, tagFloat32), uint64(math.Float32bits(x)), 4), nil
	case nil:
		return hashByte(h, tagNil), nil
	case time.Time:
		var a [64]byte
		b := appendTime(append(a[:0], tagTime), x)
		return hashBytes(h, b), nil
	}
	bp := hashBufs.Get().(*[]byte)
	b, err := appendValue((*bp)[:0], v, 0, true)
	if err == nil {
		h = hashBytes(h, b)
	}
	if cap(b) <= 64<<10 {
		*bp = b[:0]
		hashBufs.Put(bp)
	}
	return h, err
}

var hashBufs = sync.Pool{New: func() any { b := make([]byte, 0, 256); return &b }}

// FieldsHash is the hash of fields grouping: from FNVOffset, for each index in idx,
// HashValue of the value then the separator byte 0xff, and last the finaliser
// (x ^= x>>33; x *= 0xff51afd7ed558ccd; x ^= x>>33) so that the low bits taken by
// the modulo over the tasks are well mixed. The task is targets[hash % len(targets)].
// An unencodable field is an *UnencodableError naming the field's index.
func FieldsHash(values tuple.Values, idx []int) (uint64, error) {
	h := FNVOffset
	for _, i := range idx {
		var err error
		if h, err = HashValue(h, values[i]); err != nil {
			return 0, fieldError(err, nil, i)
		}
		h = (h ^ fieldSep) * fnvPrime
	}
	return Mix(h), nil
}

// Mix is FieldsHash's finaliser (the first half of MurmurHash3's fmix64).
func Mix(h uint64) uint64 {
	h ^= h >> 33
	h *= 0xff51afd7ed558ccd
	h ^= h >> 33
	return h
}

func hashByte(h uint64, b byte) uint64 { return (h ^ uint64(b)) * fnvPrime }

func hashBytes(h uint64, b []byte) uint64 {
	for _, c := range b {
		h = (h ^ uint64(c)) * fnvPrime
	}
	return h
}

// hashUvarint folds the bytes of binary.AppendUvarint(x).
func hashUvarint(h, x uint64) uint64 {
	for x >= 0x80 {
		h = (h ^ (x&0x7f | 0x80)) * fnvPrime
		x >>= 7
	}
	return (h ^ x) * fnvPrime
}

// hashVarint folds the bytes of binary.AppendVarint(x) (zigzag).
func hashVarint(h uint64, x int64) uint64 {
	ux := uint64(x) << 1
	if x < 0 {
		ux = ^ux
	}
	return hashUvarint(h, ux)
}

// hashLE folds the n low bytes of x, little endian.
func hashLE(h, x uint64, n int) uint64 {
	for range n {
		h = (h ^ (x & 0xff)) * fnvPrime
		x >>= 8
	}
	return h
}
