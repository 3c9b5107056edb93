package main

// End to end, Storm's multilang word count as a topology file
// (testdata/shell-wordcount.yaml): a Node spout reading lines of a book (message
// id per line, replay on fail), a Python split that fails the first attempt of
// every 7th line after emitting half its words, a Python count that drops word
// occurrences it has seen, and wordlen.AppendCounts appending "WORD COUNT" lines
// to a file. The highest count of each word in that file must be its count in the
// book: under `wordlen run`, and under `wordlen submit --file` to two workers, one
// of which is kill -9'd mid-run.

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// shellLines is how many lines of the book the spout reads.
const shellLines = 400

// needShell skips the test when python3 or node is missing, unless
// GALE_TEST_MULTILANG=1 asks for the multilang tests (then it fails).
func needShell(t *testing.T) {
	t.Helper()
	for _, b := range []string{"python3", "node"} {
		if _, err := exec.LookPath(b); err != nil {
			if os.Getenv("GALE_TEST_MULTILANG") == "1" {
				t.Fatalf("%s is not installed, and GALE_TEST_MULTILANG=1 asks for the multilang tests", b)
			}
			t.Skipf("%s is not installed: the shell word count runs Node and Python programs", b)
		}
	}
}

// shellSetup makes dir/res holding the multilang test clients the file's commands
// name (copied from gale's multilang/testdata, not kept twice in the repo), and a
// --filter file naming the book, its first shellLines lines, and dir/out.txt. It
// returns the resources directory, the filter file, the out file, and each word's
// count in those lines, counted here as split.py splits.
func shellSetup(t *testing.T, name string) (res, filter, out string, want map[string]int) {
	t.Helper()
	dir := t.TempDir()
	res = filepath.Join(dir, "res")
	if err := os.Mkdir(res, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"lines.js", "split.py", "count.py", "galestorm.py"} {
		copyFile(t, filepath.Join("..", "..", "multilang", "testdata", f), filepath.Join(res, f))
	}
	book, err := filepath.Abs(filepath.Join("..", "..", "testdata", "books", "105.txt"))
	if err != nil {
		t.Fatal(err)
	}
	// As lines.js reads (split on \n, the first shellLines) and split.py splits.
	word := regexp.MustCompile(`[A-Za-z']+`)
	want = map[string]int{}
	for _, l := range strings.Split(mustRead(t, book), "\n")[:shellLines] {
		for _, w := range word.FindAllString(l, -1) {
			want[w]++
		}
	}
	out = filepath.Join(dir, "out.txt")
	filter = filepath.Join(dir, "shell.properties")
	props := fmt.Sprintf("name = %s\nbook = %s\nlines = %d\nout = %s\n", name, book, shellLines, out)
	if err := os.WriteFile(filter, []byte(props), 0o644); err != nil {
		t.Fatal(err)
	}
	return res, filter, out, want
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	src, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	dst, err := os.Create(to)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		t.Fatal(err)
	}
	if err := dst.Close(); err != nil {
		t.Fatal(err)
	}
}

// readCounts reads the out file's complete lines and returns the highest count of
// each word (a replay, or a new generation counting again from the start, writes
// lower counts again), failing the test on a word not in want or a count above
// it: an occurrence counted twice.
func readCounts(t *testing.T, path string, want map[string]int) map[string]int {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	text := string(b)
	if i := strings.LastIndexByte(text, '\n'); i >= 0 {
		text = text[:i] // a line being appended is not read before its end
	} else {
		text = ""
	}
	got := map[string]int{}
	for _, l := range strings.Split(text, "\n") {
		if l == "" {
			continue
		}
		w, c, ok := strings.Cut(l, " ")
		n, err := strconv.Atoi(c)
		if !ok || err != nil {
			t.Fatalf("out line %q: not WORD COUNT", l)
		}
		if n > want[w] {
			t.Fatalf("out line %q: %q is %d times in the book's lines (an occurrence counted twice)", l, w, want[w])
		}
		got[w] = max(got[w], n)
	}
	return got
}

