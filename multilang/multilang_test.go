package multilang_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gale-stream/gale/engine"
	"github.com/gale-stream/gale/internal/leaktest"
	"github.com/gale-stream/gale/internal/waitfor"
	"github.com/gale-stream/gale/multilang"
	"github.com/gale-stream/gale/topology"
	"github.com/gale-stream/gale/tuple"
)

func TestMain(m *testing.M) {
	if os.Getenv("GALE_MULTILANG_HELPER") != "" {
		helper()
		return
	}
	leaktest.Main(m)
}

// helper is the gale process of TestSubprocessDiesWithGale: it runs a shell bolt,
// prints its program's pid, and waits to be killed.
func helper() {
	b := topology.NewBuilder()
	b.SetSpout("nums", func() topology.Spout { return &numSpout{done: make(chan struct{})} }, 1).Output("n")
	b.SetBolt("bad", multilang.ShellBolt([]string{"python3", "bad.py"}, "testdata",
		multilang.Env("GALE_BAD=hang", "GALE_BAD_MARKER="+os.Getenv("GALE_MULTILANG_HELPER")),
		multilang.OnStart(func(_ topology.TaskContext, pid int) { fmt.Printf("%d\n", pid) })), 1).
		ShuffleGrouping("nums").Output("n")
	topo, err := b.Build()
	if err != nil {
		panic(err)
	}
	if _, err := engine.Start(context.Background(), topo, topology.DefaultConfig()); err != nil {
		panic(err)
	}
	select {}
}

// A program does not outlive gale: killed with SIGKILL (no stop, no cleanup), gale's
// process takes its programs with it (the parent-death signal), even one that does
// not read its stdin and so never sees it close.
func TestSubprocessDiesWithGale(t *testing.T) {
	need(t, "python3")
	if runtime.GOOS != "linux" {
		t.Skip("the parent-death signal is Linux's")
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "GALE_MULTILANG_HELPER="+filepath.Join(t.TempDir(), "marker"))
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var pid int
	if _, err := fmt.Fscan(out, &pid); err != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		t.Fatalf("reading the program's pid from the helper: %v", err)
	}
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	// A process that is not our child cannot be waited for: poll until it is gone
	// (or a zombie, if this container's init does not reap it).
	waitfor.True(t, 30*time.Second, "the program to die with gale", func() bool {
		st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			return true
		}
		f := strings.Fields(string(st[bytes.LastIndexByte(st, ')')+1:]))
		return len(f) > 0 && (f[0] == "Z" || f[0] == "X")
	})
}

// need skips the test when an interpreter is missing (CI installs python3 and node).
func need(t testing.TB, bins ...string) {
	t.Helper()
	for _, b := range bins {
		if _, err := exec.LookPath(b); err != nil {
			if os.Getenv("GALE_TEST_MULTILANG") == "1" { // .ci/run installs them
				t.Fatalf("%s is not installed, and GALE_TEST_MULTILANG=1 asks for the multilang tests", b)
			}
			t.Skipf("%s is not installed: the multilang tests run its test clients", b)
		}
	}
}

// logBuf keeps everything logged, for the tests to read.
type logBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuf) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func config(t *testing.T) (topology.Config, *logBuf) {
	lb := &logBuf{}
	cfg := topology.DefaultConfig()
	cfg.Logger = slog.New(slog.NewTextHandler(lb, &slog.HandlerOptions{Level: slog.LevelInfo}))
	cfg.MaxSpoutPending = 100
	cfg.BatchSize = 16
	t.Cleanup(func() {
		if t.Failed() {
			s := lb.String()
			if len(s) > 20000 {
				s = s[len(s)-20000:]
			}
			t.Logf("log:\n%s", s)
		}
	})
	return cfg, lb
}

func run(t *testing.T, b *topology.Builder, cfg topology.Config) *engine.Runtime {
	t.Helper()
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return start(t, topo, cfg)
}

// start starts topo in this process, its tuples serialised as between processes.
func start(t *testing.T, topo *topology.Topology, cfg topology.Config) *engine.Runtime {
	t.Helper()
	rt, err := engine.Start(context.Background(), topo, cfg, engine.WithSerialization())
	if err != nil {
		t.Fatal(err)
	}
	return rt
}

func stop(t *testing.T, rt *engine.Runtime) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := rt.Stop(ctx); err != nil {
		t.Errorf("Stop: %v", err)
	}
	<-rt.Done()
}

