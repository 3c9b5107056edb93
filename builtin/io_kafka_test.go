package builtin

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gale-stream/gale/internal/waitfor"
)

func ioKafka(t *testing.T, topics ...string) *kfake.Cluster {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(4, topics...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// ioBrokersYAML is the cluster's addresses as a YAML flow list.
func ioBrokersYAML(c *kfake.Cluster) string {
	return "[" + strings.Join(c.ListenAddrs(), ", ") + "]"
}

// TestKafkaSpoutToFile produces 500 retail lines to a 4-partition topic, reads
// them with gale.spout.Kafka into gale.sink.File, and checks the file: every
// record once, with its topic, partition and offset, and the group's committed
// offsets at the end of every partition (the acked prefix, all of it).
func TestKafkaSpoutToFile(t *testing.T) {
	c := ioKafka(t, "orders")
	lines := ioRetailLines(t, 500)
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	recs := make([]*kgo.Record, len(lines))
	for i, o := range lines {
		recs[i] = &kgo.Record{Topic: "orders", Key: []byte(o.stockCode), Value: []byte(o.raw)}
	}
	if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}

	dir := t.TempDir()
	b := ioBuild(t, dir, fmt.Sprintf(`name: kafka-spout
spouts:
  - id: orders
    className: gale.spout.Kafka
    properties:
      - {name: brokers, value: %s}
      - {name: group, value: io-test}
      - {name: topics, value: [orders]}
      - {name: commitInterval, value: 50ms}
bolts:
  - id: out
    className: gale.sink.File
    properties:
      - {name: path, value: records.jsonl}
      - {name: fields, value: [topic, partition, offset, key, value]}
streams:
  - {from: orders, to: out, grouping: {type: SHUFFLE}}
`, ioBrokersYAML(c)), ioRegistry(t, nil, 0))
	_, stop := ioStart(t, b)
	path := filepath.Join(dir, "records.jsonl")
	type record struct {
		Topic     string
		Partition int32
		Offset    int64
		Key       string
		Value     string
	}
	var got []record
	waitfor.Until(t, 60*time.Second, func() error {
		got = got[:0]
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, l := range strings.SplitAfter(string(data), "\n") {
			if l == "" {
				continue
			}
			if !strings.HasSuffix(l, "\n") {
				return fmt.Errorf("a line without its newline: %q", l)
			}
			var r record
			if err := json.Unmarshal([]byte(l), &r); err != nil {
				return fmt.Errorf("line %q: %v", l, err)
			}
			got = append(got, r)
		}
		if len(got) < len(lines) {
			return fmt.Errorf("%d lines written, want %d", len(got), len(lines))
		}
		return nil
	})
	// Every committed offset at its partition's end: the spout acked them all.
	adm, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer adm.Close()
	waitfor.Until(t, 30*time.Second, func() error {
		req := kmsg.NewPtrOffsetFetchRequest()
		req.Group = "io-test"
		rt := kmsg.NewOffsetFetchRequestTopic()
		rt.Topic, rt.Partitions = "orders", []int32{0, 1, 2, 3}
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(context.Background(), adm)
		if err != nil {
			return err
		}
		sum := int64(0)
		for _, tp := range resp.Topics {
			for _, p := range tp.Partitions {
				sum += max(p.Offset, 0) // -1: nothing committed yet
			}
		}
		if sum != int64(len(lines)) {
			return fmt.Errorf("committed offsets sum to %d, want %d (every record acked)", sum, len(lines))
		}
		return nil
	})
	stop()

	byValue := map[string]record{}
	for _, r := range got {
		if prev, dup := byValue[r.Value]; dup {
			t.Errorf("record %q written twice: %+v and %+v (no failure happened: nothing to replay)", r.Value, prev, r)
		}
		byValue[r.Value] = r
	}
	seen := map[string]bool{}
	for _, o := range lines {
		r, ok := byValue[o.raw]
		switch {
		case !ok:
			t.Errorf("record %q not written", o.raw)
		case r.Topic != "orders" || r.Key != o.stockCode || r.Partition < 0 || r.Partition > 3:
			t.Errorf("record %q: %+v, want topic orders, key %s", o.raw, r, o.stockCode)
		}
		id := fmt.Sprint(r.Partition, "/", r.Offset)
		if seen[id] {
			t.Errorf("two records at partition/offset %s", id)
		}
		seen[id] = true
	}
}

// TestKafkaSinkFromOrders writes 300 retail lines with gale.sink.Kafka (key: the
// stock code, value: the line) and reads the topic back: every line once, keyed.
func TestKafkaSinkFromOrders(t *testing.T) {
	c := ioKafka(t, "lines")
	lines := ioRetailLines(t, 300)
	ioRunToEnd(t, ioBuild(t, t.TempDir(), fmt.Sprintf(`name: kafka-sink
spouts:
  - {id: orders, className: test.Orders}
bolts:
  - id: out
    className: gale.sink.Kafka
    parallelism: 2
    properties:
      - {name: brokers, value: %s}
      - {name: topic, value: lines}
      - {name: keyField, value: stock_code}
      - {name: valueField, value: line}
streams:
  - {from: orders, to: out, grouping: {type: SHUFFLE}}
`, ioBrokersYAML(c)), ioRegistry(t, lines, 1)))

	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.ConsumeTopics("lines"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	got := map[string]string{} // value -> key
	n := 0
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for n < len(lines) && ctx.Err() == nil {
		fs := cl.PollFetches(ctx)
		fs.EachRecord(func(r *kgo.Record) {
			n++
			if _, dup := got[string(r.Value)]; dup {
				t.Errorf("record %q written twice", r.Value)
			}
			got[string(r.Value)] = string(r.Key)
		})
	}
	if n != len(lines) {
		t.Fatalf("read %d records, want %d", n, len(lines))
	}
	for _, o := range lines {
		if k, ok := got[o.raw]; !ok || k != o.stockCode {
			t.Errorf("line %q: key %q (written %t), want %q", o.raw, k, ok, o.stockCode)
		}
	}
}
