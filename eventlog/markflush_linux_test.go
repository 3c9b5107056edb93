package eventlog

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

func statfsType(dir string) int64 {
	var fs unix.Statfs_t
	if unix.Statfs(dir, &fs) != nil {
		return -1
	}
	return int64(fs.Type)
}

func isExt4(dir string) bool  { return statfsType(dir) == ext4Magic }
func isTmpfs(dir string) bool { return statfsType(dir) == unix.TMPFS_MAGIC }

// Lines of a real /proc/self/mountinfo (this machine's root, plus an ext4 mount
// journalling data as an operator might set it).
const mountinfo = `22 1 254:0 / / rw,relatime shared:1 - ext4 /dev/vda rw,discard
23 22 0:21 / /proc rw,nosuid,nodev,noexec,relatime shared:12 - proc proc rw
40 22 259:3 / /srv rw,noatime - ext4 /dev/nvme0n1p3 rw,data=journal
41 22 8:17 / /old rw,relatime - ext3 /dev/sdb1 rw
`

func TestMountOptions(t *testing.T) {
	path := filepath.Join(t.TempDir(), "mountinfo")
	if err := os.WriteFile(path, []byte(mountinfo), 0o644); err != nil {
		t.Fatal(err)
	}
	fstype, opts, err := mountOptions(path, "254:0")
	if err != nil || fstype != "ext4" || !slices.Equal(opts, []string{"rw", "relatime", "rw", "discard"}) {
		t.Fatalf("254:0: %s %q, %v", fstype, opts, err)
	}
	_, opts, err = mountOptions(path, "259:3")
	if err != nil || !slices.Contains(opts, "data=journal") {
		t.Fatalf("259:3: %q, %v; want data=journal among them", opts, err)
	}
	if fstype, _, err := mountOptions(path, "8:17"); err != nil || fstype != "ext3" {
		t.Fatalf("8:17: %q, %v; want ext3", fstype, err)
	}
	if _, _, err := mountOptions(path, "8:1"); err == nil || !strings.Contains(err.Error(), "no mount of device 8:1") {
		t.Fatalf("unknown device: %v", err)
	}
}
