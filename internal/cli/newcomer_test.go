package cli

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/cobra"

	"github.com/gale-stream/gale/cluster"
	"github.com/gale-stream/gale/cluster/natsnode"
	"github.com/gale-stream/gale/cluster/placement"
	"github.com/gale-stream/gale/cluster/worker"

	"github.com/gale-stream/gale/internal/testio"
	serve "github.com/gale-stream/gale/server"
)

// apacheLicenseSHA256 is the SHA-256 of the Apache License 2.0 as NATS ships it
// (nats.go, nkeys and nuid: the same file byte for byte), appendix included.
const apacheLicenseSHA256 = "c71d239df91726fc519c6eb72d318ec65820627232b2f796219e87dcf35d0ab4"

// The repository says under which terms it may be used: LICENSE is the Apache
// License 2.0, unchanged, and the README names it.
func TestLicense(t *testing.T) {
	b, err := os.ReadFile("../../LICENSE")
	if err != nil {
		t.Fatalf("no LICENSE at the repository's root: %v", err)
	}
	if sum := sha256.Sum256(b); hex.EncodeToString(sum[:]) != apacheLicenseSHA256 {
		t.Errorf("LICENSE is not the Apache License 2.0 text unchanged: sha256 %x, want %s; it begins:\n%.200s", sum, apacheLicenseSHA256, b)
	}
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(readme), "Apache License 2.0") || !strings.Contains(string(readme), "(LICENSE)") {
		t.Errorf("the README does not name the Apache License 2.0 with a link to LICENSE")
	}
}

// gale version and gale --version print the module's version, the commit and the Go
// version from the build information; a build without VCS stamping (.ci/run's
// -buildvcs=false) says its commit is unknown instead of failing.
func TestVersion(t *testing.T) {
	stamped := &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Path: "github.com/gale-stream/gale", Version: "v0.0.0-20260101120000-0123456789ab+dirty"},
		Settings: []debug.BuildSetting{{Key: "GOOS", Value: "linux"}, {Key: "GOARCH", Value: "amd64"},
			{Key: "vcs", Value: "git"}, {Key: "vcs.revision", Value: "0123456789abcdef0123456789abcdef01234567"},
			{Key: "vcs.time", Value: "2026-01-01T12:00:00Z"}, {Key: "vcs.modified", Value: "true"}}}
	unstamped := &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Path: "github.com/gale-stream/gale", Version: "(devel)"},
		Settings: []debug.BuildSetting{{Key: "-buildvcs", Value: "false"}, {Key: "GOOS", Value: "linux"}, {Key: "GOARCH", Value: "arm64"}}}
	for _, c := range []struct {
		name string
		bi   *debug.BuildInfo
		want string
	}{
		{"stamped", stamped, "gale version v0.0.0-20260101120000-0123456789ab+dirty\n" +
			"commit: 0123456789abcdef0123456789abcdef01234567 (2026-01-01T12:00:00Z, modified)\n" +
			"go: go1.26.8 linux/amd64\n"},
		{"-buildvcs=false", unstamped, "gale version devel\n" +
			"commit: unknown (the build has no VCS information: go run, a build with -buildvcs=false, or one outside a git checkout records none)\n" +
			"go: go1.26.8 linux/arm64\n"},
		{"a user's binary", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Path: "example.com/wordlen", Version: "v1.2.0"},
			Deps:     []*debug.Module{{Path: "github.com/gale-stream/gale", Version: "v0.0.0", Replace: &debug.Module{Path: "../.."}}},
			Settings: []debug.BuildSetting{{Key: "GOOS", Value: "linux"}, {Key: "GOARCH", Value: "amd64"}}},
			"wordlen version v1.2.0 (example.com/wordlen)\ngale version v0.0.0, replaced by ../..\n" +
				"commit: unknown (the build has no VCS information: go run, a build with -buildvcs=false, or one outside a git checkout records none)\n" +
				"go: go1.26.8 linux/amd64\n"},
		{"no build info", nil, "gale version unknown\n" +
			"commit: unknown (the build has no VCS information: go run, a build with -buildvcs=false, or one outside a git checkout records none)\n" +
			"go: " + runtime.Version() + " " + runtime.GOOS + "/" + runtime.GOARCH + "\n"},
	} {
		if got := versionText(c.bi); got != c.want {
			t.Errorf("%s: version text\n%s\nwant\n%s", c.name, got, c.want)
		}
	}

	// Both spellings print this binary's, exit 0 and write nothing to stderr.
	bi, _ := debug.ReadBuildInfo()
	want := versionText(bi)
	if !strings.Contains(want, "go: "+runtime.Version()+" ") {
		t.Errorf("this binary's version text lacks its Go version %s:\n%s", runtime.Version(), want)
	}
	for _, args := range [][]string{{"version"}, {"--version"}} {
		out, errs, code := galeRun(t, args...)
		if code != 0 || out != want || errs != "" {
			t.Errorf("gale %v: exit %d, stdout %q, stderr %q; want exit 0 and %q", args, code, out, errs, want)
		}
	}
	if _, errs, code := galeRun(t, "version", "extra"); code != 2 || !strings.Contains(errs, `unknown command "extra" for "gale version"`) {
		t.Errorf("gale version extra: exit %d, stderr %q", code, errs)
	}
}

