package cli

// Attacks on gale's cluster mode with real processes: `gale worker` children (this
// test binary run as gale, TestMain's GALE_TEST_CHILD) on an embedded NATS node on
// loopback, word count submitted with `gale submit`, and workers killed (-9),
// paused (SIGSTOP), rebalanced, deactivated and resubmitted mid-run; the counts must
// stay exact. And misuse of the commands. They skip under -race (see newAtkCluster);
// .ci/run runs them without it.

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/gale-stream/gale/cluster"
	"github.com/gale-stream/gale/cluster/natsnode"
	"github.com/gale-stream/gale/internal/testio"
	"github.com/gale-stream/gale/pipelines/wordcount"
)

// atkCluster is an embedded NATS node and the gale worker processes started on it.
type atkCluster struct {
	t       *testing.T
	dir     string
	natsDir string
	url     string
	nc      *nats.Conn
	js      jetstream.JetStream
	st      *cluster.Store
	files   []string
	node    *natsnode.Node
	port    int

	mu      sync.Mutex
	workers []*atkProc
}

// atkProc is a worker process.
type atkProc struct {
	name string
	cmd  *exec.Cmd
	log  string
	done chan struct{}
}

func newAtkCluster(t *testing.T) *atkCluster {
	t.Helper()
	if raceEnabled {
		// Their workers are this binary, race-built: 5 to 10 times slower, and the
		// attacks' timings (heartbeat TTLs, the run outlasting the attack, deadlines)
		// stop holding when the other packages' tests share the two cores. The worker
		// code's races are checked by cluster/worker's tests and by this package's
		// TestWordcount* and TestOrdersOnWorkers* runs; .ci/run runs these attacks in
		// a step of their own, without -race.
		t.Skip("multi-process break-it test: run without -race (go test -run TestAttack ./cmd/gale/)")
	}
	dir := t.TempDir()
	natsDir := filepath.Join(dir, "nats")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	node, err := natsnode.Start(ctx, natsnode.Config{DataDir: natsDir, Host: "127.0.0.1", Port: -1})
	if err != nil {
		t.Fatal(err)
	}
	c := &atkCluster{t: t, dir: dir, natsDir: natsDir, url: node.ClientURL(), files: testio.Books(t), node: node,
		port: node.Server().Addr().(*net.TCPAddr).Port}
	t.Cleanup(func() {
		c.stopAll()
		if c.nc != nil {
			c.nc.Close()
		}
		c.node.Shutdown()
		c.node.WaitForShutdown()
	})
	if err := node.Ready(ctx); err != nil {
		t.Fatal(err)
	}
	nc, err := natsnode.Connect(c.url, natsDir, nats.MaxReconnects(-1))
	if err != nil {
		t.Fatal(err)
	}
	c.nc = nc
	if c.js, err = jetstream.New(nc); err != nil {
		t.Fatal(err)
	}
	// The buckets are made here, with 1 s TTLs; the workers take them as they are.
	if c.st, err = cluster.Open(ctx, c.js, cluster.Config{Prefix: cluster.DefaultPrefix, HeartbeatTTL: time.Second, LeaseTTL: time.Second}); err != nil {
		t.Fatal(err)
	}
	return c
}

// startWorker starts `gale worker --name name extra...`.
func (c *atkCluster) startWorker(name string, extra ...string) *atkProc {
	c.t.Helper()
	logPath := filepath.Join(c.dir, fmt.Sprintf("%s-%d.log", name, time.Now().UnixNano()))
	lf, err := os.Create(logPath)
	if err != nil {
		c.t.Fatal(err)
	}
	args := append([]string{"worker", "--nats", c.url, "--nats-data", c.natsDir, "--name", name, "--log-level", "info", "--stop-timeout", "5s"}, extra...)
	cmd := childSpawner(args)
	cmd.Stdout, cmd.Stderr = lf, lf
	if err := cmd.Start(); err != nil {
		lf.Close()
		c.t.Fatal(err)
	}
	p := &atkProc{name: name, cmd: cmd, log: logPath, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); lf.Close(); close(p.done) }()
	c.mu.Lock()
	c.workers = append(c.workers, p)
	c.mu.Unlock()
	return p
}

// stopAll stops every worker process started: SIGCONT (if paused) and SIGTERM,
// then SIGKILL for one still there after 10 s.
func (c *atkCluster) stopAll() {
	c.mu.Lock()
	ps := slices.Clone(c.workers)
	c.mu.Unlock()
	for _, p := range ps {
		select {
		case <-p.done:
		default:
			_ = p.cmd.Process.Signal(syscall.SIGCONT)
			_ = p.cmd.Process.Signal(syscall.SIGTERM)
		}
	}
	deadline := time.After(10 * time.Second)
	for _, p := range ps {
		select {
		case <-p.done:
		case <-deadline:
			c.t.Logf("worker %s (pid %d) still there 10s after SIGTERM: killed", p.name, p.cmd.Process.Pid)
			_ = p.cmd.Process.Kill()
			<-p.done
		}
	}
}