// wait waits for done, or fails the test after a generous bound (a hang, not a
// timing assertion).
func wait(t *testing.T, done <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-done:
	case <-time.After(2 * time.Minute):
		t.Fatalf("%s: not within 2 minutes", what)
	}
}

// book is the first n lines of a book of testdata/books, and its word counts as
// split.py counts them.
func book(t *testing.T, n int) (string, map[string]int64, int64) {
	file, err := filepath.Abs("../testdata/books/105.txt")
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(data), "\n")[:n]
	word := regexp.MustCompile(`[A-Za-z']+`)
	counts := map[string]int64{}
	var total int64
	for _, l := range lines {
		for _, w := range word.FindAllString(l, -1) {
			counts[w]++
			total++
		}
	}
	return file, counts, total
}

// countSink keeps the highest count seen per word, and closes done when they add up
// to want.
type countSink struct {
	topology.BaseBolt
	mu     *sync.Mutex
	counts map[string]int64
	sum    *int64
	want   int64
	done   chan struct{}
	hook   func(sum int64)
}

func (s *countSink) Execute(in *tuple.Tuple) {
	w := in.Value(0).(string)
	c := in.Value(1).(int64)
	s.mu.Lock()
	if c > s.counts[w] {
		*s.sum += c - s.counts[w]
		s.counts[w] = c
		if s.hook != nil {
			s.hook(*s.sum)
		}
		if *s.sum == s.want {
			close(s.done)
		}
	}
	s.mu.Unlock()
	_ = s.Out.Ack(in)
}

// wordCount builds lines.js -> split.py -> count.py -> a Go sink.
func wordCount(t *testing.T, lines int, splitOpts []multilang.Option, hook func(int64)) (*topology.Builder, *countSink, map[string]int64) {
	file, want, total := book(t, lines)
	sink := &countSink{mu: &sync.Mutex{}, counts: map[string]int64{}, sum: new(int64), want: total, done: make(chan struct{}), hook: hook}
	b := topology.NewBuilder()
	b.SetSpout("lines", multilang.ShellSpout([]string{"node", "lines.js"}, "testdata",
		multilang.Env("GALE_LINES_FILE="+file, fmt.Sprintf("GALE_LINES_MAX=%d", lines))), 1).
		Output("n", "line")
	b.SetBolt("split", multilang.ShellBolt([]string{"python3", "split.py"}, "testdata", splitOpts...), 2).
		ShuffleGrouping("lines").Output("word", "occurrence")
	b.SetBolt("count", multilang.ShellBolt([]string{"python3", "count.py"}, "testdata"), 2).
		FieldsGrouping("split", "word").Output("word", "count")
	b.SetBolt("sink", func() topology.Bolt { return sink }, 1).ShuffleGrouping("count")
	return b, sink, want
}

func checkCounts(t *testing.T, sink *countSink, want map[string]int64) {
	t.Helper()
	sink.mu.Lock()
	defer sink.mu.Unlock()
	if len(sink.counts) != len(want) {
		t.Errorf("%d distinct words, want %d", len(sink.counts), len(want))
	}
	for w, n := range want {
		if sink.counts[w] != n {
			t.Errorf("%q counted %d times, want %d", w, sink.counts[w], n)
		}
	}
}

// Word count through a Node spout, a Python splitter that fails every 7th line
// after emitting half its words, and a Python counter that drops replayed words:
// the counts are exact.
func TestWordCountNodePython(t *testing.T) {
	need(t, "python3", "node")
	cfg, lb := config(t)
	var mu sync.Mutex
	var pids []int
	onStart := multilang.OnStart(func(tc topology.TaskContext, pid int) {
		// Its own process group: a Ctrl-C to gale does not reach it before the drain.
		if pg, err := syscall.Getpgid(pid); err != nil || pg != pid {
			t.Errorf("task %d: pid %d in process group %d (%v), want its own", tc.TaskID, pid, pg, err)
		}
		mu.Lock()
		pids = append(pids, pid)
		mu.Unlock()
	})
	b, sink, want := wordCount(t, 1500, []multilang.Option{multilang.Env("GALE_SPLIT_FAIL_EVERY=7"), onStart}, nil)
	rt := run(t, b, cfg)
	wait(t, sink.done, "every word counted")
	stop(t, rt)
	checkCounts(t, sink, want)
	// The stop stopped every program, and charged nothing: no restart, no error.
	mu.Lock()
	for _, pid := range pids {
		if err := syscall.Kill(pid, 0); err != syscall.ESRCH {
			t.Errorf("split pid %d still exists after the stop (%v)", pid, err)
		}
	}
	mu.Unlock()
	if !strings.Contains(lb.String(), `line="count.py ready"`) {
		t.Errorf("count.py's stderr line is not in the log")
	}
	if strings.Contains(lb.String(), "reported error") {
		t.Errorf("errors reported in a run with no misbehaviour")
	}
	st := rt.Stats()
	if c := st.Components["lines"]; c == nil || c.Failed == 0 {
		t.Errorf("the spout saw no failure: split.py's failures did not reach it (%+v)", c)
	}
	if !strings.Contains(lb.String(), "failing line ") {
		t.Errorf("split.py's log command did not reach gale's log")
	}
}

