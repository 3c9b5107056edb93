package event

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// parseFast decodes the top-level object of an event without reflection: the ingest
// hot path (encoding/json's Decoder was a fifth of the server's CPU at 90k events/s).
// It accepts exactly what Parse's contract says (the known fields, each at most
// once; payload any JSON value, checked with json.Valid; nothing after the object)
// and reports errors with the byte offset. Strings with escapes are decoded by
// encoding/json, so their meaning is the standard one.
func parseFast(data []byte) (Event, error) {
	var e Event
	p := parser{b: data}
	p.ws()
	if !p.eat('{') {
		return e, p.errf("want a JSON object")
	}
	seen := 0
	p.ws()
	if p.eat('}') {
		return e, p.end()
	}
	for {
		p.ws()
		key, err := p.str()
		if err != nil {
			return e, err
		}
		p.ws()
		if !p.eat(':') {
			return e, p.errf("want ':' after key %q", key)
		}
		p.ws()
		var bit int
		switch key {
		case "event_id", "source", "type", "key":
			if p.peek() == 'n' && p.lit("null") {
				break // null leaves the field empty, as encoding/json does
			}
			if p.peek() != '"' {
				return e, &FieldError{Field: key, Reason: "must be a string"}
			}
			s, err := p.str()
			if err != nil {
				return e, err
			}
			switch key {
			case "event_id":
				e.ID, bit = s, 1
			case "source":
				e.Source, bit = s, 2
			case "type":
				e.Type, bit = s, 4
			case "key":
				e.Key, bit = s, 8
			}
		case "version":
			bit = 16
			if p.peek() == 'n' && p.lit("null") {
				break
			}
			start := p.i
			for p.i < len(p.b) && (p.b[p.i] == '-' || p.b[p.i] >= '0' && p.b[p.i] <= '9' || p.b[p.i] == '.' || p.b[p.i] == 'e' || p.b[p.i] == 'E' || p.b[p.i] == '+') {
				p.i++
			}
			num := p.b[start:p.i]
			v, err := strconv.ParseInt(string(num), 10, 64)
			if start == p.i || err != nil || !json.Valid(num) { // +1 and 01 are not JSON
				if start < p.i && !json.Valid(num) {
					return e, p.errf("bad number %q", num)
				}
				return e, &FieldError{Field: "version", Reason: "must be an integer"}
			}
			e.Version = &v
		case "payload":
			bit = 32
			start := p.i
			if err := p.skip(0); err != nil {
				return e, err
			}
			e.Payload = json.RawMessage(data[start:p.i])
		default:
			return e, unknownField(key)
		}
		if bit != 0 && seen&bit != 0 {
			return e, &FieldError{Field: key, Reason: "given twice"}
		}
		seen |= bit
		p.ws()
		if p.eat(',') {
			continue
		}
		if p.eat('}') {
			return e, p.end()
		}
		return e, p.errf("want ',' or '}'")
	}
}

// fields are an event's keys, exact-case.
var fields = [...]string{"event_id", "source", "type", "key", "version", "payload"}

// unknownField is the error for a key that is not one of fields, exactly: a strict
// API names it, and says which field a key in other case was likely meant to be
// (encoding/json would match "Event_ID" to event_id silently, and then a
// differently cased duplicate could override a field).
func unknownField(key string) error {
	for _, f := range fields {
		if strings.EqualFold(key, f) {
			return fmt.Errorf("%w: unknown field %q: keys are case-sensitive; did you mean %q?", ErrInvalid, key, f)
		}
	}
	return fmt.Errorf("%w: unknown field %q (an event has event_id, source, type, key, version and payload)", ErrInvalid, key)
}

type parser struct {
	b []byte
	i int
}

func (p *parser) errf(format string, a ...any) error {
	return fmt.Errorf("%w: malformed JSON at byte %d: %s", ErrInvalid, p.i, fmt.Sprintf(format, a...))
}