// proc returns the first process of worker name still there.
func (c *atkCluster) proc(name string) *atkProc {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, p := range c.workers {
		select {
		case <-p.done:
		default:
			if p.name == name {
				return p
			}
		}
	}
	return nil
}

// signal sends sig to worker name's process (by its pid).
func (c *atkCluster) signal(name string, sig syscall.Signal) {
	c.t.Helper()
	p := c.proc(name)
	if p == nil {
		c.t.Fatalf("no worker %s", name)
	}
	if err := p.cmd.Process.Signal(sig); err != nil {
		c.t.Fatalf("%v to %s: %v", sig, name, err)
	}
	if sig == syscall.SIGKILL {
		select {
		case <-p.done:
		case <-time.After(5 * time.Second):
			c.t.Fatalf("%s not dead 5s after SIGKILL", name)
		}
	}
}

// logs returns the tail of every worker's log, for a failure message.
func (c *atkCluster) logs() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var b strings.Builder
	for _, p := range c.workers {
		n := p.name
		data, _ := os.ReadFile(p.log)
		lines := strings.Split(strings.TrimSpace(string(data)), "\n")
		if len(lines) > 15 {
			lines = lines[len(lines)-15:]
		}
		fmt.Fprintf(&b, "--- %s:\n%s\n", n, strings.Join(lines, "\n"))
	}
	return b.String()
}

// waitLive waits until the named workers (exactly those) are live.
func (c *atkCluster) waitLive(names ...string) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	ch, err := c.st.WatchWorkers(ctx, false)
	if err != nil {
		c.t.Fatal(err)
	}
	live := map[string]bool{}
	want := map[string]bool{}
	for _, n := range names {
		want[n] = true
	}
	for ev := range ch {
		if ev.Kind == cluster.Left {
			delete(live, ev.Worker.Name)
		} else {
			live[ev.Worker.Name] = true
		}
		if maps.Equal(live, want) {
			return
		}
	}
	c.t.Fatalf("workers %v not live in 15s (live: %v)\n%s", names, live, c.logs())
}

// gale runs gale args as a child process (bounded by 30 s) and returns its output,
// exit status and duration.
func (c *atkCluster) gale(args ...string) (stdout, stderr string, code int, took time.Duration) {
	return atkGale(c.t, args...)
}

func atkGale(t *testing.T, args ...string) (stdout, stderr string, code int, took time.Duration) {
	t.Helper()
	return runChild(t, 30*time.Second, args...)
}

// conn are the flags every command takes to reach the cluster.
func (c *atkCluster) conn() []string { return []string{"--nats", c.url, "--nats-data", c.natsDir} }

// submit submits word count (run run, extra flags) on want workers with gale submit.
// Flags in extra go after "--", so that word count's --timeout reaches it (see
// TestAttackSubmitTopologyFlagNamedLikeSubmits).
func (c *atkCluster) submit(want int, run string, extra ...string) *cluster.Record {
	c.t.Helper()
	args := append([]string{"submit"}, c.conn()...)
	args = append(args, "--timeout", "20s", "--workers", fmt.Sprint(want), "wordcount", "--run="+run, "--fail-rate=0.05", "--ackers=2")
	args = append(args, "--")
	args = append(args, extra...)
	args = append(args, c.files...)
	out, errs, code, _ := c.gale(args...)
	if code != 0 {
		c.t.Fatalf("gale submit: exit %d\nstdout: %s\nstderr: %s\n%s", code, out, errs, c.logs())
	}
	return c.record()
}

func (c *atkCluster) record() *cluster.Record {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	rec, err := c.st.Record(ctx, "wordcount")
	if err != nil {
		c.t.Fatal(err)
	}
	return rec
}

// holders returns the workers holding a task of component comp in rec.
func (c *atkCluster) holders(rec *cluster.Record, comp string) []string {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	sp, err := c.st.Spec(ctx, rec.Topology)
	if err != nil {
		c.t.Fatal(err)
	}
	comps := componentsOf(sp.Tasks)
	var out []string
	for id, w := range rec.Assignment.Of {
		if comps[id] == comp && !slices.Contains(out, w) {
			out = append(out, w)
		}
	}
	slices.Sort(out)
	return out
}

// waitProgress waits until run's spout has committed progress (some lines acked),
// and fails the test if the run is already done: the attack would not be mid-run.
func (c *atkCluster) waitProgress(run string) wordcount.ClusterCommit {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	kv, err := c.js.KeyValue(ctx, wordcount.ClusterBucket(cluster.DefaultPrefix))
	if err != nil {
		c.t.Fatal(err)
	}
	w, err := kv.Watch(ctx, run+".lines")
	if err != nil {
		c.t.Fatal(err)
	}
	defer func() { _ = w.Stop() }()
	for {
		select {
		case e := <-w.Updates():
			if e == nil || e.Operation() != jetstream.KeyValuePut {
				continue
			}
			var cm wordcount.ClusterCommit
			if err := json.Unmarshal(e.Value(), &cm); err != nil {
				c.t.Fatal(err)
			}
			if cm.Done {
				c.t.Fatal("the run ended before the attack: make it longer")
			}
			if cm.Low > 0 && cm.Acked > 0 {
				return cm
			}
		case <-ctx.Done():
			c.t.Fatalf("no progress of run %s in 15s\n%s", run, c.logs())
		}
	}
}

