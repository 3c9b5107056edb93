//go:build linux

package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/cockroachdb/pebble/v2/record"

	"github.com/gale-stream/gale/event"
	"github.com/gale-stream/gale/ingest"
	"github.com/gale-stream/gale/internal/waitfor"
)

// A failing log device, with real kernel block I/O errors and no device-mapper:
// ext4 on a loop device whose backing file is a sparse file on a small tmpfs. Once
// the tmpfs is full the loop driver cannot store blocks it has not stored before, so
// writeback fails ("Buffer I/O error") and fsync returns an error.
//
// One thing about that device must be known to read these tests: the loop driver
// (drivers/block/loop.c, lo_complete_rq) ends a WRITE request whose write to the
// backing file came back short with success. Once the tmpfs is full, a request
// that starts in a block the tmpfs already holds and runs into new ones is stored
// only in its first part yet reported written, so the fsync that waited for it
// returns 0 for data that is not on the device, with no kernel message. No
// fsync-based store can keep such a write: that is what lost the group commit
// answered just before the first failing one in issue 9 §2
// (TestLoopDriverShortWriteIsSilent, TestLogDiskLieIsNotSilent).
// newFailingDisk with honest=true caps the device's requests at one 4 KiB page,
// the unit tmpfs allocates, so every request is stored whole or fails whole, and
// the kernel reports every failure.

// needRoot skips unless the test can make loop devices and file systems (as root,
// with util-linux and e2fsprogs); GALE_TEST_LOOP=1 (.ci/run sets it) makes that
// a failure instead.
func needRoot(t *testing.T) {
	t.Helper()
	skip := needRootWith(t, "mount, losetup", "losetup", "mkfs.ext4", "fsck.ext4", "mount", "umount", "truncate")
	if out, err := exec.Command("losetup", "--find").CombinedOutput(); err != nil {
		skip("needs a free loop device (losetup --find: %v %s)", err, out)
	}
}

func sh(t *testing.T, name string, args ...string) string {
	t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

// failingDisk is a loop device on a sparse file on a small tmpfs.
type failingDisk struct {
	tmpfs, back, dev string
	mnt              string // where the ext4 on dev is mounted ("" if not)
}

// newFailingDisk makes a tmpfs of tmpfsMiB holding a sparse backing file of
// backMiB, attaches it to a loop device and, if honest, caps its requests at one
// page. Everything it makes is undone at the test's end, also on failure.
//
// tmpfsMiB 0 puts the backing file in the test's temporary directory instead: a
// device that never fails, for a file system that fills up by itself.
func newFailingDisk(t *testing.T, tmpfsMiB, backMiB int, honest bool) *failingDisk {
	t.Helper()
	d := &failingDisk{tmpfs: t.TempDir()}
	if tmpfsMiB > 0 {
		sh(t, "mount", "-t", "tmpfs", "-o", fmt.Sprintf("size=%dm", tmpfsMiB), "gale-test", d.tmpfs)
		t.Cleanup(func() {
			if err := exec.Command("umount", d.tmpfs).Run(); err != nil {
				_ = exec.Command("umount", "-l", d.tmpfs).Run()
			}
		})
	}
	d.back = filepath.Join(d.tmpfs, "backing")
	sh(t, "truncate", "-s", fmt.Sprintf("%dM", backMiB), d.back)
	d.dev = sh(t, "losetup", "--find", "--show", d.back)
	t.Cleanup(func() { _ = exec.Command("losetup", "-d", d.dev).Run() })
	// The request size limit outlives the attachment (a later losetup of the same
	// device keeps it), so it is set either way and put back at the end.
	q := filepath.Join("/sys/block", filepath.Base(d.dev), "queue")
	was, err := os.ReadFile(filepath.Join(q, "max_sectors_kb"))
	if err != nil {
		t.Fatal(err)
	}
	limit := []byte("4")
	if !honest {
		if limit, err = os.ReadFile(filepath.Join(q, "max_hw_sectors_kb")); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(q, "max_sectors_kb"), limit, 0o644); err != nil {
		t.Fatalf("setting %s's request size limit to %s KiB: %v", d.dev, limit, err)
	}
	t.Cleanup(func() { _ = os.WriteFile(filepath.Join(q, "max_sectors_kb"), was, 0o644) })
	return d
}

// mkfs makes ext4 on the device and mounts it; the unmount is a cleanup too.
func (d *failingDisk) mkfs(t *testing.T) {
	t.Helper()
	sh(t, "mkfs.ext4", "-q", "-F", d.dev)
	d.mount(t)
}

func (d *failingDisk) mount(t *testing.T) {
	t.Helper()
	if d.mnt == "" {
		d.mnt = t.TempDir()
	}
	sh(t, "mount", "-t", "ext4", d.dev, d.mnt)
	mnt := d.mnt
	t.Cleanup(func() {
		if err := exec.Command("umount", mnt).Run(); err != nil && !strings.Contains(err.Error(), "exit status 32") {
			_ = exec.Command("umount", "-l", mnt).Run()
		}
	})
}

func (d *failingDisk) umount(t *testing.T) {
	t.Helper()
	sh(t, "umount", d.mnt)
}

// fill takes every free byte of the file system at dir (for the tmpfs: the loop
// device's writes to blocks it has not stored then fail) and returns the function
// that frees them.
func fill(t *testing.T, dir string) (free func()) {
	t.Helper()
	name := filepath.Join(dir, "gale-test-fill")
	f, err := os.Create(name)
	if err != nil {
		t.Fatal(err)
	}
	// Until ENOSPC, in smaller writes at the end, so not a page is left.
	buf := make([]byte, 1<<20)
	for len(buf) >= 4096 {
		if _, err := f.Write(buf); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("filling %s: %v", dir, err)
			}
			buf = buf[:len(buf)/2]
		}
	}
	if err := f.Sync(); err != nil && !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("filling %s: %v", dir, err)
	}
	_ = f.Close()
	return func() {
		if err := os.Remove(name); err != nil {
			t.Errorf("freeing %s: %v", dir, err)
		}
	}
}

