package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/gale-stream/gale/cluster"
	"github.com/gale-stream/gale/cluster/natsnode"

	"github.com/gale-stream/gale/pipelines/wordcount"
)

// clusterDemo is `gale wordcount --workers N`: an embedded NATS node, N `gale worker`
// child processes on loopback, word count submitted to them, and (with
// --kill-worker) one of them kill -9'd mid-run.
type clusterDemo struct {
	files     []string
	args      []string // word count's flags but the files
	workers   int
	killAfter time.Duration
	pause     bool          // SIGSTOP the worker instead of SIGKILL, and SIGCONT it once its tasks run elsewhere
	natsNodes int           // 1, or 3 for a JetStream cluster with every bucket and stream replicated 3 times
	killNATS  time.Duration // shut one NATS node down this long after the submit
	hbTTL     time.Duration
	top       int
	asJSON    bool
	outFile   string
	out, errw io.Writer
	logger    *slog.Logger
	keepLogs  bool
	// spawn makes the command of a worker child process from its arguments (default:
	// this executable with them; tests run their own binary as gale).
	spawn func(args []string) *exec.Cmd
}

// failover is what the demo measured around its kill -9.
type failover struct {
	Victim        string            `json:"worker"`
	PID           int               `json:"pid"`
	Tasks         string            `json:"tasks"`
	KilledAfter   time.Duration     `json:"-"`
	Detected      time.Duration     `json:"-"` // kill to its heartbeat's expiry (server time)
	Reassigned    time.Duration     `json:"-"` // kill to the new generation's record
	Running       time.Duration     `json:"-"` // kill to every worker of it running it
	OldGen        uint64            `json:"from_generation"`
	NewGen        uint64            `json:"to_generation"`
	NewAssignment string            `json:"-"`
	After         map[string]string `json:"-"` // the new generation's tasks by worker
	Paused        bool              `json:"-"` // SIGSTOP rather than SIGKILL
	Resumed       bool              `json:"-"` // SIGCONT sent once the new generation ran
}

// childWorker is a `gale worker` process the demo started.
type childWorker struct {
	name string
	cmd  *exec.Cmd
	log  string
	done chan struct{}
}

// demoOutcome is what a run on workers measured.
type demoOutcome struct {
	natsNodes  int
	natsKilled string // the NATS node shut down mid-run, and when
	first      *cluster.Record
	comps      map[int]string
	counts     *wordcount.ClusterCounts
	commit     wordcount.ClusterCommit
	exact      bool
	elapsed    time.Duration // submit to the spout's last commit
	placed     time.Duration // submit to every worker running it
	fo         *failover
	// cpu is the CPU time of the worker processes (user and system, from their exit
	// status) and of this process (the NATS node, the watchers) during the run.
	cpu, selfCPU time.Duration
}

func (d *clusterDemo) run(ctx context.Context) error {
	o, err := d.execute(ctx)
	if err != nil {
		return err
	}
	if d.outFile != "" {
		if err := writeCounts(d.outFile, o.counts.Counts); err != nil {
			return err
		}
	}
	if d.asJSON {
		err = d.writeJSON(o)
	} else {
		d.writeSummary(o)
	}
	if err != nil {
		return err
	}
	if !o.exact {
		return ExitError{1}
	}
	return nil
}

