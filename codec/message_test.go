package codec

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/gale-stream/gale/acker"
	"github.com/gale-stream/gale/internal/tupleinternal"
	"github.com/gale-stream/gale/topology"
	"github.com/gale-stream/gale/transport"
	"github.com/gale-stream/gale/tuple"
)

func testTopology(t testing.TB) *topology.Topology {
	b := topology.NewBuilder()
	b.SetSpout("lines", func() topology.Spout { return nil }, 2).Output("line").OutputStream("meta", "n", "at")
	b.SetBolt("split", func() topology.Bolt { return nil }, 2).ShuffleGrouping("lines").Output("word")
	b.SetBolt("count", func() topology.Bolt { return nil }, 3).FieldsGrouping("split", "word").TickEvery(time.Second).
		Output("word", "n").DirectStream("direct", "x")
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return topo
}

func src(topo *topology.Topology, comp, stream string) *tuple.Source {
	return topo.Component(comp).Streams[stream].Source
}

// mkTuple makes a tuple with a tracking state.
func mkTuple(s *tuple.Source, srcTask, dst int, values tuple.Values, edges ...tupleinternal.Edge) *tuple.Tuple {
	t := tuple.New(s, srcTask, values)
	st := stateOf(t)
	st.DstTask = int32(dst)
	if len(edges) > 0 {
		st.Root0, st.Edge0 = edges[0].Root, edges[0].Edge
		if len(edges) > 1 {
			more := append([]tupleinternal.Edge(nil), edges[1:]...)
			st.More = &more
		}
	}
	return t
}

func TestStreams(t *testing.T) {
	topo := testTopology(t)
	st := NewStreams(topo)
	want := []*tuple.Source{tuple.TickSource, src(topo, "lines", "default"), src(topo, "lines", "meta"),
		src(topo, "split", "default"), src(topo, "count", "default"), src(topo, "count", "direct")}
	if st.Len() != len(want) {
		t.Fatalf("%d streams", st.Len())
	}
	for i, s := range want {
		if id, ok := st.ID(s); !ok || id != uint32(i) {
			t.Errorf("%s/%s: id %d %v, want %d", s.Component, s.Stream, id, ok, i)
		}
		if got, ok := st.Source(uint32(i)); !ok || got != s {
			t.Errorf("source %d", i)
		}
	}
	if _, ok := st.Source(99); ok {
		t.Error("source 99")
	}
	if _, ok := st.ID(&tuple.Source{Component: "lines", Stream: "default"}); ok {
		t.Error("a look-alike source has an id")
	}
	// Another process building the same topology numbers it the same.
	st2 := NewStreams(testTopology(t))
	for i := range want {
		a, _ := st.Source(uint32(i))
		b, _ := st2.Source(uint32(i))
		if a.Component != b.Component || a.Stream != b.Stream {
			t.Fatalf("stream %d: %s/%s and %s/%s", i, a.Component, a.Stream, b.Component, b.Stream)
		}
	}
}

func sameTuple(t *testing.T, got, want *tuple.Tuple) {
	t.Helper()
	if got.Source() != want.Source() || got.SourceTask() != want.SourceTask() || got.Task() != want.Task() {
		t.Fatalf("got %v (task %d), want %v (task %d)", got, got.Task(), want, want.Task())
	}
	if !reflect.DeepEqual(got.Values(), want.Values()) {
		t.Fatalf("values %#v, want %#v", got.Values(), want.Values())
	}
	gs, ws := stateOf(got), stateOf(want)
	if gs.Root0 != ws.Root0 || gs.Edge0 != ws.Edge0 || !reflect.DeepEqual(gs.Extra(), ws.Extra()) || gs.DstTask != ws.DstTask {
		t.Fatalf("state %+v, want %+v", *gs, *ws)
	}
}

