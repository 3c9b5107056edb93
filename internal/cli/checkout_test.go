package cli

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/gale-stream/gale/eventlog"
)

// A store Pebble cannot open (a damaged MANIFEST) does not make its WALs
// "obsolete": which are replayed is not known.
func TestLogCheckWALLivenessNotKnownWhenUnopened(t *testing.T) {
	unopened := &eventlog.CheckReport{Dir: "data/log", OpenErr: errors.New("pebble: corrupt manifest"),
		WAL: []eventlog.WALFile{{Name: "data/log/000011.log", Size: 600000}}}
	var out bytes.Buffer
	printCheck(&out, unopened)
	if strings.Contains(out.String(), "obsolete") || !strings.Contains(out.String(), "not known") {
		t.Fatalf("gale log check of a store Pebble cannot open calls its WALs obsolete:\n%s", out.String())
	}
}

// A WAL before the newest was closed: damage at its end is not a torn tail.
func TestLogCheckClosedWALDamagedTail(t *testing.T) {
	older, newest := "data/log/000010.log", "data/log/000011.log"
	r := &eventlog.CheckReport{Dir: "data/log", Keys: map[byte]int{}, LiveWAL: []string{older, newest},
		WAL: []eventlog.WALFile{
			{Name: older, Size: 3293640, Damage: []eventlog.WALDamage{{Offset: 3293600, Cut: 3293600, Resync: -1, Reason: "chunk of log 12, not 10"}}},
			{Name: newest, Size: 1484546},
		}}
	var out bytes.Buffer
	printCheck(&out, r)
	if !r.Damaged() || !strings.Contains(out.String(), older+": live, 3293640 bytes, 0 intact batches: DAMAGED") ||
		strings.Contains(out.String(), "torn") {
		t.Fatalf("damaged=%v, gale log check of a closed WAL damaged at its end:\n%s", r.Damaged(), out.String())
	}
}

// What gale log check prints must agree with what gale serve and gale log
// salvage do. A torn tail of the newest WAL with intact batches after it that
// hold status documents and the committed offset: serve starts and drops them,
// salvage refuses the log as intact, so check must not call them "kept by a
// salvage" and must report their loss as a result of its own (exit 0: no
// acknowledged record is missing).
func TestLogCheckOutputAgreesWithServeAndSalvage(t *testing.T) {
	wal := "data/log/000011.log"
	torn := &eventlog.CheckReport{
		Dir: "data/log", Mark: 7418, Named: 7419, Keys: map[byte]int{'l': 7419, 's': 6129},
		WAL: []eventlog.WALFile{{Name: wal, Size: 600000,
			Damage: []eventlog.WALDamage{{Offset: 491520, Cut: 480000, Resync: 500000, Reason: "checksum mismatch"}}}},
		LiveWAL: []string{wal}, Records: 7419, First: 1, Last: 7419, Committed: 6003,
		AfterDamage: 3, AfterStatus: 1290, AfterCommitted: 7420,
	}
	if torn.Damaged() {
		t.Fatal("a torn tail with no record missing is damaged")
	}
	var out bytes.Buffer
	printCheck(&out, torn)
	result, code := checkResult(torn, "data")
	if code != 0 || strings.Contains(out.String(), "kept by a salvage") || !strings.Contains(out.String(), "dropped by the next start") ||
		!strings.Contains(result, "WRITES LOST") || !strings.Contains(result, "1290 status documents") ||
		!strings.Contains(result, "committed offset 7420 (it goes back to 6003)") || strings.Contains(result, "result: intact") {
		t.Fatalf("gale log check of a torn tail dropping status writes (exit %d):\n%s%s", code, out.String(), result)
	}

	damaged := *torn
	damaged.Missing = [][2]uint64{{5001, 5500}}
	out.Reset()
	printCheck(&out, &damaged)
	if result, code := checkResult(&damaged, "data"); code != 1 || !strings.Contains(out.String(), "kept by a salvage") || !strings.Contains(result, "DAMAGED") {
		t.Fatalf("gale log check of a damaged log (exit %d):\n%s%s", code, out.String(), result)
	}
}

// The newest WAL's last batch damaged before the log's EOF trailer: the WAL was
// closed after the damage, so it is not a torn write, and a start drops the
// batch. Check says so, as a result of its own (exit 0: serve starts).
func TestLogCheckDamageBeforeEOFTrailer(t *testing.T) {
	wal := "data/log/000011.log"
	r := &eventlog.CheckReport{
		Dir: "data/log", Mark: 7419, Keys: map[byte]int{'l': 7419, 's': 7341},
		WAL: []eventlog.WALFile{{Name: wal, Size: 1484546,
			Damage: []eventlog.WALDamage{{Offset: 1436568, Cut: 1436568, Resync: -1, Closed: true, Reason: "checksum mismatch"}}}},
		LiveWAL: []string{wal}, Records: 7419, First: 1, Last: 7419, Committed: 7014,
	}
	var out bytes.Buffer
	printCheck(&out, r)
	result, code := checkResult(r, "data")
	if r.Damaged() || code != 0 || !strings.Contains(out.String(), "DAMAGED at offset 1436568") || strings.Contains(out.String(), "ends at offset") ||
		!strings.Contains(result, "WRITES LOST") || !strings.Contains(result, "before its EOF trailer") || strings.Contains(result, "--force") {
		t.Fatalf("gale log check of a damaged batch before the EOF trailer (damaged=%v, exit %d):\n%s%s", r.Damaged(), code, out.String(), result)
	}
}
