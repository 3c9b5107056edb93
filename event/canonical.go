package event

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"unicode/utf16"
	"unicode/utf8"
)

// AppendCanonical appends the canonical form of the JSON value src to dst, the
// payload form that content hashes of rule HashCanonical cover. Two texts have one
// canonical form exactly when encoding/json decodes them (with UseNumber) to the
// same value:
//
//   - no whitespace outside strings;
//   - object members sorted by their canonical key's bytes; of a key given twice,
//     the last member only (as encoding/json keeps);
//   - strings with one escaping rule: \" and \\, \b \f \n \r \t, \u00xx (lower
//     case) for the other control characters, everything else as UTF-8; escapes
//     decoded, and an invalid byte or lone surrogate becomes U+FFFD (as
//     encoding/json does);
//   - numbers as their exact text (1.0 and 1 differ, and two integers above 2^53
//     stay apart: nothing goes through float64);
//   - arrays in order; true, false and null as they are.
//
// An error means src is not one JSON value (trailing text, a syntax error, or
// nesting deeper than 10,000 levels, encoding/json's limit).
func AppendCanonical(dst, src []byte) ([]byte, error) {
	c := canonPool.Get().(*canonicalizer)
	defer canonPool.Put(c)
	out, err := c.canonical(dst, src)
	c.src, c.out = nil, nil
	return out, err
}

// canonical is AppendCanonical with c's buffers (c.out is dst, grown).
func (c *canonicalizer) canonical(dst, src []byte) ([]byte, error) {
	c.src, c.i, c.out, c.members = src, 0, dst, c.members[:0]
	c.ws()
	if err := c.value(0); err != nil {
		return dst, err
	}
	c.ws()
	if c.i != len(c.src) {
		return dst, c.errf("text after the JSON value")
	}
	return c.out, nil
}

var canonPool = sync.Pool{New: func() any { return new(canonicalizer) }}

// errSyntax is wrapped by AppendCanonical's errors.
var errSyntax = errors.New("not canonicalizable JSON")

const maxCanonicalDepth = 10000

type canonicalizer struct {
	src     []byte
	i       int
	out     []byte
	members []member // a stack: each object's members above those of its parents
	scratch []byte
	buf     []byte // the output buffer HashAs reuses
}

// member is where an object member's canonical text lies in out: key (quoted)
// from start to colon, value from colon+1 to end; prefix is the key's first 8
// bytes, big-endian and zero-padded, so most comparisons are one of integers (a
// canonical key holds no zero byte, so padding orders as a shorter key does).
type member struct {
	start, colon, end int
	prefix            uint64
}

func (c *canonicalizer) errf(format string, a ...any) error {
	return fmt.Errorf("%w: %s at byte %d", errSyntax, fmt.Sprintf(format, a...), c.i)
}

func (c *canonicalizer) ws() {
	for c.i < len(c.src) {
		switch c.src[c.i] {
		case ' ', '\t', '\n', '\r':
			c.i++
		default:
			return
		}
	}
}

func (c *canonicalizer) value(depth int) error {
	if c.i >= len(c.src) {
		return c.errf("unexpected end")
	}
	switch b := c.src[c.i]; {
	case b == '{':
		return c.object(depth + 1)
	case b == '[':
		return c.array(depth + 1)
	case b == '"':
		return c.str()
	case b == '-' || (b >= '0' && b <= '9'):
		return c.number()
	case b == 't':
		return c.literal("true")
	case b == 'f':
		return c.literal("false")
	case b == 'n':
		return c.literal("null")
	}
	return c.errf("unexpected %q", c.src[c.i])
}

func (c *canonicalizer) literal(s string) error {
	if !bytes.HasPrefix(c.src[c.i:], []byte(s)) {
		return c.errf("bad literal")
	}
	c.out = append(c.out, s...)
	c.i += len(s)
	return nil
}

func (c *canonicalizer) number() error {
	start := c.i
	if c.src[c.i] == '-' {
		c.i++
	}
	digits := func() int {
		n := 0
		for c.i < len(c.src) && c.src[c.i] >= '0' && c.src[c.i] <= '9' {
			c.i++
			n++
		}
		return n
	}
	switch {
	case c.i < len(c.src) && c.src[c.i] == '0':
		c.i++
	case digits() == 0:
		return c.errf("bad number")
	}
	if c.i < len(c.src) && c.src[c.i] == '.' {
		c.i++
		if digits() == 0 {
			return c.errf("bad number")
		}
	}
	if c.i < len(c.src) && (c.src[c.i] == 'e' || c.src[c.i] == 'E') {
		c.i++
		if c.i < len(c.src) && (c.src[c.i] == '+' || c.src[c.i] == '-') {
			c.i++
		}
		if digits() == 0 {
			return c.errf("bad number")
		}
	}
	c.out = append(c.out, c.src[start:c.i]...)
	return nil
}

