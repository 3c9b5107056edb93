package main

// End to end: the wordlen binary, built once, run as separate processes on
// loopback: `wordlen nats`, two `wordlen worker`s and `wordlen submit` (the
// topology's output file checked line by line), and `wordlen serve` (events
// answered PROCESSED, one sink row each). Every wait polls for what it waits for,
// bounded in time; every child is stopped by its pid (SIGTERM, then SIGKILL after
// a bound), and a failed test shows the tail of each child's stderr.

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
	"unicode"

	_ "modernc.org/sqlite"
)

const input = "testdata/scarlet-ch1.txt"

// binary builds the example's binary once per test run (go test puts its own go
// command first in PATH) and returns its path.
var binary = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "wordlen-test-bin")
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "wordlen")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if out, err := exec.CommandContext(ctx, "go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build: %v\n%s", err, out)
	}
	return bin, nil
})

func TestMain(m *testing.M) {
	code := m.Run()
	if bin, err := binary(); err == nil {
		_ = os.RemoveAll(filepath.Dir(bin))
	}
	os.Exit(code)
}

// syncBuffer is a bytes.Buffer a child writes while the test reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// proc is a running child process of the wordlen binary.
type proc struct {
	name           string
	cmd            *exec.Cmd
	stdout, stderr syncBuffer
	done           chan struct{} // closed once it exited; err is then its exit error
	err            error
	stopOnce       sync.Once
}

// start starts the binary with args in directory dir. It is stopped when the
// test ends (after the children started later: cleanups run last first), and a
// failed test shows what it wrote on stderr last.
func start(t *testing.T, dir, name string, args ...string) *proc {
	t.Helper()
	bin, err := binary()
	if err != nil {
		t.Fatal(err)
	}
	p := &proc{name: name, cmd: exec.Command(bin, args...), done: make(chan struct{})}
	p.cmd.Dir = dir
	p.cmd.Stdout, p.cmd.Stderr = &p.stdout, &p.stderr
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	go func() { p.err = p.cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		err := p.stop(20 * time.Second)
		if t.Failed() {
			out := p.stderr.String()
			if len(out) > 4000 {
				out = "..." + out[len(out)-4000:]
			}
			t.Logf("%s (pid %d, %s) ended with %v; stderr:\n%s", name, p.cmd.Process.Pid, strings.Join(args, " "), err, out)
		}
	})
	return p
}

// stop sends SIGTERM and waits for the exit; past bound, SIGKILL. It returns the
// exit error (nil: status 0), and is safe to call again.
func (p *proc) stop(bound time.Duration) error {
	p.stopOnce.Do(func() {
		select {
		case <-p.done:
			return
		default:
		}
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(bound):
			_ = p.cmd.Process.Kill()
			<-p.done
			p.err = fmt.Errorf("no exit %v after SIGTERM: killed (%v)", bound, p.err)
		}
	})
	<-p.done
	return p.err
}

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// poll calls check every 50 ms until it returns "" (done), for at most bound,
// failing the test with check's last answer past it, or as soon as one of live has
// exited.
func poll(t *testing.T, bound time.Duration, what string, check func() string, live ...*proc) {
	t.Helper()
	deadline := time.Now().Add(bound)
	for {
		state := check()
		if state == "" {
			return
		}
		for _, p := range live {
			if p.exited() {
				t.Fatalf("waiting for %s: %s exited (%v); last: %s", what, p.name, p.err, state)
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("waiting for %s: not after %v; last: %s", what, bound, state)
		}
		time.Sleep(50 * time.Millisecond) // the poll's period, not a wait for anything
	}
}

// run runs the binary with args to its end, within bound, and returns its stdout.
func run(t *testing.T, bound time.Duration, args ...string) (string, error) {
	t.Helper()
	bin, err := binary()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("wordlen %s: %v\nstdout: %s\nstderr: %s", strings.Join(args, " "), err, stdout.String(), stderr.String())
	}
	return stdout.String(), nil
}

// counts are a line's words and letters.
type counts struct{ words, letters int }

// expected reads the input the way the spout is documented to (line numbers from
// 1, CRLF or LF, blank lines skipped) and counts each line here, without the
// example's Count: a word is a run of non-space runes, a letter a Unicode letter.
func expected(t *testing.T) (map[int]counts, []int) {
	t.Helper()
	b, err := os.ReadFile(input)
	if err != nil {
		t.Fatal(err)
	}
	want := map[int]counts{}
	var order []int
	for i, l := range strings.Split(strings.ReplaceAll(string(b), "\r\n", "\n"), "\n") {
		var c counts
		inWord := false
		for _, r := range l {
			if unicode.IsSpace(r) {
				inWord = false
				continue
			}
			if !inWord {
				c.words++
			}
			inWord = true
			if unicode.IsLetter(r) {
				c.letters++
			}
		}
		if c.words > 0 {
			want[i+1] = c
			order = append(order, i+1)
		}
	}
	if len(want) != 253 { // testdata/SOURCE.md
		t.Fatalf("%s: %d lines that are not blank, want 253", input, len(want))
	}
	return want, order
}

