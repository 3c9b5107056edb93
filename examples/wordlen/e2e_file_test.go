package main

// End to end, the topology as a file: testdata/wordlen.yaml names wordlen's
// classes, its paths given by a --filter file the test writes; `wordlen submit
// --file` ships it (and a --resources directory) to two `wordlen worker`s, one of
// which is kill -9'd while the topology runs; the out file must then hold every
// line of the input with its counts. Around it: a bad file refused at its line
// before anything connects, --dry-run, a worker of another build (gale's own,
// without wordlen's classes) refusing a file and saying which class it lacks, and
// `wordlen kill` of the file's topology.

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode"
)

// galeBinary builds gale's own binary (cmd/gale of the replaced module): a
// worker of another build, without wordlen's classes.
var galeBinary = sync.OnceValues(func() (string, error) {
	bin, err := binary()
	if err != nil {
		return "", err
	}
	gale := filepath.Join(filepath.Dir(bin), "gale")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if out, err := exec.CommandContext(ctx, "go", "build", "-o", gale, "github.com/gale-stream/gale/cmd/gale").CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build gale: %v\n%s", err, out)
	}
	return gale, nil
})

// countFile counts each non-blank line of path as expected() does.
func countFile(t *testing.T, path string) map[int]counts {
	t.Helper()
	want := map[int]counts{}
	for i, l := range strings.Split(strings.ReplaceAll(mustRead(t, path), "\r\n", "\n"), "\n") {
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
		}
	}
	return want
}

// readOut reads the out file's complete lines, checking each against want, and
// returns the lines seen (by number) and how many were written more than once.
func readOut(t *testing.T, path string, want map[int]counts) (map[int]bool, int) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, 0
	}
	text := string(b)
	if i := strings.LastIndexByte(text, '\n'); i >= 0 {
		text = text[:i] // a line being appended is not read before its end
	} else {
		text = ""
	}
	got, repeats := map[int]bool{}, 0
	for _, l := range strings.Split(text, "\n") {
		if l == "" {
			continue
		}
		var n int
		var c counts
		if _, err := fmt.Sscanf(l, "%d %d %d", &n, &c.words, &c.letters); err != nil {
			t.Fatalf("out line %q: %v", l, err)
		}
		if w, ok := want[n]; !ok || c != w {
			t.Fatalf("out line %q: line %d has %+v (present: %v)", l, n, w, ok)
		}
		if got[n] {
			repeats++
		}
		got[n] = true
	}
	return got, repeats
}