// awaitRunning waits until word count's record has a generation above rec's and
// every worker of it says it runs it (Store.AwaitRunning); it returns that record.
func (c *atkCluster) awaitRunning(rec *cluster.Record, d time.Duration) *cluster.Record {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	next, err := c.st.AwaitRunning(ctx, rec, cluster.AwaitOptions{Next: true})
	if err != nil {
		c.t.Fatalf("no generation above %d running on all its workers within %v: %v\n%s", rec.Generation(), d, err, c.logs())
	}
	return next
}

// finish waits for run to be done, kills word count, and checks the counts against
// a one-goroutine count of the books, and that no line was lost.
func (c *atkCluster) finish(run string) wordcount.ClusterCommit {
	c.t.Helper()
	return c.finishWithin(run, 30*time.Second)
}

// finishWithin is finish, the run given d to be done.
func (c *atkCluster) finishWithin(run string, d time.Duration) wordcount.ClusterCommit {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	bucket := wordcount.ClusterBucket(cluster.DefaultPrefix)
	cm, err := wordcount.WaitClusterDone(ctx, c.js, bucket, run)
	if err != nil {
		st, _ := c.st.Status(context.Background())
		var b strings.Builder
		if st != nil {
			writeStatus(&b, st, time.Now())
		}
		c.t.Fatalf("run %s not done: %v (last commit %+v)\nstatus:\n%s\n%s", run, err, cm, b.String(), c.logs())
	}
	if _, err := c.st.Kill(ctx, "wordcount"); err != nil {
		c.t.Errorf("kill: %v", err)
	}
	counts, err := wordcount.ReadClusterCounts(ctx, c.js, bucket, run, 2)
	if err != nil {
		c.t.Fatal(err)
	}
	want, err := wordcount.CountFiles(c.files)
	if err != nil {
		c.t.Fatal(err)
	}
	if !maps.Equal(counts.Counts, want) {
		var wsum uint64
		for _, n := range want {
			wsum += n
		}
		diff := 0
		for w, n := range want {
			if counts.Counts[w] != n {
				if diff < 5 {
					c.t.Errorf("%q: %d, want %d", w, counts.Counts[w], n)
				}
				diff++
			}
		}
		c.t.Fatalf("counts not exact: %d words counted, want %d; %d words differ (commit %+v)\n%s", counts.Words, wsum, diff, cm, c.logs())
	}
	if cm.Lost != 0 {
		c.t.Errorf("%d lines lost", cm.Lost)
	}
	c.t.Logf("exact: %d words, %d duplicates skipped; commit: %d incarnations, %d resumes, %d replays", counts.Words, counts.Duplicates, cm.Incarnations, cm.Resumes, cm.Replays)
	return cm
}

// three starts w1, w2 and w3 and submits word count on the three of them.
func (c *atkCluster) three(run string) *cluster.Record {
	c.t.Helper()
	for _, n := range []string{"w1", "w2", "w3"} {
		c.startWorker(n)
	}
	c.waitLive("w1", "w2", "w3")
	rec := c.submit(3, run)
	if rec.Generation() == 0 || len(rec.Assignment.Workers) != 3 {
		c.t.Fatalf("placed: %+v", rec.Assignment)
	}
	return rec
}

// A worker that runs a count task but not the spout is kill -9'd mid-run: its count
// task is restored elsewhere from its changelog, and the counts stay exact.
func TestAttackKillNonSpoutWorker(t *testing.T) {
	c := newAtkCluster(t)
	rec := c.three("nonspout")
	spout := c.holders(rec, "lines")
	var victim string
	for _, w := range c.holders(rec, "count") {
		if !slices.Contains(spout, w) {
			victim = w
		}
	}
	if victim == "" {
		t.Fatalf("no count worker without the spout in %+v", rec.Assignment)
	}
	c.waitProgress("nonspout")
	c.signal(victim, syscall.SIGKILL)
	nrec := c.awaitRunning(rec, 10*time.Second)
	if slices.Contains(nrec.Assignment.Workers, victim) {
		t.Errorf("the dead %s is still in generation %d", victim, nrec.Generation())
	}
	c.finish("nonspout")
}

// The worker holding the scheduler's lease is kill -9'd mid-run: another takes the
// lease, moves the dead worker's tasks, and the counts stay exact.
func TestAttackKillSchedulerWorker(t *testing.T) {
	c := newAtkCluster(t)
	rec := c.three("sched")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	l, err := c.st.Lease(ctx)
	if err != nil {
		t.Fatal(err)
	}
	c.waitProgress("sched")
	c.signal(l.Holder, syscall.SIGKILL)
	c.awaitRunning(rec, 10*time.Second)
	nl, err := c.st.Lease(ctx)
	if err != nil || nl.Holder == l.Holder {
		t.Errorf("lease after killing %s: %+v, %v", l.Holder, nl, err)
	}
	c.finish("sched")
}