func (c *canonicalizer) array(depth int) error {
	if depth > maxCanonicalDepth {
		return c.errf("nested too deep")
	}
	c.i++ // [
	c.out = append(c.out, '[')
	c.ws()
	if c.i < len(c.src) && c.src[c.i] == ']' {
		c.i++
		c.out = append(c.out, ']')
		return nil
	}
	for {
		c.ws()
		if err := c.value(depth); err != nil {
			return err
		}
		c.ws()
		if c.i >= len(c.src) {
			return c.errf("unexpected end in an array")
		}
		switch c.src[c.i] {
		case ',':
			c.i++
			c.out = append(c.out, ',')
		case ']':
			c.i++
			c.out = append(c.out, ']')
			return nil
		default:
			return c.errf("want , or ] in an array")
		}
	}
}

func (c *canonicalizer) object(depth int) error {
	if depth > maxCanonicalDepth {
		return c.errf("nested too deep")
	}
	c.i++ // {
	open := len(c.out)
	c.out = append(c.out, '{')
	c.ws()
	if c.i < len(c.src) && c.src[c.i] == '}' {
		c.i++
		c.out = append(c.out, '}')
		return nil
	}
	mark := len(c.members)
	sorted := true // members so far in strictly increasing key order
	for {
		c.ws()
		if c.i >= len(c.src) || c.src[c.i] != '"' {
			return c.errf("want a key")
		}
		m := member{start: len(c.out)}
		if err := c.str(); err != nil {
			return err
		}
		m.colon = len(c.out)
		m.prefix = keyPrefix(c.key(m))
		c.ws()
		if c.i >= len(c.src) || c.src[c.i] != ':' {
			return c.errf("want : after a key")
		}
		c.i++
		c.out = append(c.out, ':')
		c.ws()
		if err := c.value(depth); err != nil {
			return err
		}
		m.end = len(c.out)
		if n := len(c.members); n > mark && sorted {
			sorted = c.compare(c.members[n-1], m) < 0
		}
		c.members = append(c.members, m)
		c.ws()
		if c.i >= len(c.src) {
			return c.errf("unexpected end in an object")
		}
		if c.src[c.i] == ',' {
			c.i++
			c.out = append(c.out, ',')
			continue
		}
		if c.src[c.i] != '}' {
			return c.errf("want , or } in an object")
		}
		c.i++
		break
	}
	if !sorted {
		c.sortMembers(open, c.members[mark:])
	}
	c.members = c.members[:mark]
	c.out = append(c.out, '}')
	return nil
}

// key is a member's canonical key without its quotes.
func (c *canonicalizer) key(m member) []byte { return c.out[m.start+1 : m.colon-1] }

// keyPrefix is k's first 8 bytes as a big-endian integer, zero-padded.
func keyPrefix(k []byte) uint64 {
	if len(k) >= 8 {
		return binary.BigEndian.Uint64(k)
	}
	var p uint64
	for _, b := range k {
		p = p<<8 | uint64(b)
	}
	return p << (8 * uint(8-len(k)))
}

// compare orders members by key.
func (c *canonicalizer) compare(a, b member) int {
	switch {
	case a.prefix < b.prefix:
		return -1
	case a.prefix > b.prefix:
		return 1
	case a.colon-a.start <= 10 && b.colon-b.start <= 10: // keys of at most 8 bytes
		return 0
	}
	return bytes.Compare(c.key(a), c.key(b))
}

// sortMembers rewrites the object's members (after its '{' at open) in key order,
// keeping the last of equal keys.
func (c *canonicalizer) sortMembers(open int, ms []member) {
	// Insertion sort: objects are small, and it is stable, so that of equal keys
	// the last given stays last.
	for i := 1; i < len(ms); i++ {
		m := ms[i]
		j := i
		for ; j > 0 && c.compare(ms[j-1], m) > 0; j-- {
			ms[j] = ms[j-1]
		}
		ms[j] = m
	}
	// Drop each member a later one of the same key replaces (an empty span marks
	// it) before the write-out below overwrites the keys compare reads.
	for i := 0; i+1 < len(ms); i++ {
		if c.compare(ms[i], ms[i+1]) == 0 {
			ms[i].end = ms[i].start
		}
	}
	base := open + 1
	c.scratch = append(c.scratch[:0], c.out[base:]...)
	out := c.out[:base]
	for _, m := range ms {
		if m.end == m.start {
			continue // a later member has this key
		}
		if len(out) > base {
			out = append(out, ',')
		}
		out = append(out, c.scratch[m.start-base:m.end-base]...)
	}
	c.out = out
}

