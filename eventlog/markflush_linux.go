package eventlog

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/cockroachdb/pebble/v2/vfs"
	"golang.org/x/sys/unix"
)

const ext4Magic = 0xEF53

// walFlushable reports whether the mark file f (in directory dir) may ride the
// WAL's flush: written back with sync_file_range before each WAL fdatasync
// instead of synced on its own. That holds where an overwrite in place needs no
// metadata (the file is full size and its blocks written, see createHWM) and the
// WAL's fdatasync always ends with a cache flush of the device, which makes every
// write completed before it durable, the mark's included. ext4 does both (its
// fsync issues the flush through the journal commit or blkdev_issue_flush),
// unless it journals data, commits asynchronously, was mounted without barriers
// or uses fast commits: a fast commit that finds another one running waits for
// it and returns without a flush of its own, and the one it waited for may have
// flushed before the mark's write completed (seen with tracefs on a fast_commit
// file system beside a SQLite sink's fsyncs; the mark's own fdatasync, having
// nothing to journal, always flushes). Mount options come from mountinfo and
// /proc/fs/ext4/DEV/options; whether fast commits are on, which neither shows on
// every kernel, is found by fastCommits. Where that cannot be known the mark gets
// its own fdatasync. Copy-on-write file systems (btrfs, zfs) allocate on every
// overwrite, and others are not checked: there the mark gets its own fdatasync.
func walFlushable(f vfs.File, dir string) (bool, string) {
	fd := f.Fd()
	if fd == vfs.InvalidFd {
		return false, "not a file of the operating system"
	}
	var sfs unix.Statfs_t
	if err := unix.Fstatfs(int(fd), &sfs); err != nil {
		return false, fmt.Sprintf("statfs: %v", err)
	}
	if sfs.Type != ext4Magic {
		return false, fmt.Sprintf("file system type %#x is not ext4", sfs.Type)
	}
	var st unix.Stat_t
	if err := unix.Fstat(int(fd), &st); err != nil {
		return false, fmt.Sprintf("stat: %v", err)
	}
	dev := fmt.Sprintf("%d:%d", unix.Major(st.Dev), unix.Minor(st.Dev))
	fstype, opts, err := mountOptions("/proc/self/mountinfo", dev)
	if err != nil {
		return false, err.Error()
	}
	if fstype != "ext4" {
		// ext2 and ext3 share ext4's magic number; only ext4 was examined.
		return false, fmt.Sprintf("file system on %s is %s, not ext4", dev, fstype)
	}
	name, sbOpts, err := ext4Options("/sys/dev/block", "/proc/fs/ext4", dev)
	if err != nil {
		return false, err.Error()
	}
	if why := ext4Fallback(append(opts, sbOpts...)); why != "" {
		return false, fmt.Sprintf("ext4 on %s (%s) %s", name, dev, why)
	}
	switch fc, how := fastCommits(hostExt4, name, func() error { return journaledSync(dir) }); fc {
	case fcOn:
		return false, fmt.Sprintf("ext4 on %s (%s) uses fast commits (%s), whose fdatasync may end without a flush", name, dev, how)
	case fcUnknown:
		return false, fmt.Sprintf("ext4 on %s (%s): whether it uses fast commits is not known (%s), so the mark is synced on its own", name, dev, how)
	default:
		return true, fmt.Sprintf("ext4 on %s (%s), no fast commits (%s): the WAL's fdatasync flushes the device", name, dev, how)
	}
}

// ext4Fallback says why ext4 with these options cannot carry the mark on the
// WAL's flush, or "" if it can.
func ext4Fallback(opts []string) string {
	for _, o := range opts {
		switch o {
		case "data=journal", "journal_async_commit", "nobarrier", "barrier=0":
			return "is mounted with " + o
		case "fc_debug_force":
			// Kernels before 6.x listed the fast-commit flag under this name in
			// /proc/fs/ext4/DEV/options; newer ones list nothing (fastCommits).
			return "uses fast commits, whose fdatasync may end without a flush"
		}
		if strings.HasPrefix(o, "dax") { // persistent memory: not examined
			return "is mounted with " + o
		}
	}
	return ""
}

type fcAnswer int

const (
	fcUnknown fcAnswer = iota
	fcOff
	fcOn
)

// ext4Paths are where fastCommits looks; tests point them at captured text.
type ext4Paths struct {
	proc     string // /proc/fs/ext4: DEV/fc_info
	features string // /sys/fs/ext4/features: what this kernel's ext4 can do
	dev      string // /dev: DEV, for its super block
}

