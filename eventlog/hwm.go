package eventlog

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// The high-water mark (HWM) is the highest seq ever answered durable, kept in a
// small file of its own beside Pebble's: a fault in the WAL cannot also erase it,
// so Open can tell records that were acknowledged and are gone from records that
// a crash legitimately lost before they were acknowledged.
//
// It is written only after the WAL sync covering its seq returned (never ahead of
// the WAL, so a power cut cannot make it claim seqs that were never answered) and
// synced before those seqs are answered (so a damaged last record is caught too).
//
// The file holds the same 16-byte slot twice, 512 bytes apart (two sectors), and
// is overwritten in place with one write and an fdatasync: a torn write or a
// flipped bit damages at most one slot, and the larger intact one wins.
const (
	hwmFile    = "GALE-HWM"
	hwmSlotGap = 512
	hwmSize    = 2 * hwmSlotGap
	hwmMagic   = "GHWM"
)

var crcTable = crc32.MakeTable(crc32.Castagnoli)

type hwm struct {
	path string
	f    vfs.File // opened read-write; nil until create/open
	buf  []byte
}

// readHWM reads the mark in dir. found is false if the file does not exist; an
// error means it exists but no slot is intact.
func readHWM(fs vfs.FS, dir string) (seq uint64, found bool, err error) {
	path := fs.PathJoin(dir, hwmFile)
	f, err := fs.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("eventlog: open high-water mark %s: %w", path, err)
	}
	defer f.Close()
	b := make([]byte, hwmSize)
	n, err := f.ReadAt(b, 0)
	if err != nil && !errors.Is(err, io.EOF) {
		return 0, true, fmt.Errorf("eventlog: read high-water mark %s: %w", path, err)
	}
	b = b[:n]
	ok := false
	for off := 0; off+16 <= len(b); off += hwmSlotGap {
		if s, good := decodeHWMSlot(b[off : off+16]); good {
			seq, ok = max(seq, s), true
		}
	}
	if !ok {
		return 0, true, fmt.Errorf("eventlog: high-water mark %s (%d bytes): no intact slot", path, n)
	}
	return seq, true, nil
}

func decodeHWMSlot(s []byte) (uint64, bool) {
	if string(s[:4]) != hwmMagic || crc32.Checksum(s[:12], crcTable) != binary.BigEndian.Uint32(s[12:16]) {
		return 0, false
	}
	return binary.BigEndian.Uint64(s[4:12]), true
}

func encodeHWM(dst []byte, seq uint64) {
	clear(dst)
	for off := 0; off < hwmSize; off += hwmSlotGap {
		s := dst[off : off+16]
		copy(s, hwmMagic)
		binary.BigEndian.PutUint64(s[4:12], seq)
		binary.BigEndian.PutUint32(s[12:16], crc32.Checksum(s[:12], crcTable))
	}
}

// createHWM makes the file in dir holding seq, synced together with its directory
// entry, and opens it for the writer.
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
	b := make([]byte, hwmSize)
	encodeHWM(b, seq)
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
	return openHWM(fs, dir)
}

// openHWM opens the existing file for in-place writes.
func openHWM(fs vfs.FS, dir string) (*hwm, error) {
	path := fs.PathJoin(dir, hwmFile)
	f, err := fs.OpenReadWrite(path, vfs.WriteCategoryUnspecified)
	if err != nil {
		return nil, fmt.Errorf("eventlog: open high-water mark %s: %w", path, err)
	}
	return &hwm{path: path, f: f, buf: make([]byte, hwmSize)}, nil
}

// set makes seq the durable mark: one in-place write and an fdatasync.
func (h *hwm) set(seq uint64) error {
	encodeHWM(h.buf, seq)
	if _, err := h.f.WriteAt(h.buf, 0); err != nil {
		return fmt.Errorf("write high-water mark %s: %w", h.path, err)
	}
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
