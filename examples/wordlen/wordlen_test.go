package main

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gale-stream/gale/app"
	"github.com/gale-stream/gale/builtin"
	"github.com/gale-stream/gale/cluster"
	"github.com/gale-stream/gale/component"
	"github.com/gale-stream/gale/flux"
)

// What main registers is taken whole: the topology, the pipeline (a topology of
// the workers too) and the four classes, beside gale's own.
func TestOptions(t *testing.T) {
	a := app.New(options()...)
	if err := a.Err(); err != nil {
		t.Fatal(err)
	}
	if got := a.Topologies(); !slices.Equal(got, []string{TopologyName, PipelineName}) {
		t.Errorf("topologies %v", got)
	}
	// gale's built-ins (every binary has them) and the shell wrappers, then the
	// program's own four.
	var want []string
	for _, d := range builtin.Components() {
		want = append(want, d.Class)
	}
	want = append(want, flux.ShellBoltClass, flux.ShellSpoutClass, AppendClass, AppendCountsClass, CountClass, LinesClass)
	slices.Sort(want)
	if got := a.Components(); !slices.Equal(got, want) {
		t.Errorf("components %v, want %v", got, want)
	}
}

// Submit's arguments: relative paths made absolute, a missing input refused where
// the user is; the factory builds from the normalized arguments and refuses a
// relative path (a worker runs elsewhere).
func TestArgs(t *testing.T) {
	args, err := normalizeArgs([]string{"--file", input, "--out", "out.txt"})
	if err != nil {
		t.Fatal(err)
	}
	abs, _ := filepath.Abs(input)
	if want := []string{"--file=" + abs, "--out=" + filepath.Join(filepath.Dir(filepath.Dir(abs)), "out.txt"), "--parallelism=2"}; !slices.Equal(args, want) {
		t.Errorf("normalized %q, want %q", args, want)
	}
	if _, err := normalizeArgs([]string{"--file", "testdata/missing.txt", "--out", "o"}); err == nil || !strings.Contains(err.Error(), "--file") {
		t.Errorf("a missing file: %v", err)
	}
	reg := &component.Registry{}
	for _, d := range declarations() {
		if err := reg.Register(d); err != nil {
			t.Fatal(err)
		}
	}
	d, err := factory(context.Background(), cluster.Env{Topology: TopologyName, Args: args, Components: reg})
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"lines", "count", "out"} {
		if d.Topology.Component(id) == nil {
			t.Errorf("no component %s", id)
		}
	}
	if _, err := factory(context.Background(), cluster.Env{Args: []string{"--file=rel.txt", "--out=/tmp/o"}, Components: reg}); err == nil || !strings.Contains(err.Error(), "not an absolute path") {
		t.Errorf("a relative --file: %v", err)
	}
}

func TestCount(t *testing.T) {
	for _, c := range []struct {
		text           string
		words, letters int
	}{{"", 0, 0}, {"  “Whose blood?”  he asked. ", 4, 17}, {"Dr. Watson, 1878", 3, 8}} {
		if w, l := Count(c.text); w != c.words || l != c.letters {
			t.Errorf("Count(%q) = %d, %d; want %d, %d", c.text, w, l, c.words, c.letters)
		}
	}
}
