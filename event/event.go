// Package event holds what gale's ingest path carries: an Event as a producer sends it,
// its validation, and the binary Record the durable log stores for it.
//
// An event is keyed by its EventID, chosen by the producer and stable across retries
// (seed 004: "the same business event retried ten times keeps one id"). Key and Version
// are optional: a business key and an integer that grows per key, for sinks that keep
// only the newest version of an entity (versioned upsert).
package event

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// MaxIDLen is the longest accepted EventID, in bytes.
const MaxIDLen = 128

// ErrInvalid is wrapped by every validation error, so callers can map it to a 400.
var ErrInvalid = errors.New("invalid event")

// Event is one event as a producer sends it (the JSON body of POST /v1/events).
type Event struct {
	// ID is the idempotency key: at most MaxIDLen bytes of printable ASCII.
	ID string `json:"event_id"`
	// Source names the producer; an ack-level default may be set per source.
	Source string `json:"source"`
	// Type names what happened (e.g. "order_line", "device_command").
	Type string `json:"type"`
	// Key is the optional business key (e.g. an order id).
	Key string `json:"key,omitempty"`
	// Version is optional; when set it grows per Key, and a versioned-upsert sink
	// applies an event only if its version is newer than the stored one.
	Version *int64 `json:"version,omitempty"`
	// Payload is a JSON object, kept byte for byte as sent.
	Payload json.RawMessage `json:"payload"`
}

// FieldError says which field of an event is wrong. It wraps ErrInvalid.
type FieldError struct {
	Field  string
	Reason string
}

func (e *FieldError) Error() string { return fmt.Sprintf("field %q: %s", e.Field, e.Reason) }

// Unwrap makes errors.Is(err, ErrInvalid) true.
func (e *FieldError) Unwrap() error { return ErrInvalid }

// Parse decodes one JSON event and validates it. Keys are exact-case: a key that is
// not one of event_id, source, type, key, version and payload, including one of them
// in other case ("Event_ID"), is refused with an error naming it (a typo such as
// "eventid" would otherwise lose the id, and a case-folding match would let
// "EVENT_ID" and "event_id" in one object fight over the id). Each key may appear
// once. Errors wrap ErrInvalid; a *FieldError names the field.
func Parse(data []byte) (Event, error) {
	if !utf8.Valid(data) {
		// Checked first: decoding would replace bad bytes with U+FFFD, and two
		// different keys could become one.
		return Event{}, fmt.Errorf("%w: not valid UTF-8", ErrInvalid)
	}
	e, err := parseFast(data)
	if err != nil {
		return e, err
	}
	return e, e.Validate()
}

// parseStd is Parse on encoding/json, kept as the reference the fast parser is
// tested against.
func parseStd(data []byte) (Event, error) {
	if !utf8.Valid(data) {
		return Event{}, fmt.Errorf("%w: not valid UTF-8", ErrInvalid)
	}
	var e Event
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&e); err != nil {
		return Event{}, jsonError(err)
	}
	if dec.More() {
		return Event{}, fmt.Errorf("%w: more than one JSON value (use /v1/events:batch for many)", ErrInvalid)
	}
	// encoding/json matches keys case-insensitively (DisallowUnknownFields too); the
	// API's keys are exact-case, checked here as the fast parser does.
	var keys map[string]json.RawMessage
	if err := json.Unmarshal(data, &keys); err != nil {
		return Event{}, jsonError(err)
	}
	for k := range keys {
		known := false
		for _, f := range fields {
			known = known || k == f
		}
		if !known {
			return Event{}, unknownField(k)
		}
	}
	return e, e.Validate()
}

func jsonError(err error) error {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) && te.Field != "" {
		return &FieldError{Field: te.Field, Reason: fmt.Sprintf("must be %s, not JSON %s", goKind(te.Type.String()), te.Value)}
	}
	return fmt.Errorf("%w: malformed JSON: %v", ErrInvalid, err)
}

