package kafka_test

import (
	"context"
	"fmt"
	"sort"
	"sync"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/gale-stream/gale/connect/kafka"
	"github.com/gale-stream/gale/engine"
	"github.com/gale-stream/gale/topology"
	"github.com/gale-stream/gale/tuple"
)

// collect acks each input and keeps its value.
type collect struct {
	topology.BaseBolt
	mu   *sync.Mutex
	got  *[]string
	done chan struct{}
}

func (c *collect) Execute(t *tuple.Tuple) {
	c.mu.Lock()
	*c.got = append(*c.got, string(t.ValueByField("value").([]byte)))
	if len(*c.got) == 3 {
		close(c.done)
	}
	c.mu.Unlock()
	c.Out.Ack(t)
}

// A spout reading a topic of an in-process fake cluster as group "example".
func Example() {
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "lines"))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer cluster.Close()
	prod, err := kgo.NewClient(kgo.SeedBrokers(cluster.ListenAddrs()...), kgo.DefaultProduceTopic("lines"))
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, l := range []string{"the cat sat", "on the mat", "the end"} {
		prod.ProduceSync(context.Background(), &kgo.Record{Value: []byte(l)})
	}
	prod.Close()

	src, err := kafka.NewSource(cluster.ListenAddrs(), "example", []string{"lines"})
	if err != nil {
		fmt.Println(err)
		return
	}
	var mu sync.Mutex
	var got []string
	done := make(chan struct{})
	b := topology.NewBuilder()
	b.SetSpout("kafka", src.Spout(), 1).Output(kafka.SpoutFields...)
	b.SetBolt("collect", func() topology.Bolt { return &collect{mu: &mu, got: &got, done: done} }, 1).
		ShuffleGrouping("kafka")
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
	<-done
	if err := rt.Stop(context.Background()); err != nil { // Close commits the acked prefix
		fmt.Println(err)
	}
	sort.Strings(got)
	fmt.Println(got, "committed:", cluster.GroupInfo("example").Commits["lines"][0].Offset)
	// Output: [on the mat the cat sat the end] committed: 3
}