var hostExt4 = ext4Paths{proc: "/proc/fs/ext4", features: "/sys/fs/ext4/features", dev: "/dev"}

// fcProbes bounds the journaled fdatasyncs fastCommits runs. One is enough but
// where the journal thread commits the probe's transaction between its write and
// its fdatasync (the fast commit is then skipped, and skips are not counted).
const fcProbes = 3

// fastCommits says whether ext4 on block device name commits fsyncs through fast
// commits, and how it knows. The super-block feature is not visible to an
// unprivileged process (nor, in some sandboxes, to root: the block device cannot
// be opened), and 6.x kernels no longer name it among the options. What they do
// give is /proc/fs/ext4/DEV/fc_info, whose commit and ineligible counters move
// only on the fast-commit path: so probe runs a journaled fdatasync and the
// counters are read again. They stay at 0 where fast commits are off. The super
// block is read as a second source, where it can be; if neither answers, the
// answer is fcUnknown and the caller fails safe.
func fastCommits(p ext4Paths, name string, probe func() error) (fcAnswer, string) {
	info := filepath.Join(p.proc, name, "fc_info")
	n, err := fcCount(info)
	if errors.Is(err, fs.ErrNotExist) {
		if _, ferr := os.Stat(filepath.Join(p.features, "fast_commit")); errors.Is(ferr, fs.ErrNotExist) {
			if _, derr := os.Stat(p.features); derr == nil {
				return fcOff, "this kernel's ext4 has no fast commits"
			}
		}
	}
	if err == nil && n > 0 {
		return fcOn, fmt.Sprintf("%s counts %d", info, n)
	}
	var why string
	if err == nil {
		for i := 0; i < fcProbes; i++ {
			if err = probe(); err != nil {
				err = fmt.Errorf("probe: %w", err)
				break
			}
			if n, err = fcCount(info); err != nil || n > 0 {
				break
			}
		}
		if err == nil && n > 0 {
			return fcOn, fmt.Sprintf("%s counts %d after a journaled fdatasync", info, n)
		}
	}
	if err == nil {
		why = fmt.Sprintf("%s stayed at 0 over %d journaled fdatasyncs", info, fcProbes)
	} else {
		why = err.Error()
	}
	on, sbErr := superBlockFastCommit(filepath.Join(p.dev, name))
	switch {
	case sbErr == nil && on:
		return fcOn, "its super block has fast_commit"
	case sbErr == nil:
		return fcOff, why + "; its super block has no fast_commit"
	case err == nil:
		return fcOff, why
	default:
		return fcUnknown, why + "; " + sbErr.Error()
	}
}

// fcCount reads an fc_info file and returns its fast commits plus its
// ineligible ones (full commits the fast-commit path fell back to).
func fcCount(path string) (uint64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, fmt.Errorf("read fast-commit counters: %w", err)
	}
	commits, ineligible, err := parseFCInfo(string(b))
	if err != nil {
		return 0, fmt.Errorf("%s: %w", path, err)
	}
	return commits + ineligible, nil
}

// parseFCInfo reads the "N commits" and "N ineligible" lines of fc_info.
func parseFCInfo(text string) (commits, ineligible uint64, err error) {
	var seen int
	for _, line := range strings.Split(text, "\n") {
		f := strings.Fields(line)
		if len(f) != 2 || (f[1] != "commits" && f[1] != "ineligible") {
			continue
		}
		v, perr := strconv.ParseUint(f[0], 10, 64)
		if perr != nil {
			return 0, 0, fmt.Errorf("fc_info line %q: %w", line, perr)
		}
		if f[1] == "commits" {
			commits, seen = v, seen|1
		} else {
			ineligible, seen = v, seen|2
		}
	}
	if seen != 3 {
		return 0, 0, errors.New("no commits and ineligible counters in fc_info")
	}
	return commits, ineligible, nil
}

// ext4 super block: at byte 1024; magic at 0x38, s_feature_compat at 0x5C.
const (
	sbOffset         = 1024
	sbMagic          = 0x38
	sbFeatureCompat  = 0x5C
	compatFastCommit = 0x400
)