func goKind(t string) string {
	switch t {
	case "string":
		return "a string"
	case "int64", "*int64":
		return "an integer"
	case "json.RawMessage":
		return "a JSON object"
	}
	return t
}

// Validate checks the rules of the API: event_id, source, type and payload are
// required; event_id is printable ASCII of at most MaxIDLen bytes; payload is a JSON
// object; version, when given, is not negative.
func (e *Event) Validate() error {
	switch {
	case e.ID == "":
		return &FieldError{"event_id", "required"}
	case len(e.ID) > MaxIDLen:
		return &FieldError{"event_id", fmt.Sprintf("%d bytes, at most %d allowed", len(e.ID), MaxIDLen)}
	}
	for i := 0; i < len(e.ID); i++ {
		if c := e.ID[i]; c < 0x21 || c > 0x7e {
			return &FieldError{"event_id", fmt.Sprintf("byte %d (0x%02x) is not printable ASCII", i, c)}
		}
		if e.ID[i] == '/' {
			// Ids appear in URL paths (GET /v1/events/{id}), where "/" segments
			// are cleaned and redirected, so such an id could never be looked up.
			return &FieldError{"event_id", fmt.Sprintf("byte %d is '/', which ids may not contain", i)}
		}
	}
	if e.ID == "." || e.ID == ".." {
		return &FieldError{"event_id", fmt.Sprintf("%q cannot appear in a URL path", e.ID)}
	}
	if e.Source == "" {
		return &FieldError{"source", "required"}
	}
	if e.Type == "" {
		return &FieldError{"type", "required"}
	}
	for _, f := range []struct{ name, v string }{{"source", e.Source}, {"type", e.Type}, {"key", e.Key}} {
		if len(f.v) > 256 {
			return &FieldError{f.name, fmt.Sprintf("%d bytes, at most 256 allowed", len(f.v))}
		}
		if !utf8.ValidString(f.v) {
			return &FieldError{f.name, "not valid UTF-8"}
		}
		for i := 0; i < len(f.v); i++ {
			if f.v[i] < 0x20 || f.v[i] == 0x7f {
				// Control characters (NUL above all) cannot be stored in a
				// PostgreSQL TEXT column: refused here, not at the sink.
				return &FieldError{f.name, fmt.Sprintf("control character 0x%02x at byte %d", f.v[i], i)}
			}
		}
	}
	if e.Version != nil && *e.Version < 0 {
		return &FieldError{"version", fmt.Sprintf("%d is negative", *e.Version)}
	}
	if e.Version != nil && e.Key == "" {
		return &FieldError{"key", "required when version is given"}
	}
	p := bytes.TrimSpace(e.Payload)
	if len(p) == 0 || string(p) == "null" {
		return &FieldError{"payload", "required"}
	}
	if p[0] != '{' {
		return &FieldError{"payload", "must be a JSON object"}
	}
	if !utf8.Valid(p) {
		return &FieldError{"payload", "not valid UTF-8"}
	}
	if hasNULEscape(p) {
		// JSON allows it, but PostgreSQL's text and jsonb do not.
		return &FieldError{"payload", `contains \u0000 (NUL), which SQL sinks cannot store`}
	}
	e.Payload = p
	return nil
}

// HashRule names how a content hash covers the payload. Stored hashes keep their
// rule, so events stored under an older rule still answer their retries.
type HashRule uint8

const (
	// HashRaw covers the payload's bytes as sent: gale's rule before HashCanonical,
	// shown "sha256:...". Key order or whitespace changed the hash.
	HashRaw HashRule = 0
	// HashCanonical covers the payload's canonical form (AppendCanonical), shown
	// "c1:sha256:...": a retry with its keys in another order, or other whitespace,
	// or other string escapes, is the same content.
	HashCanonical HashRule = 1
)

// hashPrefixes are the rules' prefixes as the API shows them.
var hashPrefixes = [...]string{HashRaw: "sha256:", HashCanonical: "c1:sha256:"}