// galeRun runs a gale command line in this process, as main does, and returns its
// output and exit status.
func galeRun(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var o, e bytes.Buffer
	code = runWith(args, &o, &e)
	return o.String(), e.String(), code
}

// An unknown subcommand is a usage error (exit 2) naming it and the nearest command,
// not the group's help with exit 0; a group alone still shows its help.
func TestUnknownSubcommand(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"cluster", "stat"}, `gale: unknown command "stat" for "gale cluster": did you mean "status"?` + "\n"},
		{[]string{"sink", "replay"}, `gale: unknown command "replay" for "gale sink" (its commands: rebuild)` + "\n"},
		{[]string{"serv"}, `gale: unknown command "serv" for "gale": did you mean "serve"?` + "\n"},
		{[]string{"log", "chek", "--data", "x"}, `gale: unknown command "chek" for "gale log": did you mean "check"?` + "\n"},
	} {
		out, errs, code := galeRun(t, c.args...)
		if code != 2 || errs != c.want || out != "" {
			t.Errorf("gale %v: exit %d, stderr %q, stdout %.200q; want exit 2, stderr %q", c.args, code, errs, out, c.want)
		}
	}
	// Every group of the tree, cobra's completion too.
	groups := 0
	walkCommands(newRoot(), func(c *cobra.Command) {
		if !c.HasAvailableSubCommands() {
			return
		}
		groups++
		path := strings.Fields(c.CommandPath())[1:]
		_, errs, code := galeRun(t, append(path, "nosuchcommand")...)
		if want := fmt.Sprintf("unknown command %q for %q", "nosuchcommand", c.CommandPath()); code != 2 || !strings.Contains(errs, want) {
			t.Errorf("%s nosuchcommand: exit %d, stderr %q; want exit 2 and %q", c.CommandPath(), code, errs, want)
		}
		out, errs, code := galeRun(t, path...)
		if code != 0 || !strings.Contains(out, "Available Commands:") || errs != "" {
			t.Errorf("%s alone: exit %d, stderr %q, stdout %.300q; want its help, exit 0", c.CommandPath(), code, errs, out)
		}
	})
	if groups < 6 { // gale, bench, cluster, completion, log, sink
		t.Errorf("walked %d groups, want at least 6", groups)
	}
}

// walkCommands calls f on c and every command under it.
func walkCommands(c *cobra.Command, f func(*cobra.Command)) {
	f(c)
	for _, sub := range c.Commands() {
		walkCommands(sub, f)
	}
}

