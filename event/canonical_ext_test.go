package event_test

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/gale-stream/gale/event"
)

// reorder writes the JSON object p with its keys in reverse order and extra
// whitespace, keeping each value's text.
func reorder(t *testing.T, p []byte) []byte {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(p))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		t.Fatalf("not an object: %s", p)
	}
	var keys []string
	var vals []json.RawMessage
	for dec.More() {
		k, _ := dec.Token()
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			t.Fatal(err)
		}
		keys, vals = append(keys, k.(string)), append(vals, v)
	}
	var b strings.Builder
	b.WriteString("{ ")
	for i := len(keys) - 1; i >= 0; i-- {
		k, _ := json.Marshal(keys[i])
		b.WriteString("\n\t" + string(k) + " :  " + string(vals[i]))
		if i > 0 {
			b.WriteString(" ,")
		}
	}
	b.WriteString("\n}")
	return []byte(b.String())
}

// TestCanonicalHashRetail: on every real order line, a retry with its keys in
// another order and other whitespace has the same hash; a changed value does not.
func TestCanonicalHashRetail(t *testing.T) {
	evs := retailEvents(t)
	if len(evs) != 7419 {
		t.Fatalf("%d events", len(evs))
	}
	for i := range evs {
		e := evs[i]
		r := e
		r.Payload = reorder(t, e.Payload)
		if bytes.Equal(r.Payload, e.Payload) {
			t.Fatalf("%s: reorder changed nothing", e.ID)
		}
		if e.Hash() != r.Hash() {
			t.Fatalf("%s: %s and reordered %s hash differently", e.ID, e.Payload, r.Payload)
		}
		if e.HashAs(event.HashRaw) == r.HashAs(event.HashRaw) {
			t.Fatalf("%s: the raw rule took other bytes for the same", e.ID)
		}
		c := e
		c.Payload = bytes.Replace(e.Payload, []byte(`"quantity":`), []byte(`"quantity":1`), 1)
		if e.Hash() == c.Hash() {
			t.Fatalf("%s: a changed quantity kept the hash: %s", e.ID, c.Payload)
		}
	}
	// Integers past 2^53, where float64 would make them one.
	a := event.Event{Source: "s", Type: "t", Payload: []byte(`{"n":9007199254740993}`)}
	b := event.Event{Source: "s", Type: "t", Payload: []byte(`{"n":9007199254740992}`)}
	if a.Hash() == b.Hash() {
		t.Error("2^53+1 and 2^53 hash alike")
	}
}

// FuzzCanonical: for any JSON text, the canonical form is JSON with the same value
// as encoding/json decodes it (numbers kept as text), canonicalizing it again
// changes nothing, and encoding/json's own re-encoding of the value (other key
// order, escapes and whitespace) has the same canonical form.
func FuzzCanonical(f *testing.F) {
	for _, s := range []string{`{"b":2,"a":1}`, ` { "a" : [ 1, 2.50 , -0 , 1e3 ] } `, `{"a":1,"a":{"c":3,"b":"\u00e9\n"}}`,
		`"\ud800\udc00\ud800"`, `[null,true,false,"<&>"]`, `{"n":9007199254740993}`, "\"\xff\""} {
		f.Add([]byte(s))
	}
	for _, e := range retailEvents(f)[:20] {
		f.Add([]byte(e.Payload))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := event.AppendCanonical(nil, data)
		if !json.Valid(data) {
			if err == nil {
				t.Fatalf("invalid JSON %q canonicalized to %q", data, c)
			}
			return
		}
		if err != nil {
			t.Fatalf("valid JSON %q: %v", data, err)
		}
		if !json.Valid(c) {
			t.Fatalf("canonical form %q of %q is not JSON", c, data)
		}
		again, err := event.AppendCanonical(nil, c)
		if err != nil || !bytes.Equal(again, c) {
			t.Fatalf("not idempotent: %q → %q → %q (%v)", data, c, again, err)
		}
		v1, v2 := decodeNumbers(t, data), decodeNumbers(t, c)
		if !reflect.DeepEqual(v1, v2) {
			t.Fatalf("values differ: %q is %#v, canonical %q is %#v", data, v1, c, v2)
		}
		var m bytes.Buffer
		enc := json.NewEncoder(&m)
		enc.SetEscapeHTML(data[0]%2 == 0) // either way
		if err := enc.Encode(v1); err != nil {
			t.Fatal(err)
		}
		if c2, err := event.AppendCanonical(nil, bytes.TrimSpace(m.Bytes())); err != nil || !bytes.Equal(c2, c) {
			t.Fatalf("encoding/json's %q has canonical %q, want %q (%v)", m.Bytes(), c2, c, err)
		}
	})
}

func decodeNumbers(t *testing.T, b []byte) any {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("%q: %v", b, err)
	}
	return v
}
