package cli

import (
	"bufio"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/gale-stream/gale/cluster/natsnode"
	"github.com/gale-stream/gale/internal/testio"
)

// gale nats as a process: it prints its URL and credentials file, a client with
// those credentials uses JetStream KV, one without is refused, and SIGTERM stops it
// with exit status 0.
func TestNatsCommand(t *testing.T) {
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "GALE_TEST_CHILD="+strings.Join([]string{
		"nats", "--data", dir, "--listen", "127.0.0.1:0", "--log-level", "warn"}, "\n"))
	var stderr testio.SyncBuffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	lines := make(chan string, 16)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
		exited <- cmd.Wait() // after stdout is read to its end, as Wait requires
	}()
	reaped := false
	t.Cleanup(func() {
		if !reaped { // the test failed before the process exited
			_ = cmd.Process.Kill()
			<-exited
		}
	})

	var first string
	select {
	case first = <-lines:
	case <-time.After(30 * time.Second):
		t.Fatalf("no URL line in 30s; stderr:\n%s", stderr.String())
	}
	m := regexp.MustCompile(`^(nats://127\.0\.0\.1:\d+) \(credentials: (.+)\)$`).FindStringSubmatch(first)
	if m == nil {
		t.Fatalf("first line %q: want \"nats://127.0.0.1:PORT (credentials: FILE)\"; stderr:\n%s", first, stderr.String())
	}
	url, creds := m[1], m[2]
	if creds != filepath.Join(dir, "gale.nk") {
		t.Errorf("credentials %q, want %q", creds, filepath.Join(dir, "gale.nk"))
	}

	if _, err := nats.Connect(url, nats.MaxReconnects(0)); !errors.Is(err, nats.ErrAuthorization) {
		t.Errorf("connect without credentials: %v, want %v", err, nats.ErrAuthorization)
	}
	nc, err := natsnode.Connect(url, dir)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	js, _ := jetstream.New(nc)
	kv, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "cmd"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Put(ctx, "k", []byte("v")); err != nil {
		t.Fatal(err)
	}
	if e, err := kv.Get(ctx, "k"); err != nil || string(e.Value()) != "v" {
		t.Fatalf("get: %v %v", e, err)
	}
	nc.Close()

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		reaped = true
		if err != nil {
			t.Fatalf("gale nats after SIGTERM: %v; stderr:\n%s", err, stderr.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("gale nats still running 30s after SIGTERM; stderr:\n%s", stderr.String())
	}
	var rest []string
	for l := range lines {
		rest = append(rest, l)
	}
	if len(rest) > 0 {
		t.Errorf("stdout after the URL line: %q", rest)
	}
	// The one error logged is the refusal of the client without credentials.
	var errs []string
	for l := range strings.Lines(stderr.String()) {
		if strings.Contains(l, "level=ERROR") {
			errs = append(errs, l)
		}
	}
	if len(errs) != 1 || !strings.Contains(errs[0], "authentication error") {
		t.Errorf("errors logged: %q, want one authentication error", errs)
	}
	if _, err := os.Stat(filepath.Join(dir, "jetstream")); err != nil {
		t.Errorf("no JetStream store in the data directory: %v", err)
	}
}

// gale nats refuses what it should not run, without starting a server.
func TestNatsCommandFlags(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--listen", "0.0.0.0:0"}, "--allow-non-loopback"},
		{[]string{"--listen", ":0"}, "name the host"},
		{[]string{"--listen", "127.0.0.1"}, "want HOST:PORT"},
		{[]string{"--listen", "127.0.0.1:x"}, "bad port"},
		{[]string{"--listen", "127.0.0.1:0", "--routes", "127.0.0.1:6222"}, "routes need a cluster listener"},
		{[]string{"--listen", "127.0.0.1:0", "--cluster-listen", "127.0.0.1:0"}, "needs routes"},
		{[]string{"--listen", "127.0.0.1:0", "--log-level", "loud"}, "--log-level"},
		{[]string{"extra"}, "unknown command"},
	} {
		root := newRoot()
		root.SetOut(io.Discard)
		root.SetErr(io.Discard)
		root.SetArgs(append([]string{"nats", "--data", t.TempDir()}, c.args...))
		err := root.Execute()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("gale nats %q: %v, want an error with %q", c.args, err, c.want)
		}
	}
}