// Two workers are kill -9'd one after the other (the second once the first's tasks
// run elsewhere): the last worker runs everything, and the counts stay exact.
func TestAttackKillTwoWorkersInTurn(t *testing.T) {
	c := newAtkCluster(t)
	rec := c.three("twokills")
	spout := c.holders(rec, "lines")[0]
	var first string
	for _, w := range rec.Assignment.Workers {
		if w != spout {
			first = w
			break
		}
	}
	c.waitProgress("twokills")
	c.signal(first, syscall.SIGKILL)
	rec2 := c.awaitRunning(rec, 10*time.Second)
	spout2 := c.holders(rec2, "lines")[0]
	c.signal(spout2, syscall.SIGKILL)
	rec3 := c.awaitRunning(rec2, 10*time.Second)
	if len(rec3.Assignment.Workers) != 1 {
		t.Errorf("generation %d on %v, want the one worker left", rec3.Generation(), rec3.Assignment.Workers)
	}
	c.finish("twokills")
}

// The spout's worker is kill -9'd, and as soon as the scheduler has written the new
// generation, the worker given a count task that moved is kill -9'd too: during the
// restore of that task from its changelog. The last worker takes everything.
func TestAttackKillDuringRestore(t *testing.T) {
	c := newAtkCluster(t)
	rec := c.three("restore")
	spout := c.holders(rec, "lines")[0]
	before := map[string][]int{}
	for _, w := range rec.Assignment.Workers {
		before[w] = rec.Assignment.Tasks(w)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	recs, err := c.st.WatchRecords(ctx)
	if err != nil {
		t.Fatal(err)
	}
	c.waitProgress("restore")
	c.signal(spout, syscall.SIGKILL)
	var rec2 *cluster.Record
	for r := range recs {
		if r.Topology == "wordcount" && r.Generation() > rec.Generation() {
			rec2 = r
			break
		}
	}
	if rec2 == nil {
		t.Fatalf("no new generation after killing %s\n%s", spout, c.logs())
	}
	// The worker that got most of the dead one's tasks (its count task included).
	var second string
	for _, w := range rec2.Assignment.Workers {
		if len(rec2.Assignment.Tasks(w)) > len(before[w]) && (second == "" || len(rec2.Assignment.Tasks(w)) > len(rec2.Assignment.Tasks(second))) {
			second = w
		}
	}
	if second == "" {
		t.Fatalf("nobody took %s's tasks: %+v", spout, rec2.Assignment)
	}
	c.signal(second, syscall.SIGKILL)
	rec3 := c.awaitRunning(rec2, 10*time.Second)
	if len(rec3.Assignment.Workers) != 1 {
		t.Errorf("generation %d on %v", rec3.Generation(), rec3.Assignment.Workers)
	}
	c.finish("restore")
}

// The scheduler's worker is paused (SIGSTOP) past its lease and heartbeat, and
// resumed once its tasks run elsewhere: it must not write a stale decision, its old
// generation is fenced off, and the counts stay exact.
func TestAttackPauseSchedulerWorker(t *testing.T) {
	c := newAtkCluster(t)
	rec := c.three("pause")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	l, err := c.st.Lease(ctx)
	if err != nil {
		t.Fatal(err)
	}
	c.waitProgress("pause")
	c.signal(l.Holder, syscall.SIGSTOP)
	rec2 := c.awaitRunning(rec, 10*time.Second)
	c.signal(l.Holder, syscall.SIGCONT)
	if slices.Contains(rec2.Assignment.Workers, l.Holder) {
		t.Errorf("the paused %s is in generation %d", l.Holder, rec2.Generation())
	}
	c.finish("pause")
}

// gale rebalance --workers 2, then --workers 3, mid-run: each drains and moves;
// counts exact.
func TestAttackRebalanceMidRun(t *testing.T) {
	c := newAtkCluster(t)
	rec := c.three("rebal")
	c.waitProgress("rebal")
	out, errs, code, _ := c.gale(append(append([]string{"rebalance"}, c.conn()...), "--timeout", "20s", "--workers", "2", "wordcount")...)
	if code != 0 {
		t.Fatalf("rebalance 2: exit %d\n%s\n%s\n%s", code, out, errs, c.logs())
	}
	rec2 := c.record()
	if rec2.Generation() <= rec.Generation() || len(rec2.Assignment.Workers) != 2 {
		t.Errorf("after rebalance --workers 2: generation %d on %v", rec2.Generation(), rec2.Assignment.Workers)
	}
	out, errs, code, _ = c.gale(append(append([]string{"rebalance"}, c.conn()...), "--timeout", "20s", "--workers", "3", "wordcount")...)
	if code != 0 {
		t.Fatalf("rebalance 3: exit %d\n%s\n%s\n%s", code, out, errs, c.logs())
	}
	rec3 := c.record()
	if rec3.Generation() <= rec2.Generation() || len(rec3.Assignment.Workers) != 3 {
		t.Errorf("after rebalance --workers 3: generation %d on %v", rec3.Generation(), rec3.Assignment.Workers)
	}
	c.finish("rebal")
}

// gale deactivate then gale activate mid-run: counts exact, and nothing runs while
// it is inactive.
func TestAttackDeactivateActivateMidRun(t *testing.T) {
	c := newAtkCluster(t)
	rec := c.three("deact")
	c.waitProgress("deact")
	out, errs, code, _ := c.gale(append(append([]string{"deactivate"}, c.conn()...), "--timeout", "20s", "wordcount")...)
	if code != 0 {
		t.Fatalf("deactivate: exit %d\n%s\n%s", code, out, errs)
	}
	// Every worker stops it (its heartbeat says it runs nothing).
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ws, err := c.st.WatchWorkers(ctx, false)
	if err != nil {
		t.Fatal(err)
	}
	running := map[string]bool{}
	for ev := range ws {
		running[ev.Worker.Name] = ev.Kind != cluster.Left && ev.Worker.Running["wordcount"] != 0
		if len(running) == 3 && !slices.Contains(slices.Collect(maps.Values(running)), true) {
			break
		}
	}
	if ctx.Err() != nil {
		t.Fatalf("workers still running word count 10s after deactivate: %v", running)
	}
	out, errs, code, _ = c.gale(append(append([]string{"activate"}, c.conn()...), "--timeout", "20s", "wordcount")...)
	if code != 0 {
		t.Fatalf("activate: exit %d\n%s\n%s", code, out, errs)
	}
	c.awaitRunning(rec, 10*time.Second)
	c.finish("deact")
}

// gale kill mid-run, then gale submit again with the same --run: the run resumes
// from its committed offsets and changelogs, and the counts are exact.
func TestAttackKillThenResubmitSameRun(t *testing.T) {
	c := newAtkCluster(t)
	rec := c.three("again")
	c.waitProgress("again")
	out, errs, code, _ := c.gale(append(append([]string{"kill"}, c.conn()...), "--timeout", "20s", "wordcount")...)
	if code != 0 {
		t.Fatalf("kill: exit %d\n%s\n%s", code, out, errs)
	}
	rec2 := c.submit(3, "again")
	if rec2.Generation() <= rec.Generation() {
		t.Errorf("resubmitted at generation %d, killed at %d", rec2.Generation(), rec.Generation())
	}
	cm := c.finish("again")
	if cm.Resumes < 1 {
		t.Errorf("the spout did not resume: %+v", cm)
	}
}

// Misuse of the commands on a live cluster of two workers: each must fail (or not)
// at once with a message that says why, and leave nothing pending.
func TestAttackCommandMisuse(t *testing.T) {
	c := newAtkCluster(t)
	c.startWorker("w1")
	c.startWorker("w2")
	c.waitLive("w1", "w2")
	conn := c.conn()
	sub := func(extra ...string) []string {
		return append(append(append([]string{"submit"}, conn...), "--timeout", "8s"), extra...)
	}
	dir := t.TempDir()
	for _, tc := range []struct {
		name string
		args []string
		want string // in stderr
	}{
		// First, while word count's bucket does not exist yet: once it does (with 1
		// replica), --state-replicas 3 is silently ignored (EnsureClusterState leaves
		// existing ones as they are).
		{"state replicas 3 on one node", sub("wordcount", "--state-replicas=3", c.files[0]), "replicas"},
		{"unknown topology", sub("nosuch"), "not in this build"},
		{"no topology", sub(), "name the topology"},
		{"fail-rate 2", sub("wordcount", "--fail-rate=2", c.files[0]), "--fail-rate 2: must be at least 0 and below 1"},
		{"fail-rate NaN", sub("wordcount", "--fail-rate=NaN", c.files[0]), "--fail-rate NaN"},
		{"bad flag", sub("wordcount", "--nosuchflag", c.files[0]), "unknown flag"},
		{"workers -1", sub("--workers", "-1", "wordcount", c.files[0]), "--workers"},
		{"bad run name", sub("wordcount", "--run=a.b", c.files[0]), "Run"},
		{"ackers 0", sub("wordcount", "--ackers=0", c.files[0]), "--ackers 0: a run on workers needs at least 1"},
		{"more workers than live", sub("--workers", "5", "wordcount", c.files[0]), "refused"},
		{"kill unknown", append(append([]string{"kill"}, conn...), "--timeout", "8s", "nosuch"), "not submitted"},
		{"deactivate unknown", append(append([]string{"deactivate"}, conn...), "--timeout", "8s", "nosuch"), "not submitted"},
		{"rebalance unknown", append(append([]string{"rebalance"}, conn...), "--timeout", "8s", "nosuch"), "not submitted"},
		{"rebalance -1", append(append([]string{"rebalance"}, conn...), "--timeout", "8s", "--workers", "-1", "wordcount"), "workers"},
		{"worker slots -1", append(append([]string{"worker"}, conn...), "--name", "neg", "--slots", "-1"), "slots"},
		{"worker bad name", append(append([]string{"worker"}, conn...), "--name", "a.b"), "name"},
		{"worker bad log level", append(append([]string{"worker"}, conn...), "--name", "x", "--log-level", "loud"), "loud"},
		{"wrong credentials", []string{"cluster", "status", "--nats", c.url, "--nats-data", dir, "--timeout", "5s"}, "credentials"},
		{"bogus nkey file", []string{"cluster", "status", "--nats", c.url, "--nkey", filepath.Join(dir, "none.nk"), "--timeout", "5s"}, "nkey"},
		{"bogus creds file", []string{"cluster", "status", "--nats", c.url, "--creds", filepath.Join(dir, "none.creds"), "--timeout", "5s"}, "creds"},
		{"no server", []string{"cluster", "status", "--nats", "nats://127.0.0.1:1", "--nats-data", c.natsDir, "--timeout", "5s"}, "127.0.0.1:1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, errs, code, took := atkGale(t, tc.args...)
			if code == 0 {
				t.Errorf("gale %v succeeded\nstdout: %s\nstderr: %s", tc.args, out, errs)
			}
			if !strings.Contains(errs, tc.want) {
				t.Errorf("gale %v: stderr %q does not say %q", tc.args, errs, tc.want)
			}
			if took > 10*time.Second {
				t.Errorf("gale %v took %v", tc.args, took)
			}
		})
	}
	// Nothing was left pending: a proper submit on 2 workers goes through, a second
	// one of the same name is refused, and status shows it once.
	c.submit(2, "misuse")
	out, errs, code, _ := c.gale(sub("--workers", "2", "wordcount", "--run=misuse2", c.files[0])...)
	if code == 0 || !strings.Contains(errs, "already submitted") {
		t.Errorf("second submit: exit %d\n%s\n%s", code, out, errs)
	}
	out, errs, code, _ = c.gale(append(append([]string{"cluster", "status"}, conn...), "--timeout", "5s")...)
	if code != 0 || strings.Count(out, "topology wordcount:") != 1 || !strings.Contains(out, "scheduler: w") {
		t.Errorf("status: exit %d\n%s\n%s", code, out, errs)
	}
	c.finish("misuse")
}

