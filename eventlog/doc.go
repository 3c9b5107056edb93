// Package eventlog is gale's durable event log: ingested events in sequence, stored in
// an embedded Pebble database, with group commit and a sticky sync error.
//
// # The promise
//
// Append returns only after the Pebble batch holding the record was committed with
// pebble.Sync, i.e. after the WAL fsync that covers it returned. Concurrent appends
// share one sync (group commit): a single writer goroutine takes every append waiting
// at that moment, writes them as one batch and syncs once, so throughput follows the
// number of concurrent callers rather than the disk's flushes per second.
//
// A record is visible to readers (Read, Durable) only once durable: Pebble makes a
// write readable before its sync returns, so readers are bounded by the durable
// sequence number, which advances after the sync.
//
// A failed commit is sticky (PostgreSQL's "fsyncgate" rule; Pebble's own WAL writer
// keeps its f.err the same way): every append in that batch and every later one gets
// an error wrapping ErrFailed, nothing is reported durable again, and the process must
// reopen the log, which recovers what is actually on disk.
//
// # Layout
//
//	l<seq:8 BE>        event.Record (CRC-32C checked on read)
//	d<event id>        dedupe index entry: seq, receipt time, generation, content hash
//	m/committed        the committed offset: every seq below it is finished
//	s<event id>        processing status document (owned by package ingest)
//	x<event id>        dead letter (owned by package ingest)
//
// The dedupe entry of an event is written in the same atomic batch as its record, so
// it can never be durable without the record (the NATS #6415 lesson) nor the reverse.
//
// Open scans the records from the committed offset to the end and verifies each
// checksum: a corrupt record is reported by sequence number and Open fails, rather
// than truncating the good records that follow it.
//
// # Corruption
//
// A damaged SST block is an error, never a panic: reads that meet it return a
// *CorruptError (wrapping event.ErrCorrupt, naming the file and its key range),
// Pebble's DataCorruption and background-error reports are recorded the same way
// (Damaged, DamagedFiles, Corrupted), and from then on the log takes no new
// records. Open checks every block checksum of every SST and refuses a damaged
// store with the CorruptError, so a restart does not crash-loop on it.
package eventlog
