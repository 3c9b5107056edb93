package ingest

import (
	"reflect"
	"strings"
	"testing"

	"github.com/gale-stream/gale/event"
	"github.com/gale-stream/gale/internal/plaintest"
	"github.com/gale-stream/gale/tuple"
)

// A log record goes out as plain values, one per SpoutFields name, and SpoutRecord
// gives it back (but its hash, which stays in the log), with and without a version.
func TestSpoutValuesRoundTrip(t *testing.T) {
	src := &tuple.Source{Component: "log", Stream: tuple.DefaultStream, Fields: tuple.NewFields(SpoutFields...)}
	v := int64(7)
	for _, rec := range []event.Record{
		{Seq: 12, ReceivedAt: 1_700_000_000_123, Generation: 2, Hash: event.ContentHash{Rule: event.HashCanonical, Sum: [32]byte{1}},
			Event: event.Event{ID: "pump-7:7", Source: "devices", Type: "device_command", Key: "pump-7", Version: &v, Payload: []byte(`{"setpoint":70}`)}},
		{Seq: 1, Event: event.Event{ID: "e1", Source: "s", Type: "t", Payload: []byte(`{}`)}},
	} {
		vals := SpoutValues(&rec)
		if len(vals) != len(SpoutFields) {
			t.Fatalf("%d values for %d fields", len(vals), len(SpoutFields))
		}
		for i, x := range vals {
			if err := plaintest.PlainValue(x); err != nil {
				t.Errorf("field %s: %v", SpoutFields[i], err)
			}
		}
		got, err := SpoutRecord(tuple.New(src, 1, vals))
		want := rec
		want.Hash = event.ContentHash{}
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("SpoutRecord = %+v, %v\nwant %+v", got, err, want)
		}
	}
	bad := SpoutValues(&event.Record{Seq: 3, Event: event.Event{ID: "e3"}})
	bad[4] = "7" // version
	if _, err := SpoutRecord(tuple.New(src, 1, bad)); err == nil || !strings.Contains(err.Error(), `field "version" of a tuple from log is string`) {
		t.Errorf("a string version: %v", err)
	}
	short := &tuple.Source{Component: "log", Stream: tuple.DefaultStream, Fields: tuple.NewFields("event_id", "record")}
	if _, err := SpoutRecord(tuple.New(short, 1, tuple.Values{"e4", nil})); err == nil || !strings.Contains(err.Error(), `no field "source"`) {
		t.Errorf("an old-style tuple: %v", err)
	}
}
