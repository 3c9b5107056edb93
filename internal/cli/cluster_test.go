package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gale-stream/gale/internal/testio"
	"github.com/gale-stream/gale/pipelines/wordcount"
)

// childSpawner runs this test binary as gale (TestMain's GALE_TEST_CHILD), so the
// workers are real separate processes.
func childSpawner(args []string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "GALE_TEST_CHILD="+strings.Join(args, "\n"))
	return cmd
}

// demoSpawner is childSpawner for the word count runs on workers, with each worker's
// drain of a planned stop bounded by 5 s instead of 30. A drain there takes about
// a second; one that waits for a host of its generation that never started it
// (seen once a NATS node is lost: the worker that lost it is moved off and comes
// back) waits out the whole bound while the next generation stalls. The trees a
// cut drain abandons are replayed from the committed offsets, and the counts must
// still be exact.
func demoSpawner(args []string) *exec.Cmd {
	if len(args) > 0 && args[0] == "worker" {
		args = append(slices.Clone(args), "--stop-timeout=5s")
	}
	return childSpawner(args)
}

// demoResult is the JSON summary of gale wordcount --workers.
type demoResult struct {
	Workers    int               `json:"workers"`
	Generation uint64            `json:"generation"`
	Placement  map[string]string `json:"placement"`
	Words      uint64            `json:"words"`
	Duplicates uint64            `json:"duplicates_skipped"`
	Replays    uint64            `json:"replays"`
	Resumes    uint64            `json:"spout_resumes"`
	Exact      bool              `json:"exact"`
	Failover   *struct {
		Worker     string  `json:"worker"`
		Detected   float64 `json:"detected_seconds"`
		Reassigned float64 `json:"reassigned_seconds"`
		Running    float64 `json:"running_seconds"`
		From       uint64  `json:"from_generation"`
		To         uint64  `json:"to_generation"`
	} `json:"failover"`
}

// demoBooks is what a word count on workers reads in these tests: every book, or
// under the race detector, whose workers count several times slower and whose run
// is CPU-bound on CI's two cores, the two smallest (135,171 words, a seventh of
// every book's): a run of 4 to 7 s here that still lasts well past a failover
// (the kill at 0.5 s, detected about 1 s later and running again 0.1 s after
// that; fo.Running is checked). Its words are all counted and compared, as with
// every book.
func demoBooks(t *testing.T) []string {
	t.Helper()
	if !raceEnabled {
		return testio.Books(t)
	}
	var files []string
	for _, f := range []string{"244-0.txt", "105.txt"} {
		files = append(files, filepath.Join("../../testdata/books", f))
	}
	return files
}

// demoWords is how many words the files hold, counted in one goroutine.
func demoWords(t *testing.T, files []string) uint64 {
	t.Helper()
	counts, err := wordcount.CountFiles(files)
	if err != nil {
		t.Fatal(err)
	}
	var n uint64
	for _, c := range counts {
		n += c
	}
	return n
}

