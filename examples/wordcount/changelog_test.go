package wordcount

import (
	"strings"
	"testing"
)

// A changelog message decodes to the occurrences appended, in order, whatever the
// deltas' signs (a replayed line's occurrences come after later ones); a message
// that is not format 1, or is cut short, is refused.
func TestChangelogEncoding(t *testing.T) {
	type rec struct {
		occ  uint64
		word string
	}
	recs := []rec{{OccurrenceID(0, 3), "the"}, {OccurrenceID(2, 1<<39), "élan"}, {OccurrenceID(0, 7), "x"},
		{OccurrenceID(1<<24-1, 1<<40-1), strings.Repeat("a", 300)}, {0, ""}}
	enc := []byte{changelogVersion}
	var prev uint64
	for _, r := range recs {
		enc = appendOccurrence(enc, prev, r.occ, r.word)
		prev = r.occ
	}
	var got []rec
	if err := decodeChangelog(enc, func(occ uint64, word string) { got = append(got, rec{occ, word}) }); err != nil {
		t.Fatal(err)
	}
	if len(got) != len(recs) {
		t.Fatalf("decoded %d records, want %d", len(got), len(recs))
	}
	for i := range recs {
		if got[i] != recs[i] {
			t.Fatalf("record %d: %v, want %v", i, got[i], recs[i])
		}
	}
	for _, bad := range [][]byte{nil, {2}, enc[:len(enc)-1], append([]byte{changelogVersion}, 0x80)} {
		if err := decodeChangelog(bad, func(uint64, string) {}); err == nil {
			t.Errorf("%x accepted", bad)
		}
	}
}
