package eventlog

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
)

// What a damaged key range holds, in the operator's terms: record seqs and the
// ids of documents, not raw keys (a record key is 'l' and 8 bytes of seq).

var kindNames = map[byte][2]string{
	'l':              {"record", "records"},
	'd':              {"dedupe entry", "dedupe entries"},
	byte(Status):     {"status document", "status documents"},
	byte(DeadLetter): {"dead letter", "dead letters"},
	syncPrefix:       {"group sync time", "group sync times"},
}

// keyRange describes the keys from lo to hi (both included; hi nil: to the end).
func keyRange(lo, hi []byte) string {
	if len(lo) == 0 {
		return fmt.Sprintf("keys %q..%q", lo, hi)
	}
	names, known := kindNames[lo[0]]
	if len(hi) > 0 && hi[0] == lo[0] && known {
		if lo[0] == 'l' {
			from, to, _ := recordSeqs(lo, hi)
			return fmt.Sprintf("records seq %d..%d", from, to)
		}
		if lo[0] == syncPrefix { // keyed by a group's last seq, as records by theirs
			return fmt.Sprintf("group sync times of groups ending at seq %d..%d", firstSeqFrom(lo), lastSeqTo(hi))
		}
		return fmt.Sprintf("%s of ids %s..%s", names[1], idBound(lo, true), idBound(hi, false))
	}
	if hi == nil {
		return "keys from " + keyDesc(lo, true) + " on"
	}
	return "keys from " + keyDesc(lo, true) + " to " + keyDesc(hi, false)
}

func keyDesc(k []byte, lower bool) string {
	if len(k) == 0 {
		return fmt.Sprintf("%q", k)
	}
	names, known := kindNames[k[0]]
	switch {
	case k[0] == 'l' && lower:
		return fmt.Sprintf("record seq %d", firstSeqFrom(k))
	case k[0] == 'l':
		return fmt.Sprintf("record seq %d", lastSeqTo(k))
	case known:
		return names[0] + " of id " + idBound(k, lower)
	}
	return fmt.Sprintf("%q", k)
}

// idBound is the id of a document key; a lower bound just past a key (the key
// and a 0 byte) is "after" that id.
func idBound(k []byte, lower bool) string {
	id := k[1:]
	if lower && len(id) > 0 && id[len(id)-1] == 0 {
		return fmt.Sprintf("after %q", id[:len(id)-1])
	}
	return fmt.Sprintf("%q", id)
}

// recordSeqs are the seqs of the records a key range from lo to hi (hi nil: to
// the end) may hold; ok is false if it holds no record keys.
func recordSeqs(lo, hi []byte) (from, to uint64, ok bool) {
	if len(lo) == 0 {
		return 0, 0, false
	}
	switch {
	case lo[0] < 'l':
		from = 1
	case lo[0] == 'l':
		from = max(firstSeqFrom(lo), 1)
	default:
		return 0, 0, false
	}
	switch {
	case hi == nil || hi[0] > 'l':
		to = math.MaxUint64
	case hi[0] == 'l':
		to = lastSeqTo(hi)
	default:
		return 0, 0, false
	}
	return from, to, from <= to
}

// firstSeqFrom is the seq of the first record key at or after k ('l'...).
func firstSeqFrom(k []byte) uint64 {
	b := k[1:]
	if len(b) >= 8 {
		s := binary.BigEndian.Uint64(b)
		if len(b) > 8 && s < math.MaxUint64 {
			s++
		}
		return s
	}
	var p [8]byte
	copy(p[:], b)
	return binary.BigEndian.Uint64(p[:])
}

// lastSeqTo is the seq of the last record key at or before k ('l'...).
func lastSeqTo(k []byte) uint64 {
	b := k[1:]
	if len(b) >= 8 {
		return binary.BigEndian.Uint64(b)
	}
	var p [8]byte
	copy(p[:], b)
	s := binary.BigEndian.Uint64(p[:])
	if bytes.Equal(p[len(b):], make([]byte, 8-len(b))) && s > 0 {
		s-- // k is a proper prefix of the key of s: that key sorts after k
	}
	return s
}
