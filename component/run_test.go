package component_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/gale-stream/gale/component"
	"github.com/gale-stream/gale/engine"
	"github.com/gale-stream/gale/topology"
	"github.com/gale-stream/gale/tuple"
)

// fluxFile is the part of a Flux file this test needs, decoded as Flux writes it:
// properties are a list of name and value, which a reader turns into a map.
type fluxFile struct {
	Spouts []fluxComponent `yaml:"spouts"`
	Bolts  []fluxComponent `yaml:"bolts"`
}

type fluxComponent struct {
	ID          string `yaml:"id"`
	ClassName   string `yaml:"className"`
	Parallelism int    `yaml:"parallelism"`
	Args        []any  `yaml:"constructorArgs"`
	Properties  []struct {
		Name  string `yaml:"name"`
		Value any    `yaml:"value"`
	} `yaml:"properties"`
}

func (c fluxComponent) spec() component.Spec {
	s := component.Spec{Args: c.Args}
	if len(c.Properties) > 0 {
		s.Properties = map[string]any{}
		for _, p := range c.Properties {
			s.Properties[p.Name] = p.Value
		}
	}
	return s
}

const wordsFile = `
spouts:
  - id: lines
    className: test.Lines
    parallelism: 1
    constructorArgs:
      - ["the cat sat", "on a mat"]
    properties:
      - name: times
        value: 2
bolts:
  - id: split
    className: test.Split
    parallelism: 2
    properties:
      - name: minLength
        value: 3
      - name: upper
        value: true
  - id: collect
    className: test.Collect
    parallelism: 1
`

// linesSpout emits each line times times, tracked, and closes done when every tree
// has completed.
type linesSpout struct {
	topology.BaseSpout
	lines       []string
	times       int
	next, acked int
	done        chan struct{}
}

func (s *linesSpout) NextTuple() {
	if s.next < len(s.lines)*s.times {
		s.Out.Emit(tuple.Values{s.lines[s.next%len(s.lines)]}, s.next)
		s.next++
	}
}

func (s *linesSpout) Ack(any) {
	if s.acked++; s.acked == len(s.lines)*s.times {
		close(s.done)
	}
}

// splitBolt emits each word of at least min letters on the default stream with its
// length, and each shorter one on stream "short".
type splitBolt struct {
	topology.BaseBasicBolt
	min   int
	upper bool
}

func (b *splitBolt) Execute(t *tuple.Tuple, out topology.BasicCollector) error {
	for _, w := range strings.Fields(t.StringByField("line")) {
		if b.upper {
			w = strings.ToUpper(w)
		}
		var err error
		if len(w) >= b.min {
			err = out.Emit(tuple.Values{w, len(w)})
		} else {
			err = out.EmitTo("short", tuple.Values{w})
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// collectBolt records every tuple it receives as "source/stream values".
type collectBolt struct {
	topology.BaseBolt
	mu  *sync.Mutex
	got *[]string
}

func (c *collectBolt) Execute(t *tuple.Tuple) {
	c.mu.Lock()
	*c.got = append(*c.got, fmt.Sprintf("%s/%s %v", t.SourceComponent(), t.SourceStream(), t.Values()))
	c.mu.Unlock()
	c.Out.Ack(t)
}

// TestAddRunsTopology reads a Flux-shaped file, adds its components through the
// registry, runs the topology in the engine and checks every tuple that reached the
// sink: the values of the file (a list argument, int and bool properties) reached
// the task instances, each maker ran once while each task got its own instance, and
// the streams Outputs declared are the ones the tuples came on.
func TestAddRunsTopology(t *testing.T) {
	var file fluxFile
	if err := yaml.Unmarshal([]byte(wordsFile), &file); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	var mu sync.Mutex
	var got []string
	var splitMakers, splitTasks atomic.Int32

	var reg component.Registry
	for _, d := range []component.Declaration{{
		Class: "test.Lines",
		Doc:   "emits the lines of constructorArgs[0], times times",
		Spout: func(s component.Spec) (func() topology.Spout, error) {
			lines, err := s.ArgStrings(0)
			if err != nil {
				return nil, err
			}
			times, err := s.Int("times", 1)
			if err != nil {
				return nil, err
			}
			return func() topology.Spout { return &linesSpout{lines: lines, times: times, done: done} }, nil
		},
		Outputs: func(component.Spec) ([]component.Output, error) {
			return []component.Output{{Fields: []string{"line"}}}, nil
		},
	}, {
		Class: "test.Split",
		Doc:   "splits lines into words",
		BasicBolt: func(s component.Spec) (func() topology.BasicBolt, error) {
			splitMakers.Add(1)
			n, err := s.Int("minLength", 1)
			if err != nil {
				return nil, err
			}
			upper, err := s.Bool("upper", false)
			if err != nil {
				return nil, err
			}
			return func() topology.BasicBolt {
				splitTasks.Add(1)
				return &splitBolt{min: n, upper: upper}
			}, nil
		},
		Outputs: func(component.Spec) ([]component.Output, error) {
			return []component.Output{{Fields: []string{"word", "length"}}, {Stream: "short", Fields: []string{"word"}}}, nil
		},
	}, {
		Class: "test.Collect",
		Doc:   "records what it receives",
		Bolt: func(component.Spec) (func() topology.Bolt, error) {
			return func() topology.Bolt { return &collectBolt{mu: &mu, got: &got} }, nil
		},
	}} {
		if err := reg.Register(d); err != nil {
			t.Fatal(err)
		}
	}

	b := topology.NewBuilder()
	for _, c := range file.Spouts {
		if _, err := reg.Add(b, c.ID, c.ClassName, c.spec(), c.Parallelism); err != nil {
			t.Fatal(err)
		}
	}
	decls := map[string]*topology.Declarer{}
	for _, c := range file.Bolts {
		d, err := reg.Add(b, c.ID, c.ClassName, c.spec(), c.Parallelism)
		if err != nil {
			t.Fatal(err)
		}
		decls[c.ID] = d
	}
	// The file's streams section, which this package leaves to its caller.
	decls["split"].ShuffleGrouping("lines")
	decls["collect"].ShuffleGrouping("split").Input("split", "short", topology.Shuffle())
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	rt, err := engine.Start(context.Background(), topo, topology.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
	case <-time.After(20 * time.Second): // a hang, not a slow machine
		t.Error("the spout's trees did not all complete")
	}
	if err := rt.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}

	var want []string
	for range 2 { // times: 2
		want = append(want,
			"split/default [THE 3]", "split/default [CAT 3]", "split/default [SAT 3]", "split/default [MAT 3]",
			"split/short [ON]", "split/short [A]")
	}
	slices.Sort(want)
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf("the sink received\n%q\nwant\n%q", got, want)
	}
	if m, n := splitMakers.Load(), splitTasks.Load(); m != 1 || n != 2 {
		t.Errorf("split's maker ran %d times and its factory %d, want once and once per task (2)", m, n)
	}
}
