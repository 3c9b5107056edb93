package eventlog

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/gale-stream/gale/event"
)

// Check and Salvage are the operator's way out of a log that Open refuses. Both
// read the store through Pebble in read-only mode over a view of the directory in
// which each damaged live WAL ends at the start of the batch its first bad chunk
// belongs to (and the WALs after it are empty), so Pebble opens what is intact,
// whichever live WAL is damaged; the batches after the damage, in that WAL and
// the later ones, are read by scanWAL.

// KeyError is a key range that could not be read (an SST block failing its
// checksum, or a read error), or a value that failed its own check.
type KeyError struct {
	From, To string // keys, quoted; To empty if unknown
	// Lo and Hi are the range's raw keys, where known (an unreadable SST
	// block): String names what they hold, seqs for records, ids for documents.
	Lo, Hi []byte
	File   string // the SST, where known
	Err    error
}

func (e KeyError) String() string {
	s := "key " + e.From
	switch {
	case e.Lo != nil:
		s = keyRange(e.Lo, e.Hi)
	case e.To != "" && e.To != e.From:
		s = "keys " + e.From + ".." + e.To
	}
	if e.File != "" {
		s += " in " + e.File
	}
	msg, _, _ := strings.Cut(e.Err.Error(), "\n") // Pebble appends a stack trace
	if e.Lo != nil {
		// Pebble's message repeats the SST's bounds as raw keys.
		msg = pebbleBounds.ReplaceAllString(msg, "$1")
	}
	return s + ": " + msg
}

var pebbleBounds = regexp.MustCompile(`; bounds: \[.*?\](; details:)`)

// CheckReport is what Check found.
type CheckReport struct {
	Dir         string
	Format      string
	Mark        uint64 // the high-water mark (0 if none or unreadable)
	MarkErr     error  // the mark file is missing from a store that had one, or unreadable
	WAL         []WALFile
	LiveWAL     []string // WAL files Pebble replays
	OpenErr     error    // Pebble refused even the truncated view
	Keys        map[byte]int
	Committed   uint64
	First, Last uint64 // lowest and highest record seq found
	Records     int
	Lost        []LostRange // recorded by an earlier salvage
	Missing     [][2]uint64 // seqs possibly acknowledged (From..max(Mark, Named)) without a record or replica
	Replica     [][2]uint64 // seqs without a record held by a replica in the mark file (a salvage keeps them; Open restores those continuing the log)
	// Named is the highest seq an intact replica or WAL batch names: it may have
	// been answered, so no seq up to it is given out again.
	Named uint64
	// Refused, if not zero, are the acknowledged seqs Pebble's replay would drop
	// at the WAL damage (intact batches follow it): Open refuses, a salvage keeps them.
	Refused       [2]uint64
	BadKeys       []KeyError
	AfterDamage   int // intact batches after a WAL damage (a salvage keeps them)
	AfterDamageTo uint64
	// AfterStatus and AfterCommitted are what those batches write besides
	// records: status documents (set or deleted), and the highest committed
	// offset they set (0: none). On a log Open starts (a torn tail of the newest
	// WAL), Pebble's replay drops them: the committed offset goes back to
	// Committed and those events are processed again.
	AfterStatus    int
	AfterCommitted uint64

	// From is the lowest seq whose record the log still claims: below it only
	// Trim removed records (the dedupe window). It is the first record that is not
	// a kept dead letter, or lower where a dedupe entry or a damaged block of
	// records shows that records below it existed.
	From uint64
	// Unindexed are the seqs of intact records whose id has no dedupe entry (it
	// was in a damaged block): a resend would be taken as new and a lookup
	// answers 404. A salvage rebuilds the entries from the records.
	Unindexed [][2]uint64
}

// Damaged says whether anything acknowledged is missing or unreadable.
func (r *CheckReport) Damaged() bool {
	if r.MarkErr != nil || r.OpenErr != nil || len(r.Missing) > 0 || len(r.BadKeys) > 0 || r.Refused[0] != 0 ||
		len(r.Unindexed) > 0 {
		return true
	}
	newest := newestLive(r.WAL, r.LiveWAL)
	for _, w := range r.WAL {
		if !slices.Contains(r.LiveWAL, w.Name) {
			continue
		}
		for _, d := range w.Damage {
			// Intact chunks after a bad one without a promise that the WAL
			// was synced past it are a torn tail (a power cut writing blocks out
			// of order): not damage, unless acknowledged records are missing.
			// Only the newest WAL can have a torn tail: an older one was
			// closed, and Pebble refuses to start on any damage in it.
			if d.Synced || w.Name != newest {
				return true
			}
		}
	}
	return false
}

// Check reads every WAL chunk, every key and every record of the log in dir
// without modifying it (Pebble read-only; it needs the server stopped).
func Check(dir string, fs vfs.FS) (*CheckReport, error) {
	st, err := inspect(dir, fs)
	if err != nil {
		return nil, err
	}
	defer st.close()
	return st.report, nil
}