// plain marks the bytes a string's fast path copies: not '"', '\\', a control
// character or a byte of a multi-byte UTF-8 sequence.
var plain = func() (t [256]bool) {
	for b := 0x20; b < 0x80; b++ {
		t[b] = b != '"' && b != '\\'
	}
	return t
}()

// str appends the canonical form of the string at c.i.
func (c *canonicalizer) str() error {
	c.i++ // "
	start := c.i
	j := start
	// Eight bytes at a time while none is '"', '\\', a control character or
	// non-ASCII (the "has a zero byte" trick on each test).
	for ; j+8 <= len(c.src); j += 8 {
		w := binary.LittleEndian.Uint64(c.src[j:])
		const ones, highs = 0x0101010101010101, 0x8080808080808080
		zero := func(v uint64) uint64 { return (v - ones) & ^v & highs }
		if (w|(w-0x20*ones)|zero(w^('"'*ones))|zero(w^('\\'*ones)))&highs != 0 {
			break
		}
	}
	for j < len(c.src) && plain[c.src[j]] {
		j++
	}
	if j < len(c.src) && c.src[j] == '"' { // plain ASCII without escapes: already canonical
		c.out = append(c.out, c.src[start-1:j+1]...)
		c.i = j + 1
		return nil
	}
	c.out = append(c.out, '"')
	for c.i < len(c.src) {
		b := c.src[c.i]
		switch {
		case b == '"':
			c.i++
			c.out = append(c.out, '"')
			return nil
		case b < 0x20:
			return c.errf("control character in a string")
		case b == '\\':
			if err := c.escape(); err != nil {
				return err
			}
		case b < 0x80:
			c.out = append(c.out, b)
			c.i++
		default:
			r, n := utf8.DecodeRune(c.src[c.i:])
			if r == utf8.RuneError && n == 1 {
				c.out = utf8.AppendRune(c.out, utf8.RuneError)
			} else {
				c.out = append(c.out, c.src[c.i:c.i+n]...)
			}
			c.i += n
		}
	}
	return c.errf("unterminated string")
}

// escape decodes the escape at c.i and appends its character canonically.
func (c *canonicalizer) escape() error {
	if c.i+1 >= len(c.src) {
		return c.errf("unterminated escape")
	}
	e := c.src[c.i+1]
	c.i += 2
	switch e {
	case '"', '\\':
		c.out = append(c.out, '\\', e)
	case '/':
		c.out = append(c.out, '/')
	case 'b', 'f', 'n', 'r', 't':
		c.out = append(c.out, '\\', e)
	case 'u':
		r, ok := c.hex4(c.i)
		if !ok {
			return c.errf("bad \\u escape")
		}
		c.i += 4
		if utf16.IsSurrogate(r) {
			// A pair makes one character; a lone half is U+FFFD, as encoding/json.
			r2, ok := rune(0), false
			if c.i+6 <= len(c.src) && c.src[c.i] == '\\' && c.src[c.i+1] == 'u' {
				r2, ok = c.hex4(c.i + 2)
			}
			if d := utf16.DecodeRune(r, r2); ok && d != utf8.RuneError {
				r = d
				c.i += 6
			} else {
				r = utf8.RuneError
			}
		}
		c.appendRune(r)
	default:
		return c.errf("bad escape \\%c", e)
	}
	return nil
}

func (c *canonicalizer) hex4(at int) (rune, bool) {
	if at+4 > len(c.src) {
		return 0, false
	}
	var r rune
	for _, h := range c.src[at : at+4] {
		switch {
		case h >= '0' && h <= '9':
			h -= '0'
		case h >= 'a' && h <= 'f':
			h -= 'a' - 10
		case h >= 'A' && h <= 'F':
			h -= 'A' - 10
		default:
			return 0, false
		}
		r = r<<4 | rune(h)
	}
	return r, true
}

// appendRune appends r as the canonical string form writes it.
func (c *canonicalizer) appendRune(r rune) {
	switch r {
	case '"', '\\':
		c.out = append(c.out, '\\', byte(r))
	case '\b':
		c.out = append(c.out, '\\', 'b')
	case '\f':
		c.out = append(c.out, '\\', 'f')
	case '\n':
		c.out = append(c.out, '\\', 'n')
	case '\r':
		c.out = append(c.out, '\\', 'r')
	case '\t':
		c.out = append(c.out, '\\', 't')
	default:
		if r < 0x20 {
			const hex = "0123456789abcdef"
			c.out = append(c.out, '\\', 'u', '0', '0', hex[r>>4], hex[r&0xf])
			return
		}
		c.out = utf8.AppendRune(c.out, r)
	}
}
