package eventlog

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/cockroachdb/pebble/v2/vfs"
	"golang.org/x/sys/unix"
)

const ext4Magic = 0xEF53

// walFlushable reports whether the mark file f may ride the WAL's flush: written
// back with sync_file_range before each WAL fdatasync instead of synced on its
// own. That holds where an overwrite in place needs no metadata (the file is full
// size and its blocks written, see createHWM) and the WAL's fdatasync always ends
// with a cache flush of the device, which makes every write completed before it
// durable, the mark's included. ext4 does both (its fsync issues the flush through
// the journal commit or blkdev_issue_flush), unless it journals data, commits
// asynchronously, was mounted without barriers or uses fast commits: a fast
// commit that finds another one running waits for it and returns without a flush
// of its own, and the one it waited for may have flushed before the mark's write
// completed (seen with tracefs on a fast_commit file system beside a SQLite
// sink's fsyncs; the mark's own fdatasync, having nothing to journal, always
// flushes). What ext4 itself says of the file system is read from
// /proc/fs/ext4/DEV/options, which names features the super block turns on
// (mountinfo does not); if it cannot be read the mark gets its own fdatasync.
// Copy-on-write file systems (btrfs, zfs) allocate on every overwrite, and others
// are not checked: there the mark gets its own fdatasync.
func walFlushable(f vfs.File) (bool, string) {
	fd := f.Fd()
	if fd == vfs.InvalidFd {
		return false, "not a file of the operating system"
	}
	var fs unix.Statfs_t
	if err := unix.Fstatfs(int(fd), &fs); err != nil {
		return false, fmt.Sprintf("statfs: %v", err)
	}
	if fs.Type != ext4Magic {
		return false, fmt.Sprintf("file system type %#x is not ext4", fs.Type)
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
	return true, fmt.Sprintf("ext4 on %s (%s): the WAL's fdatasync flushes the device", name, dev)
}

// ext4Fallback says why ext4 with these options cannot carry the mark on the
// WAL's flush, or "" if it can.
func ext4Fallback(opts []string) string {
	for _, o := range opts {
		switch o {
		case "data=journal", "journal_async_commit", "nobarrier", "barrier=0":
			return "is mounted with " + o
		case "fc_debug_force": // the name /proc gives the flag fast commits set
			return "uses fast commits, whose fdatasync may end without a flush"
		}
		if strings.HasPrefix(o, "dax") { // persistent memory: not examined
			return "is mounted with " + o
		}
	}
	return ""
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