type inspection struct {
	report *CheckReport
	fs     vfs.FS // the store's, for reading a damaged SST's index
	db     *pebble.DB
	// after are the intact batches that follow the first damage in live WAL
	// order, which the read-only open does not replay.
	after []walBatch
	// replicas are the intact slots of the mark file holding a group's batch;
	// keep are those holding seqs without a record (a salvage applies them).
	replicas, keep []sideSlot
	// unindexed are the entries, made from the intact records, of the ids
	// whose dedupe entry is unreadable (report.Unindexed): a salvage writes them.
	unindexed []unindexed
}

type unindexed struct {
	id string
	e  Entry
}

func (s *inspection) close() {
	if s.db != nil {
		func() {
			defer func() { _ = recover() }() // a read that panicked may leave references behind
			_ = s.db.Close()
		}()
		s.db = nil
	}
}

func inspect(dir string, fs vfs.FS) (*inspection, error) {
	if fs == nil {
		fs = vfs.Default
	}
	desc, err := peek(fs, dir)
	if err != nil {
		return nil, err
	}
	if !desc.Exists {
		return nil, fmt.Errorf("eventlog: %s holds no log", dir)
	}
	r := &CheckReport{Dir: dir, Format: desc.FormatMajorVersion.String(), Keys: map[byte]int{}}
	mark, replicas, found, err := readSide(fs, dir)
	r.Mark = mark
	switch {
	case err != nil:
		r.MarkErr = err
	case !found && desc.FormatMajorVersion >= formatVersion:
		r.MarkErr = fmt.Errorf("the high-water mark file %s is missing", fs.PathJoin(dir, hwmFile))
	}
	if r.WAL, err = scanWALs(fs, dir); err != nil {
		return nil, err
	}
	st := &inspection{report: r, replicas: replicas, fs: fs}
	db, live, after, err := openView(fs, dir, r.WAL)
	if err != nil && !pebble.IsCorruptionError(err) {
		// Not damage: most often the lock of a running gale serve.
		if lerr := lockedErr(dir, err); lerr != nil {
			return nil, fmt.Errorf("%w (stop gale serve first)", lerr)
		}
		return nil, fmt.Errorf("eventlog: open %s read-only: %w", dir, err)
	}
	if err != nil {
		r.OpenErr = err
		return st, nil
	}
	r.LiveWAL, st.after = live, after
	st.db = db
	for _, b := range st.after {
		r.AfterDamage++
		r.AfterDamageTo = max(r.AfterDamageTo, b.max)
	}
	r.AfterStatus, r.AfterCommitted = batchWrites(st.after)
	st.scan()
	return st, nil
}

// openView opens the store read-only over a view in which the first damaged live
// WAL ends before the batch its damage is in and later WALs are empty, so what
// Pebble replays is a prefix of the history; it returns the live WAL names and
// the intact batches after the damage, in order.
//
// Each damaged WAL ends at a batch boundary (WALDamage.Cut), not at the bad
// chunk: Pebble replays every live WAL but the newest strictly, as a closed WAL
// ends cleanly, and takes one ending inside a batch for corruption ("pebble/record:
// unexpected EOF"), so a view cut inside a batch of an older WAL could not be
// opened at all.
func openView(fs vfs.FS, dir string, wals []WALFile) (*pebble.DB, []string, []walBatch, error) {
	// First pass: learn which WALs are live (Pebble opens only those).
	view := newWALView(fs)
	for _, w := range wals {
		if len(w.Damage) > 0 {
			view.limit[w.Name] = w.Damage[0].Cut
		}
	}
	db, err := openReadOnly(dir, view)
	if err != nil {
		return nil, nil, nil, err
	}
	live := view.openedLogs()
	newest := newestLive(wals, live)
	view2 := newWALView(fs)
	var after []walBatch
	cut := false
	for _, w := range wals {
		if !slices.Contains(live, w.Name) {
			continue
		}
		switch {
		case cut:
			view2.limit[w.Name] = 0
			after = append(after, w.Batches...)
		case len(w.Damage) > 0 && (w.Damage[0].Resync >= 0 || w.Name != newest):
			// Intact chunks after the damage, or later WALs: Pebble would
			// refuse (a closed WAL damaged) or drop them, the scan keeps them.
			cut = true
			view2.limit[w.Name] = w.Damage[0].Cut
			for _, b := range w.Batches {
				if b.off > w.Damage[0].Offset {
					after = append(after, b)
				}
			}
		case len(w.Damage) > 0:
			view2.limit[w.Name] = w.Damage[0].Cut // the newest WAL's tail: nothing after it
		}
	}
	if cut {
		_ = db.Close()
		if db, err = openReadOnly(dir, view2); err != nil {
			return nil, nil, nil, err
		}
	}
	return db, live, after, nil
}

