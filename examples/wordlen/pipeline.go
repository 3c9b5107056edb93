package main

// The serve pipeline: `wordlen serve` takes events at POST /v1/events and writes,
// for each, one row (event_id, words, letters) of its payload's text.
//
//	log spout ──shuffle──▶ sink (1 task: insert-once into line_lengths)

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/gale-stream/gale/ingest"
	"github.com/gale-stream/gale/server"
	"github.com/gale-stream/gale/sink"
	"github.com/gale-stream/gale/topology"
	"github.com/gale-stream/gale/tuple"
)

// PipelineName is the serve pipeline's name. It cannot be "wordlen": a pipeline
// also runs on the cluster's workers as a topology of its own name, and the
// topology has that one.
const PipelineName = "wordlen-events"

// LineLengths is the sink's table: insert-once by event_id, so a replayed event
// (at-least-once) or a resent one writes nothing more.
var LineLengths = sink.Table{Name: "line_lengths", Mode: sink.InsertOnce, Conflict: []string{"event_id"},
	Columns: []string{"event_id", "words", "letters"}}

// pipeline is the serve pipeline. An event's payload is {"text": "..."}.
func pipeline() server.Pipeline {
	return server.Pipeline{
		Name: PipelineName,
		Doc:  "the words and letters of each event's payload text, one row per event_id in line_lengths",
		Schema: func(sink.Dialect) []string {
			return []string{`CREATE TABLE IF NOT EXISTS line_lengths (
	event_id TEXT PRIMARY KEY,
	words BIGINT NOT NULL,
	letters BIGINT NOT NULL
)`}
		},
		SinkComponents: []string{"sink"},
		Build: func(p server.Parts) (server.Built, error) {
			b := topology.NewBuilder()
			b.SetSpout("events", p.Spout, 1).Output(ingest.SpoutFields...)
			so := p.SinkOptions() // the database, counters, health and bounds serve gives
			so.Tables, so.Rows = []sink.Table{LineLengths}, rows
			d, err := sink.SetBolt(b, "sink", 1, so)
			if err != nil {
				return server.Built{}, err
			}
			d.ShuffleGrouping("events")
			topo, err := b.Build()
			return server.Built{Topology: topo}, err
		},
	}
}

// rows maps a log spout tuple to its row. A payload without a text string is an
// error: the event fails, is retried, and ends FAILED_FINAL (a dead letter).
func rows(t *tuple.Tuple) ([]sink.Row, error) {
	rec, err := ingest.SpoutRecord(t)
	if err != nil {
		return nil, err
	}
	var p struct {
		Text *string `json:"text"`
	}
	if err := json.Unmarshal(rec.Event.Payload, &p); err != nil {
		return nil, fmt.Errorf("event %s: payload: %w", rec.Event.ID, err)
	}
	if p.Text == nil {
		return nil, errors.New("event " + rec.Event.ID + `: payload has no "text" string`)
	}
	words, letters := Count(*p.Text)
	return []sink.Row{{Table: LineLengths.Name, Values: []any{rec.Event.ID, int64(words), int64(letters)}}}, nil
}