func (p *parser) ws() {
	for p.i < len(p.b) {
		switch p.b[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

func (p *parser) peek() byte {
	if p.i < len(p.b) {
		return p.b[p.i]
	}
	return 0
}

func (p *parser) eat(c byte) bool {
	if p.i < len(p.b) && p.b[p.i] == c {
		p.i++
		return true
	}
	return false
}

func (p *parser) lit(s string) bool {
	if len(p.b)-p.i >= len(s) && string(p.b[p.i:p.i+len(s)]) == s {
		p.i += len(s)
		return true
	}
	return false
}

func (p *parser) end() error {
	p.ws()
	if p.i != len(p.b) {
		return fmt.Errorf("%w: more than one JSON value (use /v1/events:batch for many)", ErrInvalid)
	}
	return nil
}

// str reads a JSON string; without escapes it is a plain copy.
func (p *parser) str() (string, error) {
	if !p.eat('"') {
		return "", p.errf("want a string")
	}
	start, esc := p.i, false
	for p.i < len(p.b) {
		c := p.b[p.i]
		switch {
		case c == '"':
			raw := p.b[start:p.i]
			p.i++
			if !esc { // Parse checked the whole input is UTF-8
				return string(raw), nil
			}
			var s string
			if err := json.Unmarshal(p.b[start-1:p.i], &s); err != nil {
				return "", p.errf("bad string: %v", err)
			}
			return s, nil
		case c == '\\':
			esc = true
			p.i += 2
		case c < 0x20:
			return "", p.errf("control character 0x%02x in a string", c)
		default:
			p.i++
		}
	}
	return "", p.errf("unterminated string")
}

// skip moves past one JSON value, checking its grammar (RFC 8259) as it goes, so
// the payload is walked once.
func (p *parser) skip(depth int) error {
	if depth > 1000 {
		return p.errf("nested deeper than 1000")
	}
	p.ws()
	switch c := p.peek(); {
	case c == '"':
		return p.skipString()
	case c == '{' || c == '[':
		closer := byte('}')
		if c == '[' {
			closer = ']'
		}
		p.i++
		p.ws()
		if p.eat(closer) {
			return nil
		}
		for {
			if c == '{' {
				p.ws()
				if p.peek() != '"' {
					return p.errf("want a string key")
				}
				if err := p.skipString(); err != nil {
					return err
				}
				p.ws()
				if !p.eat(':') {
					return p.errf("want ':' in an object")
				}
			}
			if err := p.skip(depth + 1); err != nil {
				return err
			}
			p.ws()
			if p.eat(',') {
				continue
			}
			if p.eat(closer) {
				return nil
			}
			return p.errf("want ',' or '%c'", closer)
		}
	case c == 't':
		if p.lit("true") {
			return nil
		}
	case c == 'f':
		if p.lit("false") {
			return nil
		}
	case c == 'n':
		if p.lit("null") {
			return nil
		}
	case c == '-' || c >= '0' && c <= '9':
		return p.skipNumber()
	case c == 0 && p.i >= len(p.b):
		return p.errf("unexpected end of input")
	}
	return p.errf("unexpected %q", p.peek())
}

// skipString moves past a string, checking escapes and control characters.
func (p *parser) skipString() error {
	p.i++ // the opening quote
	for p.i < len(p.b) {
		c := p.b[p.i]
		switch {
		case c == '"':
			p.i++
			return nil
		case c == '\\':
			if p.i+1 >= len(p.b) {
				return p.errf("unterminated string")
			}
			switch p.b[p.i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				p.i += 2
			case 'u':
				if p.i+6 > len(p.b) {
					return p.errf("short \\u escape")
				}
				for _, h := range p.b[p.i+2 : p.i+6] {
					if !(h >= '0' && h <= '9' || h >= 'a' && h <= 'f' || h >= 'A' && h <= 'F') {
						return p.errf("bad \\u escape")
					}
				}
				p.i += 6
			default:
				return p.errf("bad escape \\%c", p.b[p.i+1])
			}
		case c < 0x20:
			return p.errf("control character 0x%02x in a string", c)
		default:
			p.i++
		}
	}
	return p.errf("unterminated string")
}

// skipNumber moves past a number: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func (p *parser) skipNumber() error {
	digits := func() int {
		n := 0
		for p.i < len(p.b) && p.b[p.i] >= '0' && p.b[p.i] <= '9' {
			p.i++
			n++
		}
		return n
	}
	p.eat('-')
	switch {
	case p.eat('0'):
	case digits() == 0:
		return p.errf("bad number")
	}
	if p.eat('.') && digits() == 0 {
		return p.errf("bad number: no digits after '.'")
	}
	if p.eat('e') || p.eat('E') {
		if !p.eat('+') {
			p.eat('-')
		}
		if digits() == 0 {
			return p.errf("bad number: no exponent digits")
		}
	}
	return nil
}
