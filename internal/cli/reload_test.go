package cli

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gale-stream/gale/internal/waitfor"
)

func statusWith(t *testing.T, url, token string) int {
	t.Helper()
	req, _ := http.NewRequest("GET", url+"/v1/lost", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// SIGHUP to a gale serve process re-reads its tokens file; a broken file is logged
// and the tokens before it stay; the process keeps serving, and SIGTERM still stops
// it cleanly.
func TestSIGHUPReloadsTheTokensFile(t *testing.T) {
	const a, b = "token-a-0123456789abcdef", "token-b-0123456789abcdef"
	tokens := filepath.Join(t.TempDir(), "tokens.txt")
	write := func(s string) {
		if err := os.WriteFile(tokens+".tmp", []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tokens+".tmp", tokens); err != nil {
			t.Fatal(err)
		}
	}
	write(a + " read\n")
	c := startChild(t, "serve", "--data", t.TempDir(), "--addr", freeAddr(t), "--tokens", tokens, "--log-level", "info")
	defer func() { _ = c.cmd.Process.Kill() }()
	if got := [2]int{statusWith(t, c.url, a), statusWith(t, c.url, b)}; got != [2]int{200, 401} {
		t.Fatalf("before SIGHUP: a %d, b %d", got[0], got[1])
	}
	write(b + " read\n")
	if err := c.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitLogged(t, c, "tokens reloaded")
	if got := [2]int{statusWith(t, c.url, a), statusWith(t, c.url, b)}; got != [2]int{401, 200} {
		t.Fatalf("after SIGHUP: a %d, b %d", got[0], got[1])
	}
	write(b + " read\n" + a + " reed\n")
	if err := c.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitLogged(t, c, "reload failed")
	if log := c.stderr.String(); !strings.Contains(log, `tokens.txt:2: unknown scope \"reed\"`) || strings.Contains(log, a) || strings.Contains(log, b) {
		t.Fatalf("the failed reload's log does not name the line, or shows a token:\n%s", log)
	}
	if got := statusWith(t, c.url, b); got != 200 {
		t.Fatalf("after a failed reload: b %d", got)
	}
	if err := c.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := c.cmd.Wait(); err != nil {
		t.Fatalf("graceful stop: %v\n%s", err, c.stderr.String())
	}
}

// waitLogged waits until the child's stderr holds s.
func waitLogged(t *testing.T, c *child, s string) {
	t.Helper()
	waitfor.Until(t, 30*time.Second, func() error {
		if out := c.stderr.String(); !strings.Contains(out, s) {
			return fmt.Errorf("the child has not logged %q:\n%s", s, out)
		}
		return nil
	})
}