// newestLive is the name of the newest of wals (oldest first) that live holds:
// the one WAL whose tail Pebble's replay may find torn.
func newestLive(wals []WALFile, live []string) string {
	newest := ""
	for _, w := range wals {
		if slices.Contains(live, w.Name) {
			newest = w.Name
		}
	}
	return newest
}

func openReadOnly(dir string, fs vfs.FS) (*pebble.DB, error) {
	return pebble.Open(dir, &pebble.Options{FS: fs, ReadOnly: true, Logger: pebbleLogger{}})
}

// scan reads every key of st.db, checking each value that has a checksum or a
// fixed layout, and the records against the committed offset and the mark.
func (st *inspection) scan() {
	r := st.report
	seqs := map[uint64]bool{}
	var committed uint64 = 1
	// The seqs the dedupe entries name ('d' keys come before the records), and
	// the records whose seq none names: an older generation of an id, or one
	// whose entry was in a damaged block.
	named := map[uint64]bool{}
	var lowest uint64 // the lowest seq a dedupe entry or a damaged block of records holds
	note := func(s uint64) {
		if s != 0 && (lowest == 0 || s < lowest) {
			lowest = s
		}
	}
	var unnamed []unindexed
	scanAll(st.db, st.fs, st.report.Dir, func(k, v []byte) {
		if len(k) == 0 {
			return
		}
		r.Keys[k[0]]++
		switch {
		case k[0] == 'l' && len(k) == 9:
			seq := binary.BigEndian.Uint64(k[1:])
			rec, err := event.Decode(v)
			if err == nil && rec.Seq != seq {
				err = fmt.Errorf("record says seq %d: %w", rec.Seq, event.ErrCorrupt)
			}
			if err != nil {
				r.BadKeys = append(r.BadKeys, KeyError{From: fmt.Sprintf("l/%d", seq), Err: err})
				return
			}
			seqs[seq] = true
			if !named[seq] {
				unnamed = append(unnamed, unindexed{rec.Event.ID,
					Entry{Seq: seq, ReceivedAt: rec.ReceivedAt, Generation: rec.Generation, Hash: rec.Hash}})
			}
			r.Records++
			if r.First == 0 || seq < r.First {
				r.First = seq
			}
			r.Last = max(r.Last, seq)
		case k[0] == 'd':
			e, err := decodeEntry(v)
			if err != nil {
				r.BadKeys = append(r.BadKeys, KeyError{From: fmt.Sprintf("%q", k), Err: err})
				return
			}
			named[e.Seq] = true
			note(e.Seq)
		case bytes.Equal(k, committedKey):
			if len(v) == 8 {
				committed = binary.BigEndian.Uint64(v)
			} else {
				r.BadKeys = append(r.BadKeys, KeyError{From: string(k), Err: fmt.Errorf("%d bytes, want 8: %w", len(v), event.ErrCorrupt)})
			}
		case bytes.HasPrefix(k, lostPrefix):
			var lr LostRange
			if err := json.Unmarshal(v, &lr); err != nil {
				r.BadKeys = append(r.BadKeys, KeyError{From: fmt.Sprintf("%q", k), Err: err})
			} else {
				r.Lost = append(r.Lost, lr)
			}
		}
	}, func(e KeyError) {
		r.BadKeys = append(r.BadKeys, e)
		if from, _, ok := recordSeqs(e.Lo, e.Hi); ok {
			note(from)
		}
	})
	st.unindexed, r.Unindexed = st.resolveUnnamed(unnamed)
	// What Open decides before Pebble replays (preflight): intact batches after
	// a damage, and the records before it end below the mark.
	if resync := st.resyncDamage(); resync && len(st.after) > 0 {
		top := restorableAfter(r.Last, st.replicas, st.after)
		if r.Mark > top && !(&Log{lost: r.Lost}).lostCovers(top+1, r.Mark) {
			r.Refused = [2]uint64{top + 1, max(r.Mark, namedTop(st.replicas, st.after))}
		}
	}
	for _, b := range st.after { // a salvage keeps these
		for s := b.min; s != 0 && s <= b.max; s++ {
			if !seqs[s] {
				seqs[s] = true
				r.Records++
			}
		}
		r.Last = max(r.Last, b.max)
	}
	for _, s := range st.replicas { // by first seq
		// Groups without a record that a replica holds: a salvage keeps them
		// all (Open restores those that continue the log).
		held := false
		for q := s.first; q <= s.last; q++ {
			if !seqs[q] {
				seqs[q], held = true, true
				r.Records++
			}
		}
		if held {
			if n := len(r.Replica); n > 0 && r.Replica[n-1][1]+1 == s.first {
				r.Replica[n-1][1] = s.last
			} else {
				r.Replica = append(r.Replica, [2]uint64{s.first, s.last})
			}
			st.keep = append(st.keep, s)
			r.Last = max(r.Last, s.last)
		}
	}
	r.First = 0 // the lowest of all kept, not only of the records in the intact part
	for q := range seqs {
		if r.First == 0 || q < r.First {
			r.First = q
		}
	}
	r.Named = namedTop(st.replicas, st.after)
	r.Committed = committed
	// Below the committed offset too: a record lost there belonged to a finished
	// event, but it is lost all the same (a sink rebuild would miss it). Only
	// the part Trim removed is left out.
	r.From = committed
	if f := st.firstKept(); f != 0 {
		r.From = min(r.From, f)
	}
	if lowest != 0 {
		r.From = min(r.From, lowest)
	}
	top := max(r.Mark, r.Last, r.Named)
	lg := &Log{lost: r.Lost}
	var from uint64
	for s := r.From; s <= top; s++ {
		if seqs[s] || lg.lostCovers(s, s) {
			if from != 0 {
				r.Missing = append(r.Missing, [2]uint64{from, s - 1})
				from = 0
			}
			continue
		}
		if from == 0 {
			from = s
		}
	}
	if from != 0 {
		r.Missing = append(r.Missing, [2]uint64{from, top})
	}
}

