package eventlog

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// One bad data block in an SST costs the keys of that block only: Check counts
// every record in the other blocks of the file as intact and Salvage records as
// lost only the seqs whose records were in the bad block (none if it held
// dedupe entries only). The scan used to skip the rest of the whole SST.
func TestSSTBitFlipLosesOnlyTheDamagedBlock(t *testing.T) {
	for _, kind := range []byte{'d', 'l'} {
		t.Run(string(kind), func(t *testing.T) {
			fs := vfs.NewMem()
			sst, _ := buildSSTStore(t, fs, "data")
			dropReplicas(t, fs, "data") // the SST is the records' only copy
			seps, err := blockSeparators(fs, sst)
			if err != nil {
				t.Fatal(err)
			}
			// The keys written, and the data block each falls in (Pebble's index
			// contract: block i holds sep[i-1] < k <= sep[i]).
			var keys [][]byte
			for i, id := range sstIDs() {
				keys = append(keys, nsKey('d', id), logKey(uint64(i+1)))
			}
			blockOf := func(k []byte) int {
				for i, s := range seps {
					if bytes.Compare(k, s) <= 0 {
						return i
					}
				}
				t.Fatalf("key %q after the last separator", k)
				return -1
			}
			// A block other than the first and last of the file, holding only kind.
			victim := -1
			for i := 1; i < len(seps)-1 && victim < 0; i++ {
				only := true
				n := 0
				for _, k := range keys {
					if blockOf(k) == i {
						n++
						only = only && k[0] == kind
					}
				}
				if only && n > 0 {
					victim = i
				}
			}
			if victim < 0 {
				t.Fatalf("no middle block of %c keys among %d blocks", kind, len(seps))
			}
			var lostSeqs []uint64
			for i := range sstEvents {
				if blockOf(logKey(uint64(i+1))) == victim {
					lostSeqs = append(lostSeqs, uint64(i+1))
				}
			}
			flipDataBlockBit(t, fs, sst, victim)

			rep, err := Check("data", fs)
			if err != nil {
				t.Fatal(err)
			}
			for _, k := range rep.BadKeys {
				t.Logf("check: %s", k)
			}
			t.Logf("check: %d records, missing %v", rep.Records, rep.Missing)
			if len(rep.BadKeys) != 1 || rep.BadKeys[0].File == "" {
				t.Fatalf("bad keys %v, want the one damaged block of %s", rep.BadKeys, sst)
			}
			if want := sstEvents - len(lostSeqs); rep.Records != want {
				t.Fatalf("check counted %d records intact, want %d (block %d of %d held %d)",
					rep.Records, want, victim, len(seps), len(lostSeqs))
			}
			var wantMissing [][2]uint64
			if len(lostSeqs) > 0 {
				wantMissing = [][2]uint64{{lostSeqs[0], lostSeqs[len(lostSeqs)-1]}}
			}
			if fmt.Sprint(rep.Missing) != fmt.Sprint(wantMissing) {
				t.Fatalf("missing %v, want %v", rep.Missing, wantMissing)
			}

			srep, err := Salvage("data", fs, time.Unix(1700000000, 0))
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("salvage: %d keys, lost %+v", srep.Keys, srep.Lost)
			var gotLost [][2]uint64
			for _, lr := range srep.Lost {
				gotLost = append(gotLost, [2]uint64{lr.From, lr.To})
			}
			if fmt.Sprint(gotLost) != fmt.Sprint(wantMissing) {
				t.Fatalf("salvage recorded lost %v, want %v", gotLost, wantMissing)
			}
			inBlock := 0
			for _, k := range keys {
				if blockOf(k) == victim {
					inBlock++
				}
			}
			// Every written key but the block's, plus the committed offset and
			// the status documents of the other SST.
			if min := len(keys) - inBlock + sstEvents; srep.Keys < min {
				t.Fatalf("salvage copied %d keys, want at least %d", srep.Keys, min)
			}
		})
	}
}

// With the SST's index itself unreadable the block cannot be found: the whole
// SST is reported, with its key range, as before.
func TestSSTBadIndexReportsTheWholeSST(t *testing.T) {
	fs := vfs.NewMem()
	sst, _ := buildSSTStore(t, fs, "data")
	r, err := openSST(fs, sst)
	if err != nil {
		t.Fatal(err)
	}
	l, err := r.Layout()
	_ = r.Close()
	if err != nil {
		t.Fatal(err)
	}
	bh := l.Index[0]
	flipBit(t, fs, sst, int64(bh.Offset+bh.Length/2))
	if _, err := blockSeparators(fs, sst); err == nil {
		t.Fatal("the index with a flipped bit read fine")
	}
	rep, err := Check("data", fs)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range rep.BadKeys {
		t.Logf("check: %s", k)
	}
	t.Logf("check: %d records, missing %v, open %v, replica %v, after %d, keys %v", rep.Records, rep.Missing, rep.OpenErr, rep.Replica, rep.AfterDamage, rep.Keys)
	if rep.OpenErr != nil {
		t.Fatalf("the read-only open failed: %v", rep.OpenErr)
	}
	if len(rep.BadKeys) != 1 || rep.BadKeys[0].From != fmt.Sprintf("%q", nsKey('d', "ev-0000")) ||
		rep.BadKeys[0].To != fmt.Sprintf("%q", logKey(sstEvents)) {
		t.Fatalf("bad keys %v, want the whole of %s", rep.BadKeys, sst)
	}
	// Nothing of the SST is read; the records that check still counts come from
	// the mark file's replica of their group (Open would restore them).
	if rep.Keys['l'] != 0 || rep.Keys['d'] != 0 {
		t.Fatalf("keys %v read through an unreadable index", rep.Keys)
	}
}