// directWrite writes n bytes of b at off to the device with O_DIRECT and fsyncs,
// returning what the kernel said.
func directWrite(dev string, off int64, n int, b byte) (int, error) {
	f, err := os.OpenFile(dev, os.O_RDWR|syscall.O_DIRECT, 0)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	buf := alignedBuf(n)
	for i := range buf {
		buf[i] = b
	}
	w, err := f.WriteAt(buf, off)
	if err != nil {
		return w, err
	}
	return w, f.Sync()
}

func alignedBuf(n int) []byte {
	raw := make([]byte, n+4096)
	skip := int(4096 - uintptr(unsafe.Pointer(&raw[0]))&4095)
	return raw[skip : skip+n]
}

// storedBytes counts the bytes equal to b that the device holds at [off, off+n),
// read past the page cache.
func storedBytes(t *testing.T, dev string, off int64, n int, b byte) int {
	t.Helper()
	f, err := os.OpenFile(dev, os.O_RDONLY|syscall.O_DIRECT, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := alignedBuf(n)
	if _, err := f.ReadAt(buf, off); err != nil {
		t.Fatal(err)
	}
	c := 0
	for _, x := range buf {
		if x == b {
			c++
		}
	}
	return c
}

// The loop driver's lie, shown on the raw device: with 64 KiB left on the tmpfs a
// 128 KiB O_DIRECT write and its fsync both succeed, yet only 64 KiB are stored.
// With requests capped at one page the same write fails, as it must. This is the
// mechanism of issue 9 §2's loss, below any file system or database.
func TestLoopDriverShortWriteIsSilent(t *testing.T) {
	needRoot(t)
	for _, honest := range []bool{false, true} {
		t.Run(fmt.Sprintf("honest=%v", honest), func(t *testing.T) {
			d := newFailingDisk(t, 8, 64, honest)
			name := filepath.Join(d.tmpfs, "fill")
			// Leave exactly 64 KiB of the 8 MiB tmpfs (the backing file holds none yet).
			if err := os.WriteFile(name, make([]byte, 8<<20-64<<10), 0o644); err != nil {
				t.Fatal(err)
			}
			const off, n = 16 << 20, 128 << 10
			w, err := directWrite(d.dev, off, n, 0xab)
			stored := storedBytes(t, d.dev, off, n, 0xab)
			t.Logf("%s: 128 KiB O_DIRECT write+fsync with 64 KiB free: wrote %d, err %v; device holds %d bytes of it", d.dev, w, err, stored)
			if honest {
				if err == nil {
					t.Fatalf("one-page requests: the write of %d bytes succeeded with %d stored", w, stored)
				}
				return
			}
			if err == nil && stored < n {
				t.Logf("the loop driver reported a short write as success: %d of %d bytes lost after a successful fsync", n-stored, n)
			} else {
				t.Logf("this kernel's loop driver reports the short write (err %v): the lie is fixed here", err)
			}
		})
	}
}

// serveOn starts gale serve with its log in data, the sink off the failing disk
// (these tests are about the log), and returns its args for a restart.
func serveOn(t *testing.T, data string) []string {
	return []string{"serve", "--data", data, "--sink", filepath.Join(t.TempDir(), "sink.db"),
		"--addr", freeAddr(t), "--log-level", "error"}
}

// stopChild sends SIGTERM and waits (a failed log may make the stop report an error).
func stopChild(c *child) {
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	_ = c.cmd.Wait()
}

// restartAfterFsck unmounts, runs fsck.ext4 -fy (which must find the file system
// clean), remounts and returns the WAL files as the device holds them.
func (d *failingDisk) restartAfterFsck(t *testing.T, logDir string) map[string][]byte {
	t.Helper()
	d.umount(t)
	out, err := exec.Command("fsck.ext4", "-fy", d.dev).CombinedOutput()
	if err != nil {
		t.Fatalf("fsck.ext4 -fy %s: %v\n%s", d.dev, err, out)
	}
	d.mount(t)
	return readWALs(t, logDir)
}

// diskRun is one cycle of the reproduction: gale serve with its log on
// d, 16 clients posting ack=persisted, the file system at full filled once 2,000
// events were answered and freed once the failure shows (/readyz 503, or the
// process gone), SIGTERM, unmount, fsck, remount, restart; then every event
// answered PERSISTED is looked up. It returns the ids answered PERSISTED, those
// missing after the restart, how the failure showed, and why the restart did not
// become ready ("" if it did).
func diskRun(t *testing.T, d *failingDisk, full string) (persisted, missing []string, how, refused string) {
	d.mkfs(t)
	if full == "" {
		full = d.mnt
	}
	data := filepath.Join(d.mnt, "data")
	args := serveOn(t, data)
	c := startChild(t, args...)
	stopped := false
	defer func() {
		if !stopped {
			_ = c.cmd.Process.Kill()
			_ = c.cmd.Wait()
		}
	}()
	client := &ingest.Client{URL: c.url}

	var mu sync.Mutex
	cond := sync.NewCond(&mu)
	live := 16
	afterFail := 0 // PERSISTED answers to requests sent after /readyz said 503
	failedSeen := false
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range live {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { mu.Lock(); live--; cond.Broadcast(); mu.Unlock() }()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				mu.Lock()
				sentAfterFail := failedSeen
				mu.Unlock()
				id := fmt.Sprintf("d%d-%d", w, i)
				ev := event.Event{ID: id, Source: "disk", Type: "t", Payload: []byte(fmt.Sprintf(`{"w":%d,"i":%d}`, w, i))}
				answers, _, err := client.Send(context.Background(), []event.Event{ev}, ingest.LevelPersisted, 0)
				if err != nil {
					return
				}
				mu.Lock()
				if len(answers) == 1 && (answers[0].Status == ingest.Persisted || answers[0].Status == ingest.Processed) {
					persisted = append(persisted, id)
					if sentAfterFail {
						afterFail++
					}
					cond.Broadcast()
				}
				mu.Unlock()
			}
		}()
	}
	mu.Lock()
	for len(persisted) < 2000 && live == 16 {
		cond.Wait()
	}
	n := len(persisted)
	mu.Unlock()
	if n < 2000 {
		t.Fatalf("a client stopped after %d answers\n%s", n, c.stderr.String())
	}
	free := fill(t, full)
	// The failure shows (sticky, /readyz 503; or the process ended); bounded, for
	// a disk that never fails.
	err := waitfor.Err(context.Background(), time.Minute, func() error {
		var re *readyzError
		switch err := readyz(c.url); {
		case err == nil:
			return fmt.Errorf("the log has not failed with %s full: /readyz 200", full)
		case errors.As(err, &re) && re.code == http.StatusServiceUnavailable:
			how = "/readyz 503: " + re.body
		case errors.As(err, &re):
			return err
		default:
			how = "the process ended: " + lastLine(c.stderr.String())
		}
		return nil
	})
	if err != nil {
		free()
		t.Fatal(err)
	}
	mu.Lock()
	failedSeen = true
	mu.Unlock()
	free()
	// Sticky: space back or not, the log stays failed until a restart.
	if resp, err := http.Get(c.url + "/readyz"); err == nil {
		resp.Body.Close()
		if resp.StatusCode != http.StatusServiceUnavailable {
			t.Errorf("/readyz %d once space was freed, want 503 until a restart", resp.StatusCode)
		}
	}
	close(stop)
	wg.Wait()
	if afterFail != 0 {
		t.Errorf("%d events sent after /readyz said 503 were answered PERSISTED", afterFail)
	}
	cached := readWALs(t, filepath.Join(data, "log")) // as the page cache has them
	stopChild(c)
	stopped = true
	ondisk := d.restartAfterFsck(t, filepath.Join(data, "log"))
	defer func() { walDiff(t, cached, ondisk, missing) }()
	c2, ready, why := startMaybe(t, args...)
	if !ready {
		return persisted, nil, how, why
	}
	client.URL = c2.url
	for i, a := range askStatuses(context.Background(), client, persisted) {
		if a.err != nil {
			t.Fatalf("status of %s after restart: %v", persisted[i], a.err)
		}
		if !a.found {
			missing = append(missing, persisted[i])
		}
	}
	// Recovered: the restarted server takes new events again.
	answers, _, err := client.Send(context.Background(), []event.Event{{ID: "after-restart", Source: "disk", Type: "t",
		Payload: []byte(`{}`)}}, ingest.LevelPersisted, 0)
	if err != nil || len(answers) != 1 || answers[0].Status != ingest.Persisted {
		t.Errorf("a new event after the restart: %+v %v", answers, err)
	}
	return persisted, missing, how, ""
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		return s[i+1:]
	}
	return s
}

