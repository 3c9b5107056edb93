package flux_test

import (
	"bufio"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"unicode"

	"github.com/gale-stream/gale/component"
	"github.com/gale-stream/gale/internal/leaktest"
	"github.com/gale-stream/gale/topology"
	"github.com/gale-stream/gale/tuple"
)

// Word count and example tests start engines: every goroutine must end with them.
func TestMain(m *testing.M) { leaktest.Main(m) }

// env is a registry of test classes and what their makers and tasks saw.
type env struct {
	reg    component.Registry
	mu     sync.Mutex
	log    []string       // what each maker was given, in order
	done   chan struct{}  // closed when the lines spout's trees all completed
	word   map[string]int // what the count bolt counted
	taskOf map[string]int // the count task of each word
	split  []string       // words counted by two tasks
}

func (e *env) logf(format string, a ...any) {
	e.mu.Lock()
	e.log = append(e.log, fmt.Sprintf(format, a...))
	e.mu.Unlock()
}

// readLines returns n non-blank lines of path after skipping skip lines (blank or
// not), without their line ends.
func readLines(path string, skip, n int) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for i := 0; sc.Scan() && len(out) < n; i++ {
		if l := strings.TrimRight(sc.Text(), "\r"); i >= skip && strings.TrimSpace(l) != "" {
			out = append(out, l)
		}
	}
	return out, sc.Err()
}

// words is how test.Split splits: runs of letters.
func words(line string, lower bool) []string {
	ws := strings.FieldsFunc(line, func(r rune) bool { return !unicode.IsLetter(r) })
	if lower {
		for i, w := range ws {
			ws[i] = strings.ToLower(w)
		}
	}
	return ws
}

type endpoint struct {
	Host string
	Port int
}

func outs(o ...component.Output) func(component.Spec) ([]component.Output, error) {
	return func(component.Spec) ([]component.Output, error) { return o, nil }
}

