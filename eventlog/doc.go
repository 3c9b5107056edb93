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
// Before Append returns, the group is also durable in GALE-HWM, a file of its own
// beside Pebble's (hwm.go): the writer puts each group in a slot of it (seq range,
// the highest seq answered so far, and the group's Pebble batch, CRC'd) before the
// WAL write, and the slot is made durable with the WAL; the answer waits for both.
// On ext4 (markflush_linux.go, markfs.go) the slot rides the WAL's flush: each
// WAL sync first writes the mark's dirty pages to the device beside the WAL's and
// waits for them, and the WAL's fdatasync then flushes the device cache, covering
// both. Elsewhere the slot gets its own fdatasync, concurrent with the WAL's. The highest floor of an intact slot is the high-water mark Open
// checks; a replica's own range is restored when the WAL ends short of it, but
// never claimed (a slot written and not synced can survive a power cut whose WAL
// lost the group before it, neither answered). A group whose batch is over 64 KiB
// (large NDJSON batches) gets its range only, written after its WAL sync returned
// and synced before its answer, as a serial mark: its fsync is shared by many
// events. Cost on ext4, in 30 alternating pairs of `gale bench ingest --rows 2,3`
// against ffbb1f7, the build before the mark: single-event PERSISTED answers/s
// 1.03x (median; geometric mean 0.97x), the raw group-commit row of the same runs
// 0.94x; with the slot's own fdatasync it was 0.89x to 0.91x, with the serial mark
// for every group 0.81x (docs/performance.md).
//
// A record is visible to readers (Read, Durable) only once durable: Pebble makes a
// write readable before its sync returns, so readers are bounded by the durable
// sequence number, which advances after the sync and the mark.
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
//	m/lost/<from:8 BE> a seq range a salvage recorded lost (JSON LostRange)
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
// # Media faults (a flipped bit, a torn or lost block)
//
// An acknowledged record is never lost silently and its seq is never given out
// again. The store is kept at a Pebble format whose WAL chunks carry the offset
// the WAL was synced to (FormatWALSyncChunks or newer; older stores are ratcheted
// at Open), so a bad chunk before a later chunk's synced offset is corruption and
// Pebble refuses to open, where older formats took it for the WAL's end. A damaged
// last record has no later chunk to vouch for it: its replica restores it.
// Open fails with an error wrapping ErrDamaged, naming the missing seqs and the WAL
// file and offset (from an independent scan of the WAL before Pebble replays it),
// whenever Pebble finds its WAL corrupt, records between the committed offset and
// the mark are missing, or the mark is unreadable or gone from a store that had it.
// Pebble's own check reads ahead only from the next 32 KiB block, and once open it
// flushes what it replayed and retires the WAL, so Open refuses first, before
// Pebble writes anything, when intact chunks follow a bad one and either a later
// chunk promises the WAL was synced past it or the records before it end below the
// mark: the intact batches after the damage are kept for a salvage. A damaged,
// torn or lost last group is not refused but restored from its replica, as are
// the groups after it that replicas hold, when no other batch follows the
// damage. A crash or power cut alone never makes Open fail: what they lose was
// not answered, and an intact replica of a group that was synced only in the
// mark file is restored rather than claimed.
//
// The named seqs: the newest answered group is covered by no floor, only by its
// replica, and a WAL batch after a damage may be the only copy of an answered
// group. So every seq an intact replica or an intact WAL batch after a damage
// names counts as possibly answered: the next seq is above max(mark, last
// record, those), since a seq given out twice is worse than a gap; Check's
// MISSING, the refusal and a salvage's lost ranges run up to it; Salvage keeps
// every replica holding seqs with no other copy; what has no record is recorded
// lost with the ids known. A start that is not refused (the named seqs all past
// the mark, as a power cut can leave an unanswered group's slot intact while the
// slot before it tore) records them lost itself, with the ids the replicas name:
// the client resends, and the resend is a new event.
//
// Pebble keeps several live WALs until it flushes, and replays all but the
// newest strictly (a closed WAL ends cleanly): damage in an older one always
// refuses. A torn tail of the newest WAL that Open accepts (no acknowledged
// record missing) still loses the intact batches after it, which Pebble drops:
// Open logs a WARN naming the status documents and committed offset they held,
// and so it does for a damaged batch followed by the WAL's EOF trailer (closed,
// and synced, after the damage: not a torn write).
//
// Check reads every WAL chunk, key and record without writing, and says what is
// intact. Salvage is the deliberate way out: it copies what is intact (and the
// intact WAL batches after the damage, in whichever live WAL it is, and the
// replicas that continue them) into a fresh store, moves the damaged one
// aside, records the lost seq ranges with every event id a dedupe entry or status
// document still names (Log.Lost; ingest serves them at GET /v1/lost), and keeps
// the mark, so new records get seqs above every acknowledged one.
//
// What is not covered: damage to the WAL of a store's first Open after an upgrade
// from a format without synced offsets (that WAL was written before the ratchet),
// a group's WAL batch and its slot in the mark file damaged at once, and SST
// damage, which Pebble reports as read errors (Check names the SST and key range;
// Salvage skips that range).
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
