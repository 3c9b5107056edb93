package wordcount

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/gale-stream/gale/component"
	"github.com/gale-stream/gale/engine"
	"github.com/gale-stream/gale/topology"
)

// The classes refuse what they cannot run when the topology is built (each error
// a *component.SpecError pointing at its argument or property), and the spout
// refuses a parallelism other than 1 at Open, before any tuple.
func TestComponentsRefuse(t *testing.T) {
	var reg component.Registry
	for _, d := range Components() {
		if err := reg.Register(d); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		class string
		spec  component.Spec
		want  string
	}{
		{LineSpoutClass, component.Spec{}, "name at least one text file"},
		{LineSpoutClass, component.Spec{Args: []any{"no/such/file.txt"}}, "constructorArgs[0]: stat no/such/file.txt"},
		{LineSpoutClass, component.Spec{Args: []any{"../../testdata"}}, "is a directory"},
		{WordCountClass, component.Spec{}, "output"},
		{WordCountClass, component.Spec{Properties: map[string]any{"output": "no/such/dir/counts.tsv"}}, "no/such/dir: no such directory"},
		// Found by a breaker: built, the run's counts were lost at its end (the rename onto a directory).
		{WordCountClass, component.Spec{Properties: map[string]any{"output": "../../testdata"}}, "../../testdata is a directory"},
		{SplitSentenceClass, component.Spec{Properties: map[string]any{"failRate": 1.0}}, "must be at least 0 and below 1"},
	} {
		_, err := reg.Add(topology.NewBuilder(), "c", c.class, c.spec, 1)
		var se *component.SpecError
		if err == nil || !strings.Contains(err.Error(), c.want) || !errors.As(err, &se) {
			t.Errorf("%s %+v: %v, want a SpecError with %q", c.class, c.spec, err, c.want)
		}
	}
	b := topology.NewBuilder()
	if _, err := reg.Add(b, "lines", LineSpoutClass, component.Spec{Args: []any{"../../testdata/books/244-0.txt"}}, 2); err != nil {
		t.Fatal(err)
	}
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	rt, err := engine.Start(context.Background(), topo, topology.DefaultConfig())
	if err == nil {
		_ = rt.Stop(context.Background())
		t.Fatal("a LineSpout of parallelism 2 started")
	}
	if !strings.Contains(err.Error(), "parallelism 2, want 1") {
		t.Fatalf("Start: %v", err)
	}
}
