package event

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
)

// Record is an event as the durable log stores it: the event, the log sequence number
// it was given, when it was received, and its resubmission generation (0 for the
// original; POST /v1/events/{id}:retry appends a new record with the next generation).
type Record struct {
	Seq        uint64 // log position, from 1, contiguous
	ReceivedAt int64  // Unix nanoseconds when the ingest API took it in
	Generation uint32
	Hash       ContentHash // Event.Hash at receipt, under the rule of that time
	Event      Event
}

// ErrCorrupt is wrapped by Decode when a record's checksum or framing is wrong.
var ErrCorrupt = errors.New("corrupt log record")

// Record formats: 1 has no hash rule (its hash is HashRaw); 2 has the rule's byte
// after the hash.
const (
	recordFormatRaw = 1
	recordFormat    = 2
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Encode appends r's binary form to dst: a format byte, a CRC-32C of the rest, then
// the fields. The checksum lets a restart name a damaged record instead of feeding
// garbage to the topology.
func (r *Record) Encode(dst []byte) []byte {
	start := len(dst)
	dst = append(dst, recordFormat, 0, 0, 0, 0)
	dst = binary.AppendUvarint(dst, r.Seq)
	dst = binary.AppendVarint(dst, r.ReceivedAt)
	dst = binary.AppendUvarint(dst, uint64(r.Generation))
	dst = append(dst, r.Hash.Sum[:]...)
	dst = append(dst, byte(r.Hash.Rule))
	var v int64 = -1
	if r.Event.Version != nil {
		v = *r.Event.Version
	}
	dst = binary.AppendVarint(dst, v)
	for _, s := range []string{r.Event.ID, r.Event.Source, r.Event.Type, r.Event.Key} {
		dst = binary.AppendUvarint(dst, uint64(len(s)))
		dst = append(dst, s...)
	}
	dst = binary.AppendUvarint(dst, uint64(len(r.Event.Payload)))
	dst = append(dst, r.Event.Payload...)
	binary.LittleEndian.PutUint32(dst[start+1:], crc32.Checksum(dst[start+5:], castagnoli))
	return dst
}

// Decode parses a record written by Encode. Errors wrap ErrCorrupt. The strings and
// payload are copied, so src may be reused.
func Decode(src []byte) (Record, error) {
	var r Record
	if len(src) < 5 {
		return r, fmt.Errorf("%w: %d bytes, shorter than a header", ErrCorrupt, len(src))
	}
	if src[0] != recordFormat && src[0] != recordFormatRaw {
		return r, fmt.Errorf("%w: unknown format %d", ErrCorrupt, src[0])
	}
	if want, got := binary.LittleEndian.Uint32(src[1:]), crc32.Checksum(src[5:], castagnoli); want != got {
		return r, fmt.Errorf("%w: checksum %08x, stored %08x", ErrCorrupt, got, want)
	}
	b := src[5:]
	bad := func(what string) (Record, error) {
		return Record{}, fmt.Errorf("%w: bad %s", ErrCorrupt, what)
	}
	var n int
	if r.Seq, n = binary.Uvarint(b); n <= 0 {
		return bad("seq")
	}
	b = b[n:]
	if r.ReceivedAt, n = binary.Varint(b); n <= 0 {
		return bad("received time")
	}
	b = b[n:]
	g, n := binary.Uvarint(b)
	if n <= 0 || g > 1<<32-1 {
		return bad("generation")
	}
	r.Generation = uint32(g)
	b = b[n:]
	if len(b) < 32 {
		return bad("hash")
	}
	copy(r.Hash.Sum[:], b)
	b = b[32:]
	if src[0] == recordFormat {
		if len(b) < 1 || !HashRule(b[0]).Known() {
			return bad("hash rule")
		}
		r.Hash.Rule = HashRule(b[0])
		b = b[1:]
	}
	v, n := binary.Varint(b)
	if n <= 0 {
		return bad("version")
	}
	if v >= 0 {
		r.Event.Version = &v
	}
	b = b[n:]
	var fields [5][]byte
	for i := range fields {
		l, n := binary.Uvarint(b)
		if n <= 0 || l > uint64(len(b)-n) {
			return bad("field length")
		}
		fields[i] = b[n : n+int(l)]
		b = b[n+int(l):]
	}
	if len(b) != 0 {
		return bad("trailing bytes")
	}
	r.Event.ID, r.Event.Source, r.Event.Type, r.Event.Key = string(fields[0]), string(fields[1]), string(fields[2]), string(fields[3])
	r.Event.Payload = append([]byte(nil), fields[4]...)
	return r, nil
}
