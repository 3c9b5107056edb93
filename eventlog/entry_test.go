package eventlog

import (
	"testing"

	"github.com/gale-stream/gale/event"
)

// An index entry keeps its hash's rule; one of 52 bytes, as the version before
// hash rules wrote it, is read as the raw-byte rule.
func TestEntryHashRule(t *testing.T) {
	e := event.Event{Source: "s", Type: "t", Payload: []byte(`{"b":1,"a":2}`)}
	for _, h := range []event.ContentHash{e.Hash(), e.HashAs(event.HashRaw)} {
		in := Entry{Seq: 7, ReceivedAt: 8, Generation: 1, Hash: h}
		b := encodeEntry(nil, in)
		if got, err := decodeEntry(b); err != nil || got != in {
			t.Errorf("rule %d: %+v %v", h.Rule, got, err)
		}
	}
	old := Entry{Seq: 7, ReceivedAt: 8, Hash: e.HashAs(event.HashRaw)}
	b := encodeEntry(nil, old)[:52]
	if got, err := decodeEntry(b); err != nil || got != old {
		t.Errorf("a 52-byte entry: %+v %v", got, err)
	}
	b = encodeEntry(nil, old)
	b[52] = 200
	if _, err := decodeEntry(b); err == nil {
		t.Error("an unknown rule decoded")
	}
}