// superBlockFastCommit reads the fast_commit feature from the ext4 super block
// on the block device at path.
func superBlockFastCommit(path string) (bool, error) {
	f, err := os.Open(path)
	if err != nil {
		return false, fmt.Errorf("read the super block: %w", err)
	}
	defer f.Close()
	b := make([]byte, sbFeatureCompat+4)
	if _, err := f.ReadAt(b, sbOffset); err != nil {
		return false, fmt.Errorf("read the super block of %s: %w", path, err)
	}
	return parseSuperBlock(b)
}

// parseSuperBlock reads the fast_commit feature from the start of an ext4 super
// block.
func parseSuperBlock(b []byte) (bool, error) {
	if len(b) < sbFeatureCompat+4 || binary.LittleEndian.Uint16(b[sbMagic:]) != ext4Magic {
		return false, errors.New("no ext4 super block")
	}
	return binary.LittleEndian.Uint32(b[sbFeatureCompat:])&compatFastCommit != 0, nil
}

// journaledSync makes ext4 commit through its fsync path: a new file with data,
// fdatasynced, then removed. Its name is the log's own, so a stale one left by a
// crash is overwritten.
func journaledSync(dir string) error {
	path := filepath.Join(dir, "GALE-FC-PROBE")
	f, err := os.OpenFile(path, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	_, err = f.Write([]byte{1})
	if err == nil {
		err = unix.Fdatasync(int(f.Fd()))
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if rerr := os.Remove(path); err == nil {
		err = rerr
	}
	return err
}

// ext4Options returns the name of block device dev ("major:minor", from
// sysDev/dev/uevent) and the options ext4 reports for the file system on it
// (procExt4/name/options, one per line).
func ext4Options(sysDev, procExt4, dev string) (string, []string, error) {
	uevent, err := os.ReadFile(filepath.Join(sysDev, dev, "uevent"))
	if err != nil {
		return "", nil, fmt.Errorf("read the name of device %s: %w", dev, err)
	}
	var name string
	for _, line := range strings.Split(string(uevent), "\n") {
		if v, ok := strings.CutPrefix(line, "DEVNAME="); ok {
			name = v
		}
	}
	if name == "" || strings.Contains(name, "/") {
		return "", nil, fmt.Errorf("no usable DEVNAME for device %s in %s", dev, filepath.Join(sysDev, dev, "uevent"))
	}
	b, err := os.ReadFile(filepath.Join(procExt4, name, "options"))
	if err != nil {
		return "", nil, fmt.Errorf("read ext4's options for %s: %w", name, err)
	}
	return name, strings.Fields(string(b)), nil
}

// mountOptions returns the file system type and the mount and super-block
// options of the mount of device dev ("major:minor") in a mountinfo file.
func mountOptions(path, dev string) (fstype string, opts []string, err error) {
	f, err := os.Open(path)
	if err != nil {
		return "", nil, fmt.Errorf("read mount options: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// id parent major:minor root mountpoint options [optional...] - fstype source superoptions
		fields := strings.Fields(sc.Text())
		if len(fields) < 6 || fields[2] != dev {
			continue
		}
		opts = strings.Split(fields[5], ",")
		for i, x := range fields {
			if x == "-" && i+3 < len(fields) {
				fstype = fields[i+1]
				opts = append(opts, strings.Split(fields[i+3], ",")...)
				break
			}
		}
		return fstype, opts, nil
	}
	if err := sc.Err(); err != nil {
		return "", nil, fmt.Errorf("read mount options: %w", err)
	}
	return "", nil, fmt.Errorf("no mount of device %s in %s", dev, path)
}

// writeBack writes every dirty page of the mark to the device and waits for it,
// without the device cache flush: the WAL's fdatasync that follows does that.
// The WAL's own dirty pages are submitted between the two, so the mark's write
// and the WAL's run on the device together, not one after the other; the
// fdatasync waits for the WAL's and reports their errors (a write-only
// sync_file_range does not consume them).
func writeBack(mark, wal vfs.File) error {
	fd := int(mark.Fd())
	if err := unix.SyncFileRange(fd, 0, 0, unix.SYNC_FILE_RANGE_WRITE); err != nil {
		return err
	}
	if wfd := wal.Fd(); wfd != vfs.InvalidFd {
		_ = unix.SyncFileRange(int(wfd), 0, 0, unix.SYNC_FILE_RANGE_WRITE)
	}
	return unix.SyncFileRange(fd, 0, 0,
		unix.SYNC_FILE_RANGE_WAIT_BEFORE|unix.SYNC_FILE_RANGE_WRITE|unix.SYNC_FILE_RANGE_WAIT_AFTER)
}