func (d *clusterDemo) execute(ctx context.Context) (_ *demoOutcome, err error) {
	selfStart := selfCPU()
	dir, err := os.MkdirTemp("", "gale-wordcount-cluster-")
	if err != nil {
		return nil, err
	}
	defer func() {
		if !d.keepLogs {
			os.RemoveAll(dir)
		}
	}()
	if d.keepLogs {
		fmt.Fprintf(d.errw, "gale: the workers' logs and the NATS store are kept in %s\n", dir)
	}
	nodes, err := startDemoNodes(ctx, dir, max(d.natsNodes, 1))
	defer func() {
		for _, n := range nodes {
			n.Shutdown()
			n.WaitForShutdown()
		}
	}()
	if err != nil {
		return nil, err
	}
	natsDir := nodes[0].DataDir() // every node has the first one's credentials
	var urls []string
	for _, n := range nodes {
		urls = append(urls, n.ClientURL())
	}
	url := strings.Join(urls, ",")
	replicas := 1
	if len(nodes) >= 3 {
		replicas = 3
	}
	cf := ClusterAt(url, natsDir, replicas, d.hbTTL, 60*time.Second)
	nc, st, err := cf.Connect(ctx, "gale wordcount --workers")
	if err != nil {
		return nil, err
	}
	defer nc.Close()

	if d.spawn == nil {
		exe, err := os.Executable()
		if err != nil {
			return nil, err
		}
		d.spawn = func(args []string) *exec.Cmd { return exec.Command(exe, args...) }
	}
	var children []*childWorker
	defer func() { stopChildren(children, d.errw) }()
	for i := 1; i <= d.workers; i++ {
		c, err := startWorkerChild(d.spawn, dir, fmt.Sprintf("w%d", i), url, natsDir)
		if err != nil {
			return nil, err
		}
		children = append(children, c)
	}
	if err := waitWorkers(ctx, st, d.workers, children); err != nil {
		return nil, err
	}

	args, err := wordcount.NormalizeClusterArgs(append(append(slices.Clone(d.args), fmt.Sprintf("--state-replicas=%d", replicas)), d.files...), defaultBooks)
	if err != nil {
		return nil, err
	}
	a, err := wordcount.ParseClusterArgs(args)
	if err != nil {
		return nil, err
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, err
	}
	start := time.Now()
	rec, comps, err := wordcountSubmitter().SubmitTopology(ctx, nc, st, "wordcount", args, d.workers, 60*time.Second, true, d.errw)
	if err != nil {
		return nil, err
	}
	placed := time.Since(start)
	first := rec

	// Watch the cluster while the job runs: the end, and around a kill -9, the
	// victim's expiry, the new record and every worker of it running again.
	wctx, wcancel := context.WithCancel(ctx)
	defer wcancel()
	members, err := st.WatchWorkers(wctx, false)
	if err != nil {
		return nil, err
	}
	recs, err := st.WatchRecords(wctx)
	if err != nil {
		return nil, err
	}
	type doneMsg struct {
		c   wordcount.ClusterCommit
		err error
	}
	doneCh := make(chan doneMsg, 1)
	go func() {
		c, err := wordcount.WaitClusterDone(wctx, js, wordcount.ClusterBucket(cluster.DefaultPrefix), a.Options.Run)
		doneCh <- doneMsg{c, err}
	}()
	var killC <-chan time.Time
	var killTimer *time.Timer
	if d.killAfter > 0 {
		killTimer = time.NewTimer(d.killAfter)
		defer killTimer.Stop()
		killC = killTimer.C
	}
	var natsKillC <-chan time.Time
	if d.killNATS > 0 && len(nodes) > 1 {
		t := time.NewTimer(d.killNATS)
		defer t.Stop()
		natsKillC = t.C
	}
	var natsKilled string
	var fo *failover
	// After the kill: every worker of the next generation running it.
	running := make(chan error, 1)
	var killedAt time.Time
	var newRec *cluster.Record
	var commit wordcount.ClusterCommit
	var paused *childWorker
	defer func() {
		if paused != nil {
			_ = paused.cmd.Process.Signal(syscall.SIGCONT)
		}
	}()
wait:
	for {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case m := <-doneCh:
			if m.err != nil {
				return nil, fmt.Errorf("waiting for the job to end: %w", m.err)
			}
			commit = m.c
			break wait
		case <-natsKillC:
			// The last node: the first holds the credentials file the others copied.
			n := nodes[len(nodes)-1]
			natsKilled = fmt.Sprintf("%s at %v", n.Name(), time.Since(start).Round(time.Millisecond))
			n.Shutdown()
		case <-killC:
			// Mid-run means after the spout committed some progress (a slow start, under
			// load or the race detector, can take longer than AFTER): the failover
			// then shows the spout resuming from its committed offset.
			if cm, err := wordcount.ClusterProgress(ctx, js, wordcount.ClusterBucket(cluster.DefaultPrefix), a.Options.Run); err == nil && cm.Low == 0 && !cm.Done {
				killTimer.Reset(50 * time.Millisecond)
				continue
			}
			victim := spoutWorker(rec, comps)
			for _, c := range children {
				if c.name == victim {
					fo = &failover{Victim: victim, PID: c.cmd.Process.Pid, Tasks: DescribeTasks(rec.Assignment.Tasks(victim), comps), OldGen: rec.Generation(), Paused: d.pause}
					killedAt = time.Now()
					fo.KilledAfter = killedAt.Sub(start)
					sig := syscall.SIGKILL
					if d.pause {
						sig = syscall.SIGSTOP
						paused = c
					}
					if err := c.cmd.Process.Signal(sig); err != nil {
						return nil, fmt.Errorf("%v to %s: %w", sig, victim, err)
					}
					go func(rec *cluster.Record) {
						_, err := st.AwaitRunning(wctx, rec, cluster.AwaitOptions{Next: true})
						running <- err
					}(rec)
				}
			}
		case err := <-running:
			if err != nil {
				continue // the job ended first, or the wait did: "not seen"
			}
			fo.Running = time.Since(killedAt)
			if paused != nil {
				// Back from its pause, it finds its key expired and its tasks moved:
				// whatever its old generation still sends goes where nobody listens.
				if err := paused.cmd.Process.Signal(syscall.SIGCONT); err != nil {
					return nil, fmt.Errorf("SIGCONT to %s: %w", paused.name, err)
				}
				fo.Resumed = true
				paused = nil
			}
		case ev, ok := <-members:
			if !ok {
				return nil, ctx.Err()
			}
			if ev.Kind == cluster.Left && fo != nil && ev.Worker.Name == fo.Victim && fo.Detected == 0 {
				fo.Detected = ev.At.Sub(killedAt)
			}
		case r, ok := <-recs:
			if !ok {
				return nil, ctx.Err()
			}
			if r.Topology != "wordcount" || r.Revision < rec.Revision {
				continue
			}
			rec = r
			if fo != nil && newRec == nil && r.Generation() > fo.OldGen {
				newRec = r
				fo.NewGen = r.Generation()
				fo.Reassigned = time.Since(killedAt)
				var b strings.Builder
				WriteTasks(&b, r.Assignment, comps)
				fo.NewAssignment = b.String()
				fo.After = map[string]string{}
				for _, w := range r.Assignment.Workers {
					fo.After[w] = DescribeTasks(r.Assignment.Tasks(w), comps)
				}
			}
		}
	}
	elapsed := time.Since(start)
	wcancel()

	kctx, kcancel := context.WithTimeout(ctx, 60*time.Second)
	defer kcancel()
	if _, err := st.Kill(kctx, "wordcount"); err != nil {
		fmt.Fprintln(d.errw, "gale: kill wordcount:", err)
	}
	counts, err := wordcount.ReadClusterCounts(kctx, js, wordcount.ClusterBucket(cluster.DefaultPrefix), a.Options.Run, a.Options.Parallelism)
	if err != nil {
		return nil, fmt.Errorf("reading the count changelogs: %w", err)
	}
	want, err := wordcount.CountFiles(a.Options.Files)
	if err != nil {
		return nil, err
	}
	stopChildren(children, d.errw)
	var cpu time.Duration
	for _, c := range children {
		if ps := c.cmd.ProcessState; ps != nil {
			cpu += ps.UserTime() + ps.SystemTime()
		}
	}
	children = nil
	return &demoOutcome{natsNodes: len(nodes), natsKilled: natsKilled, first: first, comps: comps, counts: &counts, commit: commit, exact: maps.Equal(counts.Counts, want),
		elapsed: elapsed, placed: placed, fo: fo, cpu: cpu, selfCPU: selfCPU() - selfStart}, nil
}

