package builtin

import (
	"errors"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gale-stream/gale/component"
	"github.com/gale-stream/gale/flux"
	"github.com/gale-stream/gale/topology"
)

// TestIOClassesRefuseBadOptions builds each source and sink class with one bad
// option at a time: each is refused at build, as a *component.SpecError placed at
// the property at fault (a Flux file's reader points at its line), with a message
// naming what is wrong.
func TestIOClassesRefuseBadOptions(t *testing.T) {
	dir := t.TempDir()
	base := map[string]map[string]any{
		KafkaSpoutClass:     {"brokers": []any{"127.0.0.1:9092"}, "group": "g", "topics": []any{"orders"}},
		JetStreamSpoutClass: {"url": "nats://127.0.0.1:4222", "stream": "LINES", "durable": "d"},
		SQLSinkClass:        {"url": "sqlite:x.db", "table": "t", "columns": []any{"a", "b"}, "conflict": []any{"a"}},
		KafkaSinkClass:      {"brokers": []any{"127.0.0.1:9092"}, "topic": "out"},
		JetStreamSinkClass:  {"url": "nats://127.0.0.1:4222", "subject": "orders.out"},
		FileSinkClass:       {"path": "out.txt"},
		StdoutSinkClass:     {},
	}
	const del = "(delete)"
	cases := []struct {
		class  string
		set    map[string]any
		config map[string]any
		prop   string // where the error is placed; "" the spec as a whole
		want   string
	}{
		// gale.spout.Kafka
		{KafkaSpoutClass, map[string]any{"brokers": del}, nil, "", `property "brokers" is required`},
		{KafkaSpoutClass, map[string]any{"group": del, "topics": del}, nil, "", `properties "group", "topics" are required`},
		{KafkaSpoutClass, map[string]any{"brokers": []any{}}, nil, "brokers", "an empty list: want at least a seed broker"},
		{KafkaSpoutClass, map[string]any{"brokers": "127.0.0.1:9092"}, nil, "brokers", "want a list of strings"},
		{KafkaSpoutClass, map[string]any{"group": ""}, nil, "group", "empty: the spout commits its offsets as a consumer group"},
		{KafkaSpoutClass, map[string]any{"topics": []any{""}}, nil, "topics", "element 0 is empty"},
		{KafkaSpoutClass, map[string]any{"offsetReset": "newest"}, nil, "offsetReset", `want earliest or latest (auto.offset.reset), not "newest"`},
		{KafkaSpoutClass, map[string]any{"readCommitted": "yes"}, nil, "readCommitted", "want true or false"},
		{KafkaSpoutClass, map[string]any{"maxAttempts": 3}, nil, "maxAttempts", "needs deadLetterTopic"},
		{KafkaSpoutClass, map[string]any{"deadLetterTopic": "dead", "maxAttempts": 0}, nil, "maxAttempts", "0: want at least 1"},
		{KafkaSpoutClass, map[string]any{"deadLetterTopic": "orders"}, nil, "deadLetterTopic", `dead-letter topic "orders" is also read`},
		{KafkaSpoutClass, map[string]any{"retryBackoff": "1s", "retryBackoffMax": "10ms"}, nil, "retryBackoff", "need 0 <= first <= max"},
		{KafkaSpoutClass, map[string]any{"retryBackoffMax": 5}, nil, "retryBackoffMax", `want a duration such as "500ms"`},
		{KafkaSpoutClass, map[string]any{"commitInterval": "0s"}, nil, "commitInterval", "commit interval 0s, must be > 0"},
		{KafkaSpoutClass, map[string]any{"revokeWait": "-1s"}, nil, "revokeWait", "revoke wait -1s, must be >= 0"},
		{KafkaSpoutClass, map[string]any{"maxBuffered": 0}, nil, "maxBuffered", "max buffered 0, must be >= 1"},
		{KafkaSpoutClass, map[string]any{"topic": "orders"}, nil, "topic", `property "topic" is not used; did you mean "topics"?`},

		// gale.spout.JetStream
		{JetStreamSpoutClass, map[string]any{"url": del}, nil, "", `property "url" is required`},
		{JetStreamSpoutClass, map[string]any{"url": "nats://gale:hunter2@127.0.0.1:4222"}, nil, "url", "holds credentials"},
		{JetStreamSpoutClass, map[string]any{"url": "nats://s3cr3t-token@127.0.0.1:4222"}, nil, "url", "give it by reference, env:NAME or @PATH"},
		{JetStreamSpoutClass, map[string]any{"url": "env:"}, nil, "url", "env: names no environment variable"},
		{JetStreamSpoutClass, map[string]any{"url": "env:nats://127.0.0.1:4222"}, nil, "url", "a reference (env:NAME or @PATH) holds a URL"},
		{JetStreamSpoutClass, map[string]any{"stream": "LINES.IN"}, nil, "stream", `stream name "LINES.IN" holds '.'`},
		{JetStreamSpoutClass, map[string]any{"durable": ""}, nil, "durable", "empty durable consumer name"},
		{JetStreamSpoutClass, map[string]any{"fields": []any{}}, nil, "fields", "an empty list: want at least one field"},
		{JetStreamSpoutClass, map[string]any{"fields": []any{"line=body"}}, nil, "fields", `part "body" is none of subject, data, text, seq, delivered, header:KEY`},
		{JetStreamSpoutClass, map[string]any{"fields": []any{"seq", "seq"}}, nil, "fields", `field "seq" twice`},
		{JetStreamSpoutClass, map[string]any{"fields": []any{"=text"}}, nil, "fields", "has no field name"},
		{JetStreamSpoutClass, map[string]any{"filterSubjects": []any{""}}, nil, "filterSubjects", "an empty subject"},
		{JetStreamSpoutClass, map[string]any{"maxAttempts": 0}, nil, "maxAttempts", "WithMaxAttempts(0): must be at least 1"},
		{JetStreamSpoutClass, map[string]any{"deadLetter": "dead.*"}, nil, "deadLetter", "want a literal subject"},
		{JetStreamSpoutClass, map[string]any{"backoff": "2s", "backoffMax": "1s"}, nil, "backoff", "want 0 < min <= max"},
		{JetStreamSpoutClass, map[string]any{"ackWait": "1s"}, nil, "ackWait", "AckWait 1s < 1.25 × MessageTimeout 30s"},
		{JetStreamSpoutClass, map[string]any{"fetchBatch": 0}, nil, "fetchBatch", "want batch >= 1 and wait > 0"},
		{JetStreamSpoutClass, map[string]any{"fetchWait": "0s"}, nil, "fetchWait", "want batch >= 1 and wait > 0"},
		{JetStreamSpoutClass, map[string]any{"fetchBatch": 1 << 40}, nil, "fetchBatch", "1099511627776: above topology.max.spout.pending (5000)"},
		{JetStreamSpoutClass, map[string]any{"fetchBatch": 500}, map[string]any{"topology.max.spout.pending": 100}, "fetchBatch", "500: above topology.max.spout.pending (100)"},
		{JetStreamSpoutClass, nil, map[string]any{"topology.acker.executors": 0}, "", "the topology's config: natsjs: invalid option: NewSource: Config.Ackers = 0"},
		{JetStreamSpoutClass, nil, map[string]any{"topology.max.spout.pending": nil}, "", "Config.MaxSpoutPending = 0 (unlimited)"},

		// gale.sink.SQL
		{SQLSinkClass, map[string]any{"url": del}, nil, "", `property "url" is required`},
		{SQLSinkClass, map[string]any{"url": "postgres://gale:hunter2@db:5432/gale"}, nil, "url", "holds a password, which would travel in clear"},
		{SQLSinkClass, map[string]any{"url": "host=db user=gale password=hunter2"}, nil, "url", "give it by reference, env:NAME or @PATH"},
		{SQLSinkClass, map[string]any{"url": "host=db user=gale password = hunter2"}, nil, "url", "holds a password, which would travel in clear"},
		{SQLSinkClass, map[string]any{"url": " postgres://gale:hunter2@db:5432/gale"}, nil, "url", "holds a password, which would travel in clear"},
		{SQLSinkClass, map[string]any{"url": ""}, nil, "url", "empty: want the database URL"},
		{SQLSinkClass, map[string]any{"url": "@"}, nil, "url", "@ names no file"},
		{SQLSinkClass, map[string]any{"url": 5}, nil, "url", "want a string, got integer 5"},
		{SQLSinkClass, map[string]any{"table": del}, nil, "", `property "table" is required`},
		{SQLSinkClass, map[string]any{"table": ""}, nil, "table", `table "": name: empty`},
		{SQLSinkClass, map[string]any{"table": "a..b"}, nil, "table", `"a..b" has an empty part`},
		{SQLSinkClass, map[string]any{"columns": []any{}}, nil, "columns", "no columns"},
		{SQLSinkClass, map[string]any{"columns": []any{"a", "a"}}, nil, "columns", `column "a" listed twice`},
		{SQLSinkClass, map[string]any{"conflict": []any{"c"}}, nil, "conflict", `conflict column "c" is not one of the columns [a b]`},
		{SQLSinkClass, map[string]any{"conflict": []any{}}, nil, "conflict", "no conflict columns"},
		{SQLSinkClass, map[string]any{"mode": "upsert"}, nil, "mode", `want insert-once or versioned-upsert, not "upsert"`},
		{SQLSinkClass, map[string]any{"mode": "versioned-upsert"}, nil, "mode", "mode VersionedUpsert needs a version column"},
		{SQLSinkClass, map[string]any{"version": "b"}, nil, "version", "a version column is for mode versioned-upsert, and mode is insert-once (the default"},
		{SQLSinkClass, map[string]any{"mode": "versioned-upsert", "version": "z"}, nil, "version", `version column "z" is not one of the columns`},
		{SQLSinkClass, map[string]any{"mode": "versioned-upsert", "version": "a"}, nil, "version", `version column "a" is also a conflict column`},
		{SQLSinkClass, map[string]any{"create": "DROP TABLE t"}, nil, "create", `want CREATE TABLE [IF NOT EXISTS] t (...), not "DROP TABLE t"`},
		{SQLSinkClass, map[string]any{"create": "CREATE TABLE t (a TEXT PRIMARY KEY, b TEXT); DROP TABLE u"}, nil, "create", "one statement only"},
		{SQLSinkClass, map[string]any{"create": "CREATE TABLE other (a TEXT PRIMARY KEY, b TEXT)"}, nil, "create", "it creates table other, but the sink writes table t"},
		{SQLSinkClass, map[string]any{"batchRows": 0}, nil, "batchRows", "0: want at least 1"},

		// gale.sink.Kafka
		{KafkaSinkClass, map[string]any{"topic": del}, nil, "", `property "topic" is required`},
		{KafkaSinkClass, map[string]any{"topic": ""}, nil, "topic", "empty: want the topic to produce to"},
		{KafkaSinkClass, map[string]any{"brokers": []any{}}, nil, "brokers", "an empty list"},
		{KafkaSinkClass, map[string]any{"valueField": ""}, nil, "valueField", "empty: want the field whose value is the record's value"},
		{KafkaSinkClass, map[string]any{"keyField": "value"}, nil, "keyField", `"value" is also valueField`},
		{KafkaSinkClass, map[string]any{"maxInFlight": 0}, nil, "maxInFlight", "max in flight 0, must be >= 1"},
		{KafkaSinkClass, map[string]any{"holdRefresh": "-1s"}, nil, "holdRefresh", "hold refresh -1s, must be >= 0"},
		{KafkaSinkClass, map[string]any{"transactionInterval": "1s"}, nil, "transactionInterval", "needs transactionalId"},
		{KafkaSinkClass, map[string]any{"holdRefresh": "30s"}, nil, "holdRefresh", "30s: at or above the message timeout (30s, topology.message.timeout.secs)"},
		{KafkaSinkClass, map[string]any{"holdRefresh": "5s"}, map[string]any{"topology.message.timeout.secs": 5}, "holdRefresh", "5s: at or above the message timeout (5s"},
		{KafkaSinkClass, map[string]any{"transactionalId": "tx", "transactionInterval": "0s"}, nil, "transactionInterval", "transaction interval 0s, must be > 0"},

		// gale.sink.JetStream
		{JetStreamSinkClass, map[string]any{"subject": del}, nil, "", `property "subject" is required`},
		{JetStreamSinkClass, map[string]any{"subject": "orders.*"}, nil, "subject", `subject "orders.*": want a literal subject`},
		{JetStreamSinkClass, map[string]any{"url": "nats://gale:hunter2@127.0.0.1:4222"}, nil, "url", "holds credentials"},
		{JetStreamSinkClass, map[string]any{"eventIdField": ""}, nil, "eventIdField", `WithEventIDField(""): want a field name`},
		{JetStreamSinkClass, map[string]any{"dataField": ""}, nil, "dataField", `WithDataField(""): want a field name`},
		{JetStreamSinkClass, map[string]any{"dataField": "event_id"}, nil, "dataField", `the event id and the data are both field "event_id"`},
		{JetStreamSinkClass, map[string]any{"headers": []any{"stock_code"}}, nil, "headers", `element 0 ("stock_code"): want FIELD=Header-Key`},
		{JetStreamSinkClass, map[string]any{"headers": []any{"stock_code=Nats-Msg-Id"}}, nil, "headers", "a header key not starting with Nats-"},
		{JetStreamSinkClass, map[string]any{"maxInFlight": 0}, nil, "maxInFlight", "WithMaxInFlight(0): must be at least 1"},
		{JetStreamSinkClass, map[string]any{"publishTimeout": "0s"}, nil, "publishTimeout", "must be positive"},
		{JetStreamSinkClass, map[string]any{"retryBackoff": "2s", "retryBackoffMax": "1s"}, nil, "retryBackoff", "want 0 < min <= max"},
		{JetStreamSinkClass, map[string]any{"publishTimeout": "1m"}, nil, "publishTimeout", "publishTimeout 1m0s + retryBackoffMax 2s: at or above the message timeout (30s"},
		{JetStreamSinkClass, map[string]any{"retryBackoffMax": "25s"}, nil, "retryBackoffMax", "publishTimeout 5s + retryBackoffMax 25s: at or above the message timeout (30s"},

		// gale.sink.File
		{FileSinkClass, map[string]any{"path": del}, nil, "", `property "path" is required`},
		{FileSinkClass, map[string]any{"path": ""}, nil, "path", "empty: want the file to write"},
		{FileSinkClass, map[string]any{"path": "missing/out.txt"}, nil, "path", "does not exist"},
		{FileSinkClass, map[string]any{"path": "."}, nil, "path", "is a directory: want a file"},
		{FileSinkClass, map[string]any{"format": "csv"}, nil, "format", `"csv": want "json" (one JSON object per line) or "tsv"`},
		{FileSinkClass, map[string]any{"fields": []any{}}, nil, "fields", "an empty list (leave it out to write every field)"},
		{FileSinkClass, map[string]any{"fields": []any{"a", "a"}}, nil, "fields", `"a" twice`},
		{FileSinkClass, map[string]any{"sync": "yes"}, nil, "sync", "want true or false"},
		{FileSinkClass, map[string]any{"truncate": 1}, nil, "truncate", "want true or false"},

		// gale.sink.Stdout
		{StdoutSinkClass, map[string]any{"format": "xml"}, nil, "format", `"xml": want "json"`},
		{StdoutSinkClass, map[string]any{"fields": []any{""}}, nil, "fields", "element 0 is empty"},
		{StdoutSinkClass, map[string]any{"path": "out.txt"}, nil, "path", `property "path" is not used (the class reads fields, format)`},
	}
	reg := ioRegistry(t, nil, 0)
	for _, c := range cases {
		props := maps.Clone(base[c.class])
		for k, v := range c.set {
			if v == del {
				delete(props, k)
			} else {
				props[k] = v
			}
		}
		name := c.class + "/" + c.prop + "/" + c.want
		t.Run(name, func(t *testing.T) {
			_, err := reg.Add(topology.NewBuilder(), "c", c.class, component.Spec{Properties: props, Dir: dir, Config: c.config}, 1)
			if err == nil {
				t.Fatalf("%v: built, want refused: %s", props, c.want)
			}
			var se *component.SpecError
			if !errors.As(err, &se) {
				t.Fatalf("%v: %v, want a *component.SpecError", props, err)
			}
			if se.Prop != c.prop {
				t.Errorf("placed at property %q, want %q: %v", se.Prop, c.prop, err)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %q, want it to say %q", err, c.want)
			}
			if !strings.Contains(err.Error(), `component "c" (class "`+c.class+`")`) {
				t.Errorf("error %q does not name the component and class", err)
			}
			for _, secret := range []string{"hunter2", "s3cr3t-token"} {
				if strings.Contains(err.Error(), secret) {
					t.Errorf("error %q echoes the secret", err)
				}
			}
		})
	}
	// Each class with its base options builds: the refusals above are the bad
	// option's, not the base's.
	for class, props := range base {
		if _, err := reg.Add(topology.NewBuilder(), "c", class, component.Spec{Properties: props, Dir: dir}, 1); err != nil {
			t.Errorf("%s with %v: %v", class, props, err)
		}
	}
}