// A topology whose input file is missing, or is a directory: gale submit must say so
// (like gale wordcount does), not accept it and leave the spout's worker failing.
func TestAttackSubmitBadFiles(t *testing.T) {
	c := newAtkCluster(t)
	c.startWorker("w1")
	c.waitLive("w1")
	dir := t.TempDir()
	for _, f := range []string{filepath.Join(dir, "missing.txt"), dir} {
		out, errs, code, took := c.gale(append(append([]string{"submit"}, c.conn()...), "--timeout", "5s", "wordcount", "--run=bad", f)...)
		if code == 0 || !strings.Contains(errs, f) {
			t.Errorf("submit of %s: exit %d after %v\nstdout: %s\nstderr: %s\n%s", f, code, took, out, errs, c.logs())
		}
		// Whatever it said, leave nothing behind.
		_, _, _, _ = c.gale(append(append([]string{"kill"}, c.conn()...), "--timeout", "5s", "wordcount")...)
	}
}

// gale submit with no worker running: it must fail within --timeout saying that no
// scheduler answered; and then the topology must not be left pending (a worker
// started later must not run a submission the user was told had failed, and a
// submit of it must not be refused as "already submitted").
func TestAttackSubmitWithoutWorkers(t *testing.T) {
	c := newAtkCluster(t)
	args := append(append([]string{"submit"}, c.conn()...), "--timeout", "3s", "wordcount", "--run=nowk", "--ackers=2")
	args = append(append(args, "--"), c.files...)
	out, errs, code, took := c.gale(args...)
	if code == 0 {
		t.Fatalf("submit without a worker succeeded: %s", out)
	}
	if took > 8*time.Second {
		t.Errorf("submit without a worker took %v with --timeout 3s", took)
	}
	if !strings.Contains(errs, "worker") || !strings.Contains(errs, "scheduler") {
		t.Errorf("unclear message: %q", errs)
	}
	t.Logf("submit without a worker: exit %d after %v: %s", code, took.Round(time.Millisecond), strings.TrimSpace(errs))

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if sp, err := c.st.Spec(ctx, "wordcount"); err == nil && !sp.Killed {
		t.Errorf("the failed submit left its spec pending: %+v", sp.Args)
	}
	c.startWorker("w1")
	c.waitLive("w1")
	out, errs, code, _ = c.gale(append(append([]string{"submit"}, c.conn()...), "--timeout", "10s", "wordcount", "--run=nowk2", "--ackers=2", c.files[0])...)
	if code != 0 {
		t.Errorf("submit once a worker runs: exit %d\nstdout: %s\nstderr: %s", code, out, errs)
	}
}