// resyncDamage says whether a live WAL has intact chunks after a damaged one,
// or a live WAL other than the newest is damaged (the later WALs follow it).
func (st *inspection) resyncDamage() bool {
	newest := newestLive(st.report.WAL, st.report.LiveWAL)
	for _, w := range st.report.WAL {
		if !slices.Contains(st.report.LiveWAL, w.Name) {
			continue
		}
		for _, d := range w.Damage {
			if d.Resync >= 0 || w.Name != newest {
				return true
			}
		}
	}
	return false
}

// firstKept is the seq of the first record whose event is not a dead letter, 0 if
// none is: Trim removes finished records oldest first, keeping dead letters only,
// so every record from it on is still claimed.
func (st *inspection) firstKept() (seq uint64) {
	defer func() {
		if recover() != nil {
			seq = 0
		}
	}()
	it, err := st.db.NewIter(&pebble.IterOptions{LowerBound: []byte{'l'}, UpperBound: []byte{'l' + 1}})
	if err != nil {
		return 0
	}
	defer func() { _ = closeIter(it) }()
	for ok := it.First(); ok; ok = it.Next() {
		rec, err := event.Decode(it.Value())
		if err != nil || len(it.Key()) != 9 {
			continue
		}
		if _, c, err := st.db.Get(nsKey(byte(DeadLetter), rec.Event.ID)); err == nil {
			c.Close()
			continue
		}
		return rec.Seq
	}
	return 0
}

// resolveUnnamed keeps, of the records no dedupe entry names, those whose id has
// no readable entry naming that seq or a later one (so not an older generation),
// leaving out ids a lost range names (their newest record is gone: a resend is
// new). It returns the entries to rebuild, one per id (its newest record), and
// the seqs of those records as ranges.
func (st *inspection) resolveUnnamed(unnamed []unindexed) ([]unindexed, [][2]uint64) {
	lostIDs := map[string]bool{}
	for _, lr := range st.report.Lost {
		for _, id := range lr.IDs {
			lostIDs[id] = true
		}
	}
	newest := map[string]int{}
	var out []unindexed
	for _, u := range unnamed {
		if lostIDs[u.id] {
			continue
		}
		if e, ok := getEntry(st.db, u.id); ok && e.Seq >= u.e.Seq {
			continue
		}
		if i, ok := newest[u.id]; ok {
			if out[i].e.Seq < u.e.Seq {
				out[i] = u
			}
			continue
		}
		newest[u.id] = len(out)
		out = append(out, u)
	}
	var seqs []uint64
	for _, u := range out {
		seqs = append(seqs, u.e.Seq)
	}
	slices.Sort(seqs)
	var ranges [][2]uint64
	for _, s := range seqs {
		if n := len(ranges); n > 0 && ranges[n-1][1] == s-1 {
			ranges[n-1][1] = s
		} else {
			ranges = append(ranges, [2]uint64{s, s})
		}
	}
	return out, ranges
}

// getEntry reads the dedupe entry of id; a damaged or missing one is not found.
func getEntry(db *pebble.DB, id string) (e Entry, ok bool) {
	defer func() {
		if recover() != nil {
			e, ok = Entry{}, false
		}
	}()
	return entryOf(db, id)
}

