// Package events is the generic pipeline of `gale serve`: every ingested event is
// written once to an events table (insert-once by event_id) and, when it carries a
// business key and a version, to an entities table that keeps the newest version per
// key (versioned upsert: an older version arriving later changes nothing).
//
//	log spout ──shuffle──▶ sink (1 task: one writer per key)
//
// The spout's tuples carry the record's parts as plain values (ingest.SpoutFields);
// Rows reads them back by name with ingest.SpoutRecord. The sink task keeps its own
// batch; the database is where the results go.
package events

import (
	"errors"
	"fmt"

	"github.com/gale-stream/gale/ingest"
	"github.com/gale-stream/gale/server"
	"github.com/gale-stream/gale/sink"
	"github.com/gale-stream/gale/topology"
	"github.com/gale-stream/gale/tuple"
)

// Component ids of the topology.
const (
	SpoutID = "events"
	SinkID  = "sink"
)

// Pipeline is the pipeline gale serve runs by default (--pipeline events): Build
// over the parts the server hands it, the tables of Schema. Its one sink task is
// the only writer, pinned to the serve process with an SQLite sink on a cluster.
func Pipeline() server.Pipeline {
	return server.Pipeline{
		Name:           "events",
		Doc:            "every event to a table, the newest version per key to another",
		Schema:         func(sink.Dialect) []string { return Schema() },
		SinkComponents: []string{SinkID},
		Build: func(p server.Parts) (server.Built, error) {
			topo, err := Build(p.Spout, p.SinkOptions())
			return server.Built{Topology: topo}, err
		},
	}
}

// Tables.
var (
	EventsTable = sink.Table{Name: "events", Mode: sink.InsertOnce, Conflict: []string{"event_id"},
		Columns: []string{"event_id", "source", "type", "key", "version", "payload", "seq", "received_at_unix_nano"}}
	EntitiesTable = sink.Table{Name: "entities", Mode: sink.VersionedUpsert, Conflict: []string{"key"}, Version: "version",
		Columns: []string{"key", "version", "event_id", "type", "payload"}}
)

// Schema creates the tables (IF NOT EXISTS); the SQL fits SQLite and PostgreSQL.
func Schema() []string {
	return []string{
		`CREATE TABLE IF NOT EXISTS events (
	event_id TEXT PRIMARY KEY,
	source TEXT NOT NULL,
	type TEXT NOT NULL,
	key TEXT,
	version BIGINT,
	payload TEXT NOT NULL,
	seq BIGINT NOT NULL,
	received_at_unix_nano BIGINT NOT NULL
)`,
		`CREATE TABLE IF NOT EXISTS entities (
	key TEXT PRIMARY KEY,
	version BIGINT NOT NULL,
	event_id TEXT NOT NULL,
	type TEXT NOT NULL,
	payload TEXT NOT NULL
)`,
	}
}

// Rows maps a log spout tuple (fields ingest.SpoutFields) to its rows: the events
// row, and the entities row if the event has a key and a version.
func Rows(t *tuple.Tuple) ([]sink.Row, error) {
	rec, err := ingest.SpoutRecord(t)
	if err != nil {
		return nil, fmt.Errorf("events: %w", err)
	}
	e := &rec.Event
	var key, version any
	if e.Key != "" {
		key = e.Key
	}
	if e.Version != nil {
		version = *e.Version
	}
	rows := []sink.Row{{Table: EventsTable.Name, Values: []any{e.ID, e.Source, e.Type, key, version,
		string(e.Payload), int64(rec.Seq), rec.ReceivedAt}}}
	if e.Key != "" && e.Version != nil {
		rows = append(rows, sink.Row{Table: EntitiesTable.Name, Values: []any{e.Key, *e.Version, e.ID, e.Type, string(e.Payload)}})
	}
	return rows, nil
}

// Build returns the pipeline reading from spout (the ingest log spout) into the
// sink so configures (DB required; Counters, Health, MessageTimeout, GiveUpAfter...
// as sink.Options says). Build sets its Tables and Rows.
func Build(spout func() topology.Spout, so sink.Options) (*topology.Topology, error) {
	if spout == nil || so.DB == nil {
		return nil, errors.New("events: spout and db are required")
	}
	so.Tables, so.Rows = []sink.Table{EventsTable, EntitiesTable}, Rows
	b := topology.NewBuilder()
	b.SetSpout(SpoutID, spout, 1).Output(ingest.SpoutFields...)
	d, err := sink.SetBolt(b, SinkID, 1, so)
	if err != nil {
		return nil, fmt.Errorf("events: %w", err)
	}
	d.ShuffleGrouping(SpoutID)
	return b.Build()
}