func newEnv(t testing.TB) *env {
	e := &env{done: make(chan struct{}), word: map[string]int{}, taskOf: map[string]int{}}
	for _, d := range []component.Declaration{{
		Class: "test.Lines",
		Doc:   "emits n non-blank lines of a file (constructorArgs: path, n; property skip)",
		Spout: func(s component.Spec) (func() topology.Spout, error) {
			path, err := s.ArgString(0)
			if err != nil {
				return nil, err
			}
			n, err := s.ArgInt(1)
			if err != nil {
				return nil, err
			}
			skip, err := s.Int("skip", 0)
			if err != nil {
				return nil, err
			}
			lines, err := readLines(path, skip, n)
			if err != nil {
				return nil, err
			}
			e.logf("test.Lines: %d lines of %s after %d", len(lines), path, skip)
			return func() topology.Spout { return &linesSpout{lines: lines, done: e.done} }, nil
		},
		Outputs: outs(component.Output{Fields: []string{"sentence"}}),
	}, {
		Class: "test.Split",
		Doc:   "splits sentences into words (property lower)",
		BasicBolt: func(s component.Spec) (func() topology.BasicBolt, error) {
			lower, err := s.Bool("lower", false)
			if err != nil {
				return nil, err
			}
			e.logf("test.Split: lower=%t", lower)
			return func() topology.BasicBolt { return &splitBolt{lower: lower} }, nil
		},
		Outputs: outs(component.Output{Fields: []string{"word"}}),
	}, {
		Class: "test.Count",
		Doc:   "counts words (a sink)",
		Bolt: func(s component.Spec) (func() topology.Bolt, error) {
			return func() topology.Bolt { return &countBolt{e: e} }, nil
		},
	}, {
		Class: "test.Events",
		Doc:   "a spout of streams default [id, body], audit [id] and direct [id]",
		Spout: func(s component.Spec) (func() topology.Spout, error) {
			return func() topology.Spout { return &idleSpout{} }, nil
		},
		Outputs: outs(component.Output{Fields: []string{"id", "body"}}, component.Output{Stream: "audit", Fields: []string{"id"}},
			component.Output{Stream: "direct", Fields: []string{"id"}, Direct: true}),
	}, {
		Class: "test.Endpoint",
		Doc:   "a host (constructorArgs[0]) and a port (property port)",
		Value: func(s component.Spec) (any, error) {
			h, err := s.ArgString(0)
			if err != nil {
				return nil, err
			}
			p, err := s.Int("port", 80)
			return endpoint{h, p}, err
		},
	}, {
		Class:   "test.Client",
		Doc:     "a bolt of an endpoint (ref), a pool (reflist property) and configMethods withRetry and withHost",
		Methods: []string{"withRetry", "withHost"},
		Bolt: func(s component.Spec) (func() topology.Bolt, error) {
			ep, err := component.ArgOf[endpoint](s, 0)
			if err != nil {
				return nil, err
			}
			pool, err := component.PropOf(s, "pool", []any(nil))
			if err != nil {
				return nil, err
			}
			name, err := s.String("name", "client")
			if err != nil {
				return nil, err
			}
			var calls []string
			for _, c := range s.Method("withRetry") {
				n, err := c.ArgInt(0)
				if err != nil {
					return nil, err
				}
				calls = append(calls, fmt.Sprintf("withRetry(%d)", n))
			}
			for _, c := range s.Method("withHost") {
				h, err := component.ArgOf[endpoint](c, 0)
				if err != nil {
					return nil, err
				}
				calls = append(calls, fmt.Sprintf("withHost(%v)", h))
			}
			e.logf("test.Client %s: %v pool %v calls %v", name, ep, pool, calls)
			return func() topology.Bolt { return &ackBolt{} }, nil
		},
		Outputs: outs(component.Output{Fields: []string{"key", "value"}}, component.Output{Stream: "errors", Fields: []string{"error"}},
			component.Output{Stream: "to-task", Fields: []string{"n"}, Direct: true}),
	}, {
		Class: "test.Sink",
		Doc:   "acks everything (a sink)",
		Bolt: func(component.Spec) (func() topology.Bolt, error) {
			return func() topology.Bolt { return &ackBolt{} }, nil
		},
	}, {
		Class: "test.Args",
		Doc:   "a bolt of constructorArgs: a string and an integer",
		BasicBolt: func(s component.Spec) (func() topology.BasicBolt, error) {
			if _, err := s.ArgString(0); err != nil {
				return nil, err
			}
			if _, err := s.ArgInt(1); err != nil {
				return nil, err
			}
			return func() topology.BasicBolt { return &splitBolt{} }, nil
		},
		Outputs: outs(component.Output{Fields: []string{"word"}}),
	}} {
		if err := e.reg.Register(d); err != nil {
			t.Fatal(err)
		}
	}
	return e
}

type linesSpout struct {
	topology.BaseSpout
	lines       []string
	next, acked int
	done        chan struct{}
}

func (s *linesSpout) NextTuple() {
	if s.next < len(s.lines) {
		s.Out.Emit(tuple.Values{s.lines[s.next]}, s.next)
		s.next++
	}
}

func (s *linesSpout) Ack(any) {
	if s.acked++; s.acked == len(s.lines) {
		close(s.done)
	}
}

func (s *linesSpout) Fail(id any) { s.Out.Emit(tuple.Values{s.lines[id.(int)]}, id) } // replay

type splitBolt struct {
	topology.BaseBasicBolt
	lower bool
}

func (b *splitBolt) Execute(t *tuple.Tuple, out topology.BasicCollector) error {
	for _, w := range words(t.StringByField("sentence"), b.lower) {
		if err := out.Emit(tuple.Values{w}); err != nil {
			return err
		}
	}
	return nil
}

type countBolt struct {
	topology.BaseBolt
	e *env
}

func (c *countBolt) Execute(t *tuple.Tuple) {
	w := t.StringByField("word")
	c.e.mu.Lock()
	c.e.word[w]++
	// A FIELDS grouping on word sends a word to one task only.
	if prev, ok := c.e.taskOf[w]; ok && prev != c.Task.TaskID {
		c.e.split = append(c.e.split, w)
	}
	c.e.taskOf[w] = c.Task.TaskID
	c.e.mu.Unlock()
	c.Out.Ack(t)
}

type idleSpout struct{ topology.BaseSpout }

func (*idleSpout) NextTuple() {}

type ackBolt struct{ topology.BaseBolt }

func (b *ackBolt) Execute(t *tuple.Tuple) { b.Out.Ack(t) }
