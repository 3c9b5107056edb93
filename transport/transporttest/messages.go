package transporttest

import (
	"bytes"
	"fmt"
	"reflect"
	"slices"
	"sync"

	"github.com/gale-stream/gale/acker"
	"github.com/gale-stream/gale/internal/tupleinternal"
	"github.com/gale-stream/gale/topology"
	"github.com/gale-stream/gale/transport"
	"github.com/gale-stream/gale/tuple"
)

// The components and streams of Topology.
const (
	SourceComponent = "suite-src"
	SinkComponent   = "suite-sink"
	SideStream      = "side"
)

var (
	topoOnce sync.Once
	topo     *topology.Topology
)

// Topology returns the topology whose streams the suite's tuples travel on: spout
// suite-src declares the default stream (word, n, ratio, raw, ok) and stream side
// (k, at), and bolt suite-sink consumes both. A serialising transport that needs the
// topology to encode tuples (codec.NewStreams) is built from it.
func Topology() *topology.Topology {
	topoOnce.Do(func() {
		b := topology.NewBuilder()
		b.SetSpout(SourceComponent, func() topology.Spout { return &idleSpout{} }, 1).
			Output("word", "n", "ratio", "raw", "ok").
			OutputStream(SideStream, "k", "big")
		b.SetBolt(SinkComponent, func() topology.Bolt { return &idleBolt{} }, 1).
			ShuffleGrouping(SourceComponent).
			Input(SourceComponent, SideStream, topology.Shuffle())
		t, err := b.Build()
		if err != nil {
			panic(fmt.Sprintf("transporttest: the suite's topology: %v", err))
		}
		topo = t
	})
	return topo
}

type idleSpout struct{ topology.BaseSpout }

func (*idleSpout) NextTuple() {}

type idleBolt struct{ topology.BaseBolt }

func (*idleBolt) Execute(*tuple.Tuple) {}

// source returns the Source of one of Topology's streams.
func source(stream string) *tuple.Source {
	return Topology().Component(SourceComponent).Streams[stream].Source
}

var stateOf = sync.OnceValue(func() func(*tuple.Tuple) *tupleinternal.State {
	return tupleinternal.StateOf.(func(*tuple.Tuple) *tupleinternal.State)
})

// newTuple returns a tuple from task srcTask delivered to task dst, in the trees of
// the given (root, edge) pairs.
func newTuple(stream string, srcTask, dst int, values tuple.Values, edges ...tupleinternal.Edge) *tuple.Tuple {
	t := tuple.New(source(stream), srcTask, values)
	s := stateOf()(t)
	s.DstTask = int32(dst)
	if len(edges) > 0 {
		s.Root0, s.Edge0 = edges[0].Root, edges[0].Edge
	}
	if len(edges) > 1 {
		more := slices.Clone(edges[1:])
		s.More = &more
	}
	return t
}

// sampleMessages returns one message of every kind from one endpoint to another,
// every field that the kind uses set, Seq numbering them from seq.
func sampleMessages(from, to int, epoch, seq uint64) []*transport.Message {
	tuples := []*tuple.Tuple{
		newTuple(tuple.DefaultStream, from, to, tuple.Values{"hello", 42, 3.5, []byte{0, 1, 255}, true}),
		newTuple(tuple.DefaultStream, from, to, tuple.Values{"anchored", -1, -0.25, []byte{}, false},
			tupleinternal.Edge{Root: 0x1234_5678_9abc_def0, Edge: 0x0fed_cba9_8765_4321}),
		newTuple(SideStream, from, to, tuple.Values{int64(-7), uint64(1) << 63},
			tupleinternal.Edge{Root: 1, Edge: 2}, tupleinternal.Edge{Root: 3, Edge: 4}, tupleinternal.Edge{Root: ^uint64(0), Edge: 5}),
	}
	ms := []*transport.Message{
		{Kind: transport.KindTuples, Pos: 3, Tuples: tuples},
		{Kind: transport.KindAcks, Acks: []acker.Msg{
			{Kind: acker.Init, Root: 11, Val: 12, Task: 3},
			{Kind: acker.Ack, Root: 11, Val: 13},
			{Kind: acker.Fail, Root: 14, Reason: "bolt said no"},
			{Kind: acker.Reset, Root: 15},
		}},
		{Kind: transport.KindOutcomes, Outcomes: []acker.Outcome{
			{Root: 11, SpoutTask: 3, Result: acker.Completed, Latency: 7e6},
			{Root: 14, SpoutTask: 3, Result: acker.Failed, Latency: 1e6, Reason: "bolt said no"},
		}},
		{Kind: transport.KindCredit, Pos: 1 << 40},
		{Kind: transport.KindProbe, Pos: 99},
		{Kind: transport.KindEnd, Pos: 1000},
		{Kind: transport.KindEndAck, Pos: 1000},
		{Kind: transport.KindControl, Op: 7, ID: 1<<64 - 1, Body: []byte("stop\x00please")},
	}
	for i, m := range ms {
		m.From, m.To, m.Epoch, m.Seq = from, to, epoch, seq+uint64(i)
	}
	return ms
}