// scanAll calls fn for every key in db, in order. A read error is reported with
// the key range it spans and the scan goes on after it, so one bad block does not
// hide the rest: the range is the data block of the SST (in dir on fs) that holds
// the key after the last good one, found from the SST's index; if that index
// cannot be read, or that block reads fine (the damage is elsewhere), it is the
// whole SST. The scan resumes at a lower bound through the merged iterator, so
// keys of other levels after the range are read; those of other files inside
// the range are skipped with it (a DB iterator cannot leave one file out).
func scanAll(db *pebble.DB, fs vfs.FS, dir string, fn func(k, v []byte), bad func(KeyError)) {
	var lower []byte
	for round := 0; round < 100000; round++ {
		var last []byte
		err := func() (err error) {
			defer recoverPebble(&err)
			it, err := db.NewIter(&pebble.IterOptions{LowerBound: lower})
			if err != nil {
				return err
			}
			defer func() {
				if cerr := closeIter(it); err == nil {
					err = cerr
				}
			}()
			for ok := it.First(); ok; ok = it.Next() {
				v, verr := it.ValueAndErr()
				if verr != nil {
					return fmt.Errorf("value of %q: %w", it.Key(), verr)
				}
				fn(it.Key(), v)
				last = append(last[:0], it.Key()...)
			}
			return it.Error()
		}()
		if err == nil {
			return
		}
		// The damage lies after last: find the SST and its block it is in and
		// go on past it.
		probe := append(slices.Clone(last), 0)
		if last == nil {
			probe = lower
		}
		file, smallest, to := sstAfter(db, fs, dir, probe)
		if bytes.Compare(smallest, probe) > 0 {
			probe = smallest
		}
		from := fmt.Sprintf("%q", probe)
		if to == nil {
			bad(KeyError{From: from, Lo: slices.Clone(probe), File: file, Err: err})
			return
		}
		bad(KeyError{From: from, To: fmt.Sprintf("%q", to), Lo: slices.Clone(probe), Hi: slices.Clone(to), File: file, Err: err})
		lower = append(slices.Clone(to), 0)
	}
}

// closeIter closes it even if Pebble panics doing so (after a panic in a read).
func closeIter(it *pebble.Iterator) (err error) {
	defer recoverPebble(&err)
	return it.Close()
}

// sstAfter is the SST whose key range holds key, or else the first one after it,
// and the key range of its damaged data block that holds key or the first key
// after it: from the key after the previous block's separator to the block's
// separator. If the SST's index cannot be read or that block reads fine, the
// range is the SST's own (smallest and largest user keys).
func sstAfter(db *pebble.DB, fs vfs.FS, dir string, key []byte) (file string, smallest, largest []byte) {
	levels, err := db.SSTables()
	if err != nil {
		return "", nil, nil
	}
	var best *pebble.SSTableInfo
	for _, lv := range levels {
		for i := range lv {
			t := &lv[i]
			if bytes.Compare(t.Largest.UserKey, key) < 0 {
				continue
			}
			if best == nil || bytes.Compare(t.Smallest.UserKey, best.Smallest.UserKey) < 0 ||
				bytes.Compare(t.Smallest.UserKey, key) <= 0 {
				best = t
			}
		}
	}
	if best == nil {
		return "", nil, nil
	}
	file = fmt.Sprintf("%06d.sst", best.FileNum)
	smallest, largest = slices.Clone(best.Smallest.UserKey), slices.Clone(best.Largest.UserKey)
	if fs == nil || best.Virtual {
		return file, smallest, largest
	}
	lo, hi, err := damagedBlock(fs, fs.PathJoin(dir, fmt.Sprintf("%06d.sst", best.BackingSSTNum)), key)
	if err != nil {
		return file, smallest, largest
	}
	if bytes.Compare(lo, smallest) > 0 {
		smallest = lo
	}
	if bytes.Compare(hi, largest) < 0 {
		largest = hi
	}
	return file, smallest, largest
}

// SalvageReport says what Salvage kept and what it recorded lost.
type SalvageReport struct {
	Check   *CheckReport
	Keys    int // keys copied into the fresh store
	Batches int // intact WAL batches after the damage applied on top
	Lost    []LostRange
	OldDir  string // where the damaged store now is
	// Replay, if not 0, is the committed offset the salvage moved back to: the
	// first record below the old offset whose status document is gone or not
	// final (the damage held its newer one), so that event and the later ones
	// are processed again (the sinks absorb repeats; finished ones are skipped).
	Replay uint64
	// Finished is set when this run only finished an earlier salvage that
	// stopped between moving the damaged store aside and moving its copy in.
	Finished bool
	// Replicas are the groups applied from the mark file's replicas (their
	// records had no intact copy in the WAL or SSTs).
	Replicas int

	// Reindexed is the number of dedupe entries rebuilt from intact records
	// (theirs were in a damaged block).
	Reindexed int
}