// Two `gale worker` processes with the same --name: the second must exit with a
// clear error, and the first must keep running word count undisturbed.
func TestAttackSameNameWorkers(t *testing.T) {
	c := newAtkCluster(t)
	c.startWorker("w1")
	c.startWorker("w2")
	c.waitLive("w1", "w2")
	rec := c.submit(2, "dupname")
	c.waitProgress("dupname")
	dup := c.startWorker("w1")
	select {
	case <-dup.done:
	case <-time.After(10 * time.Second):
		t.Fatalf("the second w1 is still running after 10s\n%s", c.logs())
	}
	data, _ := os.ReadFile(dup.log)
	if !strings.Contains(string(data), "name in use") {
		t.Errorf("the second w1 did not say its name is in use:\n%s", data)
	}
	if strings.Contains(string(data), "msg=started") {
		t.Errorf("the second w1 started tasks:\n%s", data)
	}
	if r := c.record(); r.Generation() != rec.Generation() {
		t.Logf("generation moved from %d to %d", rec.Generation(), r.Generation())
	}
	c.finishWithin("dupname", 15*time.Second)
}

// A worker (not the spout's) is kill -9'd and started again at once under the same
// name, as systemd's Restart= would: the new process waits for the dead one's key
// to expire and joins; the run must end within a few seconds with exact counts.
//
// It hangs: the old key expires (generation g+1 without the worker) and the new
// process joins ~0.3 s later (g+2, the spout moved to it). A worker still stopping
// g starts g+1 after the new worker has started g+2; g+1's spout claims the offsets
// key after g+2's did, so g+2's spout is stale for good and emits nothing more.
func TestAttackRestartSameNameAfterKill(t *testing.T) {
	c := newAtkCluster(t)
	rec := c.three("restart")
	spout := c.holders(rec, "lines")
	var victim string
	for _, w := range rec.Assignment.Workers {
		if !slices.Contains(spout, w) {
			victim = w
			break
		}
	}
	c.waitProgress("restart")
	c.signal(victim, syscall.SIGKILL)
	again := c.startWorker(victim)
	c.finishWithin("restart", 20*time.Second)
	select {
	case <-again.done:
		data, _ := os.ReadFile(again.log)
		t.Fatalf("the restarted %s exited: %v\n%s", victim, again.cmd.ProcessState, data)
	default:
	}
}

