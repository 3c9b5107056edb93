package main

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