// diffMessage says how got differs from want ("" if it does not). Pointers are not
// compared: a serialising transport returns new ones.
func diffMessage(want, got *transport.Message) string {
	switch {
	case want.Kind != got.Kind:
		return fmt.Sprintf("kind %s, want %s", got.Kind, want.Kind)
	case want.From != got.From || want.To != got.To:
		return fmt.Sprintf("%d -> %d, want %d -> %d", got.From, got.To, want.From, want.To)
	case want.Epoch != got.Epoch || want.Seq != got.Seq:
		return fmt.Sprintf("epoch %d seq %d, want %d %d", got.Epoch, got.Seq, want.Epoch, want.Seq)
	case want.Pos != got.Pos:
		return fmt.Sprintf("pos %d, want %d", got.Pos, want.Pos)
	case want.Op != got.Op || want.ID != got.ID:
		return fmt.Sprintf("op %d id %d, want %d %d", got.Op, got.ID, want.Op, want.ID)
	case !bytes.Equal(want.Body, got.Body):
		return fmt.Sprintf("body %q, want %q", got.Body, want.Body)
	case len(want.Acks) != len(got.Acks) || (len(want.Acks) > 0 && !reflect.DeepEqual(want.Acks, got.Acks)):
		return fmt.Sprintf("acks %+v, want %+v", got.Acks, want.Acks)
	case len(want.Outcomes) != len(got.Outcomes) || (len(want.Outcomes) > 0 && !reflect.DeepEqual(want.Outcomes, got.Outcomes)):
		return fmt.Sprintf("outcomes %+v, want %+v", got.Outcomes, want.Outcomes)
	case len(want.Tuples) != len(got.Tuples):
		return fmt.Sprintf("%d tuples, want %d", len(got.Tuples), len(want.Tuples))
	}
	for i := range want.Tuples {
		if d := diffTuple(want.Tuples[i], got.Tuples[i]); d != "" {
			return fmt.Sprintf("tuple %d: %s", i, d)
		}
	}
	return ""
}

func diffTuple(want, got *tuple.Tuple) string {
	if got == nil {
		return "nil"
	}
	ws, gs := stateOf()(want), stateOf()(got)
	switch {
	case want.SourceComponent() != got.SourceComponent() || want.SourceStream() != got.SourceStream():
		return fmt.Sprintf("stream %s/%s, want %s/%s", got.SourceComponent(), got.SourceStream(), want.SourceComponent(), want.SourceStream())
	case got.Fields() == nil || !slices.Equal(want.Fields().Names(), got.Fields().Names()):
		return fmt.Sprintf("fields %v, want %v", got.Fields(), want.Fields())
	case want.SourceTask() != got.SourceTask():
		return fmt.Sprintf("source task %d, want %d", got.SourceTask(), want.SourceTask())
	case want.Task() != got.Task():
		return fmt.Sprintf("task %d, want %d", got.Task(), want.Task())
	case !reflect.DeepEqual(want.Values(), got.Values()):
		return fmt.Sprintf("values %#v, want %#v", got.Values(), want.Values())
	case want.Root() != got.Root() || !slices.Equal(want.Roots(), got.Roots()):
		return fmt.Sprintf("roots %x, want %x", got.Roots(), want.Roots())
	case !slices.Equal(edgesOf(ws), edgesOf(gs)):
		return fmt.Sprintf("edges %x, want %x", edgesOf(gs), edgesOf(ws))
	}
	return ""
}

func edgesOf(s *tupleinternal.State) []tupleinternal.Edge {
	var out []tupleinternal.Edge
	s.Edges(func(r, e uint64) { out = append(out, tupleinternal.Edge{Root: r, Edge: e}) })
	return out
}

// shared reports a pointer got shares with want (a Message, a tuple, a slice's
// array), or "".
func shared(want, got *transport.Message) string {
	switch {
	case want == got:
		return "the message"
	case len(want.Tuples) > 0 && len(got.Tuples) > 0 && &want.Tuples[0] == &got.Tuples[0]:
		return "the tuples slice"
	case len(want.Acks) > 0 && len(got.Acks) > 0 && &want.Acks[0] == &got.Acks[0]:
		return "the acks slice"
	case len(want.Outcomes) > 0 && len(got.Outcomes) > 0 && &want.Outcomes[0] == &got.Outcomes[0]:
		return "the outcomes slice"
	case len(want.Body) > 0 && len(got.Body) > 0 && &want.Body[0] == &got.Body[0]:
		return "the body"
	}
	for i, t := range want.Tuples {
		if i < len(got.Tuples) && t == got.Tuples[i] {
			return fmt.Sprintf("tuple %d", i)
		}
	}
	return ""
}