// The scheduler's worker is stopped gracefully (SIGTERM) mid-run: it drains, leaves
// (its heartbeat and lease deleted), another worker takes the lease and its tasks,
// and the counts stay exact.
func TestAttackSigtermSchedulerWorker(t *testing.T) {
	c := newAtkCluster(t)
	rec := c.three("sigterm")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	l, err := c.st.Lease(ctx)
	if err != nil {
		t.Fatal(err)
	}
	c.waitProgress("sigterm")
	p := c.proc(l.Holder)
	c.signal(l.Holder, syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		t.Fatalf("%s still there 10s after SIGTERM\n%s", l.Holder, c.logs())
	}
	if !p.cmd.ProcessState.Success() {
		data, _ := os.ReadFile(p.log)
		t.Errorf("%s exited %v after SIGTERM:\n%s", l.Holder, p.cmd.ProcessState, data)
	}
	rec2 := c.awaitRunning(rec, 10*time.Second)
	if slices.Contains(rec2.Assignment.Workers, l.Holder) {
		t.Errorf("the stopped %s is in generation %d", l.Holder, rec2.Generation())
	}
	c.finish("sigterm")
}

// Requests that change nothing (rebalance to the same number of workers, activate
// an active topology, deactivate twice) must be answered at once, not wait for a
// record the scheduler has no reason to write.
func TestAttackNoOpRequests(t *testing.T) {
	c := newAtkCluster(t)
	c.startWorker("w1")
	c.startWorker("w2")
	c.waitLive("w1", "w2")
	rec := c.submit(2, "noop")
	for _, args := range [][]string{
		{"rebalance", "--workers", "2", "wordcount"},
		{"rebalance", "wordcount"},
		{"activate", "wordcount"},
		{"deactivate", "wordcount"},
		{"deactivate", "wordcount"},
		{"activate", "wordcount"},
	} {
		full := append(append([]string{args[0]}, c.conn()...), append([]string{"--timeout", "8s"}, args[1:]...)...)
		out, errs, code, took := c.gale(full...)
		if code != 0 || took > 5*time.Second {
			t.Errorf("gale %v: exit %d after %v\nstdout: %s\nstderr: %s", args, code, took.Round(time.Millisecond), out, errs)
		}
	}
	c.awaitRunning(rec, 10*time.Second)
	c.finish("noop")
}

// Every worker is kill -9'd mid-run (no scheduler is left to write anything), then
// three are started again under the same names: they take up the last generation's
// record, the spout resumes from its committed offset, and the counts are exact.
//
// It hangs in about one run in three, as TestAttackRestartSameNameAfterKill: the
// restarted workers start generation 1 at once, the dead ones' keys expire
// (generation 2, everything on one of them), the others join again (generations 3
// and 4), and a worker slow to start a superseded generation opens its spout after
// the newest generation's spout, which is then stale for good.
func TestAttackKillAllThenRestart(t *testing.T) {
	c := newAtkCluster(t)
	c.three("all")
	c.waitProgress("all")
	for _, n := range []string{"w1", "w2", "w3"} {
		c.signal(n, syscall.SIGKILL)
	}
	for _, n := range []string{"w1", "w2", "w3"} {
		c.startWorker(n)
	}
	cm := c.finishWithin("all", 20*time.Second)
	if cm.Resumes < 1 {
		t.Errorf("no resume: %+v", cm)
	}
}

