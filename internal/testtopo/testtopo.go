// Package testtopo builds small topologies and sources with known counts, for the
// tests of the engine, the metrics, the UI, the workers and the command line.
package testtopo

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gale-stream/gale/engine"
	"github.com/gale-stream/gale/internal/waitfor"
	"github.com/gale-stream/gale/topology"
	"github.com/gale-stream/gale/tuple"
)

// Counted describes the topology
//
//	src (spout, 1 task) -> fan (bolt, 1 task, shuffle) -> sink (bolt, SinkTasks, shuffle)
//
// src emits Roots tracked tuples with message ids 0..Roots-1 and never replays. fan
// fails input i when FailEvery > 0 and i%FailEvery == 0 (reason ErrInjected), else
// emits Fanout tuples anchored to it and acks it. sink acks every input except the
// tuples of root DropAck (if >= 0), which it keeps without acking: that tree times out.
type Counted struct {
	Roots, Fanout, FailEvery, SinkTasks int
	DropAck                             int
	// Done counts the roots whose spout got Ack or Fail.
	Done atomic.Int64
}

// ErrInjected is the reason of fan's deliberate failures.
var ErrInjected = errors.New("injected failure")

// Topology builds it.
func (c *Counted) Topology() (*topology.Topology, error) {
	b := topology.NewBuilder()
	b.SetSpout("src", func() topology.Spout { return &countedSpout{c: c} }, 1).Output("i")
	b.SetBolt("fan", func() topology.Bolt { return &fanBolt{c: c} }, 1).Output("i", "j").ShuffleGrouping("src")
	b.SetBolt("sink", func() topology.Bolt { return &sinkBolt{c: c} }, max(c.SinkTasks, 1)).ShuffleGrouping("fan")
	return b.Build()
}

type countedSpout struct {
	c    *Counted
	out  topology.SpoutCollector
	next int
}

func (s *countedSpout) Open(_ context.Context, _ topology.TaskContext, out topology.SpoutCollector) error {
	s.out = out
	return nil
}

func (s *countedSpout) NextTuple() {
	if s.next < s.c.Roots {
		_ = s.out.Emit(tuple.Values{s.next}, s.next)
		s.next++
	}
}

func (s *countedSpout) Ack(any)      { s.c.Done.Add(1) }
func (s *countedSpout) Fail(any)     { s.c.Done.Add(1) }
func (s *countedSpout) Close() error { return nil }

type fanBolt struct {
	c   *Counted
	out topology.OutputCollector
}

func (b *fanBolt) Prepare(_ context.Context, _ topology.TaskContext, out topology.OutputCollector) error {
	b.out = out
	return nil
}

func (b *fanBolt) Execute(in *tuple.Tuple) {
	i := in.Value(0).(int)
	if b.c.FailEvery > 0 && i%b.c.FailEvery == 0 {
		_ = b.out.FailWith(in, fmt.Errorf("fan: root %d: %w", i, ErrInjected))
		return
	}
	for j := range b.c.Fanout {
		_ = b.out.Emit(tuple.Values{i, j}, in)
	}
	_ = b.out.Ack(in)
}

func (b *fanBolt) Cleanup() error { return nil }

type sinkBolt struct {
	c    *Counted
	out  topology.OutputCollector
	kept []*tuple.Tuple
}

func (b *sinkBolt) Prepare(_ context.Context, _ topology.TaskContext, out topology.OutputCollector) error {
	b.out = out
	return nil
}

func (b *sinkBolt) Execute(in *tuple.Tuple) {
	if in.Value(0).(int) == b.c.DropAck {
		b.kept = append(b.kept, in) // deliberately never acked
		return
	}
	_ = b.out.Ack(in)
}

func (b *sinkBolt) Cleanup() error { return nil }

// Start runs the topology and waits (up to 30 s) until every root has ended, that is
// until the spout got Ack or Fail for each; the topology keeps running.
func (c *Counted) Start(cfg topology.Config, opts ...engine.Option) (*engine.Runtime, error) {
	topo, err := c.Topology()
	if err != nil {
		return nil, err
	}
	rt, err := engine.Start(context.Background(), topo, cfg, opts...)
	if err != nil {
		return nil, err
	}
	if err := waitfor.Err(context.Background(), 30*time.Second, c.Ended); err != nil {
		_ = rt.Stop(context.Background())
		return nil, err
	}
	return rt, nil
}

// Ended returns nil once every root has ended (its spout got Ack or Fail), else an
// error saying how many have: a condition for waitfor.
func (c *Counted) Ended() error {
	if n := c.Done.Load(); n < int64(c.Roots) {
		return fmt.Errorf("%d of %d roots ended", n, c.Roots)
	}
	return nil
}

// Numbers is a durable source for the tests of tasks that move between workers:
// the numbers 0..n-1, shared by every spout task that reads it, wherever it runs.
// A number is done once acked; a spout task emits, from its Open on, the numbers
// not done yet (so a task started again elsewhere resumes), and a failed one again.
type Numbers struct {
	mu      sync.Mutex
	n       int
	acked   map[int]bool
	applied map[int]int
	opens   int
	done    chan struct{}
}

// NewNumbers returns the source of 0..n-1.
func NewNumbers(n int) *Numbers {
	return &Numbers{n: n, acked: map[int]bool{}, applied: map[int]int{}, done: make(chan struct{})}
}

// N is how many numbers there are.
func (s *Numbers) N() int { return s.n }

// Spout returns a new spout task reading s (a factory for SetSpout): it emits
// each number as the tuple's one value, with the number as message id.
func (s *Numbers) Spout() topology.Spout { return &numSpout{src: s} }

// Done is closed once every number is acked.
func (s *Numbers) Done() <-chan struct{} { return s.done }

// Acked is how many numbers are acked.
func (s *Numbers) Acked() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.acked)
}

// Opens is how many spout tasks have opened on s.
func (s *Numbers) Opens() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.opens
}

// Apply records that a bolt applied number i (once per tree that reached it).
func (s *Numbers) Apply(i int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.applied[i]++
}

// Applied is how many times number i was applied.
func (s *Numbers) Applied(i int) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.applied[i]
}

type numSpout struct {
	topology.BaseSpout
	src  *Numbers
	todo []int
}

func (s *numSpout) Open(_ context.Context, _ topology.TaskContext, out topology.SpoutCollector) error {
	s.Out = out
	s.src.mu.Lock()
	defer s.src.mu.Unlock()
	s.src.opens++
	for i := s.src.n - 1; i >= 0; i-- {
		if !s.src.acked[i] {
			s.todo = append(s.todo, i)
		}
	}
	return nil
}

func (s *numSpout) NextTuple() {
	if n := len(s.todo); n > 0 {
		i := s.todo[n-1]
		s.todo = s.todo[:n-1]
		_ = s.Out.Emit(tuple.Values{i}, i)
	}
}

func (s *numSpout) Ack(id any) {
	s.src.mu.Lock()
	defer s.src.mu.Unlock()
	s.src.acked[id.(int)] = true
	if len(s.src.acked) == s.src.n {
		select {
		case <-s.src.done:
		default:
			close(s.src.done)
		}
	}
}

func (s *numSpout) Fail(id any) { s.todo = append(s.todo, id.(int)) }