// shellProgress says how far the counts in got are from want: "" when every word
// has its count.
func shellProgress(got, want map[string]int) string {
	done, sum, total := 0, 0, 0
	for w, n := range want {
		total += n
		sum += got[w]
		if got[w] == n {
			done++
		}
	}
	if done == len(want) {
		return ""
	}
	return fmt.Sprintf("%d of %d words complete, %d of %d occurrences counted", done, len(want), sum, total)
}

// `wordlen run` of the file, in the resources directory (its commands run in the
// file's directory): every word's count, then SIGTERM and exit status 0.
func TestShellFileRun(t *testing.T) {
	needShell(t)
	res, filter, out, want := shellSetup(t, "shell-run")
	file := filepath.Join(res, "shell-wordcount.yaml")
	copyFile(t, "testdata/shell-wordcount.yaml", file)
	p := start(t, res, "run", "run", file, "--filter", filter, "--ttl", "2m")
	poll(t, 60*time.Second, "every word's count in the out file", func() string {
		return shellProgress(readCounts(t, out, want), want)
	}, p)
	// The Node spout never says its input is done: the run ends on a signal.
	if err := p.stop(30 * time.Second); err != nil {
		t.Fatalf("wordlen run after SIGTERM: %v\nstderr:\n%s", err, p.stderr.String())
	}
	if s := shellProgress(readCounts(t, out, want), want); s != "" {
		t.Fatal(s)
	}
	t.Logf("%d distinct words with their counts in the out file", len(want))
	if !strings.Contains(p.stderr.String(), "failing line") {
		t.Errorf("split.py failed no line (its log, in stderr, says none):\n%s", p.stderr.String())
	}
}

// `wordlen submit --file` of the file with the scripts as --resources, to two
// workers; the worker running the spout is kill -9'd mid-run, and the other runs
// the topology alone in a new generation: every word's count, none above it.
func TestShellFileOnTwoWorkers(t *testing.T) {
	needShell(t)
	const name = "shell-wordcount"
	res, filter, out, want := shellSetup(t, name)
	dir := filepath.Dir(res)
	file := "testdata/shell-wordcount.yaml"

	nats, workers, client, status := startCluster(t, dir)

	submitted, err := run(t, time.Minute, append([]string{"submit", "--file", file, "--filter", filter, "--resources", res}, client...)...)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(submitted, name+": generation 1 on 2 workers") {
		t.Fatalf("submit printed:\n%s", submitted)
	}
	m := regexp.MustCompile(`(?m)^\s+(w[12])\s+.*lines\[`).FindStringSubmatch(submitted)
	if m == nil {
		t.Fatalf("no worker runs the spout:\n%s", submitted)
	}
	spoutW, otherW := m[1], map[string]string{"w1": "w2", "w2": "w1"}[m[1]]

	// kill -9 of the spout's worker once part of the book is counted.
	total := 0
	for _, n := range want {
		total += n
	}
	var before string
	poll(t, 30*time.Second, "the first counts in the out file", func() string {
		got, sum := readCounts(t, out, want), 0
		for _, n := range got {
			sum += n
		}
		before = shellProgress(got, want)
		if sum < total/10 {
			return before
		}
		return ""
	}, nats, workers["w1"], workers["w2"])
	if err := workers[spoutW].cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-workers[spoutW].done
	t.Logf("killed %s (the spout's) with %s", spoutW, before)
	if before == "" {
		t.Error("every word was counted before the kill: the run is too short to lose a worker in it")
	}
	poll(t, 60*time.Second, "every word's count in the out file", func() string {
		return shellProgress(readCounts(t, out, want), want)
	}, nats, workers[otherW])
	t.Logf("%d distinct words with their counts in the out file", len(want))
	if !strings.Contains(workers["w1"].stderr.String()+workers["w2"].stderr.String(), "failing line") {
		t.Error("split.py failed no line (its log, in the workers' stderr, says none)")
	}
	if st := status(); !regexp.MustCompile(`(?m)^` + otherW + `\s.*\s` + name + `@g[2-9]\s`).MatchString(st) {
		t.Errorf("%s does not run a later generation of %s:\n%s", otherW, name, st)
	}
	if _, err := run(t, 30*time.Second, append([]string{"kill", name}, client...)...); err != nil {
		t.Error(err)
	}
}
