package natsnode_test

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/gale-stream/gale/cluster/natsnode"
)

func ctxT(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// A node of its own: loopback, credentials written 0600, JetStream with fsync on
// every write under the data directory; a client with the credentials publishes,
// subscribes and uses a KV bucket.
func TestSingleNode(t *testing.T) {
	dir := t.TempDir()
	n := startNode(t, natsnode.Config{DataDir: dir})
	ready(t, n)

	if !strings.HasPrefix(n.ClientURL(), "nats://127.0.0.1:") {
		t.Errorf("ClientURL %q: want nats://127.0.0.1:PORT", n.ClientURL())
	}
	if want := filepath.Join(dir, "gale.nk"); n.CredentialsFile() != want {
		t.Errorf("CredentialsFile %q, want %q", n.CredentialsFile(), want)
	}
	st, err := os.Stat(n.CredentialsFile())
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Errorf("credentials file mode %v, want -rw-------", st.Mode().Perm())
	}
	data, _ := os.ReadFile(n.CredentialsFile())
	if !bytes.Contains(data, []byte("\nSU")) {
		t.Errorf("credentials file has no nkey user seed line:\n%s", data)
	}
	jsc := n.Server().JetStreamConfig()
	if jsc == nil || !jsc.SyncAlways {
		t.Fatalf("JetStream config %+v: want SyncAlways (sync_interval: always)", jsc)
	}
	// The setting is recorded for gale serve --log jetstream --nats-data.
	if si, err := natsnode.ReadSync(dir); err != nil || !si.SyncAlways || si.ServerName != n.Name() {
		t.Errorf("ReadSync: %+v %v, want sync_always for %s", si, err, n.Name())
	}
	if _, err := natsnode.ReadSync(t.TempDir()); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("ReadSync of a directory no node used: %v, want fs.ErrNotExist", err)
	}
	if jsc.StoreDir != filepath.Join(dir, "jetstream") {
		t.Errorf("JetStream store %q, want %q", jsc.StoreDir, filepath.Join(dir, "jetstream"))
	}
	if n.ClusterURL() != "" || n.MetaLeader() != n.Name() {
		t.Errorf("a node of its own: ClusterURL %q (want none), MetaLeader %q (want %q)", n.ClusterURL(), n.MetaLeader(), n.Name())
	}

	nc := connect(t, n.ClientURL(), dir)
	sub, err := nc.SubscribeSync("gale.test.>")
	if err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil { // the subscription is on the server
		t.Fatal(err)
	}
	if err := nc.Publish("gale.test.a", []byte("hello")); err != nil {
		t.Fatal(err)
	}
	m, err := sub.NextMsg(10 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if m.Subject != "gale.test.a" || string(m.Data) != "hello" {
		t.Errorf("got %s %q, want gale.test.a \"hello\"", m.Subject, m.Data)
	}

	ctx := ctxT(t, 30*time.Second)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	kv, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "workers"})
	if err != nil {
		t.Fatal(err)
	}
	rev, err := kv.Put(ctx, "w1", []byte("alive"))
	if err != nil {
		t.Fatal(err)
	}
	if rev != 1 {
		t.Errorf("first put: revision %d, want 1", rev)
	}
	if _, err := kv.Create(ctx, "w1", []byte("again")); !errors.Is(err, jetstream.ErrKeyExists) {
		t.Errorf("Create of an existing key: %v, want ErrKeyExists", err)
	}
	e, err := kv.Get(ctx, "w1")
	if err != nil {
		t.Fatal(err)
	}
	if string(e.Value()) != "alive" || e.Revision() != 1 {
		t.Errorf("get w1: %q rev %d, want \"alive\" rev 1", e.Value(), e.Revision())
	}
}

// The node is not an open door: a client without credentials, or with another
// node's, is refused, and gale's Connect says which file it used.
func TestRefusesOtherClients(t *testing.T) {
	dir := t.TempDir()
	n := startNode(t, natsnode.Config{DataDir: dir})

	_, err := nats.Connect(n.ClientURL(), nats.MaxReconnects(0))
	if !errors.Is(err, nats.ErrAuthorization) {
		t.Errorf("connect without credentials: %v, want %v", err, nats.ErrAuthorization)
	}
	_, err = nats.Connect(n.ClientURL(), nats.UserInfo("gale", "guess"))
	if !errors.Is(err, nats.ErrAuthorization) {
		t.Errorf("connect with a user and password: %v, want %v", err, nats.ErrAuthorization)
	}

	other := startNode(t, natsnode.Config{}) // writes credentials of its own
	_, err = natsnode.Connect(n.ClientURL(), other.DataDir())
	if !errors.Is(err, nats.ErrAuthorization) || !strings.Contains(err.Error(), other.CredentialsFile()) {
		t.Errorf("connect with another node's credentials: %v, want an authorization error naming %s", err, other.CredentialsFile())
	}
	if a, b := readFile(t, n.CredentialsFile()), readFile(t, other.CredentialsFile()); a == b {
		t.Errorf("two nodes generated the same credentials")
	}

	empty := t.TempDir()
	_, err = natsnode.Connect(n.ClientURL(), empty)
	if err == nil || !strings.Contains(err.Error(), "no credentials file "+filepath.Join(empty, "gale.nk")) {
		t.Errorf("connect with a directory without credentials: %v", err)
	}
	garbage := t.TempDir()
	if err := os.WriteFile(filepath.Join(garbage, "gale.nk"), []byte("not a seed\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err = natsnode.ClientOptions(garbage); err == nil || !strings.Contains(err.Error(), "no nkey user seed") {
		t.Errorf("ClientOptions of a file without a seed: %v", err)
	}
}

func readFile(t testing.TB, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// A restart on the same data directory keeps the credentials (a client of the first
// run connects with them again) and JetStream's data.
func TestRestartKeepsCredentialsAndData(t *testing.T) {
	dir := t.TempDir()
	ctx := ctxT(t, 60*time.Second)
	n := startNode(t, natsnode.Config{DataDir: dir})
	creds := readFile(t, n.CredentialsFile())
	nc, err := n.Connect()
	if err != nil {
		t.Fatal(err)
	}
	js, _ := jetstream.New(nc)
	kv, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "offsets"})
	if err != nil {
		t.Fatal(err)
	}
	for i, v := range []string{"10", "20", "30"} {
		if rev, err := kv.Put(ctx, "books/a.txt", []byte(v)); err != nil || rev != uint64(i+1) {
			t.Fatalf("put %s: rev %d, %v", v, rev, err)
		}
	}
	nc.Close()
	name := n.Name()
	stop(n)

	n2 := startNode(t, natsnode.Config{DataDir: dir})
	ready(t, n2)
	if got := readFile(t, n2.CredentialsFile()); got != creds {
		t.Fatalf("credentials changed on restart:\n%s\nthen\n%s", creds, got)
	}
	if n2.Name() != name {
		t.Errorf("server name %q after restart, was %q", n2.Name(), name)
	}
	nc2 := connect(t, n2.ClientURL(), dir)
	js2, _ := jetstream.New(nc2)
	kv2, err := js2.KeyValue(ctx, "offsets")
	if err != nil {
		t.Fatal(err)
	}
	e, err := kv2.Get(ctx, "books/a.txt")
	if err != nil {
		t.Fatal(err)
	}
	if string(e.Value()) != "30" || e.Revision() != 3 {
		t.Errorf("after restart: %q rev %d, want \"30\" rev 3", e.Value(), e.Revision())
	}
}