// TestIOClassBadOptionAtItsLine: in a Flux file, a bad option is refused at the
// line and column of its property.
func TestIOClassBadOptionAtItsLine(t *testing.T) {
	dir := t.TempDir()
	doc := `name: bad
spouts:
  - id: lines
    className: gale.spout.JetStream
    properties:
      - name: url
        value: "nats://gale:hunter2@127.0.0.1:4222"
      - {name: stream, value: LINES}
      - {name: durable, value: d}
bolts:
  - id: out
    className: gale.sink.SQL
    properties:
      - {name: url, value: "env:DB"}
      - {name: table, value: t}
      - {name: columns, value: [subject, data]}
      - {name: conflict, value: [seq]}
streams:
  - {from: lines, to: out, grouping: {type: SHUFFLE}}
`
	path := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := flux.Load(path, flux.Options{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = f.Build(ioRegistry(t, nil, 0))
	if err == nil {
		t.Fatal("built, want two refusals")
	}
	for _, want := range []string{
		path + `:6:15: component "lines" (class "gale.spout.JetStream"): invalid spec: property "url": the NATS URL holds credentials`,
		path + `:17:16: component "out" (class "gale.sink.SQL"): invalid spec: property "conflict": sink: table "t": conflict column "seq" is not one of the columns [subject data]`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error:\n%v\nwant it to hold:\n%s", err, want)
		}
	}
	if strings.Contains(err.Error(), "hunter2") {
		t.Errorf("the error echoes the password: %v", err)
	}
}
