package eventlog

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/sstable"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/gale-stream/gale/event"
)

// CorruptError is damage found in one of the store's files: a block whose checksum
// fails, met by a read, a compaction or Open's check of every table. It wraps
// event.ErrCorrupt and Pebble's report. Once one is found the log takes no new
// records (Submit and Append return it), Damaged reports it, and Open refuses to
// start the store until an operator deals with the file (gale log check).
type CorruptError struct {
	// File is the damaged file's path ("" when Pebble did not say).
	File string
	// Keys is the key range the file holds, i.e. what may be lost (e.g.
	// `d"ev-1" .. l#400`), when known.
	Keys string
	// Op is what met the damage ("open: check of every table", "lookup of ...").
	Op  string
	Err error
}

func (e *CorruptError) Error() string {
	file := e.File
	if file == "" {
		file = "a file Pebble did not name"
	}
	s := "eventlog: on-disk corruption in " + file
	if e.Keys != "" {
		s += " (keys " + e.Keys + ")"
	}
	if e.Op != "" {
		s += ", met by " + e.Op
	}
	return s + ": " + e.detail()
}

// detail is Pebble's message, without the line of the carrier of the corruption's
// details that it joins to its error (whose text says only that).
func (e *CorruptError) detail() string {
	return strings.TrimSuffix(e.Err.Error(), "\n<corruption detail carrier>")
}

// Unwrap lets errors.Is match event.ErrCorrupt and Pebble's own error.
func (e *CorruptError) Unwrap() []error { return []error{event.ErrCorrupt, e.Err} }

// Damage is a damaged file as the log has met it so far.
type Damage struct {
	File    string
	Keys    string
	Reports uint64 // corruption reports naming this file (reads, compactions, checks)
	First   *CorruptError
}

// damage records the corruption Pebble reports (its DataCorruption event, read
// errors, background errors). Pebble's default for DataCorruption is
// Logger.Fatalf, which our logger turns into a panic: at Open (loadIDs) that
// crashed the start, on a compaction goroutine it crashed the process at every
// start, and in an HTTP handler it dropped the connection. Here it is a report.
type damage struct {
	fs     vfs.FS
	logger *slog.Logger

	mu    sync.Mutex
	files map[string]*Damage
	order []string // files in the order first met
	ch    chan struct{}
	gate  *compactionGate
}

func newDamage(fs vfs.FS, logger *slog.Logger) *damage {
	if fs == nil {
		fs = vfs.Default
	}
	return &damage{fs: fs, logger: logger, files: map[string]*Damage{}, ch: make(chan struct{})}
}

// listener is the Pebble EventListener: corruption is recorded, never fatal.
func (d *damage) listener() *pebble.EventListener {
	return &pebble.EventListener{
		DataCorruption: func(info pebble.DataCorruptionInfo) {
			d.note(&CorruptError{File: info.Path, Keys: formatKeys(info.Bounds.Start, info.Bounds.End.Key),
				Op: "a read of the file", Err: info.Details}, true)
		},
		BackgroundError: func(err error) {
			if pebble.IsCorruptionError(err) {
				// Its DataCorruption event was counted already (when Pebble named
				// the file); a failed compaction is retried and reports again.
				d.note(corruptionOf("a background compaction or flush", err), false)
				return
			}
			if d.logger != nil {
				d.logger.Error("pebble background error", "component", "pebble", "err", err.Error())
			}
		},
	}
}

// corruptionOf is err (a Pebble corruption error) as a CorruptError naming the
// file Pebble attached to it.
func corruptionOf(op string, err error) *CorruptError {
	ce := &CorruptError{Op: op, Err: err}
	if info := pebble.ExtractDataCorruptionInfo(err); info != nil {
		ce.File, ce.Keys = info.Path, formatKeys(info.Bounds.Start, info.Bounds.End.Key)
	}
	return ce
}