// Listening beyond loopback takes AllowNonLoopback, and then the node warns.
func TestNonLoopback(t *testing.T) {
	for _, cfg := range []natsnode.Config{
		{Host: "0.0.0.0"},
		{Host: "::"},
		{Host: "127.0.0.1", ClusterHost: "0.0.0.0", ClusterPort: -1, Routes: []string{"127.0.0.1:1"}},
	} {
		cfg.DataDir = t.TempDir()
		cfg.Port = -1
		_, err := natsnode.Start(context.Background(), cfg)
		if err == nil || !strings.Contains(err.Error(), "not a loopback address") || !strings.Contains(err.Error(), "--allow-non-loopback") {
			t.Errorf("%+v: %v, want a refusal naming --allow-non-loopback", cfg, err)
		}
		if _, err := os.Stat(filepath.Join(cfg.DataDir, "gale.nk")); err == nil {
			t.Errorf("a refused start wrote credentials")
		}
	}

	logs := newLogCapture()
	n := startNode(t, natsnode.Config{Host: "0.0.0.0", AllowNonLoopback: true, Logger: logs.Logger()})
	line := logs.wait(t, "WARN", "non-loopback", "needs the credentials", n.CredentialsFile())
	if !strings.Contains(line, "host=0.0.0.0") {
		t.Errorf("warning %q does not name the host", line)
	}
	// Still closed without credentials.
	if _, err := nats.Connect(n.ClientURL(), nats.MaxReconnects(0)); !errors.Is(err, nats.ErrAuthorization) {
		t.Errorf("connect without credentials: %v", err)
	}
	logs.wait(t, "INFO", "wrote new credentials")
}

func TestConfigErrors(t *testing.T) {
	seedDir := t.TempDir()
	startNode(t, natsnode.Config{DataDir: seedDir}) // credentials to disagree with
	otherDir := t.TempDir()
	other := startNode(t, natsnode.Config{DataDir: otherDir})
	for _, c := range []struct {
		cfg  natsnode.Config
		want string
	}{
		{natsnode.Config{}, "DataDir is empty"},
		{natsnode.Config{DataDir: t.TempDir(), Routes: []string{"127.0.0.1:6222"}}, "routes need a cluster listener"},
		{natsnode.Config{DataDir: t.TempDir(), ClusterPort: -1}, "needs routes"},
		{natsnode.Config{DataDir: t.TempDir(), ClusterPort: -1, Routes: []string{"http://x:1"}}, `route "http://x:1"`},
		{natsnode.Config{DataDir: t.TempDir(), ClusterPort: -1, Routes: []string{"x"}}, `route "x"`},
		{natsnode.Config{DataDir: t.TempDir(), ClusterPort: -1, Routes: []string{"x:99999"}}, "bad port"},
		{natsnode.Config{DataDir: t.TempDir(), Port: 70000}, "out of range"},
		{natsnode.Config{DataDir: t.TempDir(), CredentialsFrom: filepath.Join(t.TempDir(), "none")}, "--creds-from"},
		{natsnode.Config{DataDir: seedDir, CredentialsFrom: other.CredentialsFile()}, "holds other credentials"},
		// The port is taken: the server's fatal error, not a hang.
		{natsnode.Config{DataDir: t.TempDir(), Port: port(t, other.ClientURL())}, "address already in use"},
	} {
		n, err := natsnode.Start(ctxT(t, 30*time.Second), c.cfg)
		if err == nil {
			stop(n)
			t.Errorf("%+v: started", c.cfg)
			continue
		}
		if !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want %q", c.cfg, err, c.want)
		}
	}
}

func port(t testing.TB, url string) int {
	t.Helper()
	i := strings.LastIndexByte(url, ':')
	var p int
	for _, c := range url[i+1:] {
		p = p*10 + int(c-'0')
	}
	return p
}
