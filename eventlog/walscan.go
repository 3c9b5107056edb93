package eventlog

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
	"sort"
	"strconv"
	"strings"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// scanWAL reads a Pebble WAL file chunk by chunk, independently of Pebble, to say
// where it is damaged and which intact batches follow the damage: Pebble's own
// replay stops at the first bad chunk (and refuses to open past it), which names
// neither the seqs in the damage nor what is still readable after it.
//
// The wire format (pebble/record): 32 KiB blocks of chunks, each
// checksum(4) length(2) type(1) [logNum(4) [syncOffset(8)]] payload, the checksum a
// masked CRC-32C over type..payload; a record (one batch) is a full chunk or a
// first, middles and a last. A sync chunk's syncOffset promises the WAL was synced
// up to there, so a bad chunk below a later promise is corruption, not a torn tail.

const (
	walBlock       = 32 << 10
	walLegacyHdr   = 7
	walRecycleHdr  = 11
	walSyncHdr     = 19
	walPosFull     = 1
	walPosFirst    = 2
	walPosMiddle   = 3
	walPosLast     = 4
	maxChunkTypeID = 12
)

// WALDamage is one damaged region of a WAL file.
type WALDamage struct {
	Offset int64 // of the first bad chunk
	// Cut is where the batch the bad chunk belongs to starts (Offset, or the
	// batch's first chunk before it): the WAL's intact prefix ends there, at a
	// batch boundary, as Pebble wants a closed (not the newest) WAL to end.
	Cut    int64
	Resync int64 // where intact chunks of this log start again; -1: none (the tail)
	Synced bool  // a later chunk promised the WAL synced past Offset: certainly corruption
	// Closed: the log's EOF trailer follows the damage, so the WAL was closed
	// (and synced) after it: a clean stop wrote it, not a torn write. Pebble
	// reads no further than a bad chunk without a later synced offset, so a
	// start still drops the batch (and any intact ones after it).
	Closed bool
	Reason string // what was wrong with the chunk at Offset
	// Before is the highest record seq in the intact batches before the damage,
	// After the lowest one after it (0: none seen).
	Before, After uint64
}

func (d WALDamage) String() string {
	s := fmt.Sprintf("offset %d: %s", d.Offset, d.Reason)
	switch {
	case d.Resync < 0 && d.Closed:
		s += " (no intact chunk after it but the log's EOF trailer: closed after the damage, not a torn tail)"
	case d.Resync < 0:
		s += " (no intact chunk after it: damaged or torn tail)"
	case d.Synced:
		s += fmt.Sprintf(" (intact again from offset %d, synced past the damage: corruption)", d.Resync)
	case d.Closed:
		s += fmt.Sprintf(" (intact again from offset %d; the log's EOF trailer follows: closed after the damage)", d.Resync)
	default:
		s += fmt.Sprintf(" (intact again from offset %d)", d.Resync)
	}
	return s
}

// WALFile is what scanWAL found in one WAL file.
type WALFile struct {
	Name    string
	Size    int64
	Batches []walBatch // intact batches, in file order
	Damage  []WALDamage
}

type walBatch struct {
	off      int64
	repr     []byte
	min, max uint64 // record seqs (l keys) in it; 0 if none
	// syncOnly: it holds sync times only (Close's, synctime.go), nothing a
	// replica would have to restore.
	syncOnly bool
}

func chunkHeader(typ byte) (pos int, hdr int, ok bool) {
	switch {
	case typ >= 1 && typ <= 4:
		return int(typ), walLegacyHdr, true
	case typ >= 5 && typ <= 8:
		return int(typ) - 4, walRecycleHdr, true
	case typ >= 9 && typ <= maxChunkTypeID:
		return int(typ) - 8, walSyncHdr, true
	}
	return 0, 0, false
}

// maskedCRC is pebble/internal/crc's CRC.Value: CRC-32C, rotated and offset.
func maskedCRC(b []byte) uint32 {
	c := crc32.Checksum(b, crcTable)
	return (c>>15 | c<<17) + 0xa282ead8
}