// A split.py process killed with SIGKILL mid-run is restarted; the inputs it held
// fail and are replayed: the counts are still exact.
func TestBoltKilledIsRestarted(t *testing.T) {
	need(t, "python3", "node")
	cfg, lb := config(t)
	var mu sync.Mutex
	var pids []int
	onStart := multilang.OnStart(func(tc topology.TaskContext, pid int) {
		mu.Lock()
		pids = append(pids, pid)
		mu.Unlock()
	})
	killed := make(chan struct{})
	var once sync.Once
	var want int64
	hook := func(sum int64) {
		if sum >= want/3 {
			once.Do(func() {
				mu.Lock()
				pid := pids[0]
				mu.Unlock()
				if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
					t.Errorf("kill %d: %v", pid, err)
				}
				close(killed)
			})
		}
	}
	b, sink, counts := wordCount(t, 1500, []multilang.Option{onStart}, hook)
	want = sink.want
	rt := run(t, b, cfg)
	wait(t, killed, "a third of the words counted")
	wait(t, sink.done, "every word counted after the kill")
	stop(t, rt)
	checkCounts(t, sink, counts)
	mu.Lock()
	n := len(pids)
	mu.Unlock()
	if n != 3 {
		t.Errorf("split started %d times, want 3 (2 tasks, 1 restart)", n)
	}
	if !strings.Contains(lb.String(), "killed and restarted") {
		t.Errorf("the restart was not logged")
	}
}

// numSpout emits 0..n-1 with the number as message id, replays failures, and
// closes done when every number's tree completed.
type numSpout struct {
	topology.BaseSpout
	n, next, acked int
	again          []int
	done           chan struct{}
}

func (s *numSpout) NextTuple() {
	if len(s.again) > 0 {
		i := s.again[0]
		s.again = s.again[1:]
		_ = s.Out.Emit(tuple.Values{int64(i)}, i)
		return
	}
	if s.next < s.n {
		_ = s.Out.Emit(tuple.Values{int64(s.next)}, s.next)
		s.next++
	}
}

func (s *numSpout) Ack(id any) {
	if s.acked++; s.acked == s.n {
		close(s.done)
	}
}

func (s *numSpout) Fail(id any) { s.again = append(s.again, id.(int)) }

// setSink records the numbers it is given.
type setSink struct {
	topology.BaseBolt
	mu   sync.Mutex
	seen map[int64]bool
}

func (s *setSink) Execute(in *tuple.Tuple) {
	s.mu.Lock()
	s.seen[in.Value(0).(int64)] = true
	s.mu.Unlock()
	_ = s.Out.Ack(in)
}

