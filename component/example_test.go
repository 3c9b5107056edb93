package component_test

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/gale-stream/gale/component"
	"github.com/gale-stream/gale/engine"
	"github.com/gale-stream/gale/topology"
	"github.com/gale-stream/gale/tuple"
)

// wordSpout emits each of its words once, tracked, and closes done when all are acked.
type wordSpout struct {
	topology.BaseSpout
	words       []string
	next, acked int
	done        chan struct{}
}

func (s *wordSpout) NextTuple() {
	if s.next < len(s.words) {
		s.Out.Emit(tuple.Values{s.words[s.next]}, s.next)
		s.next++
	}
}

func (s *wordSpout) Ack(any) {
	if s.acked++; s.acked == len(s.words) {
		close(s.done)
	}
}

// longer passes on the words of at least min letters.
type longer struct {
	topology.BaseBasicBolt
	min int
}

func (b *longer) Execute(t *tuple.Tuple, out topology.BasicCollector) error {
	if w := t.StringByField("word"); len(w) >= b.min {
		return out.Emit(tuple.Values{strings.ToUpper(w)})
	}
	return nil
}

// keep is a sink: it keeps every word it receives.
type keep struct {
	topology.BaseBolt
	mu   *sync.Mutex
	seen *[]string
}

func (k *keep) Execute(t *tuple.Tuple) {
	k.mu.Lock()
	*k.seen = append(*k.seen, t.StringByField("word"))
	k.mu.Unlock()
	k.Out.Ack(t)
}

func Example() {
	// A binary registers its classes once, usually in an init function. These close
	// over done and seen so that the example knows when to stop and what arrived.
	done := make(chan struct{})
	var mu sync.Mutex
	var seen []string
	var reg component.Registry
	word := func(component.Spec) ([]component.Output, error) {
		return []component.Output{{Fields: []string{"word"}}}, nil
	}
	for _, d := range []component.Declaration{{
		Class: "example.Words",
		Doc:   "emits each of its constructorArgs once",
		Spout: func(s component.Spec) (func() topology.Spout, error) {
			words := make([]string, len(s.Args))
			for i := range s.Args {
				var err error
				if words[i], err = s.ArgString(i); err != nil {
					return nil, err
				}
			}
			return func() topology.Spout { return &wordSpout{words: words, done: done} }, nil
		},
		Outputs: word,
	}, {
		Class: "example.Longer",
		Doc:   "passes on, upper-cased, the words of at least minLength letters (default 1)",
		BasicBolt: func(s component.Spec) (func() topology.BasicBolt, error) {
			n, err := s.Int("minLength", 1)
			if err != nil {
				return nil, err
			}
			return func() topology.BasicBolt { return &longer{min: n} }, nil
		},
		Outputs: word,
	}, {
		Class: "example.Keep",
		Doc:   "keeps every word (a sink)",
		Bolt: func(component.Spec) (func() topology.Bolt, error) {
			return func() topology.Bolt { return &keep{mu: &mu, seen: &seen} }, nil
		},
	}} {
		if err := reg.Register(d); err != nil {
			fmt.Println(err)
			return
		}
	}
	for _, d := range reg.Classes() {
		fmt.Printf("%-15s %-10s %s\n", d.Class, d.Kind(), d.Doc)
	}

	// What a file's reader does with each spout and bolt of the file.
	b := topology.NewBuilder()
	add := func(id, class string, spec component.Spec, parallelism int) *topology.Declarer {
		d, err := reg.Add(b, id, class, spec, parallelism)
		if err != nil {
			fmt.Println(err)
		}
		return d
	}
	add("words", "example.Words", component.Spec{Args: []any{"a", "gale", "is", "not", "storm"}}, 1)
	add("longer", "example.Longer", component.Spec{Properties: map[string]any{"minLength": 3}}, 2).
		ShuffleGrouping("words")
	add("keep", "example.Keep", component.Spec{}, 1).ShuffleGrouping("longer")
	add("typo", "example.Longr", component.Spec{}, 1) // refused: nothing is declared

	topo, err := b.Build()
	if err != nil {
		fmt.Println(err)
		return
	}
	rt, err := engine.Start(context.Background(), topo, topology.DefaultConfig())
	if err != nil {
		fmt.Println(err)
		return
	}
	<-done // every word's tree completed: it reached keep, or longer dropped it
	if err := rt.Stop(context.Background()); err != nil {
		fmt.Println(err)
	}
	sort.Strings(seen)
	fmt.Println(seen)
	// Output:
	// example.Keep    bolt       keeps every word (a sink)
	// example.Longer  basic bolt passes on, upper-cased, the words of at least minLength letters (default 1)
	// example.Words   spout      emits each of its constructorArgs once
	// component "typo": unknown class "example.Longr"; did you mean "example.Longer"? (registered: example.Keep, example.Longer, example.Words)
	// [GALE NOT STORM]
}