// selfCPU is this process's CPU time so far (user and system).
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// startDemoNodes starts n embedded NATS nodes with JetStream on loopback: one, or a
// cluster routed all to all (the route ports reserved first), the others with the
// first's credentials; it returns once JetStream has a meta leader.
func startDemoNodes(ctx context.Context, dir string, n int) ([]*natsnode.Node, error) {
	var routes []string
	var ports []int
	if n > 1 {
		for range n {
			l, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				return nil, err
			}
			ports = append(ports, l.Addr().(*net.TCPAddr).Port)
			routes = append(routes, l.Addr().String())
			l.Close()
		}
	}
	var nodes []*natsnode.Node
	for i := range n {
		cfg := natsnode.Config{DataDir: filepath.Join(dir, fmt.Sprintf("nats%d", i+1)), Host: "127.0.0.1", Port: -1}
		if n > 1 {
			cfg.ServerName, cfg.ClusterHost, cfg.ClusterPort, cfg.Routes = fmt.Sprintf("n%d", i+1), "127.0.0.1", ports[i], routes
			if i > 0 {
				cfg.CredentialsFrom = nodes[0].CredentialsFile()
			}
		}
		node, err := natsnode.Start(ctx, cfg)
		if err != nil {
			return nodes, fmt.Errorf("embedded NATS node %d: %w", i+1, err)
		}
		nodes = append(nodes, node)
	}
	rctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	for _, node := range nodes {
		if err := node.Ready(rctx); err != nil {
			return nodes, fmt.Errorf("embedded NATS not ready: %w", err)
		}
	}
	return nodes, nil
}

