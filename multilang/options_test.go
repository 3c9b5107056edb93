package multilang

import (
	"encoding/json"
	"testing"

	"github.com/gale-stream/gale/topology"
	"github.com/gale-stream/gale/tuple"
)

type nopSpout struct{ topology.BaseSpout }

func (*nopSpout) NextTuple() {}

type nopBolt struct{ topology.BaseBasicBolt }

func (*nopBolt) Execute(*tuple.Tuple, topology.BasicCollector) error { return nil }

// The handshake's context is Storm's TopologyContext for the task: every task's
// component, the component's streams and fields, whom each stream goes to and
// how, and what it reads and how.
func TestHandshakeContext(t *testing.T) {
	b := topology.NewBuilder()
	b.SetSpout("lines", func() topology.Spout { return &nopSpout{} }, 1).Output("n", "line")
	b.SetBolt("split", ShellBolt([]string{"python3", "split.py"}, "testdata"), 2).
		ShuffleGrouping("lines").Output("word", "occurrence")
	b.SetBasicBolt("count", func() topology.BasicBolt { return &nopBolt{} }, 2).
		FieldsGrouping("split", "word").Output("word", "count")
	b.SetBasicBolt("audit", func() topology.BasicBolt { return &nopBolt{} }, 1).
		LocalOrShuffleGrouping("split")
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	tasks := map[string][]int{"lines": {1}, "split": {2, 3}, "count": {4, 5}, "audit": {6}}
	tc := topology.TaskContext{Component: "split", TaskID: 3, TaskIndex: 1, Parallelism: 2, Topology: topo,
		ComponentTasks: func(c string) []int { return tasks[c] }}
	o := newOptions([]string{"python3", "split.py"}, "testdata", nil)
	got, err := json.Marshal(o.setup(tc)["context"])
	if err != nil {
		t.Fatal(err)
	}
	want := `{"componentid":"split",` +
		`"source-\u003estream-\u003efields":{"lines":{"default":["n","line"]}},` +
		`"source-\u003estream-\u003egrouping":{"lines":{"default":{"type":"SHUFFLE"}}},` +
		`"stream-\u003eoutputfields":{"default":["word","occurrence"]},` +
		`"stream-\u003etarget-\u003egrouping":{"default":{"audit":{"type":"LOCAL_OR_SHUFFLE"},"count":{"fields":["word"],"type":"FIELDS"}}},` +
		`"streams":["default"],` +
		`"task-\u003ecomponent":{"1":"lines","2":"split","3":"split","4":"count","5":"count","6":"audit"},` +
		`"taskid":3}`
	if string(got) != want {
		t.Errorf("context\n%s\nwant\n%s", got, want)
	}
}