// Salvage starts the log in dir again from what is intact: it copies every
// readable key, then the intact WAL batches after the damage in their order, into
// a fresh store; records each acknowledged seq range that is not there (with the
// event ids any dedupe entry or status document still names) under m/lost/, and
// sets the new store's mark to the old one so no seq is ever given out twice;
// then moves the damaged store aside (dir.damaged-<time>) and the fresh one into
// its place. The status documents of lost events are removed, so a lookup of
// their ids answers 404 and a resend is taken as new.
func Salvage(dir string, fs vfs.FS, now time.Time) (*SalvageReport, error) {
	if fs == nil {
		fs = vfs.Default
	}
	if done, err := finishInterrupted(fs, dir); err != nil || done {
		return &SalvageReport{Finished: done}, err
	}
	st, err := inspect(dir, fs)
	if err != nil {
		return nil, err
	}
	defer st.close()
	r := st.report
	if r.OpenErr != nil {
		return nil, fmt.Errorf("eventlog: salvage %s: Pebble cannot open even the intact part: %w", dir, r.OpenErr)
	}
	out := &SalvageReport{Check: r}
	tmp := dir + ".salvage"
	if err := removeAll(fs, tmp); err != nil {
		return nil, err
	}
	po := &pebble.Options{FS: fs, Logger: pebbleLogger{}, FormatMajorVersion: formatVersion}
	ndb, err := pebble.Open(tmp, po)
	if err != nil {
		return nil, fmt.Errorf("eventlog: salvage: create %s: %w", tmp, err)
	}
	fail := func(err error) (*SalvageReport, error) {
		_ = ndb.Close()
		return nil, fmt.Errorf("eventlog: salvage %s: %w", dir, err)
	}
	b := ndb.NewBatch()
	scanAll(st.db, st.fs, st.report.Dir, func(k, v []byte) {
		_ = b.Set(k, v, nil)
		out.Keys++
		if b.Len() > 4<<20 {
			_ = b.Commit(pebble.NoSync)
			b = ndb.NewBatch()
		}
	}, func(KeyError) {})
	if err := b.Commit(pebble.NoSync); err != nil {
		return fail(err)
	}
	for _, wb := range st.after {
		nb := ndb.NewBatch()
		if err := nb.SetRepr(slices.Clone(wb.repr)); err != nil {
			return fail(fmt.Errorf("WAL batch at offset %d: %w", wb.off, err))
		}
		if err := ndb.Apply(nb, pebble.NoSync); err != nil {
			return fail(fmt.Errorf("apply WAL batch at offset %d: %w", wb.off, err))
		}
		out.Batches++
	}
	for _, s := range st.keep {
		if _, err := applyReplica(ndb, s.repr); err != nil {
			return fail(fmt.Errorf("seqs %d..%d from %s: %w", s.first, s.last, hwmFile, err))
		}
		out.Replicas++
	}
	lost, err := lostRanges(ndb, r, now)
	if err != nil {
		return fail(err)
	}
	out.Lost = lost
	b = ndb.NewBatch()
	// Dedupe entries of intact records lost with a damaged block: rebuilt from
	// the records (seq, receipt, generation, payload hash), so the ids still
	// answer a lookup and a resend with another payload is a conflict. Not for
	// an id a lost range names: its newest record is gone.
	lostIDs := map[string]bool{}
	for _, lr := range lost {
		for _, id := range lr.IDs {
			lostIDs[id] = true
		}
	}
	var ebuf []byte
	for _, u := range st.unindexed {
		if lostIDs[u.id] {
			continue
		}
		if e, ok := entryOf(ndb, u.id); ok && e.Seq >= u.e.Seq {
			continue // a WAL batch after the damage holds a newer one
		}
		ebuf = encodeEntry(ebuf[:0], u.e)
		_ = b.Set(nsKey('d', u.id), ebuf, nil)
		out.Reindexed++
	}
	top := r.Mark
	for _, lr := range lost {
		doc, _ := json.Marshal(lr)
		_ = b.Set(lostKey(lr.From), doc, nil)
		for _, id := range lr.IDs {
			// Neither may answer for a record that is gone: a dedupe entry would
			// make a resend a duplicate of nothing, a status document would say
			// PERSISTED for ever.
			if e, ok := entryOf(ndb, id); ok && e.Seq >= lr.From && e.Seq <= lr.To {
				_ = b.Delete(nsKey('d', id), nil)
			}
			_ = b.Delete(nsKey(byte(Status), id), nil)
		}
		top = max(top, lr.To)
	}
	if out.Replay, err = replayFrom(ndb); err != nil {
		return fail(err)
	}
	if out.Replay != 0 {
		_ = b.Set(committedKey, binary.BigEndian.AppendUint64(nil, out.Replay), nil)
	}
	if err := b.Commit(pebble.Sync); err != nil {
		return fail(err)
	}
	if err := ndb.Flush(); err != nil {
		return fail(err)
	}
	last, err := lastSeq(ndb)
	if err != nil {
		return fail(err)
	}
	if err := ndb.Close(); err != nil {
		return nil, fmt.Errorf("eventlog: salvage: close %s: %w", tmp, err)
	}
	h, err := createHWM(fs, tmp, max(top, last, r.Named))
	if err != nil {
		return nil, err
	}
	_ = h.close()
	st.close()
	out.OldDir = asideName(fs, dir, now.UTC().Format("20060102T150405Z"))
	if err := fs.Rename(dir, out.OldDir); err != nil {
		return nil, fmt.Errorf("eventlog: salvage: move the damaged store aside: %w", err)
	}
	if err := fs.Rename(tmp, dir); err != nil {
		return nil, fmt.Errorf("eventlog: salvage: move %s to %s (the damaged store is in %s): %w", tmp, dir, out.OldDir, err)
	}
	if err := syncDir(fs, fs.PathDir(dir)); err != nil {
		return nil, fmt.Errorf("eventlog: salvage: sync %s: %w", fs.PathDir(dir), err)
	}
	return out, nil
}

