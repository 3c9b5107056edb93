package eventlog

import (
	"encoding/binary"
	"testing"
)

// syncChunk is one full WAL sync chunk of log logNum: its promise that the WAL was
// synced up to syncOff, and payload.
func syncChunk(logNum uint32, syncOff uint64, payload []byte) []byte {
	c := make([]byte, walSyncHdr, walSyncHdr+len(payload))
	binary.LittleEndian.PutUint16(c[4:], uint16(len(payload)))
	c[6] = 8 + walPosFull
	binary.LittleEndian.PutUint32(c[7:], logNum)
	binary.LittleEndian.PutUint64(c[11:], syncOff)
	c = append(c, payload...)
	binary.LittleEndian.PutUint32(c[0:], maskedCRC(c[6:]))
	return c
}

// TestWALScanSyncPromiseOfAnyLaterChunk: Pebble's replay confirms corruption when
// any later chunk promises a sync past the bad one, not only the first intact
// chunk after it. The chunk written right after a group can carry the synced
// offset from before that group's sync returned (group commits are pipelined), so
// taking only that chunk's promise called such damage a torn tail: Check said the
// log was intact while Open refused it (TestCheckAndSalvageAfterWALBitFlip/last
// failed that way under load).
func TestWALScanSyncPromiseOfAnyLaterChunk(t *testing.T) {
	const logNum = 6
	payload := make([]byte, 100)
	var b []byte
	b = append(b, syncChunk(logNum, 0, payload)...)
	bad := len(b)
	b = append(b, syncChunk(logNum, uint64(bad), payload)...)
	stale := len(b)
	b = append(b, syncChunk(logNum, uint64(bad), payload)...) // synced up to the bad chunk, not past it
	b = append(b, syncChunk(logNum, uint64(len(b)), payload)...)
	b[bad+walSyncHdr+10] ^= 1

	_, damage := scanWALBytes(b, logNum)
	if len(damage) != 1 {
		t.Fatalf("damage %+v, want one", damage)
	}
	d := damage[0]
	if d.Offset != int64(bad) || d.Resync != int64(stale) || !d.Synced {
		t.Errorf("damage %+v, want offset %d, resync %d, synced (the last chunk promises a sync past it)", d, bad, stale)
	}

	// Without that last promise it is what a power cut leaves: not synced.
	_, damage = scanWALBytes(b[:stale+len(syncChunk(logNum, 0, payload))], logNum)
	if len(damage) != 1 || damage[0].Synced {
		t.Errorf("damage %+v, want one, not synced", damage)
	}
}