func runDemo(t *testing.T, d *clusterDemo) demoResult {
	t.Helper()
	var out, errw bytes.Buffer
	d.out, d.errw, d.asJSON, d.spawn, d.top = &out, &errw, true, demoSpawner, 3
	d.files = demoBooks(t)
	if d.hbTTL == 0 {
		d.hbTTL = time.Second
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if err := d.run(ctx); err != nil {
		t.Fatalf("demo: %v\nstdout: %s\nstderr: %s", err, out.String(), errw.String())
	}
	var r demoResult
	if err := json.Unmarshal(out.Bytes(), &r); err != nil {
		t.Fatalf("summary %q: %v", out.String(), err)
	}
	t.Logf("summary: %s", out.String())
	return r
}

// Word count on three gale worker processes over an embedded NATS, with 5% of lines
// and words failed: the counts equal a one-goroutine count of the books, and every
// worker ran a part of the topology.
func TestWordcountOnThreeWorkers(t *testing.T) {
	r := runDemo(t, &clusterDemo{workers: 3, args: []string{"--fail-rate=0.05", "--ackers=2"}})
	if want := demoWords(t, demoBooks(t)); !r.Exact || r.Words != want || r.Replays == 0 {
		t.Fatalf("exact %v, %d words (want %d), %d replays", r.Exact, r.Words, want, r.Replays)
	}
	if len(r.Placement) != 3 || r.Generation != 1 || r.Failover != nil {
		t.Errorf("placement %v at generation %d, failover %+v", r.Placement, r.Generation, r.Failover)
	}
}

// The worker running the spout is kill -9'd mid-run: its heartbeat expires, its
// tasks run on the other two under a new generation, the spout resumes from its
// committed offset, and the counts are still exact.
func TestWordcountWorkerKilled(t *testing.T) {
	r := runDemo(t, &clusterDemo{workers: 3, killAfter: 500 * time.Millisecond, args: []string{"--fail-rate=0.05", "--ackers=2"}})
	fo := r.Failover
	if fo == nil {
		t.Fatal("the job ended before the kill: make the run longer")
	}
	if !r.Exact || r.Resumes < 1 || fo.To <= fo.From || fo.Detected <= 0 || fo.Running < fo.Reassigned {
		t.Fatalf("exact %v, resumes %d, failover %+v", r.Exact, r.Resumes, *fo)
	}
	t.Logf("kill -9 of %s: detected after %.3fs, reassigned after %.3fs, running again after %.3fs", fo.Worker, fo.Detected, fo.Reassigned, fo.Running)
}

// The worker running the spout is paused (SIGSTOP) past its heartbeat, and resumed
// once its tasks run elsewhere: whatever its old generation still does is fenced
// off (its subjects, its refused offset commit), and the counts are exact.
func TestWordcountWorkerPaused(t *testing.T) {
	r := runDemo(t, &clusterDemo{workers: 3, killAfter: 500 * time.Millisecond, pause: true, args: []string{"--fail-rate=0.05", "--ackers=2"}})
	fo := r.Failover
	if fo == nil {
		t.Fatal("the job ended before the pause: make the run longer")
	}
	if !r.Exact || r.Resumes < 1 || fo.To <= fo.From {
		t.Fatalf("exact %v, resumes %d, failover %+v", r.Exact, r.Resumes, *fo)
	}
}

// Three workers on a three-node JetStream cluster (every bucket and stream
// replicated 3 times), one node shut down mid-run: the workers and this process
// reconnect to the others, the stream and bucket leaders move, and the counts are
// exact.
func TestWordcountNATSNodeLost(t *testing.T) {
	if testing.Short() {
		t.Skip("a three-node cluster run takes about 15 s")
	}
	var r struct {
		demoResult
		Nodes  int    `json:"nats_nodes"`
		Killed string `json:"nats_node_shut_down"`
	}
	var out, errw bytes.Buffer
	d := &clusterDemo{workers: 3, natsNodes: 3, killNATS: time.Second, hbTTL: 2 * time.Second,
		args: []string{"--fail-rate=0.05", "--ackers=2", "--timeout=5s"},
		out:  &out, errw: &errw, asJSON: true, spawn: demoSpawner, files: demoBooks(t)}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if err := d.run(ctx); err != nil {
		t.Fatalf("demo: %v\nstdout: %s\nstderr: %s", err, out.String(), errw.String())
	}
	if err := json.Unmarshal(out.Bytes(), &r); err != nil {
		t.Fatalf("summary %q: %v", out.String(), err)
	}
	t.Logf("summary: %s", out.String())
	if !r.Exact || r.Nodes != 3 || !strings.HasPrefix(r.Killed, "n3 at ") {
		t.Fatalf("exact %v, %d nodes, shut down %q", r.Exact, r.Nodes, r.Killed)
	}
}