// spoutWorker names the worker running word count's spout task.
func spoutWorker(rec *cluster.Record, comps map[int]string) string {
	for id, w := range rec.Assignment.Of {
		if comps[id] == "lines" {
			return w
		}
	}
	return rec.Assignment.Workers[0]
}

func startWorkerChild(spawn func([]string) *exec.Cmd, dir, name, url, natsDir string) (*childWorker, error) {
	logPath := filepath.Join(dir, name+".log")
	lf, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := spawn([]string{"worker", "--nats", url, "--nats-data", natsDir, "--name", name, "--log-level", "info"})
	cmd.Stdout, cmd.Stderr = lf, lf
	if err := cmd.Start(); err != nil {
		lf.Close()
		return nil, fmt.Errorf("starting worker %s: %w", name, err)
	}
	c := &childWorker{name: name, cmd: cmd, log: logPath, done: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		lf.Close()
		close(c.done)
	}()
	return c, nil
}

// stopChildren stops every worker it started: SIGTERM (they drain and leave), and
// SIGKILL for one still there after 15 s.
func stopChildren(children []*childWorker, errw io.Writer) {
	for _, c := range children {
		select {
		case <-c.done:
		default:
			_ = c.cmd.Process.Signal(syscall.SIGTERM)
		}
	}
	deadline := time.After(15 * time.Second)
	for _, c := range children {
		select {
		case <-c.done:
		case <-deadline:
			fmt.Fprintf(errw, "gale: worker %s (pid %d) did not stop in 15s after SIGTERM: killed\n", c.name, c.cmd.Process.Pid)
			_ = c.cmd.Process.Kill()
			<-c.done
		}
	}
}

// waitWorkers waits until n workers are live, or one of the children has died.
func waitWorkers(ctx context.Context, st *cluster.Store, n int, children []*childWorker) error {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	ch, err := st.WatchWorkers(ctx, false)
	if err != nil {
		return err
	}
	live := map[string]bool{}
	died := make(chan *childWorker, len(children))
	for _, c := range children {
		go func() {
			select {
			case <-c.done:
				died <- c
			case <-ctx.Done():
			}
		}()
	}
	for {
		select {
		case c := <-died:
			b, _ := os.ReadFile(c.log)
			return fmt.Errorf("worker %s exited (%v) before joining; its log:\n%s", c.name, c.cmd.ProcessState, b)
		case ev, ok := <-ch:
			if !ok {
				return fmt.Errorf("%d workers not live within 60s", n)
			}
			if ev.Kind == cluster.Left {
				delete(live, ev.Worker.Name)
			} else {
				live[ev.Worker.Name] = true
			}
			if len(live) >= n {
				return nil
			}
		}
	}
}