// lostRanges are the acknowledged seqs (committed offset..mark) the fresh store has
// no record of and no earlier salvage recorded, with the event ids that any
// surviving dedupe entry or status document gives for them.
func lostRanges(db *pebble.DB, r *CheckReport, now time.Time) ([]LostRange, error) {
	committed := uint64(1)
	if v, c, err := db.Get(committedKey); err == nil {
		if len(v) == 8 {
			committed = binary.BigEndian.Uint64(v)
		}
		c.Close()
	}
	earlier, err := readLost(db)
	if err != nil {
		return nil, err
	}
	old := &Log{lost: earlier}
	last, err := lastSeq(db)
	if err != nil {
		return nil, err
	}
	top := max(r.Mark, last, r.Named)
	have := func(s uint64) bool {
		_, c, err := db.Get(logKey(s))
		if err == nil {
			c.Close()
			return true
		}
		return false
	}
	var out []LostRange
	reason := damageReason(r)
	// From the lower of the two committed offsets: the check's (the damaged
	// store's view, which named these MISSING) and the copy's, which a later
	// intact batch may have moved past the damage. A record lost below the
	// offset belonged to a finished event, but it is lost all the same.
	if r.Committed > 0 {
		committed = min(committed, r.Committed)
	}
	// And below it, down to where Trim removed records: a record lost there
	// belonged to a finished event, but it is lost all the same.
	if r.From > 0 {
		committed = min(committed, r.From)
	}
	for s := committed; s <= top; s++ {
		if have(s) || old.lostCovers(s, s) {
			continue
		}
		if n := len(out); n > 0 && out[n-1].To == s-1 {
			out[n-1].To = s
		} else {
			out = append(out, LostRange{From: s, To: s, Reason: reason, At: now.UnixNano()})
		}
	}
	if len(out) == 0 {
		return nil, nil
	}
	in := func(seq uint64) int {
		i := sort.Search(len(out), func(i int) bool { return out[i].To >= seq })
		if i < len(out) && out[i].From <= seq {
			return i
		}
		return -1
	}
	ids := make([]map[string]uint64, len(out)) // id -> its seq
	add := func(i int, id string, seq uint64) {
		if ids[i] == nil {
			ids[i] = map[string]uint64{}
		}
		if _, ok := ids[i][id]; !ok { // a dedupe entry's (scanned first) over a document's
			ids[i][id] = seq
		}
	}
	var scanErr error
	scan := func(prefix byte, seqOf func(v []byte) (uint64, bool)) {
		it, err := db.NewIter(&pebble.IterOptions{LowerBound: []byte{prefix}, UpperBound: []byte{prefix + 1}})
		if err != nil {
			scanErr = err
			return
		}
		defer it.Close()
		for ok := it.First(); ok; ok = it.Next() {
			if seq, ok := seqOf(it.Value()); ok {
				if i := in(seq); i >= 0 {
					add(i, string(it.Key()[1:]), seq)
				}
			}
		}
	}
	scan('d', func(v []byte) (uint64, bool) {
		e, err := decodeEntry(v)
		return e.Seq, err == nil
	})
	scan(byte(Status), func(v []byte) (uint64, bool) {
		var doc struct {
			Seq uint64 `json:"seq"`
		}
		return doc.Seq, json.Unmarshal(v, &doc) == nil && doc.Seq != 0
	})
	if scanErr != nil {
		return nil, scanErr
	}
	for i := range out {
		out[i].setIDs(ids[i])
	}
	return out, nil
}

// replayFrom is the seq of the first record below the committed offset whose
// event has no final status (PROCESSED, or a dead letter) in the store, or 0.
func replayFrom(db *pebble.DB) (uint64, error) {
	v, c, err := db.Get(committedKey)
	if err != nil {
		return 0, nil // no offset: everything is replayed anyway
	}
	committed := uint64(1)
	if len(v) == 8 {
		committed = binary.BigEndian.Uint64(v)
	}
	c.Close()
	it, err := db.NewIter(&pebble.IterOptions{LowerBound: []byte{'l'}, UpperBound: logKey(committed)})
	if err != nil {
		return 0, err
	}
	defer it.Close()
	for ok := it.First(); ok; ok = it.Next() {
		r, err := event.Decode(it.Value())
		if err != nil {
			continue // Check reports it; it cannot be replayed
		}
		if _, c, err := db.Get(nsKey(byte(DeadLetter), r.Event.ID)); err == nil {
			c.Close()
			continue
		}
		var doc struct {
			Status     string `json:"status"`
			Seq        uint64 `json:"seq"`
			Generation uint32 `json:"generation"`
		}
		if v, c, err := db.Get(nsKey(byte(Status), r.Event.ID)); err == nil {
			_ = json.Unmarshal(v, &doc)
			c.Close()
		}
		if doc.Seq > r.Seq || doc.Generation > r.Generation {
			continue // a newer generation of the id answers for it
		}
		if doc.Status != "PROCESSED" && doc.Status != "FAILED_FINAL" {
			return r.Seq, nil
		}
	}
	return 0, it.Error()
}