// Issue 9 §2 on a device that reports every failed write (requests of one page):
// the log fails sticky, nothing sent after /readyz said 503 is answered PERSISTED,
// fsck finds the file system clean, and nothing answered PERSISTED is missing
// after the restart.
func TestLogDiskErrorKeepsPersisted(t *testing.T) {
	needRoot(t)
	d := newFailingDisk(t, 400, 1024, true)
	persisted, missing, how, refused := diskRun(t, d, d.tmpfs)
	t.Logf("the failure showed as %s", how)
	if refused != "" {
		t.Fatalf("the restart did not become ready: %s", refused)
	}
	if len(missing) > 0 {
		t.Fatalf("%d of %d events answered PERSISTED are missing after the restart: %v", len(missing), len(persisted), missing)
	}
	t.Logf("%d events answered PERSISTED before the log's device failed; all found after fsck and restart", len(persisted))
}

// The cycle on the loop device as the issue set it up (requests up to
// 1280 KiB, so a part-stored one is reported written), where about every other
// run loses the group answered last: run with GALE_TEST_LYING_LOOP=1 to see the
// losses the issue saw and where they were in the WAL. A loss must not be silent:
// the restart refuses and says what is missing. TestLogDiskLieIsNotSilent is the
// same fault made deterministic, and runs by default.
func TestLogDiskErrorLyingLoop(t *testing.T) {
	needRoot(t)
	if os.Getenv("GALE_TEST_LYING_LOOP") == "" {
		t.Skip("set GALE_TEST_LYING_LOOP=1 to run the issue's cycle on a loop device that may report a part-stored write as written")
	}
	d := newFailingDisk(t, 400, 1024, false)
	persisted, missing, _, refused := diskRun(t, d, d.tmpfs)
	if refused != "" {
		if !strings.Contains(refused, "missing") {
			t.Fatalf("the restart did not become ready, without naming what is missing: %s", refused)
		}
		t.Logf("%d answered PERSISTED; the restart refuses: %s", len(persisted), refused)
		return
	}
	t.Logf("%d answered PERSISTED, %d missing after the restart: %v", len(persisted), len(missing), missing)
	if len(missing) > 0 {
		t.Fatalf("%d events answered PERSISTED are gone and the restart is ready: a silent loss", len(missing))
	}
}

