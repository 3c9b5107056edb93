package eventlog

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"slices"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// The high-water mark file (GALE-HWM) sits beside Pebble's files, so a fault in
// the WAL cannot also erase it. It holds hwmSlots slots, used in turn, one per
// group commit. The writer puts each group in its slot before Pebble's WAL write:
// the group's seq range, the highest seq answered so far (its floor) and, when it
// fits (hwmReplicaMax), the encoded Pebble batch itself (exactly the group's
// records and dedupe entries), checksummed. The slot is made durable with the
// WAL, and the group is answered only after both are: an answered group is
// durable twice, in the WAL and in its slot until a later group reuses the slot.
// On ext4 (markflush_linux.go) the slot rides the WAL's flush: every WAL sync
// first writes the mark file back (sync_file_range, no cache flush; markfs.go),
// and the WAL's fdatasync then flushes the device cache, which makes the slot
// durable as well: one flush per group commit. Elsewhere, or with
// Options.SeparateMarkSync, the slot's own fdatasync runs concurrently with the
// WAL's, which costs a second flush per group. A group too big for a slot gets
// its range only, written after its WAL sync returned (so it never claims seqs
// not synced) and synced before its answer: the serial mark.
//
// At Open, the mark is the highest floor (or serial mark) of any intact slot:
// records must reach it. A replica's own range is not a claim: a slot written but
// not synced can survive a power cut while the group before it did not, and
// neither was answered. Where the WAL ends short of intact replicas that continue
// it (a flipped, torn or lost last group), Open applies them: they were durable,
// so restoring them is right whether or not they were answered. A torn slot (bad
// checksum) was not answered, as its sync had not returned: it claims nothing.
//
// At most hwmInFlight groups are in flight, and hwmSlots is more than twice
// that, so a power cut tearing every slot being written leaves the slots of the
// newest hwmInFlight+1 answered groups intact: those are restorable, and the
// newest floor among them covers every group answered before them.
const (
	hwmFile       = "GALE-HWM"
	hwmInFlight   = syncDepth + 1
	hwmSlots      = 2*hwmInFlight + 2
	hwmSlotSize   = 64 << 10
	hwmHeader     = 40
	hwmReplicaMax = hwmSlotSize - hwmHeader
	hwmMagic      = "GHW2"
	hwmReplica    = 1 // slot flag: the batch follows the header

	// The format before replicas: one 16-byte slot twice, 512 bytes apart.
	hwmOldMagic   = "GHWM"
	hwmOldSlotGap = 512
)

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// sideSlot is one intact slot: a group's seq range and, if kept, its batch.
type sideSlot struct {
	index       int
	first, last uint64
	floor       uint64 // the highest seq answered when the slot was written
	repr        []byte // the group's Pebble batch (Batch.Repr); nil for a mark only
}

type hwm struct {
	path string
	f    vfs.File // opened read-write; nil until create/open
	bufs [hwmSlots][]byte
	// writeBack, if set, is how the slots ride the WAL's flush (markfs.go): it
	// runs at the start of every sync of the WAL wal. Nil: each replica gets its
	// own sync.
	writeBack func(mark, wal vfs.File) error
}

// readHWM reads the mark in dir: the highest seq of any intact slot. found is
// false if the file does not exist; an error means it exists but no slot is intact.
func readHWM(fs vfs.FS, dir string) (seq uint64, found bool, err error) {
	seq, _, found, err = readSide(fs, dir)
	return seq, found, err
}

// readSide reads the mark and the intact slots holding a replica, by first seq.
func readSide(fs vfs.FS, dir string) (mark uint64, replicas []sideSlot, found bool, err error) {
	path := fs.PathJoin(dir, hwmFile)
	f, err := fs.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil, false, nil
	}
	if err != nil {
		return 0, nil, false, fmt.Errorf("eventlog: open high-water mark %s: %w", path, err)
	}
	defer f.Close()
	b := make([]byte, hwmSlots*hwmSlotSize)
	n, err := f.ReadAt(b, 0)
	if err != nil && !errors.Is(err, io.EOF) {
		return 0, nil, true, fmt.Errorf("eventlog: read high-water mark %s: %w", path, err)
	}
	b = b[:n]
	ok := false
	if n >= 4 && string(b[:4]) == hwmOldMagic || n > hwmOldSlotGap+4 && string(b[hwmOldSlotGap:hwmOldSlotGap+4]) == hwmOldMagic {
		for off := 0; off+16 <= len(b) && off <= hwmOldSlotGap; off += hwmOldSlotGap {
			if s, good := decodeOldSlot(b[off : off+16]); good {
				mark, ok = max(mark, s), true
			}
		}
	} else {
		for i := range hwmSlots {
			off := i * hwmSlotSize
			if off+hwmHeader > len(b) {
				break
			}
			s, good := decodeSlot(b[off:min(len(b), off+hwmSlotSize)])
			if !good {
				continue
			}
			s.index = i
			mark, ok = max(mark, s.floor), true
			if s.repr == nil {
				// A mark only is written after its WAL sync returned.
				mark = max(mark, s.last)
			}
			if s.repr != nil {
				replicas = append(replicas, s)
			}
		}
	}
	if !ok {
		return 0, nil, true, fmt.Errorf("eventlog: high-water mark %s (%d bytes): no intact slot", path, n)
	}
	slices.SortFunc(replicas, func(a, b sideSlot) int { return cmp.Compare(a.first, b.first) })
	return mark, replicas, true, nil
}