// Each misbehaving program gives an error naming the component, the task and what
// it did, and is restarted; every input is processed.
func TestMisbehavingBolts(t *testing.T) {
	need(t, "python3")
	cases := []struct{ mode, text string }{
		{"garbage", `malformed message (invalid character 'h' in literal true (expecting 'r')): \"this is not json`},
		{"unknown", `unknown command \"dance\"`},
		{"exit", "subprocess ended (exit status 3)"},
		{"nohandshake", "no handshake answer within"},
		{"noheartbeat", "no heartbeat answer or message for"},
		{"undeclared", `emit refused (gale: undeclared stream: \"bad\" emits on stream \"nope\"`},
		// The program exits, but a descendant outside its process group keeps its
		// pipes open: gale closes them a second after the exit, and restarts it.
		{"orphan", "subprocess ended (exit status 5)"},
	}
	for _, c := range cases {
		t.Run(c.mode, func(t *testing.T) {
			cfg, lb := config(t)
			const n = 50
			spout := &numSpout{n: n, done: make(chan struct{})}
			sink := &setSink{seen: map[int64]bool{}}
			marker := filepath.Join(t.TempDir(), "misbehaved")
			t.Cleanup(func() { // the orphan's sleep, if any: it left our reach
				if b, err := os.ReadFile(marker + ".pid"); err == nil {
					var pid int
					if _, err := fmt.Sscan(string(b), &pid); err == nil {
						_ = syscall.Kill(pid, syscall.SIGKILL)
					}
				}
			})
			b := topology.NewBuilder()
			b.SetSpout("nums", func() topology.Spout { return spout }, 1).Output("n")
			b.SetBolt("bad", multilang.ShellBolt([]string{"python3", "bad.py"}, "testdata",
				multilang.Env("GALE_BAD="+c.mode, "GALE_BAD_MARKER="+marker),
				multilang.Timeout(2*time.Second), multilang.Heartbeat(100*time.Millisecond)), 1).
				ShuffleGrouping("nums").Output("n")
			b.SetBolt("sink", func() topology.Bolt { return sink }, 1).ShuffleGrouping("bad")
			rt := run(t, b, cfg)
			wait(t, spout.done, "every number processed")
			stop(t, rt)
			if len(sink.seen) != n {
				t.Errorf("%d numbers reached the sink, want %d", len(sink.seen), n)
			}
			log := lb.String()
			if !strings.Contains(log, c.text) {
				t.Errorf("the log has no %q", c.text)
			}
			if !strings.Contains(log, `multilang: component \"bad\" task 2: `) {
				t.Errorf("the error does not name the component and task")
			}
		})
	}
}