func TestMessageRoundTrip(t *testing.T) {
	topo := testTopology(t)
	st := NewStreams(topo)
	at := time.Date(2024, 5, 6, 7, 8, 9, 10, time.UTC)
	tuples := []*tuple.Tuple{
		mkTuple(src(topo, "split", "default"), 3, 7, tuple.Values{"word"}, tupleinternal.Edge{Root: 1 << 63, Edge: 5}),
		mkTuple(src(topo, "split", "default"), 4, 7, tuple.Values{"wörd"}),
		mkTuple(src(topo, "lines", "meta"), 1, 7, tuple.Values{int64(-3), at},
			tupleinternal.Edge{Root: 11, Edge: 12}, tupleinternal.Edge{Root: 13, Edge: 14}, tupleinternal.Edge{Root: ^uint64(0), Edge: 0}),
		mkTuple(tuple.TickSource, 0, 7, tuple.Values{at}),
		mkTuple(src(topo, "count", "default"), 5, 7, tuple.Values{map[string]any{"a": []any{1, "x"}}, point{1, 2}}),
	}
	msgs := []*transport.Message{
		{Kind: transport.KindTuples, From: 3, To: 7, Epoch: 0xdeadbeefcafef00d, Seq: 1 << 40, Pos: 5, Tuples: tuples},
		{Kind: transport.KindTuples, From: 3, To: 7, Tuples: []*tuple.Tuple{}},
		{Kind: transport.KindAcks, From: 7, To: 1, Seq: 2, Acks: []acker.Msg{
			{Root: 1, Val: 2, Task: 3, Kind: acker.Init}, {Root: ^uint64(0), Val: 0, Task: -1, Kind: acker.Fail, Reason: "boom ✗"}}},
		{Kind: transport.KindOutcomes, From: 1, To: 2, Outcomes: []acker.Outcome{
			{Root: 9, SpoutTask: 2, Result: acker.Failed, Latency: 1500000, Reason: "x"}, {Root: 1, Result: acker.Completed, Latency: -1}}},
		{Kind: transport.KindCredit, From: 7, To: 3, Pos: 1 << 50},
		{Kind: transport.KindProbe, From: 3, To: 7, Pos: 3},
		{Kind: transport.KindEnd, From: 3, To: 7, Pos: 99},
		{Kind: transport.KindEndAck, From: 7, To: 3},
		{Kind: transport.KindControl, From: transport.Host(1), To: transport.Host(2), Op: 3, ID: 77, Body: []byte("stop")},
		{Kind: transport.KindControl, From: -1, To: -2, Op: 1, Body: []byte{}},
		{},
	}
	for _, m := range msgs {
		enc, err := AppendMessage([]byte("prefix"), m, st)
		if err != nil {
			t.Fatalf("%v: %v", m.Kind, err)
		}
		if string(enc[:6]) != "prefix" || enc[6] != Magic || enc[7] != Version {
			t.Fatalf("frame %x", enc)
		}
		got, err := ReadMessage(enc[6:], st)
		if err != nil {
			t.Fatalf("%v: %v", m.Kind, err)
		}
		gt, wt := got.Tuples, m.Tuples
		got.Tuples, m.Tuples = nil, nil
		if !reflect.DeepEqual(got, m) {
			t.Fatalf("got %+v\nwant %+v", got, m)
		}
		m.Tuples = wt
		if (gt == nil) != (wt == nil) || len(gt) != len(wt) {
			t.Fatalf("tuples %v, want %v", gt, wt)
		}
		for i := range wt {
			sameTuple(t, gt[i], wt[i])
		}
	}
	c, err := Clone(msgs[0], st)
	if err != nil || !c.Tuples[3].IsTick() || c.Tuples[0].Source() != tuples[0].Source() || c.Tuples[2].Roots()[2] != ^uint64(0) {
		t.Fatalf("clone: %v %v", c, err)
	}
}

func TestMessageErrors(t *testing.T) {
	topo := testTopology(t)
	st := NewStreams(topo)
	s := src(topo, "count", "default")
	m := &transport.Message{Kind: transport.KindTuples, Tuples: []*tuple.Tuple{mkTuple(s, 1, 2, tuple.Values{"w", &orderLine{}})}}
	_, err := AppendMessage(nil, m, st)
	want := `stream "default" of "count": codec: field "n" (index 1): type *codec.orderLine is not encodable`
	if !errors.Is(err, ErrUnencodable) || !strings.Contains(err.Error(), want) {
		t.Fatalf("%v", err)
	}
	m.Tuples = []*tuple.Tuple{mkTuple(&tuple.Source{Component: "x", Stream: "y"}, 1, 2, nil)}
	if _, err := AppendMessage(nil, m, st); err == nil || !strings.Contains(err.Error(), `stream "y" of "x" is not in the topology's stream table`) {
		t.Fatalf("%v", err)
	}
	// A frame of another version.
	enc, _ := AppendMessage(nil, &transport.Message{Kind: transport.KindCredit}, st)
	enc[1] = 3
	_, err = ReadMessage(enc, st)
	if !errors.Is(err, ErrVersion) || err.Error() != "codec: frame is version 3, this process speaks version 2" {
		t.Fatalf("%v", err)
	}
	// A stream number the receiver does not know (another topology).
	m.Tuples = []*tuple.Tuple{mkTuple(s, 1, 2, tuple.Values{"w", 1})}
	enc, _ = AppendMessage(nil, m, st)
	small := NewStreams(nil)
	if _, err := ReadMessage(enc, small); err == nil || !strings.Contains(err.Error(), "stream number 4 is not in this topology's stream table") {
		t.Fatalf("%v", err)
	}
	// Every truncation fails cleanly; so does a trailing byte.
	for i := range enc {
		if _, err := ReadMessage(enc[:i], st); err == nil {
			t.Fatalf("truncated at %d: decoded", i)
		}
	}
	if _, err := ReadMessage(append(enc, 0), st); err == nil {
		t.Fatal("trailing byte accepted")
	}
}
