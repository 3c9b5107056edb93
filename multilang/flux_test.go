package multilang_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/gale-stream/gale/component"
	"github.com/gale-stream/gale/flux"
	"github.com/gale-stream/gale/multilang"
	"github.com/gale-stream/gale/topology"
)

// A Storm Flux file naming FluxShellSpout (Node) and FluxShellBolt (Python),
// unchanged from what Storm would run: built through multilang.Components, its
// commands run in the file's directory, and the counts are exact.
func TestFluxShellComponents(t *testing.T) {
	need(t, "python3", "node")
	cfg, _ := config(t)
	const lines = 600
	file, want, total := book(t, lines)
	props := filepath.Join(t.TempDir(), "shell.properties")
	if err := os.WriteFile(props, []byte(fmt.Sprintf("book: %s\nlines: %d\n", file, lines)), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := flux.Load("testdata/wordcount.yaml", flux.Options{Filter: props})
	if err != nil {
		t.Fatal(err)
	}
	sink := &countSink{mu: &sync.Mutex{}, counts: map[string]int64{}, sum: new(int64), want: total, done: make(chan struct{})}
	reg := &component.Registry{}
	for _, d := range append(multilang.Components(), component.Declaration{Class: "test.CountSink",
		Bolt: func(component.Spec) (func() topology.Bolt, error) { return func() topology.Bolt { return sink }, nil }}) {
		if err := reg.Register(d); err != nil {
			t.Fatal(err)
		}
	}
	built, err := f.Build(reg)
	if err != nil {
		t.Fatal(err)
	}
	rt := start(t, built.Topology, cfg)
	wait(t, sink.done, "every word counted")
	stop(t, rt)
	checkCounts(t, sink, want)
}

// A shell class with an empty command, or fields that are not a list of
// strings, is refused at its line before anything starts.
func TestFluxShellComponentsRefused(t *testing.T) {
	reg := &component.Registry{}
	for _, d := range multilang.Components() {
		if err := reg.Register(d); err != nil {
			t.Fatal(err)
		}
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(path, []byte(`name: bad
spouts:
  - id: lines
    className: org.apache.storm.flux.wrappers.spouts.FluxShellSpout
    constructorArgs:
      - []
      - [n, line]
bolts:
  - id: split
    className: org.apache.storm.flux.wrappers.bolts.FluxShellBolt
    constructorArgs:
      - [python3, split.py]
      - word
streams:
  - {from: lines, to: split, grouping: {type: SHUFFLE}}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := flux.Load(path, flux.Options{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = f.Build(reg)
	if err == nil || !strings.Contains(err.Error(), "the command is empty") || !strings.Contains(err.Error(), path+":") {
		t.Errorf("Build: %v; want the empty command refused at its line", err)
	}
	t.Logf("%v", err)
}
