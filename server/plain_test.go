package server_test

import (
	"context"
	"fmt"
	"os"
	"testing"

	"github.com/gale-stream/gale/event"
	"github.com/gale-stream/gale/ingest"
	"github.com/gale-stream/gale/internal/plaintest"
	"github.com/gale-stream/gale/pipelines/events"
	"github.com/gale-stream/gale/pipelines/orders"
	. "github.com/gale-stream/gale/server"
	"github.com/gale-stream/gale/topology"
)

// Both pipelines of gale serve carry only plain values in their tuples (issue 11):
// every tuple their bolts receive, from the log spout on, while real events go
// through the API: events with and without key and version for the events pipeline,
// the first day of testdata/retail for the orders pipeline.
func TestServePipelinesCarryPlainValues(t *testing.T) {
	day, err := os.Open("../testdata/retail/2010-12-01.csv")
	if err != nil {
		t.Fatal(err)
	}
	lines, err := orders.ReadCSV(day, day.Name())
	day.Close()
	if err != nil {
		t.Fatal(err)
	}
	var devices []event.Event
	for i := range 50 {
		e := event.Event{ID: fmt.Sprintf("dev-%d", i), Source: "devices", Type: "device_command", Payload: []byte(`{"celsius":21}`)}
		if i%2 == 0 {
			v := int64(i)
			e.Key, e.Version = fmt.Sprintf("pump-%d", i%7), &v
		}
		devices = append(devices, e)
	}
	for _, tc := range []struct {
		pipeline Pipeline
		evs      []event.Event
		table    string
	}{{events.Pipeline(), devices, "events"}, {orders.Pipeline(), lines, "order_lines"}} {
		t.Run(tc.pipeline.Name, func(t *testing.T) {
			var report *plaintest.Report
			s, err := start(context.Background(), WithTap(Options{Addr: "127.0.0.1:0", DataDir: t.TempDir(), Pipeline: tc.pipeline},
				func(topo *topology.Topology) { report = plaintest.Tap(topo) }))
			if err != nil {
				t.Fatal(err)
			}
			defer s.Shutdown(context.Background())
			c := &ingest.Client{URL: s.URL()}
			for evs := tc.evs; len(evs) > 0; {
				n := min(len(evs), 500)
				answers, _, err := c.Send(context.Background(), evs[:n], ingest.LevelProcessed, 0)
				if err != nil {
					t.Fatal(err)
				}
				for _, a := range answers {
					if a.Status != ingest.Processed {
						t.Fatalf("%+v", a)
					}
				}
				evs = evs[n:]
			}
			var rows int
			if err := s.DB.SQL.QueryRow(`SELECT count(*) FROM ` + tc.table).Scan(&rows); err != nil || rows != len(tc.evs) {
				t.Fatalf("%s: %d rows, %v; want %d", tc.table, rows, err, len(tc.evs))
			}
			if err := report.Err(); err != nil {
				t.Fatal(err)
			}
			t.Logf("%d tuples checked", report.Tuples())
		})
	}
}