// Every worker is kill -9'd mid-run and three others (new names) are started: the
// new scheduler moves everything to them, and the counts are exact.
func TestAttackKillAllThenNewWorkers(t *testing.T) {
	c := newAtkCluster(t)
	rec := c.three("allnew")
	c.waitProgress("allnew")
	for _, n := range []string{"w1", "w2", "w3"} {
		c.signal(n, syscall.SIGKILL)
	}
	for _, n := range []string{"w4", "w5", "w6"} {
		c.startWorker(n)
	}
	rec2 := c.awaitRunning(rec, 15*time.Second)
	for _, w := range rec2.Assignment.Workers {
		if w < "w4" {
			t.Errorf("generation %d still names %s", rec2.Generation(), w)
		}
	}
	c.finishWithin("allnew", 25*time.Second)
}

// restartNode shuts the NATS node down and starts it again on the same port and
// data directory (its JetStream state kept), waiting at most 20 s.
func (c *atkCluster) restartNode(down time.Duration) {
	c.t.Helper()
	c.node.Shutdown()
	c.node.WaitForShutdown()
	time.Sleep(down) // the outage itself: its length is what the test sets, a sleep by nature
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	node, err := natsnode.Start(ctx, natsnode.Config{DataDir: c.natsDir, Host: "127.0.0.1", Port: c.port})
	if err != nil {
		c.t.Fatal(err)
	}
	c.node = node
	if err := node.Ready(ctx); err != nil {
		c.t.Fatal(err)
	}
}

// The NATS node (the cluster's only JetStream server) is restarted mid-run, down for
// a second: workers, scheduler and tasks reconnect, and the run ends with exact
// counts.
//
// The trees in flight during the outage are lost with core NATS's messages and
// replayed after the message timeout: with word count's default (30 s) the run
// stalls for ~30 s (it ends exact after ~36 s); here it is 3 s.
func TestAttackNATSRestartMidRun(t *testing.T) {
	c := newAtkCluster(t)
	for _, n := range []string{"w1", "w2", "w3"} {
		c.startWorker(n)
	}
	c.waitLive("w1", "w2", "w3")
	rec := c.submit(3, "natsrestart", "--timeout=3s")
	if !slices.Contains(rec.Args, "--timeout=3s") {
		t.Fatalf("word count's --timeout did not reach it: %q", rec.Args)
	}
	c.waitProgress("natsrestart")
	c.restartNode(time.Second)
	c.finishWithin("natsrestart", 90*time.Second)
	for _, n := range []string{"w1", "w2", "w3"} {
		if c.proc(n) == nil {
			t.Errorf("worker %s exited over the NATS restart\n%s", n, c.logs())
		}
	}
}

// A topology flag that shares its name with one of gale submit's own (word count's
// --timeout, its message timeout) must reach the topology when it follows the
// topology's name, as gale submit's help says ("The topology's own flags follow its
// name").
func TestAttackSubmitTopologyFlagNamedLikeSubmits(t *testing.T) {
	f := galeApp().submitCmd().Flags()
	own, topo, rest, err := galeApp().splitSubmitArgs(f, []string{"--workers", "2", "wordcount", "--timeout=7s", "--fail-rate", "0.1", "a.txt"})
	if err != nil {
		t.Fatal(err)
	}
	if topo != "wordcount" || !slices.Contains(rest, "--timeout=7s") || slices.Contains(own, "--timeout=7s") {
		t.Errorf("own %q, topology %q, its flags %q: word count's --timeout was taken as submit's", own, topo, rest)
	}
}

// A worker is kill -9'd and, before its heartbeat has expired, the topology is
// rebalanced onto 2 workers: the rebalance's drain cannot complete the dead
// worker's trees (bounded by --stop-timeout, 5 s here), the dead worker's expiry
// follows, and the counts are exact.
func TestAttackRebalanceRightAfterKill(t *testing.T) {
	c := newAtkCluster(t)
	rec := c.three("rebkill")
	spout := c.holders(rec, "lines")
	var victim string
	for _, w := range rec.Assignment.Workers {
		if !slices.Contains(spout, w) {
			victim = w
		}
	}
	c.waitProgress("rebkill")
	c.signal(victim, syscall.SIGKILL)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := c.st.Rebalance(ctx, "wordcount", 2); err != nil {
		t.Fatalf("rebalance: %v", err)
	}
	rec2 := c.awaitRunning(rec, 15*time.Second)
	if slices.Contains(rec2.Assignment.Workers, victim) {
		t.Logf("generation %d still names the dead %s (its key had not expired)", rec2.Generation(), victim)
	}
	c.finishWithin("rebkill", 25*time.Second)
}
