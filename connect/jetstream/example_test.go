package natsjs_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	natsjs "github.com/gale-stream/gale/connect/jetstream"
	"github.com/gale-stream/gale/engine"
	"github.com/gale-stream/gale/topology"
	"github.com/gale-stream/gale/tuple"
)

// upper is a BasicBolt: it turns a line into an event for the sink, its event id
// the line's stream sequence (so a replay is stored once).
type upper struct{ topology.BaseBasicBolt }

func (*upper) Execute(t *tuple.Tuple, out topology.BasicCollector) error {
	id := fmt.Sprintf("line-%d", t.ValueByField("seq").(uint64))
	return out.Emit(tuple.Values{id, strings.ToUpper(t.StringByField("line"))})
}

// Lines read from one stream through a durable consumer, upper-cased, and
// published to another with the event id as Nats-Msg-Id: each input acked after its
// PubAck, each message acked after its tree.
func Example() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "natsjs-example-")
	defer os.RemoveAll(dir)
	srv, _ := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, NoLog: true, NoSigs: true,
		JetStream: true, StoreDir: dir})
	srv.Start()
	defer func() { srv.Shutdown(); srv.WaitForShutdown() }() // after nc.Close
	srv.ReadyForConnections(10 * time.Second)
	nc, _ := nats.Connect(srv.ClientURL())
	defer nc.Close()
	js, _ := jetstream.New(nc)
	_, _ = js.CreateStream(ctx, jetstream.StreamConfig{Name: "LINES", Subjects: []string{"lines"}})
	out, _ := js.CreateStream(ctx, jetstream.StreamConfig{Name: "SHOUTS", Subjects: []string{"shouts"}})
	for _, l := range []string{"the cat sat", "on the mat"} {
		_, _ = js.Publish(ctx, "lines", []byte(l))
	}

	cfg := topology.DefaultConfig()
	cfg.MessageTimeout = 5 * time.Second // the consumer's AckWait: 10 s
	src, err := natsjs.NewSource(js, "LINES", "shouter", cfg,
		natsjs.WithFields(natsjs.TextField("line"), natsjs.SequenceField("seq")))
	if err != nil {
		fmt.Println(err)
		return
	}
	snk, err := natsjs.NewSink(js, "shouts", natsjs.WithDataField("text"))
	if err != nil {
		fmt.Println(err)
		return
	}
	b := topology.NewBuilder()
	b.SetSpout("lines", src.Spout, 1).Output(src.Fields()...)
	b.SetBasicBolt("upper", func() topology.BasicBolt { return &upper{} }, 1).
		ShuffleGrouping("lines").Output("event_id", "text")
	b.SetBolt("shouts", snk.Bolt, 1).ShuffleGrouping("upper")
	topo, err := b.Build()
	if err != nil {
		fmt.Println(err)
		return
	}
	rt, err := engine.Start(ctx, topo, cfg)
	if err != nil {
		fmt.Println(err)
		return
	}
	// Read both shouts as any consumer of the stream would; then stop, which waits
	// for the trees: each input acked after its PubAck, each line after its tree.
	shouts, _ := out.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{})
	got, _ := shouts.Fetch(2, jetstream.FetchMaxWait(30*time.Second))
	var stored []jetstream.Msg
	for m := range got.Messages() {
		stored = append(stored, m)
	}
	_ = rt.Stop(ctx)

	for _, m := range stored {
		fmt.Println(m.Headers().Get(jetstream.MsgIDHeader), string(m.Data()))
	}
	fmt.Printf("%+v\n", snk.Stats())
	// Output:
	// line-1 THE CAT SAT
	// line-2 ON THE MAT
	// {Published:2 Stored:2 Duplicates:0 Failed:0 Retries:0 Outages:0}
}