// gale serve --addr that is no address says so, before anything is opened; a real
// address that is not loopback is still refused for that reason.
func TestServeBadAddr(t *testing.T) {
	for _, c := range []struct{ addr, want string }{
		{"nonsense", `gale: serve: --addr "nonsense" is not a valid address: want HOST:PORT, e.g. 127.0.0.1:8080 (or :8080 for every interface): missing port in address`},
		{"127.0.0.1", `gale: serve: --addr "127.0.0.1" is not a valid address: want HOST:PORT, e.g. 127.0.0.1:8080 (or :8080 for every interface): missing port in address`},
		{"127.0.0.1:http-ish", `gale: serve: --addr "127.0.0.1:http-ish" is not a valid address: port "http-ish" is not a number from 0 to 65535`},
		{"127.0.0.1:70000", `gale: serve: --addr "127.0.0.1:70000" is not a valid address: port "70000" is not a number from 0 to 65535`},
		{"[::1:8080", `gale: serve: --addr "[::1:8080" is not a valid address: want HOST:PORT, e.g. 127.0.0.1:8080 (or :8080 for every interface): missing ']' in address`},
		{"0.0.0.0:0", "gale: serve: --addr 0.0.0.0:0 is not a loopback address and no token is configured"},
	} {
		dir := t.TempDir()
		out, errs, code := galeRun(t, "serve", "--data", dir, "--addr", c.addr)
		if code != 2 || !strings.HasPrefix(errs, c.want) || out != "" {
			t.Errorf("gale serve --addr %q: exit %d, stderr %q; want exit 2 and %q", c.addr, code, errs, c.want)
		}
		if ents, _ := os.ReadDir(dir); len(ents) != 0 {
			t.Errorf("gale serve --addr %q left %d entries in --data", c.addr, len(ents))
		}
	}
}

// gale cluster status counts workers in English: "want 1 worker", "short of 1 worker".
func TestStatusWorkerCounts(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	a := &placement.Assignment{Generation: 2, Want: 1, Workers: []string{"w1"}, Of: map[int]string{1: "w1"}}
	s := &cluster.Status{Records: []*cluster.Record{
		{Topology: "one", Want: 1, Assignment: a, Short: 1},
		{Topology: "three", Want: 3, Assignment: a, Short: 2},
	}}
	var b bytes.Buffer
	writeStatus(&b, s, now)
	for _, want := range []string{
		"topology one: active, generation 2, want 1 worker, fingerprint",
		"short of 1 worker (no free slots)",
		"topology three: active, generation 2, want 3 workers, fingerprint",
		"short of 2 workers (no free slots)",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("status lacks %q:\n%s", want, b.String())
		}
	}
}

// A placement short of a worker because a live worker refused the topology (its
// build differs) says so, not "no free slots": a new user's m1 had a free slot.
func TestStatusShortBecauseRefused(t *testing.T) {
	a := &placement.Assignment{Generation: 11, Want: 2, Workers: []string{"n2"}, Of: map[int]string{1: "n2"}}
	rec := &cluster.Record{Topology: "mytopo", Want: 2, Assignment: a, Short: 1}
	s := &cluster.Status{Records: []*cluster.Record{rec}, Workers: []cluster.WorkerInfo{
		{Name: "m1", Slots: 1, Refused: map[string]cluster.Refusal{"mytopo": {Fingerprint: rec.Fingerprint.String(), Reason: "topology fingerprint mismatch"}}},
		{Name: "n2", Slots: 1, Running: map[string]uint64{"mytopo": 11}},
	}}
	var b bytes.Buffer
	writeStatus(&b, s, time.Now())
	if want := "short of 1 worker: refused by m1 (another build: see the REFUSED column)"; !strings.Contains(b.String(), want) || strings.Contains(b.String(), "no free slots") {
		t.Errorf("status lacks %q, or says no free slots:\n%s", want, b.String())
	}
}