// The topology on two workers: every non-blank line of the input reaches the out
// file with its counts (once or, after a replay, more than once, never with other
// counts), and the cluster reports the topology running on both workers.
func TestTopologyOnTwoWorkers(t *testing.T) {
	want, _ := expected(t)
	dir := t.TempDir()
	nats, client := startNATS(t, dir)

	var workers []*proc
	for _, name := range []string{"w1", "w2"} {
		wdir := filepath.Join(dir, name) // its own working directory: relative paths would not resolve
		if err := os.Mkdir(wdir, 0o755); err != nil {
			t.Fatal(err)
		}
		workers = append(workers, start(t, wdir, name, append([]string{"worker", "--name", name}, client...)...))
	}
	live := append([]*proc{nats}, workers...)
	status := func() string {
		out, err := run(t, 30*time.Second, append([]string{"cluster", "status"}, client...)...)
		if err != nil {
			return err.Error()
		}
		return out
	}
	workerRE := regexp.MustCompile(`(?m)^(w[12])\s`)
	poll(t, 30*time.Second, "both workers in cluster status", func() string {
		out := status()
		if len(workerRE.FindAllString(out, -1)) == 2 {
			return ""
		}
		return out
	}, live...)

	// --file relative to this directory: submit makes it absolute (TopologyArgs),
	// as the workers run elsewhere.
	out := filepath.Join(dir, "out.txt")
	submitted, err := run(t, time.Minute, append(append([]string{"submit", "--workers", "2"}, client...),
		"wordlen", "--file", input, "--out", out, "--parallelism", "2")...)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(submitted, "wordlen: generation 1 on 2 workers") {
		t.Fatalf("submit printed:\n%s", submitted)
	}

	var got map[int]counts
	repeats := 0
	poll(t, time.Minute, "every line in the out file", func() string {
		b, err := os.ReadFile(out)
		if err != nil {
			return err.Error()
		}
		got, repeats = map[int]counts{}, 0
		text := string(b)
		if i := strings.LastIndexByte(text, '\n'); i >= 0 {
			text = text[:i] // a line being appended is not read before its end
		} else {
			text = ""
		}
		for _, l := range strings.Split(text, "\n") {
			if l == "" {
				continue
			}
			var n int
			var c counts
			if _, err := fmt.Sscanf(l, "%d %d %d", &n, &c.words, &c.letters); err != nil {
				t.Fatalf("out line %q: %v", l, err)
			}
			w, ok := want[n]
			if !ok {
				t.Fatalf("out line %q: line %d is blank or past the end of the input", l, n)
			}
			if c != w {
				t.Fatalf("out line %q: line %d has %d words and %d letters", l, n, w.words, w.letters)
			}
			if _, seen := got[n]; seen {
				repeats++
			}
			got[n] = c
		}
		if len(got) < len(want) {
			return fmt.Sprintf("%d of %d lines", len(got), len(want))
		}
		return ""
	}, live...)
	t.Logf("%d lines with their counts in the out file (%d written again by a replay)", len(got), repeats)

	st := status()
	running := regexp.MustCompile(`(?m)^w[12]\s.*\swordlen@g1\s`).FindAllString(st, -1)
	if !strings.Contains(st, "topology wordlen: active, generation 1, want 2 workers") || len(running) != 2 {
		t.Fatalf("cluster status:\n%s", st)
	}
}

// answer is the part of a POST /v1/events answer the test reads.
type answer struct {
	EventID   string `json:"event_id"`
	Status    string `json:"status"`
	Duplicate bool   `json:"duplicate"`
}

// post sends one event with ack=processed and returns the answer.
func post(client *http.Client, url, id, text string) (answer, error) {
	body, err := json.Marshal(map[string]any{"event_id": id, "source": "wordlen-test", "type": "line",
		"payload": map[string]string{"text": text}})
	if err != nil {
		return answer{}, err
	}
	resp, err := client.Post(url+"/v1/events?ack=processed", "application/json", bytes.NewReader(body))
	if err != nil {
		return answer{}, err
	}
	defer resp.Body.Close()
	var a answer
	if err := json.NewDecoder(resp.Body).Decode(&a); err != nil {
		return answer{}, fmt.Errorf("%s: HTTP %d: %v", id, resp.StatusCode, err)
	}
	if resp.StatusCode != http.StatusOK {
		return a, fmt.Errorf("%s: HTTP %d: %+v", id, resp.StatusCode, a)
	}
	return a, nil
}