// scanWALBytes parses b, the contents of the WAL with file number logNum.
func scanWALBytes(b []byte, logNum uint32) (batches []walBatch, damage []WALDamage) {
	type chunk struct {
		pos, hdr, end int
		syncOff       uint64
		eofTrailer    bool
	}
	// parse says whether a valid chunk of this log starts at p.
	parse := func(p int, strict bool) (chunk, string) {
		blockEnd := min((p/walBlock+1)*walBlock, len(b))
		if p+walLegacyHdr > blockEnd {
			return chunk{}, "header crosses a block"
		}
		sum := binary.LittleEndian.Uint32(b[p:])
		length := int(binary.LittleEndian.Uint16(b[p+4:]))
		pos, hdr, ok := chunkHeader(b[p+6])
		if !ok {
			if sum == 0 && length == 0 && b[p+6] == 0 {
				return chunk{}, "zeroed chunk"
			}
			return chunk{}, fmt.Sprintf("invalid chunk type %d", b[p+6])
		}
		if !strict && hdr == walLegacyHdr {
			return chunk{}, "legacy chunk"
		}
		if p+hdr > blockEnd {
			return chunk{}, "header crosses a block"
		}
		c := chunk{pos: pos, hdr: hdr, end: p + hdr + length}
		if hdr > walLegacyHdr {
			if ln := binary.LittleEndian.Uint32(b[p+7:]); ln != logNum {
				if ln == logNum+1 && length == 0 {
					c.eofTrailer = true // the clean end of this log (its checksum is 0)
					return c, ""
				} else {
					return chunk{}, fmt.Sprintf("chunk of log %d, not %d", ln, logNum)
				}
			}
		}
		if c.end > blockEnd {
			return chunk{}, fmt.Sprintf("chunk length %d crosses its block", length)
		}
		if maskedCRC(b[p+6:c.end]) != sum {
			return chunk{}, "checksum mismatch"
		}
		if hdr == walSyncHdr {
			c.syncOff = binary.LittleEndian.Uint64(b[p+11:])
		}
		return c, ""
	}
	var (
		pending *WALDamage
		rec     []byte
		recOff  = -1
		lastMax uint64
		closed  bool // the log's EOF trailer was reached
	)
	emit := func(off int, repr []byte) {
		bt := walBatch{off: int64(off), repr: repr}
		var pb pebble.Batch
		if err := pb.SetRepr(repr); err == nil {
			r := pb.Reader()
			keys, syncTimes := 0, 0
			for {
				kind, k, _, ok, err := r.Next()
				if err != nil {
					syncTimes = -1
				}
				if !ok || err != nil {
					break
				}
				keys++
				if kind == pebble.InternalKeyKindSet && len(k) == 9 && k[0] == syncPrefix {
					syncTimes++
				}
				if kind == pebble.InternalKeyKindSet && len(k) == 9 && k[0] == 'l' {
					s := binary.BigEndian.Uint64(k[1:])
					if bt.min == 0 || s < bt.min {
						bt.min = s
					}
					bt.max = max(bt.max, s)
				}
			}
			bt.syncOnly = keys > 0 && syncTimes == keys
		}
		if bt.min != 0 {
			for i := len(damage) - 1; i >= 0 && damage[i].After == 0; i-- {
				damage[i].After = bt.min
			}
			lastMax = max(lastMax, bt.max)
		}
		batches = append(batches, bt)
	}
	p := 0
	for p < len(b) {
		blockEnd := min((p/walBlock+1)*walBlock, len(b))
		if allZero(b[p:blockEnd]) {
			p = blockEnd // padding at a block's end, or the preallocated rest of the file
			continue
		}
		c, why := parse(p, true)
		if why == "" && c.eofTrailer {
			closed = true
			break
		}
		if why != "" {
			if pending == nil {
				cut := p
				if recOff >= 0 {
					cut = recOff // the batch's first chunks are intact, its rest is not
				}
				pending = &WALDamage{Offset: int64(p), Cut: int64(cut), Resync: -1, Reason: why, Before: lastMax}
			}
			rec, recOff = nil, -1
			// Find the next intact chunk of this log (checksum and log number
			// match), so the batches after the damage are still counted.
			q := p + 1
			for ; q+walRecycleHdr <= len(b); q++ {
				if isEOFTrailer(b[q:], logNum) {
					closed = true
					break
				}
				if _, hdr, ok := chunkHeader(b[q+6]); !ok || hdr == walLegacyHdr ||
					binary.LittleEndian.Uint32(b[q+7:]) != logNum {
					continue
				}
				if _, w := parse(q, false); w == "" {
					break
				}
			}
			if closed || q+walRecycleHdr > len(b) {
				break
			}
			p = q
			continue
		}
		// Any later chunk's promise counts, as in Pebble's read-ahead: the first
		// chunk after a group can carry the offset synced before that group's
		// sync returned (group commits are pipelined).
		for i := range damage {
			damage[i].Synced = damage[i].Synced || c.syncOff > uint64(damage[i].Offset)
		}
		if pending != nil {
			if c.syncOff > uint64(pending.Offset) {
				pending.Synced = true
			}
			if c.pos == walPosFull || c.pos == walPosFirst {
				pending.Resync = int64(p)
				damage = append(damage, *pending)
				pending = nil
			}
		}
		payload := b[p+c.hdr : c.end]
		switch c.pos {
		case walPosFull:
			if pending == nil {
				emit(p, append([]byte(nil), payload...))
			}
			rec, recOff = nil, -1
		case walPosFirst:
			if pending == nil {
				rec, recOff = append([]byte(nil), payload...), p
			}
		case walPosMiddle, walPosLast:
			if recOff < 0 {
				break // the rest of a record whose start was damaged
			}
			rec = append(rec, payload...)
			if c.pos == walPosLast {
				emit(recOff, rec)
				rec, recOff = nil, -1
			}
		}
		p = c.end
	}
	if pending != nil {
		damage = append(damage, *pending)
	}
	for i := range damage {
		damage[i].Closed = closed
	}
	return batches, damage
}

