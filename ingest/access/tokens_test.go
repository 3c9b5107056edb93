package access

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const (
	writerTok = "w-orders-0123456789abcdef"
	readerTok = "reader-0123456789abcdef"
	hashedTok = "hashed-admin-0123456789abcdef"
)

func hashed(tok string) string {
	d := sha256.Sum256([]byte(tok))
	return "sha256:" + hex.EncodeToString(d[:])
}

func TestParseTokensFile(t *testing.T) {
	file := "# gale tokens\n\n" +
		writerTok + "  write:orders,write:devices\n" +
		"   # an indented comment\n" +
		readerTok + "\tread ui\n" +
		hashed(hashedTok) + " admin write:*\n"
	s, err := Parse(strings.NewReader(file), "tokens.txt")
	if err != nil {
		t.Fatal(err)
	}
	if s.Len() != 3 {
		t.Fatalf("%d tokens, want 3", s.Len())
	}
	for _, c := range []struct {
		tok, where, scopes string
	}{
		{writerTok, "tokens.txt:3", "write:devices write:orders"},
		{readerTok, "tokens.txt:5", "read ui"},
		{hashedTok, "tokens.txt:6", "write:* admin"},
	} {
		got, ok := s.Lookup(c.tok)
		if !ok || got.Where != c.where || got.Scopes.String() != c.scopes {
			t.Errorf("Lookup(%s) = %+v %v; want %s with %q", c.tok, got, ok, c.where, c.scopes)
		}
	}
	w, _ := s.Lookup(writerTok)
	if !w.Scopes.MayWrite("orders") || w.Scopes.MayWrite("payments") || w.Scopes.Read {
		t.Fatalf("write:orders token's scopes: %+v", w.Scopes)
	}
	// The digest itself is not a token: whoever reads the file cannot use it.
	for _, bad := range []string{hashed(hashedTok), writerTok[:len(writerTok)-1], writerTok + "x", ""} {
		if _, ok := s.Lookup(bad); ok {
			t.Errorf("Lookup(%q) matched", bad)
		}
	}
}

// A malformed line is an error naming the file and the line, and never the token.
func TestParseErrorsNameFileAndLine(t *testing.T) {
	for _, c := range []struct{ line, want string }{
		{writerTok, "no scopes after the token"},
		{writerTok + " write", `unknown scope "write"`},
		{writerTok + " write:", `names no source`},
		{writerTok + " rw", `unknown scope "rw"`},
		{"short read", "token of 5 characters: at least 16"},
		{"sha256:abcd read", "64 hex digits"},
		{"sha256:" + strings.Repeat("z", 64) + " read", "64 hex digits"},
		{"tok\"en-0123456789abcdef read", "character 4 is not one a bearer token may hold"},
		{readerTok + " read\n" + readerTok + " ui", "the same token as on line 2"},
	} {
		_, err := Parse(strings.NewReader("# head\n"+c.line+"\n"), "tokens.txt")
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.HasPrefix(err.Error(), "tokens.txt:") {
			t.Errorf("%q: %v; want tokens.txt:LINE: ...%s", c.line, err, c.want)
			continue
		}
		if strings.Contains(err.Error(), writerTok) || strings.Contains(err.Error(), readerTok) {
			t.Errorf("%q: the error shows the token: %v", c.line, err)
		}
	}
	_, err := Parse(strings.NewReader(writerTok+" read\n\n"+writerTok+"x"+" bogus\n"), "t")
	if err == nil || !strings.HasPrefix(err.Error(), "t:3: ") {
		t.Fatalf("error on line 3: %v", err)
	}
	if _, err := Parse(strings.NewReader("# only comments\n\n"), "empty.txt"); err == nil || !strings.Contains(err.Error(), "empty.txt: holds no token") {
		t.Fatalf("empty file: %v", err)
	}
	if _, err := ReadFile(filepath.Join(t.TempDir(), "missing")); err == nil || !strings.Contains(err.Error(), "missing") {
		t.Fatalf("missing file: %v", err)
	}
}

// Lookup compares the digest against every token with crypto/subtle, whether the
// first, the last or none matches: how long it takes says nothing of which.
func TestLookupComparesEveryTokenInConstantTime(t *testing.T) {
	var file strings.Builder
	var toks []string
	for i := range 5 {
		tok := strings.Repeat(string(rune('a'+i)), 20)
		toks = append(toks, tok)
		file.WriteString(tok + " read\n")
	}
	s, err := Parse(strings.NewReader(file.String()), "f")
	if err != nil {
		t.Fatal(err)
	}
	calls := 0
	old := compare
	compare = func(x, y []byte) int { calls++; return old(x, y) }
	defer func() { compare = old }()
	for _, c := range []struct {
		tok   string
		found bool
	}{{toks[0], true}, {toks[4], true}, {"zzzzzzzzzzzzzzzzzzzz", false}} {
		calls = 0
		got, ok := s.Lookup(c.tok)
		if ok != c.found || calls != 5 {
			t.Fatalf("Lookup(%s): found %v after %d constant-time compares; want %v after 5", c.tok, ok, calls, c.found)
		}
		if ok && got.Digest != sha256.Sum256([]byte(c.tok)) {
			t.Fatalf("Lookup(%s) returned another token", c.tok)
		}
	}
}

func TestWithJoinsTheScopesOfTheSameToken(t *testing.T) {
	s, err := Parse(strings.NewReader(readerTok+" read\n"), "f")
	if err != nil {
		t.Fatal(err)
	}
	s2 := s.With(readerTok, Scopes{UI: true}, "--ui-token").With(writerTok, Scopes{UI: true}, "--ui-token")
	r, _ := s2.Lookup(readerTok)
	w, _ := s2.Lookup(writerTok)
	if s2.Len() != 2 || r.Scopes.String() != "read ui" || w.Scopes.String() != "ui" || w.Where != "--ui-token" {
		t.Fatalf("after With: %d tokens, %+v, %+v", s2.Len(), r, w)
	}
	if orig, _ := s.Lookup(readerTok); orig.Scopes.UI || s.Len() != 1 {
		t.Fatal("With changed the set it was called on")
	}
}

func TestIsLoopback(t *testing.T) {
	for addr, want := range map[string]bool{
		"127.0.0.1:8080": true, "127.1.2.3:0": true, "[::1]:8080": true, "localhost:8080": true,
		":8080": false, "0.0.0.0:8080": false, "[::]:8080": false, "10.1.2.3:8080": false,
		"gale.example.com:8080": false, "127.0.0.1": false,
	} {
		if got := IsLoopback(addr); got != want {
			t.Errorf("IsLoopback(%q) = %v, want %v", addr, got, want)
		}
	}
}

func TestReadFileReadsAFile(t *testing.T) {
	p := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(p, []byte(writerTok+" write:orders\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if tok, ok := s.Lookup(writerTok); !ok || tok.Where != p+":1" {
		t.Fatalf("%+v %v", tok, ok)
	}
}