// serve with its default pipeline and SQLite sink: 200 lines of the input as
// events with ack=processed, every tenth sent again with the same event_id. Every
// answer is PROCESSED (the resend's a duplicate), and the sink holds one row per
// event with the line's counts.
func TestServeProcessedOnce(t *testing.T) {
	want, order := expected(t)
	lines := strings.Split(strings.ReplaceAll(mustRead(t, input), "\r\n", "\n"), "\n")
	dir := t.TempDir()
	serve := start(t, dir, "serve", "serve", "--data", dir, "--addr", "127.0.0.1:0")
	var url string
	urlRE := regexp.MustCompile(`listening on (http://\S+)`)
	poll(t, 30*time.Second, "serve's address on its stderr", func() string {
		if m := urlRE.FindStringSubmatch(serve.stderr.String()); m != nil {
			url = m[1]
			return ""
		}
		return "not yet"
	}, serve)
	if !strings.Contains(serve.stderr.String(), "pipeline "+PipelineName+";") {
		t.Fatalf("serve's start line does not name the default pipeline %s:\n%s", PipelineName, serve.stderr.String())
	}

	client := &http.Client{Timeout: 30 * time.Second}
	const events = 200
	ids := make(chan int)
	errs := make(chan error, events)
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range ids {
				n := order[i]
				id := "scarlet-ch1:" + strconv.Itoa(n)
				a, err := post(client, url, id, lines[n-1])
				if err == nil && (a.EventID != id || a.Status != "PROCESSED" || a.Duplicate) {
					err = fmt.Errorf("%s: answered %+v, want PROCESSED", id, a)
				}
				if err == nil && i%10 == 0 {
					a, err = post(client, url, id, lines[n-1])
					if err == nil && (a.Status != "PROCESSED" || !a.Duplicate) {
						err = fmt.Errorf("%s sent again: answered %+v, want PROCESSED, a duplicate", id, a)
					}
				}
				if err != nil {
					errs <- err
				}
			}
		}()
	}
	began := time.Now()
	for i := range events {
		ids <- i
	}
	close(ids)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if t.Failed() {
		return
	}
	t.Logf("%d events (%d sent twice) answered PROCESSED in %v", events, events/10, time.Since(began).Round(time.Millisecond))

	// A graceful stop, then the sink read as a file.
	if err := serve.stop(30 * time.Second); err != nil {
		t.Fatalf("serve's stop: %v", err)
	}
	db, err := sql.Open("sqlite", filepath.Join(dir, "sink.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	q, err := db.Query("SELECT event_id, words, letters FROM line_lengths")
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	rows := map[string]counts{}
	for q.Next() {
		var id string
		var c counts
		if err := q.Scan(&id, &c.words, &c.letters); err != nil {
			t.Fatal(err)
		}
		if _, dup := rows[id]; dup {
			t.Errorf("%s: two rows", id)
		}
		rows[id] = c
	}
	if err := q.Err(); err != nil {
		t.Fatal(err)
	}
	if len(rows) != events {
		t.Errorf("%d rows in line_lengths, want %d", len(rows), events)
	}
	for _, n := range order[:events] {
		id := "scarlet-ch1:" + strconv.Itoa(n)
		if got, ok := rows[id]; !ok || got != want[n] {
			t.Errorf("%s: row %+v (present: %v), want %+v", id, got, ok, want[n])
		}
	}
}

func mustRead(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// startNATS starts the binary's nats in dir on a free loopback port and returns
// it with the flags that reach it (its URL, read from its stdout, and its
// credentials' directory).
func startNATS(t *testing.T, dir string) (*proc, []string) {
	t.Helper()
	natsData := filepath.Join(dir, "nats")
	nats := start(t, dir, "nats", "nats", "--data", natsData, "--listen", "127.0.0.1:0")
	var url string
	urlRE := regexp.MustCompile(`(?m)^(nats://\S+) \(credentials`)
	poll(t, 30*time.Second, "nats's client URL on its stdout", func() string {
		if m := urlRE.FindStringSubmatch(nats.stdout.String()); m != nil {
			url = m[1]
			return ""
		}
		return fmt.Sprintf("stdout %q", nats.stdout.String())
	}, nats)
	return nats, []string{"--nats", url, "--nats-data", natsData}
}

// startCluster is startNATS and two workers, w1 and w2, each in its own
// directory under dir, once both are in cluster status; status runs cluster
// status (its output, or the error).
func startCluster(t *testing.T, dir string) (nats *proc, workers map[string]*proc, client []string, status func() string) {
	t.Helper()
	nats, client = startNATS(t, dir)
	workers = map[string]*proc{}
	for _, name := range []string{"w1", "w2"} {
		wdir := filepath.Join(dir, name)
		if err := os.Mkdir(wdir, 0o755); err != nil {
			t.Fatal(err)
		}
		workers[name] = start(t, wdir, name, append([]string{"worker", "--name", name}, client...)...)
	}
	status = func() string {
		out, err := run(t, 30*time.Second, append([]string{"cluster", "status"}, client...)...)
		if err != nil {
			return err.Error()
		}
		return out
	}
	poll(t, 30*time.Second, "both workers in cluster status", func() string {
		if out := status(); len(regexp.MustCompile(`(?m)^w[12]\s`).FindAllString(out, -1)) != 2 {
			return out
		}
		return ""
	}, nats, workers["w1"], workers["w2"])
	return nats, workers, client, status
}
