package access

import (
	"bufio"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
)

// MinTokenLen is the shortest token a tokens file may hold in clear: shorter ones
// can be guessed.
const MinTokenLen = 16

// Scopes are what a token may do.
type Scopes struct {
	WriteAll bool            // write:*
	Write    map[string]bool // write:SOURCE
	Read     bool
	Admin    bool
	UI       bool
}

// MayWrite reports whether events of source may be written.
func (s Scopes) MayWrite(source string) bool { return s.WriteAll || s.Write[source] }

func (s Scopes) writes() bool { return s.WriteAll || len(s.Write) > 0 }

// String lists the scopes as a tokens file writes them.
func (s Scopes) String() string {
	var out []string
	if s.WriteAll {
		out = append(out, "write:*")
	}
	var srcs []string
	for src := range s.Write {
		srcs = append(srcs, "write:"+src)
	}
	sort.Strings(srcs)
	out = append(out, srcs...)
	if s.Read {
		out = append(out, "read")
	}
	if s.Admin {
		out = append(out, "admin")
	}
	if s.UI {
		out = append(out, "ui")
	}
	return strings.Join(out, " ")
}

func (s *Scopes) add(o Scopes) {
	s.WriteAll = s.WriteAll || o.WriteAll
	s.Read, s.Admin, s.UI = s.Read || o.Read, s.Admin || o.Admin, s.UI || o.UI
	for src := range o.Write {
		if s.Write == nil {
			s.Write = map[string]bool{}
		}
		s.Write[src] = true
	}
}

// Token is one known token: its digest and scopes, never the secret itself.
type Token struct {
	Digest [sha256.Size]byte
	Scopes Scopes
	// Where names the token in logs and errors: "FILE:LINE" or "--ui-token".
	Where string
}

// compare is crypto/subtle's; a test counts its calls.
var compare = subtle.ConstantTimeCompare

// Set is the tokens a server knows. A nil or empty Set knows none.
type Set struct {
	tokens []Token
}

// Len is the number of tokens.
func (s *Set) Len() int {
	if s == nil {
		return 0
	}
	return len(s.tokens)
}

// Lookup returns the token whose digest is secret's SHA-256. It compares against
// every token, in constant time each, whatever matched.
func (s *Set) Lookup(secret string) (*Token, bool) {
	if s == nil {
		return nil, false
	}
	d := sha256.Sum256([]byte(secret))
	found := -1
	for i := range s.tokens {
		if compare(d[:], s.tokens[i].Digest[:]) == 1 {
			found = i
		}
	}
	if found < 0 {
		return nil, false
	}
	return &s.tokens[found], true
}

// With returns a copy of s with secret added (its scopes joined to an existing
// entry's if the file already holds that token).
func (s *Set) With(secret string, scopes Scopes, where string) *Set {
	out := &Set{}
	if s != nil {
		out.tokens = append(out.tokens, s.tokens...)
	}
	d := sha256.Sum256([]byte(secret))
	for i := range out.tokens {
		if out.tokens[i].Digest == d {
			sc := Scopes{}
			sc.add(out.tokens[i].Scopes)
			sc.add(scopes)
			out.tokens[i].Scopes = sc
			return out
		}
	}
	out.tokens = append(out.tokens, Token{Digest: d, Scopes: scopes, Where: where})
	return out
}

// ReadFile reads a tokens file (see Parse).
func ReadFile(path string) (*Set, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("tokens file: %w", err)
	}
	defer f.Close()
	return Parse(f, path)
}

// Parse reads tokens, one a line: the token (or "sha256:" and the 64 hex digits of
// its SHA-256), then its scopes separated by spaces or commas. Blank lines and lines
// starting with # are skipped. A malformed line is an error naming name and the
// line (never the token); so is a file without any token.
func Parse(r io.Reader, name string) (*Set, error) {
	s := &Set{}
	seen := map[[sha256.Size]byte]int{}
	sc := bufio.NewScanner(r)
	n := 0
	for sc.Scan() {
		n++
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		fields := strings.FieldsFunc(line, func(c rune) bool { return c == ' ' || c == '\t' || c == ',' })
		where := fmt.Sprintf("%s:%d", name, n)
		d, err := digestOf(fields[0])
		if err != nil {
			return nil, fmt.Errorf("%s: %w", where, err)
		}
		if len(fields) == 1 {
			return nil, fmt.Errorf("%s: no scopes after the token: want write:SOURCE, write:*, read, admin or ui", where)
		}
		var scopes Scopes
		for _, f := range fields[1:] {
			if err := scopes.parse(f); err != nil {
				return nil, fmt.Errorf("%s: %w", where, err)
			}
		}
		if first, dup := seen[d]; dup {
			return nil, fmt.Errorf("%s: the same token as on line %d", where, first)
		}
		seen[d] = n
		s.tokens = append(s.tokens, Token{Digest: d, Scopes: scopes, Where: where})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: line %d: %w", name, n+1, err)
	}
	if len(s.tokens) == 0 {
		return nil, fmt.Errorf("%s: holds no token (one a line: TOKEN SCOPE...)", name)
	}
	return s, nil
}

func digestOf(tok string) ([sha256.Size]byte, error) {
	var d [sha256.Size]byte
	if h, ok := strings.CutPrefix(tok, "sha256:"); ok {
		b, err := hex.DecodeString(h)
		if err != nil || len(b) != sha256.Size {
			return d, fmt.Errorf("sha256: wants the 64 hex digits of the token's SHA-256, got %d characters", len(h))
		}
		copy(d[:], b)
		return d, nil
	}
	if len(tok) < MinTokenLen {
		return d, fmt.Errorf("token of %d characters: at least %d, or give its sha256:<hex>", len(tok), MinTokenLen)
	}
	for i := 0; i < len(tok); i++ {
		if !token68(tok[i]) {
			return d, fmt.Errorf("token: character %d is not one a bearer token may hold (letters, digits, -._~+/=)", i+1)
		}
	}
	return sha256.Sum256([]byte(tok)), nil
}

// token68 is RFC 7235's alphabet for bearer credentials.
func token68(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("-._~+/=", c) >= 0
}

func (s *Scopes) parse(f string) error {
	switch f {
	case "read":
		s.Read = true
	case "admin":
		s.Admin = true
	case "ui":
		s.UI = true
	case "write:*":
		s.WriteAll = true
	default:
		src, ok := strings.CutPrefix(f, "write:")
		if !ok {
			return fmt.Errorf("unknown scope %q: want write:SOURCE, write:*, read, admin or ui", f)
		}
		if src == "" {
			return fmt.Errorf("scope %q names no source: write:SOURCE or write:*", f)
		}
		if s.Write == nil {
			s.Write = map[string]bool{}
		}
		s.Write[src] = true
	}
	return nil
}