// A spout's message ids come back to the program as it wrote them: strings, numbers
// (one past float64's precision), objects, escapes.
func TestSpoutIDsComeBackAsGiven(t *testing.T) {
	need(t, "python3")
	cfg, lb := config(t)
	const n = 6
	seen := map[int64]int{}
	var mu sync.Mutex
	second := make(chan struct{})
	b := topology.NewBuilder()
	b.SetSpout("ids", multilang.ShellSpout([]string{"python3", "ids.py"}, "testdata"), 1).Output("i")
	b.SetBolt("failfirst", func() topology.Bolt {
		return &fnBolt{fn: func(out topology.OutputCollector, in *tuple.Tuple) {
			mu.Lock()
			defer mu.Unlock()
			i := in.Value(0).(int64)
			if seen[i]++; seen[i] == 1 {
				_ = out.Fail(in)
				return
			}
			_ = out.Ack(in)
			if len(seen) == n && allTwice(seen) {
				close(second)
			}
		}}
	}, 1).ShuffleGrouping("ids")
	rt := run(t, b, cfg)
	wait(t, second, "every id seen twice")
	stop(t, rt) // waits for the last trees' acks to reach the spout
	st := rt.Stats()
	if c := st.Components["ids"]; c.Acked != n || c.Failed != n {
		t.Errorf("spout acked %d failed %d, want %d each", c.Acked, c.Failed, n)
	}
	log := lb.String()
	for i, js := range []string{`"s-1"`, `2`, `{"k": [1, 2]}`, `12345678901234567890`, `1.5`, `"\u00e9\\n\""`} {
		for _, what := range []string{"ack", "fail"} {
			line := fmt.Sprintf("%s %d %s", what, i, js)
			quoted := strings.ReplaceAll(strings.ReplaceAll(line, `\`, `\\`), `"`, `\"`)
			if !strings.Contains(log, quoted) {
				t.Errorf("the spout did not log %s (as %s)", line, quoted)
			}
		}
	}
}

func allTwice(seen map[int64]int) bool {
	for _, c := range seen {
		if c < 2 {
			return false
		}
	}
	return true
}

type fnBolt struct {
	topology.BaseBolt
	fn func(out topology.OutputCollector, in *tuple.Tuple)
}

func (b *fnBolt) Execute(in *tuple.Tuple) { b.fn(b.Out, in) }

// A spout program that hangs, exits or writes garbage is killed and restarted, with
// an error naming the component, the task and what it did; every number arrives.
func TestMisbehavingSpouts(t *testing.T) {
	need(t, "python3")
	cases := []struct{ mode, text string }{
		{"nosync", "no sync within 2s"},
		{"exit", "subprocess ended (exit status 4)"},
		{"garbage", `malformed message (unexpected EOF): \"{\\\"command\\\":`},
	}
	for _, c := range cases {
		t.Run(c.mode, func(t *testing.T) {
			cfg, lb := config(t)
			const n = 30
			done := make(chan struct{})
			seen := map[int64]bool{}
			var mu sync.Mutex
			b := topology.NewBuilder()
			b.SetSpout("nums", multilang.ShellSpout([]string{"python3", "badspout.py"}, "testdata",
				multilang.Env("GALE_BAD="+c.mode, "GALE_BAD_MARKER="+filepath.Join(t.TempDir(), "m"), fmt.Sprintf("GALE_N=%d", n)),
				multilang.Timeout(2*time.Second)), 1).Output("n")
			b.SetBolt("sink", func() topology.Bolt {
				return &fnBolt{fn: func(out topology.OutputCollector, in *tuple.Tuple) {
					mu.Lock()
					defer mu.Unlock()
					seen[in.Value(0).(int64)] = true
					if len(seen) == n && done != nil {
						close(done)
						done = nil
					}
					_ = out.Ack(in)
				}}
			}, 1).ShuffleGrouping("nums")
			d := done
			rt := run(t, b, cfg)
			wait(t, d, "every number")
			stop(t, rt)
			log := lb.String()
			if !strings.Contains(log, c.text) {
				t.Errorf("the log has no %q", c.text)
			}
			if !strings.Contains(log, `multilang: component \"nums\" task 1: `) || !strings.Contains(log, "killed and restarted") {
				t.Errorf("the error does not name the component and task, or no restart")
			}
			// Each program is activated before its first next (the restarted one too),
			// and the last is deactivated by the stop.
			if a := strings.Count(log, "state active"); a != 2 || strings.Contains(log, "next while not active") {
				t.Errorf("%d programs activated, want 2, or a next came before an activate", a)
			}
			if !strings.Contains(log, "state inactive") {
				t.Errorf("the program was not deactivated at the stop")
			}
		})
	}
}

// A program learns the task of its emit from gale, emits directly to it, and is
// sent tick tuples (stream __tick, task -1).
func TestTaskIDsDirectAndTicks(t *testing.T) {
	need(t, "python3")
	cfg, _ := config(t)
	const n = 40
	spout := &numSpout{n: n, done: make(chan struct{})}
	var mu sync.Mutex
	plain := map[int64]int{}  // n -> task that got it on the default stream
	direct := map[int64]int{} // n -> task that got it on the direct stream
	ticked := make(chan struct{})
	var once sync.Once
	b := topology.NewBuilder()
	b.SetSpout("nums", func() topology.Spout { return spout }, 1).Output("n")
	b.SetBolt("direct", multilang.ShellBolt([]string{"python3", "direct.py"}, "testdata"), 1).
		ShuffleGrouping("nums").Output("n").DirectStream("direct", "n").OutputStream("ticks", "t").
		TickEvery(20 * time.Millisecond)
	b.SetBolt("sink", func() topology.Bolt {
		s := &fnBolt{}
		s.fn = func(out topology.OutputCollector, in *tuple.Tuple) {
			mu.Lock()
			defer mu.Unlock()
			switch in.SourceStream() {
			case "ticks":
				once.Do(func() { close(ticked) })
			case "direct":
				direct[in.Value(0).(int64)] = in.Task()
			default:
				plain[in.Value(0).(int64)] = in.Task()
			}
			_ = out.Ack(in)
		}
		return s
	}, 3).FieldsGrouping("direct", "n").DirectGrouping("direct", "direct").Input("direct", "ticks", topology.All())
	rt := run(t, b, cfg)
	wait(t, spout.done, "every number")
	wait(t, ticked, "a tick reached the program")
	stop(t, rt)
	mu.Lock()
	defer mu.Unlock()
	if len(plain) != n || len(direct) != n {
		t.Fatalf("%d plain, %d direct, want %d each", len(plain), len(direct), n)
	}
	tasks := map[int]bool{}
	for i, task := range plain {
		if direct[i] != task {
			t.Errorf("%d: emitted to task %d, then directly to %d", i, task, direct[i])
		}
		tasks[task] = true
	}
	if len(tasks) < 2 {
		t.Errorf("every number went to one task: the test shows nothing")
	}
}

// A program slower than its input back-pressures it: while it does not read, the
// spout is held back and what the shell bolt holds stays bounded by the pipe; once
// it reads again every tuple gets through.
func TestSlowProgramBackpressures(t *testing.T) {
	need(t, "python3")
	cfg, _ := config(t)
	cfg.ReceiveQueue = 64
	cfg.MaxSpoutPending = 0
	const n = 20000
	gate := filepath.Join(t.TempDir(), "gate")
	spout := &numSpout{n: n, done: make(chan struct{})}
	var mu sync.Mutex
	seen := map[int64]bool{}
	all := make(chan struct{})
	factory := multilang.ShellBolt([]string{"python3", "slow.py"}, "testdata", multilang.Env("GALE_GATE="+gate))
	var slow topology.Bolt
	b := topology.NewBuilder()
	b.SetSpout("nums", func() topology.Spout { return spout }, 1).Output("n")
	b.SetBolt("slow", func() topology.Bolt { slow = factory(); return slow }, 1).ShuffleGrouping("nums").Output("n")
	b.SetBolt("sink", func() topology.Bolt {
		return &fnBolt{fn: func(out topology.OutputCollector, in *tuple.Tuple) {
			mu.Lock()
			seen[in.Value(0).(int64)] = true
			if len(seen) == n {
				close(all)
			}
			mu.Unlock()
			_ = out.Ack(in)
		}}
	}, 1).ShuffleGrouping("slow")
	rt := run(t, b, cfg)
	waitfor.True(t, time.Minute, "the spout to be back-pressured", func() bool {
		c := rt.Stats().Components["nums"]
		return c != nil && c.Backpressure > 0
	})
	emitted := rt.Stats().Components["nums"].Emitted
	held := slow.(interface{ Held() int }).Held()
	t.Logf("while the program is stuck: %d emitted of %d, %d held by the shell bolt", emitted, n, held)
	if emitted >= n || held > 5000 {
		t.Errorf("while the program is stuck: %d emitted of %d, %d held by the shell bolt", emitted, n, held)
	}
	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	wait(t, all, "every number through the slow program")
	wait(t, spout.done, "every tree acked")
	stop(t, rt)
}

// drainSeen wraps a shell bolt and closes drained at the engine's first Drain call:
// the stop has reached the task.
type drainSeen struct {
	topology.Bolt
	once    sync.Once
	drained chan struct{}
}

func (d *drainSeen) Drain() {
	d.Bolt.(topology.Drainer).Drain()
	d.once.Do(func() { close(d.drained) })
}

// A program that ends while the engine runs charges one attempt to each input it
// held (they fail, and are replayed); one that ends during a stop's drain charges
// nothing: the next program is sent them again and the stop completes with every
// tree acked, none failed.
func TestBoltEndingDuringTheStopChargesNothing(t *testing.T) {
	need(t, "python3")
	const n = 20
	for _, during := range []bool{false, true} {
		t.Run(map[bool]string{false: "running", true: "stopping"}[during], func(t *testing.T) {
			cfg, lb := config(t)
			pids := make(chan int, 8)
			var inner topology.Bolt
			wrapped := &drainSeen{drained: make(chan struct{})}
			spout := &numSpout{n: n, done: make(chan struct{})}
			b := topology.NewBuilder()
			b.SetSpout("nums", func() topology.Spout { return spout }, 1).Output("n")
			shell := multilang.ShellBolt([]string{"python3", "holdfirst.py"}, "testdata",
				multilang.Env("GALE_MARKER="+filepath.Join(t.TempDir(), "m")),
				multilang.OnStart(func(_ topology.TaskContext, pid int) { pids <- pid }))
			b.SetBolt("hold", func() topology.Bolt {
				inner = shell()
				wrapped.Bolt = inner
				return wrapped
			}, 1).ShuffleGrouping("nums")
			rt := run(t, b, cfg)
			held := inner.(interface{ Held() int })
			waitfor.True(t, time.Minute, "every input held by the first program", func() bool { return held.Held() == n })
			first := <-pids
			stopped := make(chan error, 1)
			if during {
				go func() {
					ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
					defer cancel()
					stopped <- rt.Stop(ctx)
				}()
				wait(t, wrapped.drained, "the stop to reach the bolt")
			}
			if err := syscall.Kill(first, syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			wait(t, spout.done, "every tree acked")
			if during {
				if err := <-stopped; err != nil {
					t.Fatalf("Stop: %v", err)
				}
				<-rt.Done()
			} else {
				stop(t, rt)
			}
			c := rt.Stats().Components["nums"]
			wantFailed := uint64(n)
			if during {
				wantFailed = 0
			}
			if c.Acked != n || c.Failed != wantFailed {
				t.Errorf("spout acked %d, failed %d; want %d and %d", c.Acked, c.Failed, n, wantFailed)
			}
			if want := "ended during the stop: restarted, its 20 held input(s) sent again"; during != strings.Contains(lb.String(), want) {
				t.Errorf("log has %q: %v, want %v", want, !during, during)
			}
		})
	}
}