// note records ce; count says whether it is a new report (not one already counted
// through the DataCorruption event). The first report of a file is logged.
func (d *damage) note(ce *CorruptError, count bool) {
	d.mu.Lock()
	f, ok := d.files[ce.File]
	if !ok {
		f = &Damage{File: ce.File, Keys: ce.Keys, First: ce}
		d.files[ce.File] = f
		d.order = append(d.order, ce.File)
		if len(d.order) == 1 {
			close(d.ch)
		}
		count = true
	}
	if count {
		f.Reports++
	}
	d.mu.Unlock()
	if !ok && d.logger != nil {
		d.logger.Error("eventlog: on-disk corruption; the log takes no new events until an operator runs `gale log check`",
			"file", ce.File, "keys", ce.Keys, "met_by", ce.Op, "err", ce.detail()) // a string: %+v of Pebble's error is a stack trace
	}
}

func (d *damage) first() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.order) == 0 {
		return nil
	}
	return d.files[d.order[0]].First
}

// Damaged is nil while no corruption has been met, else the first CorruptError
// (wrapping event.ErrCorrupt, naming the file). Readiness reports it.
func (l *Log) Damaged() error { return l.dmg.first() }

// Corrupted is closed when the first corruption is met.
func (l *Log) Corrupted() <-chan struct{} { return l.dmg.ch }

// DamagedFiles lists the damaged files met so far, in the order met.
func (l *Log) DamagedFiles() []Damage {
	d := l.dmg
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make([]Damage, 0, len(d.order))
	for _, f := range d.order {
		out = append(out, *d.files[f])
	}
	return out
}

// Flush writes what Pebble holds in memory to SST files (tests place keys in SSTs
// with it).
func (l *Log) Flush() error {
	if err := l.db.Flush(); err != nil {
		return l.readErr("flush", err)
	}
	return nil
}

// readErr wraps an error of a read path: a corruption becomes a CorruptError
// (recorded, so readiness and metrics see it), anything else names op.
func (l *Log) readErr(op string, err error) error {
	if err == nil {
		return nil
	}
	if pebble.IsCorruptionError(err) {
		ce := corruptionOf(op, err)
		// Pebble's DataCorruption event counted it if it named the file.
		l.dmg.note(ce, ce.File == "")
		return ce
	}
	return fmt.Errorf("eventlog: %s: %w", op, err)
}