func (d *clusterDemo) writeSummary(o *demoOutcome) {
	first, comps, c, commit, exact, elapsed, placed, fo := o.first, o.comps, o.counts, o.commit, o.exact, o.elapsed, o.placed, o.fo
	w := d.out
	p := func(label, value string) { fmt.Fprintf(w, "%-22s %s\n", label, value) }
	nodes := "an embedded NATS node"
	if o.natsNodes > 1 {
		nodes = fmt.Sprintf("a cluster of %d embedded NATS nodes, every bucket and stream replicated 3 times", o.natsNodes)
	}
	fmt.Fprintf(w, "word count on %d worker processes (%s, loopback), generation %d:\n", d.workers, nodes, first.Generation())
	WriteTasks(w, first.Assignment, comps)
	p("words", grouped(c.Words))
	p("distinct words", grouped(uint64(len(c.Counts))))
	p("duplicates skipped", grouped(c.Duplicates))
	p("replayed", grouped(commit.Replays))
	p("spout resumes", grouped(commit.Resumes))
	p("wall time", elapsed.Round(time.Millisecond).String()+fmt.Sprintf(" (placed and running after %v)", placed.Round(time.Millisecond)))
	p("words/s", grouped(uint64(perSecond(c.Words, elapsed))))
	if exact {
		p("counts", "exact (equal to a one-goroutine count of the same files)")
	} else {
		p("counts", "NOT EXACT: they differ from a one-goroutine count of the same files")
	}
	if o.natsKilled != "" {
		p("NATS node shut down", o.natsKilled)
	}
	if fo != nil {
		what := "kill -9"
		if fo.Paused {
			what = "SIGSTOP (SIGCONT once its tasks ran elsewhere)"
		}
		fmt.Fprintf(w, "failover: %s of %s (pid %d, running %s) %v into the run\n", what, fo.Victim, fo.PID, fo.Tasks, fo.KilledAfter.Round(time.Millisecond))
		p("  detected", durOr(fo.Detected, "not seen")+" after the kill (its heartbeat expired)")
		p("  reassigned", durOr(fo.Reassigned, "not seen")+fmt.Sprintf(" after the kill (generation %d -> %d)", fo.OldGen, fo.NewGen))
		p("  running again", durOr(fo.Running, "not seen")+" after the kill (every worker of the new generation running it)")
		if fo.NewAssignment != "" {
			fmt.Fprint(w, fo.NewAssignment)
		}
	} else if d.killAfter > 0 {
		fmt.Fprintln(w, "failover: the job ended before --kill-worker fired")
	}
	if d.top > 0 {
		fmt.Fprintf(w, "top %d words:\n", d.top)
		for i, wc := range topWords(c.Counts, d.top) {
			fmt.Fprintf(w, "  %2d. %-16s %s\n", i+1, wc.Word, grouped(wc.Count))
		}
	}
}

func durOr(d time.Duration, none string) string {
	if d == 0 {
		return none
	}
	return d.Round(time.Millisecond).String()
}

func (d *clusterDemo) writeJSON(o *demoOutcome) error {
	first, comps, c, commit, exact, elapsed, placed, fo := o.first, o.comps, o.counts, o.commit, o.exact, o.elapsed, o.placed, o.fo
	where := map[string]string{}
	for _, wk := range first.Assignment.Workers {
		where[wk] = DescribeTasks(first.Assignment.Tasks(wk), comps)
	}
	out := map[string]any{
		"workers": d.workers, "generation": first.Generation(), "placement": where,
		"words": c.Words, "distinct_words": len(c.Counts), "duplicates_skipped": c.Duplicates,
		"replays": commit.Replays, "spout_resumes": commit.Resumes,
		"wall_seconds": elapsed.Seconds(), "placed_seconds": placed.Seconds(),
		"words_per_second": perSecond(c.Words, elapsed), "exact": exact,
		"top": topWords(c.Counts, d.top), "nats_nodes": o.natsNodes,
	}
	if o.natsKilled != "" {
		out["nats_node_shut_down"] = o.natsKilled
	}
	if fo != nil {
		sig := "SIGKILL"
		if fo.Paused {
			sig = "SIGSTOP" // then SIGCONT once its tasks ran elsewhere
		}
		out["failover"] = map[string]any{
			"worker": fo.Victim, "pid": fo.PID, "tasks": fo.Tasks, "signal": sig, "killed_after_seconds": fo.KilledAfter.Seconds(),
			"placement_after":  fo.After,
			"detected_seconds": fo.Detected.Seconds(), "reassigned_seconds": fo.Reassigned.Seconds(),
			"running_seconds": fo.Running.Seconds(), "from_generation": fo.OldGen, "to_generation": fo.NewGen,
		}
	}
	return json.NewEncoder(d.out).Encode(out)
}
