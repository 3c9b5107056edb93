package topology_test

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"github.com/gale-stream/gale/engine"
	"github.com/gale-stream/gale/topology"
	"github.com/gale-stream/gale/tuple"
)

// LineSpout emits each line with its index as the message id, so each line roots a
// tracked tuple tree; it replays a line whose tree failed, and closes done once
// every line's tree has completed.
type LineSpout struct {
	topology.BaseSpout // Open keeps the collector in Out; Close does nothing
	lines              []string
	next, acked        int
	done               chan struct{}
}

func (s *LineSpout) NextTuple() {
	if s.next < len(s.lines) {
		s.Out.Emit(tuple.Values{s.lines[s.next]}, s.next)
		s.next++
	}
}

func (s *LineSpout) Ack(msgID any) {
	if s.acked++; s.acked == len(s.lines) {
		close(s.done)
	}
}

func (s *LineSpout) Fail(msgID any) {
	i := msgID.(int)
	s.Out.Emit(tuple.Values{s.lines[i]}, i) // the same message id: a replay
}

// Split is a BasicBolt: every emit is anchored to its input, and the input is acked
// when Execute returns nil (failed when it returns an error).
type Split struct{ topology.BaseBasicBolt }

func (*Split) Execute(t *tuple.Tuple, out topology.BasicCollector) error {
	for _, w := range strings.Fields(t.StringByField("line")) {
		if err := out.Emit(tuple.Values{w}); err != nil {
			return err
		}
	}
	return nil
}

// Count is a plain Bolt: it acks (or fails) each input itself, through Out, which
// may be called from any goroutine.
type Count struct {
	topology.BaseBolt // Prepare keeps the collector in Out; Cleanup does nothing
	mu                *sync.Mutex
	counts            map[string]int // shared by the count tasks, read at the end
}

func (c *Count) Execute(t *tuple.Tuple) {
	c.mu.Lock()
	c.counts[t.StringByField("word")]++
	c.mu.Unlock()
	c.Out.Ack(t)
}

func Example_wordCount() {
	lines := []string{"the cat sat", "on the mat", "the end"}
	done := make(chan struct{})
	var mu sync.Mutex
	counts := map[string]int{}

	b := topology.NewBuilder()
	b.SetSpout("lines", func() topology.Spout { return &LineSpout{lines: lines, done: done} }, 1).
		Output("line")
	b.SetBasicBolt("split", func() topology.BasicBolt { return &Split{} }, 2).
		ShuffleGrouping("lines").Output("word")
	b.SetBolt("count", func() topology.Bolt { return &Count{mu: &mu, counts: counts} }, 2).
		FieldsGrouping("split", "word")
	topo, err := b.Build() // unknown streams, bad groupings, cycles... are errors here
	if err != nil {
		fmt.Println(err)
		return
	}
	rt, err := engine.Start(context.Background(), topo, topology.DefaultConfig())
	if err != nil {
		fmt.Println(err)
		return
	}
	<-done // every line's tree completed: each of its words was counted and acked

	// Stop is graceful: it waits for trees in flight (here none), up to
	// Config.ShutdownTimeout, then closes every task.
	if err := rt.Stop(context.Background()); err != nil {
		fmt.Println(err)
	}
	fmt.Println("the:", counts["the"], "cat:", counts["cat"], "distinct words:", len(counts))
	// Output: the: 3 cat: 1 distinct words: 6
}
