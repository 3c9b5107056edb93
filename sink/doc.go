// Package sink writes tuples to a SQL database (SQLite or PostgreSQL, over
// database/sql) idempotently, as the last bolt of a topology.
//
// A sink bolt turns each input into rows (Options.Rows), buffers them, and writes a
// batch in one transaction when it is full (Options.BatchRows) or old enough
// (Options.BatchDelay, on tick tuples). It acks a batch's inputs only after COMMIT
// returned nil. If the batch is rolled back because of a row, its inputs are written
// again one transaction each, so a row the database refuses fails only its own input
// (the others commit and are acked). When the cause is the database as a whole (full,
// read-only, damaged, locked, unreachable, shutting down: a sink outage) no input is
// failed: the bolt holds them, retries with backoff until the database takes the
// writes, and tells a Health, which the ingest spout and readiness read. A tuple tree
// that completes means its rows are committed, and a failed one is replayed by the
// spout.
// Replays are why every write is idempotent (seed 004):
//
//   - InsertOnce tables keep the first row per key (INSERT ... ON CONFLICT DO
//     NOTHING): an event replayed or retried with the same event id is written once,
//     and the extra copies are counted as duplicates.
//   - VersionedUpsert tables keep the newest version per key (INSERT ... ON CONFLICT
//     DO UPDATE ... WHERE excluded.version > stored version): versions arriving out of
//     order, or again, never overwrite a newer one; they are counted as stale.
//
// Use it so:
//
//	db, err := sink.Open(ctx, "postgres://gale:secret@db:5432/gale") // or "sqlite:events.db"
//	...
//	opts := sink.Options{
//		DB: db,
//		Tables: []sink.Table{{Name: "events", Columns: []string{"event_id", "type", "payload"},
//			Conflict: []string{"event_id"}, Mode: sink.InsertOnce}},
//		Rows: func(t *tuple.Tuple) ([]sink.Row, error) { // t: a log spout tuple (ingest.SpoutFields)
//			return []sink.Row{{Table: "events", Values: []any{t.StringByField("event_id"), t.StringByField("type"),
//				string(t.ValueByField("payload").([]byte))}}}, nil
//		},
//	}
//	d, err := sink.SetBolt(builder, "sink", 1, opts) // declares TickEvery(BatchDelay)
//	...
//	d.ShuffleGrouping("ingest")
//
// The tables must exist, with a unique key on each Table's Conflict columns; the sink
// runs no DDL.
package sink