// isEOFTrailer says whether b starts with the EOF trailer Pebble writes when it
// closes log logNum: a recyclable full chunk of log logNum+1, checksum and
// length 0.
func isEOFTrailer(b []byte, logNum uint32) bool {
	return len(b) >= walRecycleHdr && binary.LittleEndian.Uint32(b) == 0 && binary.LittleEndian.Uint16(b[4:]) == 0 &&
		b[6] == 5 && binary.LittleEndian.Uint32(b[7:]) == logNum+1
}

// batchWrites counts what batches write besides records: status documents (set
// or deleted) and the highest committed offset set (0: none).
func batchWrites(bs []walBatch) (status int, committed uint64) {
	for _, bt := range bs {
		var b pebble.Batch
		if err := b.SetRepr(bt.repr); err != nil {
			continue
		}
		r := b.Reader()
		for {
			kind, k, v, ok, err := r.Next()
			if !ok || err != nil {
				break
			}
			switch {
			case len(k) > 0 && k[0] == byte(Status) && (kind == pebble.InternalKeyKindSet || kind == pebble.InternalKeyKindDelete):
				status++
			case kind == pebble.InternalKeyKindSet && string(k) == string(committedKey) && len(v) == 8:
				committed = max(committed, binary.BigEndian.Uint64(v))
			}
		}
	}
	return status, committed
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// scanWALs scans every WAL file in dir, oldest first.
func scanWALs(fs vfs.FS, dir string) ([]WALFile, error) {
	names, err := fs.List(dir)
	if err != nil {
		return nil, fmt.Errorf("eventlog: list %s: %w", dir, err)
	}
	type numbered struct {
		name string
		num  uint64
	}
	var logs []numbered
	for _, n := range names {
		base, ok := strings.CutSuffix(n, ".log")
		if !ok {
			continue
		}
		num, err := strconv.ParseUint(base, 10, 64)
		if err != nil {
			continue
		}
		logs = append(logs, numbered{n, num})
	}
	sort.Slice(logs, func(i, j int) bool { return logs[i].num < logs[j].num })
	var out []WALFile
	for _, lg := range logs {
		path := fs.PathJoin(dir, lg.name)
		f, err := fs.Open(path)
		if err != nil {
			return out, fmt.Errorf("eventlog: open WAL %s: %w", path, err)
		}
		b, err := io.ReadAll(f)
		f.Close()
		if err != nil {
			return out, fmt.Errorf("eventlog: read WAL %s: %w", path, err)
		}
		w := WALFile{Name: path, Size: int64(len(b))}
		w.Batches, w.Damage = scanWALBytes(b, uint32(lg.num))
		out = append(out, w)
	}
	return out, nil
}

// newestClosedDamage says whether the newest WAL file is damaged before its EOF
// trailer: written, closed and synced, then damaged.
func newestClosedDamage(files []WALFile) bool {
	n := len(files)
	return n > 0 && len(files[n-1].Damage) > 0 && files[n-1].Damage[0].Closed
}

// walSummary names the damage found, for an error message.
func walSummary(files []WALFile, mark uint64) string {
	var parts []string
	for _, f := range files {
		for _, d := range f.Damage {
			s := fmt.Sprintf("WAL %s %s", f.Name, d)
			switch {
			case d.After > d.Before+1:
				s += fmt.Sprintf(" [seqs %d..%d in it: intact records before it end at seq %d, after it start at seq %d]",
					d.Before+1, d.After-1, d.Before, d.After)
			case d.After == 0 && mark > d.Before:
				s += fmt.Sprintf(" [seqs %d..%d in it or after it: intact records before it end at seq %d]", d.Before+1, mark, d.Before)
			default:
				s += fmt.Sprintf(" [no record seq in it: intact records before it end at seq %d, after it start at seq %s]", d.Before, seqOrNone(d.After))
			}
			parts = append(parts, s)
		}
	}
	if len(parts) == 0 {
		return "no damaged WAL chunk found"
	}
	return strings.Join(parts, "; ")
}

func seqOrNone(s uint64) string {
	if s == 0 {
		return "none"
	}
	return strconv.FormatUint(s, 10)
}