func TestFileTopology(t *testing.T) {
	dir := t.TempDir()
	// The input: the chapter eight times over (2024 lines), so that the run lasts
	// long enough to lose a worker in the middle of it (the file's
	// topology.max.spout.pending keeps few lines in flight).
	chapter := mustRead(t, input)
	in := filepath.Join(dir, "in.txt")
	if err := os.WriteFile(in, []byte(strings.Repeat(chapter, 8)), 0o644); err != nil {
		t.Fatal(err)
	}
	want := countFile(t, in)
	if len(want) != 8*253 {
		t.Fatalf("%d lines in the input, want %d", len(want), 8*253)
	}
	out := filepath.Join(dir, "out.txt")
	filter := filepath.Join(dir, "paths.properties")
	if err := os.WriteFile(filter, []byte(fmt.Sprintf("name = wordlen-file\ninput = %s\nout = %s\n", in, out)), 0o644); err != nil {
		t.Fatal(err)
	}
	resources := filepath.Join(dir, "res")
	if err := os.MkdirAll(filepath.Join(resources, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(resources, "sub", "stop-words.txt"), []byte("the\na\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	file := "testdata/wordlen.yaml"

	// Refused before connecting: the cluster's URL is a closed port, and the errors
	// are the file's, at their lines.
	nowhere := []string{"--nats", "nats://127.0.0.1:1", "--timeout", "5s"}
	bad := filepath.Join(dir, "bad.yaml")
	text := strings.Replace(mustRead(t, file), `className: "wordlen.Count"`, `className: "wordlen.Cuont"`, 1)
	if err := os.WriteFile(bad, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := run(t, 30*time.Second, append([]string{"submit", "--file", bad, "--filter", filter}, nowhere...)...)
	if err == nil || !regexp.MustCompile(`stderr: gale: `+regexp.QuoteMeta(bad)+`:\d+:\d+: .*wordlen\.Cuont`).MatchString(err.Error()) {
		t.Errorf("a bad class: %v", err)
	}
	_, err = run(t, 30*time.Second, append([]string{"submit", "--file", file}, nowhere...)...) // no --filter
	if err == nil || !regexp.MustCompile(regexp.QuoteMeta(file)+`:\d+:\d+: \$\{input\}`).MatchString(err.Error()) {
		t.Errorf("no filter: %v", err)
	}
	clash := filepath.Join(dir, "clash.properties")
	if err := os.WriteFile(clash, []byte(fmt.Sprintf("name = %s\ninput = %s\nout = %s\n", TopologyName, in, out)), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = run(t, 30*time.Second, append([]string{"submit", "--file", file, "--filter", clash}, nowhere...)...)
	if err == nil || !strings.Contains(err.Error(), `name "wordlen" is a topology registered in this build`) {
		t.Errorf("the name of a Go topology: %v", err)
	}
	dry, err := run(t, 30*time.Second, append([]string{"submit", "--file", file, "--filter", filter, "--resources", resources, "--dry-run"}, nowhere...)...)
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{"topology wordlen-file (testdata/wordlen.yaml): 5 tasks, 2 workers; checked, not submitted",
		"lines      wordlen.Lines", "count      wordlen.Count   2            lines shuffle", "out        wordlen.Append  1            count global",
		"fingerprint: wordlen-file shape "} {
		if !strings.Contains(dry, w) {
			t.Errorf("--dry-run printed no %q:\n%s", w, dry)
		}
	}
	if t.Failed() {
		return
	}

	// The cluster: NATS and two workers, each in its own directory.
	nats, workers, client, status := startCluster(t, dir)

	// Submitted with its resources; --workers from the file's topology.workers.
	submitted, err := run(t, time.Minute, append([]string{"submit", "--file", file, "--filter", filter, "--resources", resources}, client...)...)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(submitted, "wordlen-file: generation 1 on 2 workers") {
		t.Fatalf("submit printed:\n%s", submitted)
	}
	m := regexp.MustCompile(`(?m)^\s+(w[12])\s+.*lines\[`).FindStringSubmatch(submitted)
	if m == nil {
		t.Fatalf("no worker runs the spout:\n%s", submitted)
	}
	spoutW, otherW := m[1], map[string]string{"w1": "w2", "w2": "w1"}[m[1]]
	for _, name := range []string{"w1", "w2"} {
		got, _ := filepath.Glob(filepath.Join(dir, name, "gale-resources", "wordlen-file-*", "sub", "stop-words.txt"))
		if len(got) != 1 {
			t.Errorf("%s: resources not unpacked in gale-resources/wordlen-file-DIGEST: %v", name, got)
		}
	}

	// kill -9 of the worker running the spout once part of the input is out: the
	// other runs the topology alone in a new generation, whose spout reads the
	// input again (lines written twice are read once: at-least-once).
	var before int
	poll(t, 30*time.Second, "the first lines in the out file", func() string {
		got, _ := readOut(t, out, want)
		if before = len(got); before < 50 {
			return fmt.Sprintf("%d lines", before)
		}
		return ""
	}, nats, workers["w1"], workers["w2"])
	if err := workers[spoutW].cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-workers[spoutW].done
	t.Logf("killed %s (the spout's) with %d of %d lines out", spoutW, before, len(want))
	if before == len(want) {
		t.Error("every line was out before the kill: the run is too short to lose a worker in it")
	}
	var got map[int]bool
	repeats := 0
	poll(t, 45*time.Second, "every line in the out file", func() string {
		got, repeats = readOut(t, out, want)
		if len(got) < len(want) {
			return fmt.Sprintf("%d of %d lines", len(got), len(want))
		}
		return ""
	}, nats, workers[otherW])
	t.Logf("%d lines with their counts in the out file (%d written again by a replay)", len(got), repeats)
	st := status()
	if !regexp.MustCompile(`(?m)^` + otherW + `\s.*\swordlen-file@g[2-9]\s`).MatchString(st) {
		t.Errorf("%s does not run a later generation of wordlen-file:\n%s", otherW, st)
	}

	// Storm's actions take the file's name: deactivate, activate, and a rebalance
	// onto the one worker left (no longer short of one).
	for _, act := range [][]string{{"deactivate", "wordlen-file"}, {"activate", "wordlen-file"}, {"rebalance", "--workers", "1", "wordlen-file"}} {
		out, err := run(t, time.Minute, append(act, client...)...)
		if err != nil || !strings.Contains(out, "wordlen-file") {
			t.Fatalf("%s: %q %v", act[0], out, err)
		}
	}
	if st := status(); !strings.Contains(st, "topology wordlen-file: active") || !strings.Contains(st, "want 1 worker,") {
		t.Errorf("after deactivate, activate, rebalance:\n%s", st)
	}

	// A worker of another build (gale's own: no wordlen classes) refuses a file
	// naming them, and says which class in cluster status. The other worker is
	// busy (one slot), so the scheduler can only offer it the new topology.
	gale, err := galeBinary()
	if err != nil {
		t.Fatal(err)
	}
	gdir := filepath.Join(dir, "g1")
	if err := os.Mkdir(gdir, 0o755); err != nil {
		t.Fatal(err)
	}
	g1 := &proc{name: "g1", cmd: exec.Command(gale, append([]string{"worker", "--name", "g1"}, client...)...), done: make(chan struct{})}
	g1.cmd.Dir = gdir
	g1.cmd.Stdout, g1.cmd.Stderr = &g1.stdout, &g1.stderr
	if err := g1.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { g1.err = g1.cmd.Wait(); close(g1.done) }()
	t.Cleanup(func() {
		if err := g1.stop(20 * time.Second); t.Failed() {
			t.Logf("g1 (gale worker) ended with %v; stderr:\n%s", err, g1.stderr.String())
		}
	})
	poll(t, 30*time.Second, "g1 in cluster status", func() string {
		if out := status(); !regexp.MustCompile(`(?m)^g1\s`).MatchString(out) {
			return out
		}
		return ""
	}, nats, workers[otherW], g1)
	second := filepath.Join(dir, "second.properties")
	if err := os.WriteFile(second, []byte(fmt.Sprintf("name = wordlen-second\ninput = %s\nout = %s\n", in, filepath.Join(dir, "out2.txt"))), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := run(t, time.Minute, append([]string{"submit", "--file", file, "--filter", second, "--workers", "1", "--no-wait"}, client...)...); err != nil {
		t.Fatal(err)
	}
	poll(t, 30*time.Second, "g1's refusal in cluster status", func() string {
		out := status()
		if regexp.MustCompile(`(?m)^g1\s.*wordlen-second: [^\n]*:\d+:\d+: "lines": unknown class "wordlen\.Lines"`).MatchString(out) {
			return ""
		}
		return out
	}, nats, workers[otherW], g1)
	if _, err := run(t, 30*time.Second, append([]string{"kill", "wordlen-second"}, client...)...); err != nil {
		t.Error(err)
	}

	// kill NAME: the file's topology stops on its worker.
	killed, err := run(t, 30*time.Second, append([]string{"kill", "wordlen-file"}, client...)...)
	if err != nil || !strings.Contains(killed, "wordlen-file: kill") {
		t.Fatalf("kill: %q %v", killed, err)
	}
	poll(t, 30*time.Second, "wordlen-file killed in cluster status", func() string {
		out := status()
		if strings.Contains(out, "topology wordlen-file: killed") && !strings.Contains(out, "wordlen-file@g") {
			return ""
		}
		return out
	}, nats, workers[otherW])
}
