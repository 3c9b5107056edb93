package eventlog

import (
	"encoding/binary"
	"testing"
)

// A damaged block of sync-time entries is named by the seqs of its groups, not
// shown as raw bytes (found by the break-it pass on `gale log check`).
func TestKeyRangeNamesSyncTimes(t *testing.T) {
	key := func(seq uint64) []byte {
		k := []byte{syncPrefix}
		return binary.BigEndian.AppendUint64(k, seq)
	}
	if got, want := keyRange(key(96), key(260)), "group sync times of groups ending at seq 96..260"; got != want {
		t.Fatalf("keyRange = %q, want %q", got, want)
	}
}
