package wordcount

import (
	"context"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/gale-stream/gale/cluster"
)

// TestParseClusterArgs: the submit arguments become ClusterOptions, and a bad one
// is refused naming its flag, not ClusterOptions' field.
func TestParseClusterArgs(t *testing.T) {
	a, err := ParseClusterArgs([]string{"--fail-rate=0.25", "--seed=7", "--parallelism=3", "--ackers=2",
		"--max-pending=10", "--timeout=5s", "--run=r1", "--state-replicas=3", "--", "/a.txt", "/b.txt"})
	if err != nil {
		t.Fatal(err)
	}
	o := a.Options
	if o.FailRate != 0.25 || o.Seed != 7 || o.Parallelism != 3 || o.Config.Ackers != 2 || o.Config.MaxSpoutPending != 10 ||
		o.Config.MessageTimeout.String() != "5s" || o.Run != "r1" || a.Replicas != 3 || !slices.Equal(o.Files, []string{"/a.txt", "/b.txt"}) {
		t.Errorf("parsed %+v", a)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--run=r"}, "no input files"},
		{[]string{"/a.txt"}, "no --run"},
		{[]string{"--run=r", "--fail-rate=1", "/a.txt"}, "--fail-rate 1: must be at least 0 and below 1"},
		{[]string{"--run=r", "--fail-rate=NaN", "/a.txt"}, "--fail-rate NaN"},
		{[]string{"--run=r", "--ackers=0", "/a.txt"}, "--ackers 0: a run on workers needs at least 1"},
		{[]string{"--run=r", "--parallelism=0", "/a.txt"}, "--parallelism 0"},
		{[]string{"--run=r", "--max-pending=-1", "/a.txt"}, "--max-pending -1"},
		{[]string{"--run=r", "--timeout=999us", "/a.txt"}, "--timeout 999µs: must be at least 1ms"},
		{[]string{"--run=r", "--no-such-flag", "/a.txt"}, "unknown flag: --no-such-flag"},
	} {
		_, err := ParseClusterArgs(tc.args)
		if err == nil || !strings.HasPrefix(err.Error(), "wordcount: ") || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v; want an error saying %q", tc.args, err, tc.want)
		}
	}
}

// TestNormalizeClusterArgs: what every worker gets is the flags in --name=value
// form, a run name, and the files as absolute paths; the defaults when none is
// named; a missing file or a directory is refused before anything is submitted.
func TestNormalizeClusterArgs(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "a.txt")
	if err := os.WriteFile(file, []byte("one two\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Chdir(dir)
	out, err := NormalizeClusterArgs([]string{"--seed", "3", "a.txt"}, "none-*.txt")
	if err != nil {
		t.Fatal(err)
	}
	if len(out) != 4 || out[0] != "--seed=3" || !regexp.MustCompile(`^--run=\d{8}-\d{6}-\w{6}$`).MatchString(out[1]) || out[2] != "--" || out[3] != file {
		t.Errorf("normalized %q", out)
	}
	// Normalized arguments normalize to themselves (flags in name order), and are
	// what ParseClusterArgs takes.
	again, err := NormalizeClusterArgs(out, "none-*.txt")
	if err != nil || !slices.Equal(again, []string{out[1], out[0], out[2], out[3]}) {
		t.Errorf("normalized again: %q, %v; want %q's flags in name order", again, err, out)
	}
	if a, err := ParseClusterArgs(out); err != nil || a.Options.Seed != 3 || !slices.Equal(a.Options.Files, []string{file}) {
		t.Errorf("parsed %+v, %v", a, err)
	}
	out, err = NormalizeClusterArgs([]string{"--run=mine"}, "*.txt")
	if err != nil || !slices.Equal(out, []string{"--run=mine", "--", file}) {
		t.Errorf("with the default files: %q, %v", out, err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "no FILE given and no none-*.txt in " + dir},
		{[]string{"missing.txt"}, "missing.txt: no such file"},
		{[]string{"."}, ". is a directory"},
		{[]string{"--bad", "a.txt"}, "unknown flag: --bad"},
	} {
		_, err := NormalizeClusterArgs(tc.args, "none-*.txt")
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v; want an error saying %q", tc.args, err, tc.want)
		}
	}
}

// TestClusterFactory: the factory builds word count from the submit arguments with
// the cluster's prefix for its state, touching no server, and refuses bad ones.
func TestClusterFactory(t *testing.T) {
	dep, err := ClusterFactory(context.Background(), cluster.Env{Topology: "wordcount", Prefix: "p",
		Args: []string{"--run=r", "--parallelism=3", "--ackers=2", "--", "/a.txt"}})
	if err != nil {
		t.Fatal(err)
	}
	if dep.Config.Ackers != 2 {
		t.Errorf("config %+v", dep.Config)
	}
	comps := map[string]int{}
	for _, c := range dep.Topology.Components {
		comps[c.ID] = c.Parallelism
	}
	if !maps.Equal(comps, map[string]int{"lines": 1, "split": 3, "count": 3}) {
		t.Errorf("components %v", comps)
	}
	if ClusterBucket("p") != "p-wordcount" {
		t.Errorf("bucket %q", ClusterBucket("p"))
	}
	if _, err := ClusterFactory(context.Background(), cluster.Env{Args: []string{"/a.txt"}}); err == nil || !strings.Contains(err.Error(), "no --run") {
		t.Errorf("no run: %v", err)
	}
}

// TestCountFiles: the one-goroutine count agrees with the independent tokenizer of
// referenceCount on two books, and names a missing file.
func TestCountFiles(t *testing.T) {
	books, _ := filepath.Glob("../../testdata/books/*.txt")
	if len(books) < 2 {
		t.Fatal("no testdata books")
	}
	books = books[:2]
	got, err := CountFiles(books)
	if err != nil {
		t.Fatal(err)
	}
	if want := referenceCount(t, books); !maps.Equal(got, want) {
		t.Errorf("%d distinct words, the reference %d", len(got), len(want))
	}
	if _, err := CountFiles([]string{"no-such-book.txt"}); err == nil || !strings.Contains(err.Error(), "no-such-book.txt") {
		t.Errorf("missing file: %v", err)
	}
}