// checkStore verifies the checksum of every block of every live SST, so a damaged
// store refuses to start, naming the file and its keys, instead of serving until a
// read or a compaction meets the damage. It reads each file once, sequentially,
// outside the block cache. Tables written while it runs (flushes, compactions,
// whose inputs were verified as they were read) are checked too. A corruption that
// Pebble itself met meanwhile (a compaction at Open) fails it as well. Every
// damaged table is named (errors.Join of *CorruptError), not just the first.
func (l *Log) checkStore(dir string) error {
	checked := map[uint64]bool{}
	var errs []error
	for {
		levels, err := l.db.SSTables()
		if err != nil {
			return fmt.Errorf("eventlog: check: listing tables: %w", err)
		}
		fresh := 0
		for _, files := range levels {
			for _, f := range files {
				n := uint64(f.BackingSSTNum)
				if checked[n] {
					continue
				}
				checked[n], fresh = true, fresh+1
				path := filepath.Join(dir, fmt.Sprintf("%06d.sst", n))
				var ro sstable.ReaderOptions
				ro.CacheOpts.FileNum = f.BackingSSTNum // so Pebble's message names the file
				if err := l.dmg.checkTable(path, formatKeys(f.Smallest.UserKey, f.Largest.UserKey), ro); err != nil {
					if errors.Is(err, os.ErrNotExist) {
						continue // compacted away since the listing: its outputs are listed next
					}
					errs = append(errs, err)
				}
			}
		}
		if fresh == 0 {
			break
		}
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	return l.Damaged()
}

// CheckSST verifies every block checksum of the SST file at path (fs nil: the
// operating system's), outside any cache: nil, or a *CorruptError naming the
// file, or the error that kept it from being read as a table. For gale log
// check, which may list the store's tables itself.
func CheckSST(fs vfs.FS, path string) error {
	return newDamage(fs, nil).checkTable(path, "", sstable.ReaderOptions{})
}

// checkTable verifies every block checksum of the SST at path.
func (d *damage) checkTable(path, keys string, ro sstable.ReaderOptions) error {
	f, err := d.fs.Open(path)
	if err != nil {
		return err
	}
	readable, err := sstable.NewSimpleReadable(f)
	if err != nil {
		_ = f.Close()
		return fmt.Errorf("eventlog: check of %s: %w", path, err)
	}
	r, err := sstable.NewReader(context.Background(), readable, ro)
	if err == nil {
		err = r.ValidateBlockChecksums()
		_ = r.Close()
	} else {
		_ = readable.Close()
	}
	if err == nil {
		return nil
	}
	ce := &CorruptError{File: path, Keys: keys, Op: "open: check of every table", Err: err}
	if !pebble.IsCorruptionError(err) {
		// Not a checksum but the file cannot be read as a table either.
		return fmt.Errorf("eventlog: check of %s: %w", path, err)
	}
	d.note(ce, true)
	return ce
}

// formatKeys shows a key range in the log's layout: l#seq for records, the kind
// and quoted id for the others.
func formatKeys(lo, hi []byte) string {
	if lo == nil && hi == nil {
		return ""
	}
	return formatKey(lo) + " .. " + formatKey(hi)
}

func formatKey(k []byte) string {
	switch {
	case len(k) == 0:
		return `""`
	case k[0] == 'l' && len(k) == 9:
		return "l#" + strconv.FormatUint(binary.BigEndian.Uint64(k[1:]), 10)
	case k[0] == 'd' || k[0] == 's' || k[0] == 'x':
		return string(k[0]) + strconv.Quote(string(k[1:]))
	}
	return strconv.Quote(string(k))
}

// openErr is an error of Open's recovery, as a CorruptError when Pebble met
// corruption (so the start's refusal names the file), joined with what the check
// of every table finds besides (so it names every damaged file).
func (l *Log) openErr(err error, dir string) error {
	var ce *CorruptError
	if !errors.As(err, &ce) {
		if !pebble.IsCorruptionError(err) {
			return err
		}
		ce = corruptionOf("open: recovery", err)
		l.dmg.note(ce, ce.File == "")
	}
	errs := []error{ce}
	// From the directory, not DB.SSTables: after an iterator met corruption
	// during Open, Pebble v2.1.7's SSTables panics ("zombie object not found").
	for _, e := range l.dmg.checkDir(dir) {
		var other *CorruptError
		if !errors.As(e, &other) || other.File != ce.File {
			errs = append(errs, e)
		}
	}
	return errors.Join(errs...)
}

// refuseDamaged is the error for a new record while the store is damaged: Pebble
// cannot compact the damaged file away, so writes would pile up behind it, and
// the operator must first see what is lost.
func (l *Log) refuseDamaged() error {
	if err := l.Damaged(); err != nil {
		return fmt.Errorf("eventlog: taking no new records: %w", err)
	}
	return nil
}

// compactionGate is Pebble's default compaction scheduler (a concurrency limit
// taken from the DB, granting on Done and every 100ms) that grants nothing once
// the store is damaged. Pebble retries a compaction that failed on corruption at
// once and without end (its own TODO: "count consecutive compaction errors and
// backoff"): measured about 1,400 attempts a second on a small store, each
// reading its inputs up to the bad block again. No compaction can get past the
// damage, so a damaged store gets none; flushes still run, and reads are served.
type compactionGate struct {
	dmg  *damage
	poke chan struct{} // a grant is worth trying (UpdateGetAllowedWithoutPermission)
	stop chan struct{}
	done chan struct{}

	mu           sync.Mutex
	cond         *sync.Cond // signalled when granting ends
	db           pebble.DBForCompaction
	running      int
	granting     bool
	unregistered bool
}

func (d *damage) compactionGate() *compactionGate {
	g := &compactionGate{dmg: d, poke: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	g.cond = sync.NewCond(&g.mu)
	d.gate = g
	return g
}

func (d *damage) damaged() bool {
	select {
	case <-d.ch:
		return true
	default:
		return false
	}
}

// Register implements pebble.CompactionScheduler.
func (g *compactionGate) Register(_ int, db pebble.DBForCompaction) {
	g.db = db
	go g.periodic()
}

func (g *compactionGate) periodic() {
	defer close(g.done)
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-t.C:
		case <-g.poke:
		case <-g.stop:
			return
		}
		g.mu.Lock()
		g.grantAndUnlock()
	}
}

