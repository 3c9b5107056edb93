package cluster

import (
	"testing"
	"time"

	"github.com/gale-stream/gale/topology"
)

// Changes to a topology that alter task ids, routing, stream numbers or what both
// ends of an edge compute, beyond those TestFingerprintChangesWithWhatProcessesMustShare
// covers, each change the shape; and names built to imitate the canonical text
// (quotes, newlines) do not collide with the topology they imitate. Attacks that
// held.
func TestFingerprintSeparatesRoutingChangesHeld(t *testing.T) {
	type spec struct {
		first, second string // component ids, in declaration order
		direct        bool   // the spout's stream is direct (and consumed with Direct)
		fields        []string
		stream        string
		grouping      string
		cfg           func(*topology.Config)
	}
	base := spec{first: "lines", second: "count", fields: []string{"word", "n"}, stream: "default", grouping: "shuffle"}
	build := func(s spec) string {
		b := topology.NewBuilder()
		spout := func() topology.Spout { return &nopSpout{} }
		bolt := func() topology.BasicBolt { return &nopBolt{} }
		var src *topology.Declarer
		declareSpout := func() {
			src = b.SetSpout(s.first, spout, 2)
			if s.direct {
				src.DirectStream(s.stream, s.fields...)
			} else {
				src.OutputStream(s.stream, s.fields...)
			}
		}
		declareBolt := func() {
			d := b.SetBasicBolt(s.second, bolt, 3)
			var g topology.Grouping
			switch s.grouping {
			case "shuffle":
				g = topology.Shuffle()
			case "all":
				g = topology.All()
			case "global":
				g = topology.Global()
			case "local":
				g = topology.LocalOrShuffle()
			case "none":
				g = topology.None()
			case "direct":
				g = topology.Direct()
			case "fields-word":
				g = topology.Fields("word")
			case "fields-n":
				g = topology.Fields("n")
			case "fields-both":
				g = topology.Fields("word", "n")
			case "fields-both-reversed":
				g = topology.Fields("n", "word")
			}
			d.Input(s.first, s.stream, g)
		}
		// Declaration order decides task ids: the bolt may come first.
		if s.second < s.first {
			declareBolt()
			declareSpout()
		} else {
			declareSpout()
			declareBolt()
		}
		topo, err := b.Build()
		if err != nil {
			t.Fatal(err)
		}
		cfg := topology.DefaultConfig()
		if s.cfg != nil {
			s.cfg(&cfg)
		}
		return FingerprintOf("t", topo, cfg).Shape
	}
	variants := map[string]spec{}
	add := func(name string, f func(*spec)) {
		s := base
		s.fields = append([]string(nil), base.fields...)
		f(&s)
		variants[name] = s
	}
	add("base", func(*spec) {})
	add("field order", func(s *spec) { s.fields = []string{"n", "word"} })
	add("field renamed", func(s *spec) { s.fields = []string{"word", "m"} })
	add("extra field", func(s *spec) { s.fields = append(s.fields, "x") })
	add("stream id", func(s *spec) { s.stream = "words" })
	add("component renamed", func(s *spec) { s.second = "counter" })
	add("declaration order", func(s *spec) { s.second = "a-count" }) // declared first
	add("direct stream", func(s *spec) { s.direct, s.grouping = true, "direct" })
	for _, g := range []string{"all", "global", "local", "none", "fields-word", "fields-n", "fields-both", "fields-both-reversed"} {
		add("grouping "+g, func(s *spec) { s.grouping = g })
	}
	add("timeouts off", func(s *spec) {
		s.cfg = func(c *topology.Config) { c.DisableTimeouts, c.MaxSpoutPending = true, 0 }
	})
	add("max spout pending", func(s *spec) { s.cfg = func(c *topology.Config) { c.MaxSpoutPending = 10 } })
	add("receive queue", func(s *spec) { s.cfg = func(c *topology.Config) { c.ReceiveQueue = 1024 } })
	add("flush interval", func(s *spec) { s.cfg = func(c *topology.Config) { c.FlushInterval = time.Millisecond } })
	add("no ackers", func(s *spec) { s.cfg = func(c *topology.Config) { c.Ackers = 0 } })
	// Names imitating the canonical text of another topology.
	add("quote in a name", func(s *spec) { s.first = `lines" spout parallelism 2 tick 0s` })
	add("newline in a name", func(s *spec) { s.second = "count\" basic-bolt parallelism 3 tick 0s\n input \"lines" })
	seen := map[string]string{}
	for name, s := range variants {
		shape := build(s)
		if other, ok := seen[shape]; ok {
			t.Errorf("%q and %q share shape %s", name, other, shape)
		}
		seen[shape] = name
	}
}