// Known reports whether r is a rule this version knows.
func (r HashRule) Known() bool { return int(r) < len(hashPrefixes) }

// ContentHash is the SHA-256 of what defines an event's content (everything but
// the id) under a rule: it tells a retry (same content) from a conflicting reuse
// of an id (409).
type ContentHash struct {
	Rule HashRule
	Sum  [32]byte
}

// String is the hash as the API shows it: the rule's prefix ("c1:sha256:" or
// "sha256:") and the first 16 hex digits.
func (h ContentHash) String() string {
	p := "unknown-rule:"
	if h.Rule.Known() {
		p = hashPrefixes[h.Rule]
	}
	return p + hex.EncodeToString(h.Sum[:8])
}

// HashRuleOf is the rule of a hash as String shows it.
func HashRuleOf(s string) (HashRule, bool) {
	// Longest prefix first: "c1:sha256:" is not "sha256:".
	for _, r := range []HashRule{HashCanonical, HashRaw} {
		if strings.HasPrefix(s, hashPrefixes[r]) {
			return r, true
		}
	}
	return 0, false
}

// Hash is the event's content hash under the current rule, HashCanonical.
func (e *Event) Hash() ContentHash { return e.HashAs(HashCanonical) }

// HashAs is the event's content hash under rule: the SHA-256 of
// "len(source):source|len(type):type|len(key):key|version|" (version -1 when
// absent) and then the payload, as sent (HashRaw) or in canonical form
// (HashCanonical; a payload that is no JSON value, which Validate refuses, is
// taken as sent).
func (e *Event) HashAs(rule HashRule) ContentHash {
	h := sha256.New()
	var v int64 = -1
	if e.Version != nil {
		v = *e.Version
	}
	// Written without fmt (which cost more than the SHA-256 itself on the ingest
	// path).
	var buf [64]byte
	b := buf[:0]
	for _, f := range []string{e.Source, e.Type, e.Key} {
		b = strconv.AppendInt(b, int64(len(f)), 10)
		b = append(b, ':')
		if len(b)+len(f)+1 > cap(b) {
			h.Write(b)
			h.Write([]byte(f))
			b = buf[:0]
		} else {
			b = append(b, f...)
		}
		b = append(b, '|')
	}
	b = strconv.AppendInt(b, v, 10)
	b = append(b, '|')
	h.Write(b)
	payload := e.Payload
	if rule == HashCanonical {
		c := canonPool.Get().(*canonicalizer)
		defer canonPool.Put(c)
		if cp, err := c.canonical(c.buf[:0], e.Payload); err == nil {
			payload, c.buf = cp, cp
		}
		c.src, c.out = nil, nil
	}
	h.Write(payload)
	out := ContentHash{Rule: rule}
	h.Sum(out.Sum[:0])
	return out
}

// Matches reports whether the stored hash h is e's content, e's hash under the
// current rule being in: under h's rule, computed again if h's rule is another.
func (h ContentHash) Matches(e *Event, in ContentHash) bool {
	if h.Rule == in.Rule {
		return h == in
	}
	return h.Rule.Known() && h == e.HashAs(h.Rule)
}

// MatchesString is Matches for a stored hash as String shows it.
func MatchesString(stored string, e *Event, in ContentHash) bool {
	r, ok := HashRuleOf(stored)
	if !ok {
		return false
	}
	if r == in.Rule {
		return stored == in.String()
	}
	return stored == e.HashAs(r).String()
}

// hasNULEscape reports whether JSON text holds the escape \u0000 (not an escaped
// backslash followed by "u0000").
func hasNULEscape(p []byte) bool {
	for i := 0; ; {
		j := bytes.Index(p[i:], []byte(`\u0000`))
		if j < 0 {
			return false
		}
		k := i + j // the backslash of the match
		n := 0
		for m := k; m >= 0 && p[m] == '\\'; m-- {
			n++
		}
		if n%2 == 1 {
			return true
		}
		i = k + 1
	}
}
