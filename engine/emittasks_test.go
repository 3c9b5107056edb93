package engine

import (
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/gale-stream/gale/topology"
	"github.com/gale-stream/gale/tuple"
)

// EmitTasks returns the tasks each copy of a tuple went to, for a spout and a bolt,
// under fields, shuffle and all groupings: the tasks that received it, no others.
func TestEmitTasksReturnsTargets(t *testing.T) {
	const n = 60
	var mu sync.Mutex
	said := map[string][]int{} // "spout/i" or "bolt/i" -> tasks EmitTasks returned
	got := map[string][]int{}  // same keys -> tasks that received the tuple
	rec := newRecorder()
	sp := &listSpout{rec: rec} // n = 0: its own emits are off, onNext emits
	next := 0
	sp.onNext = func(out topology.SpoutCollector) {
		if next >= n {
			return
		}
		i := next
		next++
		tasks, err := out.(topology.SpoutTaskEmitter).EmitTasks(tuple.DefaultStream, tuple.Values{i}, i)
		if err != nil {
			panic(err)
		}
		mu.Lock()
		said["spout/"+fmt.Sprint(i)] = tasks
		mu.Unlock()
	}
	recv := func(prefix string) func() topology.Bolt {
		return bolt(func(b *fnBolt, in *tuple.Tuple) {
			mu.Lock()
			k := prefix + fmt.Sprint(in.Value(0))
			got[k] = append(got[k], b.tc.TaskID)
			mu.Unlock()
			_ = b.out.Ack(in)
		})
	}
	relay := bolt(func(b *fnBolt, in *tuple.Tuple) {
		i := fmt.Sprint(in.Value(0))
		tasks, err := b.out.(topology.TaskEmitter).EmitTasks(tuple.DefaultStream, tuple.Values{in.Value(0)}, in)
		if err != nil {
			panic(err)
		}
		mu.Lock()
		got["spout/"+i] = append(got["spout/"+i], b.tc.TaskID)
		said["bolt/"+i] = tasks
		mu.Unlock()
		_ = b.out.Ack(in)
	})
	b := topology.NewBuilder()
	b.SetSpout("s", func() topology.Spout { return sp }, 1).Output("i")
	b.SetBolt("fields", recv("spout/"), 3).FieldsGrouping("s", "i")
	b.SetBolt("shuffle", recv("spout/"), 2).ShuffleGrouping("s")
	b.SetBolt("all", recv("spout/"), 2).AllGrouping("s")
	b.SetBolt("relay", relay, 1).GlobalGrouping("s").Output("i")
	b.SetBolt("after", recv("bolt/"), 3).FieldsGrouping("relay", "i")
	b.SetBolt("after2", recv("bolt/"), 3).AllGrouping("relay")
	rt := start(t, mustBuild(t, b), quietConfig())
	rec.waitFor(t, "every tree acked", func(acks, fails int) bool { return acks == n })
	stop(t, rt)
	if len(said) != 2*n {
		t.Fatalf("EmitTasks calls recorded: %d, want %d", len(said), 2*n)
	}
	for k, tasks := range said {
		want := append([]int(nil), got[k]...)
		have := append([]int(nil), tasks...)
		slices.Sort(want)
		slices.Sort(have)
		if !slices.Equal(want, have) {
			t.Fatalf("%s: EmitTasks said %v, received by %v", k, tasks, got[k])
		}
	}
	// The spout's tuple reaches 3 fields/shuffle/all/global copies: 1+1+2+1 = 5; the
	// relay's reaches one "after" task and every "after2" task.
	if l := len(said["spout/0"]); l != 5 {
		t.Fatalf("spout emit went to %d tasks, want 5: %v", l, said["spout/0"])
	}
	if l := len(said["bolt/0"]); l != 4 {
		t.Fatalf("bolt emit went to %d tasks, want 4: %v", l, said["bolt/0"])
	}
}