// startTestNode starts an embedded NATS node with JetStream on loopback; the test's
// end shuts it down.
// nodeJS connects to node with its credentials, until the test ends.
func nodeJS(t *testing.T, node *natsnode.Node) jetstream.JetStream {
	t.Helper()
	nc, err := natsnode.Connect(node.ClientURL(), node.DataDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return js
}

func startTestNode(t *testing.T) *natsnode.Node {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	node, err := natsnode.Start(ctx, natsnode.Config{DataDir: filepath.Join(t.TempDir(), "nats"), Host: "127.0.0.1", Port: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { node.Shutdown(); node.WaitForShutdown() })
	if err := node.Ready(ctx); err != nil {
		t.Fatal(err)
	}
	return node
}

// gale submit on a cluster with no live worker says so at once (no scheduler can
// answer, and nothing would run it) instead of waiting out --timeout, and leaves
// nothing behind: no topology in gale cluster status.
func TestSubmitWithoutLiveWorker(t *testing.T) {
	node := startTestNode(t)
	conn := []string{"--nats", node.ClientURL(), "--nats-data", node.DataDir()}
	// The buckets, as a worker that has since stopped left them.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	js := nodeJS(t, node)
	if _, err := cluster.Open(ctx, js, cluster.Config{}); err != nil {
		t.Fatal(err)
	}
	begin := time.Now()
	out, errs, code := galeRun(t, append(append([]string{"submit"}, conn...), "--timeout", "20s", "wordcount", "--run=nolive", testio.Books(t)[0])...)
	took := time.Since(begin)
	want := fmt.Sprintf("gale: no live worker on the cluster at %s (prefix gale): no scheduler to place wordcount (it runs in the workers) and nothing to run it: start gale worker first\n", node.ClientURL())
	if code != 2 || errs != want || out != "" {
		t.Errorf("submit without a live worker: exit %d after %v\nstdout %q\nstderr %q\nwant exit 2 and %q", code, took, out, errs, want)
	}
	if took > 10*time.Second {
		t.Errorf("submit without a live worker took %v with --timeout 20s: it knew at once", took)
	}
	out, errs, code = galeRun(t, append(append([]string{"cluster", "status"}, conn...), "--timeout", "10s")...)
	if code != 0 || !strings.Contains(out, "scheduler: none") || !strings.HasSuffix(out, "no topologies\n") {
		t.Errorf("status after the refused submit: exit %d\n%s%s", code, out, errs)
	}
	// Nor did it make word count's state streams (its setup runs only for a submit
	// that can be placed).
	for name := range js.StreamNames(ctx).Name() {
		if !strings.HasPrefix(name, "KV_") {
			t.Errorf("the refused submit left stream %s", name)
		}
	}
}

// gale submit whose topology every live worker refuses (their build lacks it)
// fails, and withdraws it: before, the record stayed active and started by
// itself when a worker that has it joined, after submit had said it failed.
func TestSubmitRefusedByEveryWorkerLeavesNothing(t *testing.T) {
	node := startTestNode(t)
	conn := []string{"--nats", node.ClientURL(), "--nats-data", node.DataDir()}
	dir := t.TempDir()
	bare := func(args []string) *exec.Cmd {
		cmd := childSpawner(args)
		cmd.Env = append(cmd.Env, "GALE_TEST_BUILD=bare") // TestMain: a build without word count
		return cmd
	}
	c, err := startWorkerChild(bare, dir, "w1", node.ClientURL(), node.DataDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stopChildren([]*childWorker{c}, os.Stderr) })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	st, err := cluster.Open(ctx, nodeJS(t, node), cluster.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if err := waitWorkers(ctx, st, 1, []*childWorker{c}); err != nil {
		t.Fatal(err)
	}
	out, errs, code := galeRun(t, append(append([]string{"submit"}, conn...), "--timeout", "30s", "wordcount", "--run=refused", testio.Books(t)[0])...)
	if code != 2 || !strings.Contains(errs, "refused") || !strings.Contains(errs, "the submission is withdrawn") {
		t.Fatalf("submit every worker refuses: exit %d\nstdout %s\nstderr %s", code, out, errs)
	}
	sp, err := st.Spec(ctx, "wordcount")
	if err != nil || !sp.Killed {
		t.Errorf("after the failed submit, wordcount's spec: %+v, %v; want it withdrawn (killed)", sp, err)
	}
}

// A gale serve --nats whose pipeline the scheduler refuses (no worker but its own,
// which takes only the tasks pinned to it) fails saying why, and leaves no
// "killed, generation 0" topology in gale cluster status: it never ran.
func TestServeNATSRefusedLeavesNoTopology(t *testing.T) {
	node := startTestNode(t)
	conn := []string{"--nats", node.ClientURL(), "--nats-data", node.DataDir()}
	out, errs, code := galeRun(t, append(append([]string{"serve"}, conn...), "--data", t.TempDir(), "--addr", "127.0.0.1:0",
		"--worker-name", "serve1", "--nats-timeout", "30s", "--log-level", "error")...)
	if code != 2 || !strings.Contains(errs, "submitting the events pipeline to the cluster") || !strings.Contains(errs, "refused") {
		t.Fatalf("serve --nats without a worker for its bolts: exit %d\nstdout %s\nstderr %s", code, out, errs)
	}
	t.Logf("serve: %s", strings.TrimSpace(errs))
	out, errs, code = galeRun(t, append(append([]string{"cluster", "status"}, conn...), "--timeout", "10s")...)
	if code != 0 || strings.Contains(out, "topology events") || !strings.HasSuffix(out, "no topologies\n") {
		t.Errorf("status after the refused serve: exit %d, want no topology\n%s%s", code, out, errs)
	}
}

// A second gale serve --nats for a pipeline another serve runs is refused, and its
// refusal leaves the running pipeline alone: it must not kill what it did not submit
// (whether its worker joined under another name or was refused the same one).
func TestServeNATSRefusedKeepsOthersPipeline(t *testing.T) {
	node := startTestNode(t)
	conn := []string{"--nats", node.ClientURL(), "--nats-data", node.DataDir()}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cf := ClusterFlags{url: node.ClientURL(), natsData: node.DataDir(), prefix: cluster.DefaultPrefix, hbTTL: time.Second, leaseTTL: time.Second, timeout: 30 * time.Second}
	nc, st, err := cf.Connect(ctx, "test")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close) // after the serve and the worker below have stopped
	// A worker for the bolts, in this process; stopped (drained) at the end.
	w, err := worker.New(worker.Config{Name: "w1", Conn: nc, Store: st, Registry: registry(), StopTimeout: 5 * time.Second,
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	wctx, wcancel := context.WithCancel(context.Background())
	wdone := make(chan error, 1)
	go func() { wdone <- w.Run(wctx) }()
	t.Cleanup(func() { wcancel(); <-wdone })

	// The first serve runs the events pipeline on it.
	var f ServeFlags
	f.Register(&cobra.Command{}, "127.0.0.1:0")
	o, err := f.Options(galeApp().pipeline)
	if err != nil {
		t.Fatal(err)
	}
	o.DataDir, o.Logger = t.TempDir(), nil
	o.Cluster = &serve.Cluster{Conn: nc, Store: st, Name: "serveA", Workers: 1, Timeout: 60 * time.Second}
	s, err := serve.Start(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		sctx, scancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer scancel()
		_ = s.Shutdown(sctx)
	})
	before, err := st.Record(ctx, "events")
	if err != nil || before.Killed || before.Assignment == nil {
		t.Fatalf("the first serve's pipeline: %+v, %v", before, err)
	}

	for _, name := range []string{"serveB", "serveA"} {
		out, errs, code := galeRun(t, append(append([]string{"serve"}, conn...), "--data", t.TempDir(), "--addr", "127.0.0.1:0",
			"--worker-name", name, "--nats-timeout", "30s", "--log-level", "error")...)
		if code != 2 {
			t.Errorf("a second serve --nats as worker %s: exit %d, want 2\nstdout %s\nstderr %s", name, code, out, errs)
		}
		t.Logf("second serve as %s: %s", name, strings.TrimSpace(errs))
		rec, err := st.Record(ctx, "events")
		if err != nil || rec.Killed || rec.Generation() != before.Generation() {
			t.Fatalf("after a second serve as %s was refused, the first's pipeline is %+v (%v); want it running at generation %d",
				name, rec, err, before.Generation())
		}
	}
}

// Every command's help reads alike: its short description starts with a capital
// letter and has no final period.
func TestHelpShortDescriptions(t *testing.T) {
	root := newRoot()
	root.InitDefaultHelpCmd()
	n := 0
	walkCommands(root, func(c *cobra.Command) {
		n++
		s := c.Short
		if first, _ := utf8.DecodeRuneInString(s); s == "" || !unicode.IsUpper(first) || strings.HasSuffix(s, ".") {
			t.Errorf("%s: short description %q: want one starting with a capital letter, without a final period", c.CommandPath(), s)
		}
	})
	if n < 25 {
		t.Errorf("walked %d commands, want the whole tree", n)
	}
}

// The commands that only look at or ask a cluster (submit, kill, deactivate,
// activate, rebalance, cluster status) never create its buckets, so they do not
// list the flags that only matter when creating them; gale worker does. On a NATS
// server without the cluster they say so, and create nothing.
func TestClusterClientFlags(t *testing.T) {
	creation := []string{"replicas", "heartbeat-ttl", "lease-ttl"}
	clients := map[string]bool{"gale submit": true, "gale kill": true, "gale deactivate": true, "gale activate": true,
		"gale rebalance": true, "gale cluster status": true}
	walkCommands(newRoot(), func(c *cobra.Command) {
		path := c.CommandPath()
		for _, name := range creation {
			has := c.Flags().Lookup(name) != nil
			if clients[path] && has {
				t.Errorf("%s lists --%s, which only a command creating the cluster's buckets uses", path, name)
			}
			if path == "gale worker" && !has {
				t.Errorf("gale worker lacks --%s", name)
			}
		}
	})

	node := startTestNode(t)
	conn := []string{"--nats", node.ClientURL(), "--nats-data", node.DataDir(), "--timeout", "10s"}
	want := fmt.Sprintf("gale: no gale cluster with prefix %q at %s: its bucket gale-workers does not exist; a gale worker creates the cluster's buckets when it joins (or give the cluster's --prefix)\n", "gale", node.ClientURL())
	for _, args := range [][]string{
		append([]string{"cluster", "status"}, conn...),
		append(append([]string{"kill"}, conn...), "wordcount"),
		append(append([]string{"rebalance"}, conn...), "wordcount"),
		append(append([]string{"submit"}, conn...), "wordcount", testio.Books(t)[0]),
	} {
		out, errs, code := galeRun(t, args...)
		if code != 2 || errs != want || out != "" {
			t.Errorf("gale %v on a server without the cluster: exit %d\nstdout %q\nstderr %q\nwant exit 2 and %q", args, code, out, errs, want)
		}
	}
	js := nodeJS(t, node)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for name := range js.StreamNames(ctx).Name() {
		t.Errorf("a command that only asks the cluster created stream %s", name)
	}
}

// gale cluster status leaves out a request withdrawn before it was ever placed,
// whether the scheduler has answered the withdrawal (killed) or not yet (its record
// still says the request was refused): nothing of it ever ran. A request not placed
// yet, and not withdrawn, says so rather than "generation 0".
func TestStatusLeavesOutWithdrawnRequests(t *testing.T) {
	a := &placement.Assignment{Generation: 3, Want: 1, Workers: []string{"w1"}, Of: map[int]string{1: "w1"}}
	s := &cluster.Status{
		Records: []*cluster.Record{
			{Topology: "ran", Want: 1, Assignment: a, Killed: true},
			{Topology: "refused", Want: 1, Error: "placement: no free slot"},
			{Topology: "waiting", Want: 2, Error: "placement: no free slot"},
			{Topology: "withdrawn", Want: 1, Killed: true},
		},
		Specs: []*cluster.Spec{{Topology: "ran", Killed: true}, {Topology: "refused", Killed: true}, {Topology: "waiting"}, {Topology: "withdrawn", Killed: true}},
	}
	var b bytes.Buffer
	writeStatus(&b, s, time.Now())
	out := b.String()
	for _, want := range []string{"topology ran: killed, generation 3, want 1 worker", "topology waiting: not placed yet, want 2 workers",
		"last request refused: placement: no free slot"} {
		if !strings.Contains(out, want) {
			t.Errorf("status lacks %q:\n%s", want, out)
		}
	}
	for _, not := range []string{"topology refused", "topology withdrawn", "generation 0"} {
		if strings.Contains(out, not) {
			t.Errorf("status shows %q:\n%s", not, out)
		}
	}
}
