package event

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"testing"
)

func canon(t *testing.T, s string) string {
	t.Helper()
	c, err := AppendCanonical(nil, []byte(s))
	if err != nil {
		t.Fatalf("AppendCanonical(%s): %v", s, err)
	}
	return string(c)
}

// TestCanonicalForms: what one canonical form stands for, and what stays apart.
func TestCanonicalForms(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`{"b":2,"a":1}`, `{"a":1,"b":2}`},
		{" {\n\t\"a\" : [ 1 , 2 ,{ } ,[ ]] ,\r\n \"b\":null } ", `{"a":[1,2,{},[]],"b":null}`},
		{`{"z":{"y":true,"x":false},"a":"s"}`, `{"a":"s","z":{"x":false,"y":true}}`},
		{`{"a":1,"a":2}`, `{"a":2}`}, // the last of a key given twice, as encoding/json
		{`{"a":2,"b":0,"a":1}`, `{"a":1,"b":0}`},
		// Keys of more than 8 bytes given twice: the duplicate must go however the
		// sort moves them (the fuzzer's find: the second write-out read keys it had
		// already overwritten, and kept both).
		{`{"000000000":"","":"","000000000":""}`, `{"":"","000000000":""}`},
		{`{"longer-key":1,"a":0,"longer-key":2,"longer-key":3}`, `{"a":0,"longer-key":3}`},
		{`{"zzzzzzzzzz":1,"yyyyyyyyyy":2,"zzzzzzzzzz":3,"yyyyyyyyyy":4}`, `{"yyyyyyyyyy":4,"zzzzzzzzzz":3}`},
		{`"\u0041\/\u00e9\ud83d\ude00"`, `"A/é😀"`},
		{`"\"\\\b\f\n\r\t\u0001\u001F"`, `"\"\\\b\f\n\r\t\u0001\u001f"`},
		{`"<&>\u003c\u0026\u003e\u2028"`, "\"<&><&>\u2028\""},
		{`"\ud800x"`, "\"\ufffdx\""}, // a lone surrogate, as encoding/json
		{"\"\xffa\"", "\"\ufffda\""},
		{`9007199254740993`, `9007199254740993`}, // 2^53+1: no float64 on the way
		{`[1.0,1,1e2,1E2,-0,0.10]`, `[1.0,1,1e2,1E2,-0,0.10]`},
		{`{"\u0062":1,"a":2}`, `{"a":2,"b":1}`}, // keys compare decoded
	} {
		if got := canon(t, tc.in); got != tc.want {
			t.Errorf("%s: canonical %s, want %s", tc.in, got, tc.want)
		}
	}
	for _, bad := range []string{``, `{`, `{"a"}`, `{"a":1,}`, `[1,]`, `01`, `1.`, `-`, `tru`, `"a`, "\"\x01\"", `{} {}`, `"\x"`, `"\u12"`} {
		if c, err := AppendCanonical(nil, []byte(bad)); err == nil {
			t.Errorf("%q: canonical %q, want an error", bad, c)
		}
	}
	if _, err := AppendCanonical(nil, bytes.Repeat([]byte("["), maxCanonicalDepth+1)); err == nil {
		t.Error("nesting beyond the limit accepted")
	}
}

// TestHashRules: the canonical hash is the raw rule's concatenation over the
// canonical payload; both rules are shown with their own prefix.
func TestHashRules(t *testing.T) {
	a := Event{Source: "s", Type: "t", Payload: []byte(`{"b":2, "a":1}`)}
	b := Event{Source: "s", Type: "t", Payload: []byte(`{"a":1,"b":2}`)}
	if a.Hash() != b.Hash() || a.Hash().Rule != HashCanonical {
		t.Errorf("reordered keys: %v and %v", a.Hash(), b.Hash())
	}
	if a.HashAs(HashRaw) == b.HashAs(HashRaw) {
		t.Error("the raw rule took reordered bytes for the same")
	}
	if b.Hash().Sum != b.HashAs(HashRaw).Sum { // b is already canonical
		t.Error("canonical hash of a canonical payload is not the raw one's sum")
	}
	if s := a.Hash().String(); len(s) != len("c1:sha256:")+16 || s[:10] != "c1:sha256:" {
		t.Errorf("canonical hash shown %q", s)
	}
	if s := a.HashAs(HashRaw).String(); len(s) != len("sha256:")+16 || s[:7] != "sha256:" {
		t.Errorf("raw hash shown %q", s)
	}
	for _, s := range []string{a.Hash().String(), a.HashAs(HashRaw).String()} {
		if r, ok := HashRuleOf(s); !ok || s != a.HashAs(r).String() {
			t.Errorf("HashRuleOf(%q) = %v %v", s, r, ok)
		}
	}
	if _, ok := HashRuleOf("md5:0123"); ok {
		t.Error("an unknown prefix was given a rule")
	}
	// A stored raw hash matches a byte-identical retry only.
	stored := a.HashAs(HashRaw)
	if !stored.Matches(&a, a.Hash()) || stored.Matches(&b, b.Hash()) {
		t.Error("raw stored hash: wrong matches")
	}
	if !MatchesString(stored.String(), &a, a.Hash()) || MatchesString(stored.String(), &b, b.Hash()) {
		t.Error("raw stored hash string: wrong matches")
	}
	if !MatchesString(a.Hash().String(), &b, b.Hash()) {
		t.Error("canonical stored hash string does not match reordered keys")
	}
}

// TestRecordFormats: a record keeps its hash's rule; a record of format 1 (before
// rules) decodes with HashRaw.
func TestRecordFormats(t *testing.T) {
	e := Event{ID: "x", Source: "s", Type: "t", Payload: []byte(`{"a":1}`)}
	for _, h := range []ContentHash{e.Hash(), e.HashAs(HashRaw)} {
		r := Record{Seq: 3, ReceivedAt: 4, Hash: h, Event: e}
		got, err := Decode(r.Encode(nil))
		if err != nil || got.Hash != h {
			t.Errorf("rule %d: decoded %v %v", h.Rule, got.Hash, err)
		}
	}
	// Format 1 as the previous version wrote it: no rule byte after the hash.
	r := Record{Seq: 3, ReceivedAt: 4, Hash: e.HashAs(HashRaw), Event: e}
	v2 := r.Encode(nil)
	at := 5 + binary.PutUvarint(make([]byte, 10), 3) + binary.PutVarint(make([]byte, 10), 4) + 1 + 32
	v1 := append(append([]byte{1, 0, 0, 0, 0}, v2[5:at]...), v2[at+1:]...)
	binary.LittleEndian.PutUint32(v1[1:], crc32.Checksum(v1[5:], castagnoli))
	got, err := Decode(v1)
	if err != nil || got.Hash != r.Hash || got.Event.ID != "x" || string(got.Event.Payload) != `{"a":1}` {
		t.Fatalf("format 1: %+v %v", got, err)
	}
	// An unknown rule is damage, not a hash to compare.
	bad := append([]byte(nil), v2...)
	bad[at] = 9
	binary.LittleEndian.PutUint32(bad[1:], crc32.Checksum(bad[5:], castagnoli))
	if _, err := Decode(bad); err == nil {
		t.Error("a record with an unknown hash rule decoded")
	}
}