// Unregister implements pebble.CompactionScheduler.
func (g *compactionGate) Unregister() {
	close(g.stop)
	<-g.done
	g.mu.Lock()
	defer g.mu.Unlock()
	g.unregistered = true
	for g.granting {
		g.cond.Wait()
	}
}

// TrySchedule implements pebble.CompactionScheduler (called under the DB's mutex;
// GetAllowedWithoutPermission takes none).
func (g *compactionGate) TrySchedule() (bool, pebble.CompactionGrantHandle) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.unregistered || g.dmg.damaged() || g.db.GetAllowedWithoutPermission() <= g.running {
		return false, nil
	}
	g.running++
	return true, g
}

// UpdateGetAllowedWithoutPermission implements pebble.CompactionScheduler. Pebble
// calls it holding its mutex, which granting needs: the periodic goroutine grants.
func (g *compactionGate) UpdateGetAllowedWithoutPermission() {
	select {
	case g.poke <- struct{}{}:
	default:
	}
}

// grantAndUnlock grants the compactions the DB waits for, up to its limit
// (g.mu held on entry, released on return). GetWaitingCompaction and Schedule
// take the DB's mutex, so they are called without g.mu, one granter at a time.
func (g *compactionGate) grantAndUnlock() {
	defer g.mu.Unlock()
	for g.granting {
		g.cond.Wait()
	}
	if g.unregistered || g.dmg.damaged() {
		return
	}
	toGrant := g.db.GetAllowedWithoutPermission() - g.running
	if toGrant <= 0 {
		return
	}
	g.granting = true
	g.mu.Unlock()
	for ; toGrant > 0; toGrant-- {
		if waiting, _ := g.db.GetWaitingCompaction(); !waiting {
			break
		}
		if !g.db.Schedule(g) {
			break
		}
		g.mu.Lock()
		g.running++
		g.mu.Unlock()
	}
	g.mu.Lock()
	g.granting = false
	g.cond.Broadcast()
}

// Started, MeasureCPU, CumulativeStats and Done implement
// pebble.CompactionGrantHandle.
func (g *compactionGate) Started()                                          {}
func (g *compactionGate) MeasureCPU(pebble.CompactionGoroutineKind)         {}
func (g *compactionGate) CumulativeStats(pebble.CompactionGrantHandleStats) {}
func (g *compactionGate) Done() {
	g.mu.Lock()
	g.running--
	g.grantAndUnlock()
}

// checkDir checks every SST file in dir (see checkStore) and returns the damage
// found. It may check a table Pebble no longer uses but has not deleted yet.
func (d *damage) checkDir(dir string) []error {
	names, err := d.fs.List(dir)
	if err != nil {
		return []error{fmt.Errorf("eventlog: check: listing %s: %w", dir, err)}
	}
	sort.Strings(names)
	var errs []error
	for _, name := range names {
		if !strings.HasSuffix(name, ".sst") {
			continue
		}
		if err := d.checkTable(filepath.Join(dir, name), "", sstable.ReaderOptions{}); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errs
}