func entryOf(db *pebble.DB, id string) (Entry, bool) {
	v, c, err := db.Get(nsKey('d', id))
	if err != nil {
		return Entry{}, false
	}
	defer c.Close()
	e, err := decodeEntry(v)
	return e, err == nil
}

func lastSeq(db *pebble.DB) (uint64, error) {
	it, err := db.NewIter(&pebble.IterOptions{LowerBound: []byte{'l'}, UpperBound: []byte{'l' + 1}})
	if err != nil {
		return 0, err
	}
	defer it.Close()
	if it.Last() && len(it.Key()) == 9 {
		return binary.BigEndian.Uint64(it.Key()[1:]), nil
	}
	return 0, it.Error()
}

func damageReason(r *CheckReport) string {
	var parts []string
	for _, w := range r.WAL {
		if !slices.Contains(r.LiveWAL, w.Name) {
			continue
		}
		for _, d := range w.Damage {
			parts = append(parts, fmt.Sprintf("WAL %s %s", w.Name, d))
		}
	}
	for _, k := range r.BadKeys {
		parts = append(parts, k.String())
	}
	if r.MarkErr != nil {
		parts = append(parts, r.MarkErr.Error())
	}
	if len(parts) == 0 {
		return "not in the log (no damaged chunk found)"
	}
	return strings.Join(parts, "; ")
}

func removeAll(fs vfs.FS, dir string) error {
	if _, err := fs.Stat(dir); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err := fs.RemoveAll(dir); err != nil {
		return fmt.Errorf("eventlog: remove %s: %w", dir, err)
	}
	return nil
}

// walView is an FS over the store in which some WAL files end early (at the
// first damaged chunk) or are empty, and which notes the WAL files Pebble opens.
type walView struct {
	vfs.FS
	limit  map[string]int64
	mu     sync.Mutex
	opened map[string]bool
}

func newWALView(fs vfs.FS) *walView {
	return &walView{FS: fs, limit: map[string]int64{}, opened: map[string]bool{}}
}

func (v *walView) openedLogs() []string {
	v.mu.Lock()
	defer v.mu.Unlock()
	var out []string
	for n := range v.opened {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

func (v *walView) Open(name string, opts ...vfs.OpenOption) (vfs.File, error) {
	f, err := v.FS.Open(name, opts...)
	if err != nil || !strings.HasSuffix(name, ".log") {
		return f, err
	}
	v.mu.Lock()
	v.opened[name] = true
	v.mu.Unlock()
	if n, ok := v.limit[name]; ok {
		return &shortFile{File: f, n: n}, nil
	}
	return f, nil
}

// shortFile reads as if the file ended at n.
type shortFile struct {
	vfs.File
	n, off int64
}

func (f *shortFile) Read(p []byte) (int, error) {
	if f.off >= f.n {
		return 0, io.EOF
	}
	p = p[:min(int64(len(p)), f.n-f.off)]
	k, err := f.File.ReadAt(p, f.off)
	f.off += int64(k)
	if err == io.EOF && f.off < f.n {
		return k, err
	}
	if err == io.EOF {
		err = nil
	}
	return k, err
}

func (f *shortFile) ReadAt(p []byte, off int64) (int, error) {
	if off >= f.n {
		return 0, io.EOF
	}
	short := int64(len(p)) > f.n-off
	if short {
		p = p[:f.n-off]
	}
	k, err := f.File.ReadAt(p, off)
	if err == nil && short {
		err = io.EOF
	}
	return k, err
}

func (f *shortFile) Stat() (vfs.FileInfo, error) {
	fi, err := f.File.Stat()
	if err != nil {
		return nil, err
	}
	return shortInfo{fi, f.n}, nil
}

type shortInfo struct {
	vfs.FileInfo
	n int64
}

func (s shortInfo) Size() int64 { return s.n }

// Exists reports whether dir holds a log (a Pebble store), without creating or
// changing anything: tools that only read a log use it to refuse a mistyped
// directory instead of opening a fresh, empty log there.
func Exists(dir string, fs vfs.FS) (bool, error) {
	if fs == nil {
		fs = vfs.Default
	}
	desc, err := peek(fs, dir)
	if err != nil {
		return false, err
	}
	return desc.Exists, nil
}