func decodeOldSlot(s []byte) (uint64, bool) {
	if string(s[:4]) != hwmOldMagic || crc32.Checksum(s[:12], crcTable) != binary.BigEndian.Uint32(s[12:16]) {
		return 0, false
	}
	return binary.BigEndian.Uint64(s[4:12]), true
}

// A slot: magic, flags (4 bytes each), first, last, floor (8 bytes each), the
// replica's length, a CRC-32C of the header before it and of the replica (4 bytes
// each), then the replica.
func decodeSlot(s []byte) (sideSlot, bool) {
	if string(s[:4]) != hwmMagic {
		return sideSlot{}, false
	}
	flags := binary.BigEndian.Uint32(s[4:8])
	n := int(binary.BigEndian.Uint32(s[32:36]))
	if n > len(s)-hwmHeader || n > hwmReplicaMax {
		return sideSlot{}, false
	}
	crc := crc32.Update(crc32.Checksum(s[:36], crcTable), crcTable, s[hwmHeader:hwmHeader+n])
	if crc != binary.BigEndian.Uint32(s[36:40]) {
		return sideSlot{}, false
	}
	out := sideSlot{first: binary.BigEndian.Uint64(s[8:16]), last: binary.BigEndian.Uint64(s[16:24]), floor: binary.BigEndian.Uint64(s[24:32])}
	if flags&hwmReplica != 0 {
		out.repr = slices.Clone(s[hwmHeader : hwmHeader+n])
	}
	return out, true
}

func encodeSlot(dst []byte, first, last, floor uint64, repr []byte) []byte {
	dst = append(dst[:0], hwmMagic...)
	var flags uint32
	if repr != nil {
		flags = hwmReplica
	}
	dst = binary.BigEndian.AppendUint32(dst, flags)
	dst = binary.BigEndian.AppendUint64(dst, first)
	dst = binary.BigEndian.AppendUint64(dst, last)
	dst = binary.BigEndian.AppendUint64(dst, floor)
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(repr)))
	crc := crc32.Update(crc32.Checksum(dst[:36], crcTable), crcTable, repr)
	dst = binary.BigEndian.AppendUint32(dst, crc)
	return append(dst, repr...)
}

// createHWM makes the file in dir with every slot holding the mark seq (no
// replica), full size, synced together with its directory entry (so in-place slot
// writes never change its size: fdatasync then flushes no metadata), and opens it
// for the writer.
func createHWM(fs vfs.FS, dir string, seq uint64) (*hwm, error) {
	if err := fs.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("eventlog: create %s: %w", dir, err)
	}
	path := fs.PathJoin(dir, hwmFile)
	tmp := path + ".tmp"
	f, err := fs.Create(tmp, vfs.WriteCategoryUnspecified)
	if err != nil {
		return nil, fmt.Errorf("eventlog: create high-water mark %s: %w", tmp, err)
	}
	b := make([]byte, hwmSlots*hwmSlotSize)
	for i := range hwmSlots {
		encodeSlot(b[i*hwmSlotSize:i*hwmSlotSize], seq, seq, seq, nil)
	}
	_, err = f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = fs.Rename(tmp, path)
	}
	if err == nil {
		err = syncDir(fs, dir)
	}
	if err != nil {
		return nil, fmt.Errorf("eventlog: create high-water mark %s: %w", path, err)
	}
	w, err := fs.OpenReadWrite(path, vfs.WriteCategoryUnspecified)
	if err != nil {
		return nil, fmt.Errorf("eventlog: open high-water mark %s: %w", path, err)
	}
	h := &hwm{path: path, f: w}
	for i := range h.bufs {
		h.bufs[i] = make([]byte, 0, hwmSlotSize)
	}
	return h, nil
}

// write puts a group in slot i (a replica if repr is not nil), without syncing.
// Slots are written by one goroutine each at a time, to disjoint offsets.
func (h *hwm) write(i int, first, last, floor uint64, repr []byte) error {
	h.bufs[i] = encodeSlot(h.bufs[i], first, last, floor, repr)
	if _, err := h.f.WriteAt(h.bufs[i], int64(i)*hwmSlotSize); err != nil {
		return fmt.Errorf("write high-water mark %s: %w", h.path, err)
	}
	return nil
}

// sync makes every slot written so far durable.
func (h *hwm) sync() error {
	if err := h.f.SyncData(); err != nil {
		return fmt.Errorf("sync high-water mark %s: %w", h.path, err)
	}
	return nil
}

func (h *hwm) close() error {
	if h == nil || h.f == nil {
		return nil
	}
	return h.f.Close()
}

func syncDir(fs vfs.FS, dir string) error {
	d, err := fs.OpenDir(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}
