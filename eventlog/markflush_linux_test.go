package eventlog

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gale-stream/gale/internal/mounttest"
	"golang.org/x/sys/unix"
)

func statfsType(dir string) int64 {
	var fs unix.Statfs_t
	if unix.Statfs(dir, &fs) != nil {
		return -1
	}
	return int64(fs.Type)
}

func isExt4(dir string) bool { return statfsType(dir) == ext4Magic }

// ext4FallsBack says whether the ext4 holding dir reports options (in /proc or
// mountinfo) under which the mark gets its own fdatasync.
func ext4FallsBack(t *testing.T, dir string) bool {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Stat(dir, &st); err != nil {
		t.Fatal(err)
	}
	dev := fmt.Sprintf("%d:%d", unix.Major(st.Dev), unix.Minor(st.Dev))
	_, opts, err := mountOptions("/proc/self/mountinfo", dev)
	if err != nil {
		t.Fatal(err)
	}
	_, sbOpts, err := ext4Options("/sys/dev/block", "/proc/fs/ext4", dev)
	if err != nil {
		t.Fatal(err)
	}
	return ext4Fallback(append(opts, sbOpts...)) != ""
}
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

func TestExt4Options(t *testing.T) {
	root := t.TempDir()
	sys, proc := filepath.Join(root, "sys"), filepath.Join(root, "proc")
	write := func(path, text string) {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// As a 5.x/6.1 kernel gave them for a fast_commit file system on loop0 (6.18's
	// name no fast-commit flag: testdata/ext4/options-6.18-fast_commit).
	write(filepath.Join(sys, "7:0", "uevent"), "MAJOR=7\nMINOR=0\nDEVNAME=loop0\nDEVTYPE=disk\n")
	write(filepath.Join(proc, "loop0", "options"), "rw\nbsddf\njournal_checksum\nbarrier\nfc_debug_force\ndata=ordered\n")
	name, opts, err := ext4Options(sys, proc, "7:0")
	if err != nil || name != "loop0" || !slices.Contains(opts, "fc_debug_force") || !slices.Contains(opts, "barrier") {
		t.Fatalf("7:0: %q %q, %v", name, opts, err)
	}
	if _, _, err := ext4Options(sys, proc, "8:1"); err == nil || !strings.Contains(err.Error(), "device 8:1") {
		t.Fatalf("unknown device: %v", err)
	}
	write(filepath.Join(sys, "8:1", "uevent"), "MAJOR=8\nMINOR=1\nDEVNAME=sda1\n")
	if _, _, err := ext4Options(sys, proc, "8:1"); err == nil || !strings.Contains(err.Error(), "sda1") {
		t.Fatalf("device without ext4 options: %v", err)
	}
}

func readTestdata(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "ext4", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// Both kernels' ways of saying "fast commits": the old one names fc_debug_force
// among the options, 6.18 names nothing there and counts in fc_info.
func TestFastCommitSignalsOfBothKernels(t *testing.T) {
	if why := ext4Fallback([]string{"rw", "barrier", "fc_debug_force", "data=ordered"}); !strings.Contains(why, "fast commits") {
		t.Fatalf("old kernel's options: %q, want fast commits named", why)
	}
	opts618 := strings.Fields(readTestdata(t, "options-6.18-fast_commit"))
	if why := ext4Fallback(opts618); why != "" {
		t.Fatalf("6.18's options of a fast_commit file system: %q; they name nothing, fc_info must tell", why)
	}
	for _, c := range []struct {
		file                string
		commits, ineligible uint64
	}{
		{"fc_info-6.18-fast_commit", 1, 1},
		{"fc_info-6.18-plain", 0, 0},
	} {
		commits, ineligible, err := parseFCInfo(readTestdata(t, c.file))
		if err != nil || commits != c.commits || ineligible != c.ineligible {
			t.Fatalf("%s: %d commits, %d ineligible, %v; want %d, %d", c.file, commits, ineligible, err, c.commits, c.ineligible)
		}
	}
	if _, _, err := parseFCInfo("fc stats:\n3 commits\n"); err == nil || !strings.Contains(err.Error(), "ineligible") {
		t.Fatalf("fc_info without its ineligible line: %v", err)
	}
	if _, _, err := parseFCInfo("x commits\n0 ineligible\n"); err == nil || !strings.Contains(err.Error(), `"x commits"`) {
		t.Fatalf("fc_info with a bad count: %v", err)
	}
	for file, want := range map[string]bool{"superblock-fast_commit": true, "superblock-plain": false} {
		got, err := parseSuperBlock([]byte(readTestdata(t, file)))
		if err != nil || got != want {
			t.Fatalf("%s: fast_commit %v, %v; want %v", file, got, err, want)
		}
	}
	if _, err := parseSuperBlock(make([]byte, 1024)); err == nil {
		t.Fatal("zeros read as an ext4 super block")
	}
}

// fastCommits on captured text: the counters are read, a probe is run when they
// are 0, the super block is the second source, and no answer means fcUnknown.
func TestFastCommitsDecides(t *testing.T) {
	fcText, plainText := readTestdata(t, "fc_info-6.18-fast_commit"), readTestdata(t, "fc_info-6.18-plain")
	sbFC, sbPlain := readTestdata(t, "superblock-fast_commit"), readTestdata(t, "superblock-plain")
	type files struct{ fcInfo, afterProbe, superBlock string }
	for _, c := range []struct {
		name     string
		f        files
		noFCSys  bool // the kernel's features list lacks fast_commit
		probeErr error
		want     fcAnswer
		probes   int
		why      string
	}{
		{"counted already", files{fcText, fcText, ""}, false, nil, fcOn, 0, "counts 2"},
		{"counted after a probe", files{plainText, fcText, ""}, false, nil, fcOn, 1, "after a journaled fdatasync"},
		{"never counted", files{plainText, plainText, ""}, false, nil, fcOff, fcProbes, "stayed at 0"},
		{"never counted, super block says fast_commit", files{plainText, plainText, sbFC}, false, nil, fcOn, fcProbes, "super block has fast_commit"},
		{"never counted, super block agrees", files{plainText, plainText, sbPlain}, false, nil, fcOff, fcProbes, "no fast_commit"},
		{"probe refused, no super block", files{plainText, plainText, ""}, false, errors.New("read-only"), fcUnknown, 1, "probe: read-only"},
		{"probe refused, super block", files{plainText, plainText, sbPlain}, false, errors.New("read-only"), fcOff, 1, "no fast_commit"},
		{"no fc_info, kernel without fast commits", files{"", "", ""}, true, nil, fcOff, 0, "no fast commits"},
		{"no fc_info, no super block", files{"", "", ""}, false, nil, fcUnknown, 0, "fast-commit counters"},
		{"no fc_info, super block", files{"", "", sbFC}, false, nil, fcOn, 0, "super block has fast_commit"},
	} {
		t.Run(c.name, func(t *testing.T) {
			root := t.TempDir()
			p := ext4Paths{proc: filepath.Join(root, "proc"), features: filepath.Join(root, "features"), dev: filepath.Join(root, "dev")}
			for _, d := range []string{filepath.Join(p.proc, "loop0"), p.features, p.dev} {
				if err := os.MkdirAll(d, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			if !c.noFCSys {
				if err := os.WriteFile(filepath.Join(p.features, "fast_commit"), []byte("supported\n"), 0o444); err != nil {
					t.Fatal(err)
				}
			}
			info := filepath.Join(p.proc, "loop0", "fc_info")
			put := func(path, text string) {
				if text == "" {
					return
				}
				if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			put(info, c.f.fcInfo)
			put(filepath.Join(p.dev, "loop0"), strings.Repeat("\x00", 1024)+c.f.superBlock)
			probes := 0
			got, why := fastCommits(p, "loop0", func() error {
				probes++
				if c.probeErr != nil {
					return c.probeErr
				}
				put(info, c.f.afterProbe)
				return nil
			})
			if got != c.want || probes != c.probes || !strings.Contains(why, c.why) {
				t.Fatalf("got %d after %d probes (%q), want %d after %d, the reason naming %q", got, probes, why, c.want, c.probes, c.why)
			}
		})
	}
}

// needLoop skips a test that needs root, mkfs.ext4 and mount, or fails it where
// .ci/run said they are there (GALE_TEST_LOOP=1).
func needLoop(t *testing.T) {
	t.Helper()
	skip := t.Skipf
	if os.Getenv("GALE_TEST_LOOP") == "1" {
		skip = t.Fatalf
	}
	if why := mounttest.Missing(); why != "" {
		skip("%s", why)
	}
	for _, tool := range []string{"mkfs.ext4", "mount", "umount"} {
		if _, err := exec.LookPath(tool); err != nil {
			skip("needs %s: %v", tool, err)
		}
	}
}

// mountExt4 makes a 64 MiB ext4 with mkfs.ext4's extra args on a loop device and
// mounts it; the test's cleanup unmounts it (which frees the loop device).
func mountExt4(t *testing.T, mkfsArgs ...string) string {
	t.Helper()
	dir := t.TempDir()
	img, mnt := filepath.Join(dir, "fs.img"), filepath.Join(dir, "mnt")
	if err := os.Mkdir(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(img, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(img, 64<<20); err != nil {
		t.Fatal(err)
	}
	run := func(name string, args ...string) {
		if out, err := exec.Command(name, args...).CombinedOutput(); err != nil {
			t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
		}
	}
	run("mkfs.ext4", append(append([]string{"-q"}, mkfsArgs...), img)...)
	run("mount", "-o", "loop", img, mnt)
	t.Cleanup(func() {
		if out, err := exec.Command("umount", mnt).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v\n%s", mnt, err, out)
		}
	})
	return mnt
}

// On ext4 with fast commits a WAL fdatasync can return without a cache flush of
// its own (it waited for a fast commit that flushed before the mark's write
// completed), so the mark must get its own fdatasync there; before the fix it
// rode the WAL's flush on any ext4 whose mount options looked right, as
// mountinfo does not show super-block features.
func TestMarkSyncOnFastCommitExt4(t *testing.T) {
	needLoop(t)
	for _, c := range []struct {
		name string
		mkfs []string
		want string
	}{
		// On 6.18 the options name no fast-commit flag: found by the fc_info probe.
		{"fast_commit", []string{"-O", "fast_commit"}, "fdatasync: ext4 on "},
		{"journal", nil, "wal-flush: ext4 on "},
	} {
		t.Run(c.name, func(t *testing.T) {
			mnt := mountExt4(t, c.mkfs...)
			// Freshly mounted, nothing synced yet: the answer comes from the probe.
			var st unix.Stat_t
			if err := unix.Stat(mnt, &st); err != nil {
				t.Fatal(err)
			}
			name, _, err := ext4Options("/sys/dev/block", "/proc/fs/ext4", fmt.Sprintf("%d:%d", unix.Major(st.Dev), unix.Minor(st.Dev)))
			if err != nil {
				t.Fatal(err)
			}
			fc, how := fastCommits(hostExt4, name, func() error { return journaledSync(mnt) })
			if (fc == fcOn) != (c.name == "fast_commit") || fc == fcUnknown {
				t.Fatalf("fastCommits on a fresh mount: %d (%s)", fc, how)
			}
			t.Logf("fresh mount: %s", how)
			l, err := Open(Options{Dir: filepath.Join(mnt, "log")})
			if err != nil {
				t.Fatal(err)
			}
			got := l.Stats().MarkSync
			acked := appendEach(t, l, c.name, 20)
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(got, c.want) || (c.name == "fast_commit") != strings.Contains(got, "uses fast commits") {
				t.Fatalf("MarkSync = %q, want it to start with %q and name fast commits only for fast_commit", got, c.want)
			}
			if len(acked) != 20 {
				t.Fatalf("%d appends acknowledged, want 20", len(acked))
			}
			t.Logf("%s: %s", c.name, got)
		})
	}
}