// startMaybe starts a gale serve child and waits until it is ready, exits, or has
// answered /readyz with 503 for 30 s. ready false comes with why: its stderr, or
// the last /readyz body.
func startMaybe(t *testing.T, args ...string) (c *child, ready bool, why string) {
	t.Helper()
	c = spawnChild(t, args...)
	exited := make(chan error, 1)
	go func() { exited <- c.cmd.Wait() }()
	t.Cleanup(func() {
		_ = c.cmd.Process.Signal(syscall.SIGTERM)
		<-exited
		exited <- nil
	})
	gone := false
	err := waitfor.Err(context.Background(), 30*time.Second, func() error {
		select {
		case err := <-exited:
			exited <- err
			gone, why = true, fmt.Sprintf("exited (%v): %s", err, c.stderr.String())
			return nil
		default:
		}
		err := readyz(c.url)
		if ready = err == nil; ready {
			why = ""
			return nil
		}
		if re := (*readyzError)(nil); errors.As(err, &re) {
			why = re.Error()
		}
		return err
	})
	if err != nil && !gone && why == "" {
		why = err.Error()
	}
	return c, ready, why
}

// The fault of issue 9 §2 made deterministic. Once the tmpfs is full, a group
// commit whose WAL bytes start in a page the device already stored and run into
// new ones is written as one request; the loop driver stores the first page, the
// rest fails, and the request is reported written: the fsync returns 0 and the
// event is answered PERSISTED, while the device holds zeros for its bytes (no
// kernel message, and fsck is clean). That is the group answered just before the
// first failing one. gale cannot keep a write the device dropped, but it must
// not lose an answer silently: after the restart the event is found, or the
// server refuses to become ready and names its sequence number. With one-page
// requests (honest) the same write fails and the event is not answered PERSISTED.
func TestLogDiskLieIsNotSilent(t *testing.T) {
	needRoot(t)
	for _, honest := range []bool{true, false} {
		t.Run(fmt.Sprintf("honest=%v", honest), func(t *testing.T) {
			d := newFailingDisk(t, 64, 1024, honest)
			d.mkfs(t)
			data := filepath.Join(d.mnt, "data")
			logDir := filepath.Join(data, "log")
			args := serveOn(t, data)
			c := startChild(t, args...)
			client := &ingest.Client{URL: c.url}
			// Some history, processed and its statuses synced: nothing is left to write.
			var warm []event.Event
			for i := range 100 {
				warm = append(warm, event.Event{ID: fmt.Sprintf("w%d", i), Source: "disk", Type: "t", Payload: []byte(`{}`)})
			}
			answers, _, err := client.Send(context.Background(), warm, ingest.LevelProcessed, time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			for _, a := range answers {
				if a.Status != ingest.Processed {
					t.Fatalf("warm-up %s: %s %s", a.EventID, a.Status, a.Error)
				}
			}
			free := fill(t, d.tmpfs)
			// One event whose record (8 KiB) starts in the WAL's last, stored page
			// and runs into pages the device has not stored.
			ev := event.Event{ID: "lie", Source: "disk", Type: "t",
				Payload: []byte(`{"pad":"` + strings.Repeat("x", 8<<10) + `"}`)}
			answers, _, err = client.Send(context.Background(), []event.Event{ev}, ingest.LevelPersisted, 0)
			if err != nil || len(answers) != 1 {
				t.Fatalf("send: %v %v", answers, err)
			}
			a := answers[0]
			t.Logf("answer with the tmpfs full: %s seq %d %s", a.Status, a.Seq, a.Error)
			free()
			cached := readWALs(t, logDir)
			stopChild(c)
			ondisk := d.restartAfterFsck(t, logDir)
			var missing []string
			defer func() { walDiff(t, cached, ondisk, missing) }()
			c2, ready, why := startMaybe(t, args...)
			if !ready {
				if a.Status == ingest.Persisted && strings.Contains(why, fmt.Sprint(a.Seq)) {
					t.Logf("the restart refuses and names seq %d: %s", a.Seq, why)
					return
				}
				t.Fatalf("the restart did not become ready (answered %s seq %d): %s", a.Status, a.Seq, why)
			}
			client.URL = c2.url
			for _, w := range warm {
				if _, found, err := client.Status(context.Background(), w.ID); err != nil || !found {
					t.Fatalf("warm-up %s after the restart: found %v, %v", w.ID, found, err)
				}
			}
			if a.Status != ingest.Persisted {
				return // not answered PERSISTED: nothing was promised
			}
			st, found, err := client.Status(context.Background(), ev.ID)
			if err != nil {
				t.Fatal(err)
			}
			if !found {
				missing = append(missing, ev.ID)
				t.Fatalf("event %q was answered PERSISTED (seq %d); after fsck and the restart it is gone and the server is ready: a silent loss", ev.ID, a.Seq)
			}
			t.Logf("after the restart: %s seq %d", st.Status, st.Seq)
		})
	}
}

// readWALs reads the Pebble WAL files (*.log) of dir.
func readWALs(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	names, err := filepath.Glob(filepath.Join(dir, "*.log"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]byte{}
	for _, n := range names {
		b, err := os.ReadFile(n)
		if err != nil {
			t.Fatal(err)
		}
		out[filepath.Base(n)] = b
	}
	return out
}

// walDiff logs where the WAL the process wrote (cached, read from the page cache
// before the stop) differs from the WAL on the device after the remount, and
// which missing ids the differing bytes held.
func walDiff(t *testing.T, cached, disk map[string][]byte, missing []string) {
	for name, c := range cached {
		d, ok := disk[name]
		if !ok {
			t.Logf("WAL %s (%d bytes written) is gone after the restart", name, len(c))
			continue
		}
		first, last, zero := -1, -1, true
		for i := range c {
			var db byte
			if i < len(d) {
				db = d[i]
			}
			if c[i] != db {
				if first < 0 {
					first = i
				}
				last = i
				zero = zero && db == 0
			}
		}
		if first < 0 {
			continue
		}
		var held []string
		for _, id := range missing {
			if bytes.Contains(c[first:last+1], []byte(id)) {
				held = append(held, id)
			}
		}
		t.Logf("WAL %s: %d bytes written, %d on the device; bytes %d..%d differ (device holds zeros there: %v; 4 KiB pages %d..%d); they held %d of the %d missing ids",
			name, len(c), len(d), first, last, zero, first/4096, last/4096, len(held), len(missing))
		t.Logf("WAL %s as written: %s; as on the device: %s", name, readRecords(name, c), readRecords(name, d))
	}
}

// readRecords says how far Pebble's WAL record reader gets in b: Pebble's
// recovery takes an invalid record (IsInvalidRecord) for the end of the log.
func readRecords(name string, b []byte) string {
	var num uint64
	if _, err := fmt.Sscanf(name, "%d.log", &num); err != nil {
		return err.Error()
	}
	r := newRecordReader(record.NewReader, bytes.NewReader(b), num)
	n := 0
	for {
		off := r.Offset()
		rr, err := r.Next()
		if err == nil {
			_, err = io.Copy(io.Discard, rr)
		}
		if err != nil {
			return fmt.Sprintf("%d records, then %v at offset %d (taken for the end of the log: %v)", n, err, off,
				err == io.EOF || record.IsInvalidRecord(err))
		}
		n++
	}
}

// newRecordReader calls record.NewReader, whose log number type is internal to
// Pebble (inferred here from the function).
func newRecordReader[N ~uint64](mk func(io.Reader, N) *record.Reader, r io.Reader, num uint64) *record.Reader {
	return mk(r, N(num))
}

// A full log disk (ext4 out of space, on a device that never fails) is what it
// was before issue 9: the log fails sticky at the first write Pebble cannot
// make, /readyz turns 503 and stays so (or, when Pebble's own background work
// hits ENOSPC on a file it must write, the process ends), nothing is answered
// PERSISTED after that, and a restart once space is freed recovers every event
// answered PERSISTED and takes new ones.
func TestLogDiskFull(t *testing.T) {
	needRoot(t)
	d := newFailingDisk(t, 0, 256, false)
	persisted, missing, how, refused := diskRun(t, d, "")
	t.Logf("the full disk showed as %s", how)
	if refused != "" {
		t.Fatalf("the restart did not become ready: %s", refused)
	}
	if len(missing) > 0 {
		t.Fatalf("%d of %d events answered PERSISTED are missing after the restart: %v", len(missing), len(persisted), missing)
	}
	t.Logf("%d events answered PERSISTED before the disk filled; all found after freeing space and a restart", len(persisted))
}
