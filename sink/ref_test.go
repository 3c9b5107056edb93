package sink

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestResolveURL(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "sink_url")
	if err := os.WriteFile(file, []byte("  postgres://u:secret@db/x\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	empty := filepath.Join(dir, "empty")
	if err := os.WriteFile(empty, []byte(" \n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("GALE_SINK_REF_TEST", "postgres://u:secret@db/y")
	t.Setenv("GALE_SINK_REF_EMPTY", "")
	for _, c := range []struct{ in, want, err string }{
		{"sink.db", "sink.db", ""},
		{"postgres://db/x", "postgres://db/x", ""},
		{"env:GALE_SINK_REF_TEST", "postgres://u:secret@db/y", ""},
		{"@" + file, "postgres://u:secret@db/x", ""},
		{"env:GALE_SINK_REF_EMPTY", "", "environment variable GALE_SINK_REF_EMPTY is not set"},
		{"env:GALE_SINK_REF_NONE", "", "environment variable GALE_SINK_REF_NONE is not set"},
		{"env:", "", "names no environment variable"},
		{"@" + empty, "", "the file is empty"},
		{"@" + filepath.Join(dir, "missing"), "", "no such file"},
		{"@", "", "names no file"},
		{"@/dev/zero", "", "longer than 64 KiB"},
	} {
		got, err := ResolveURL(c.in)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) || got != "" {
				t.Errorf("ResolveURL(%q) = %q, %v; want an error with %q", c.in, got, err, c.err)
			}
			if err != nil && strings.Contains(err.Error(), "secret") {
				t.Errorf("ResolveURL(%q)'s error shows the value: %v", c.in, err)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("ResolveURL(%q) = %q, %v; want %q", c.in, got, err, c.want)
		}
	}
}

func TestHoldsSecret(t *testing.T) {
	for in, want := range map[string]bool{
		"postgres://u:pw@db/x":                  true,
		"postgresql://u:pw@db/x?sslmode=off":    true,
		"POSTGRES://u:pw@db/x":                  true,
		"postgres://u@db/x?password=pw":         true,
		"postgres://u@db/x":                     false,
		"postgres://db/x?sslmode=disable":       false,
		"host=db user=u password=pw dbname=x":   true,
		"host=db user=u dbname=x":               false,
		"sink.db":                               false,
		"env:GALE_SINK_URL":                     false,
		"@/run/secrets/sink":                    false,
		"postgres://u:pw@db/%zz":                true, // unparsable: it may hold one
		"file:sink.db?_pragma=busy_timeout(50)": false,
	} {
		if got := HoldsSecret(in); got != want {
			t.Errorf("HoldsSecret(%q) = %v, want %v", in, got, want)
		}
	}
}

// Open takes a reference as it takes a URL.
func TestOpenByReference(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ref.db")
	t.Setenv("GALE_SINK_REF_OPEN", path)
	db, err := Open(context.Background(), "env:GALE_SINK_REF_OPEN")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if db.Dialect != SQLite {
		t.Errorf("dialect %v, want SQLite", db.Dialect)
	}
	if _, err := os.Stat(path); err != nil {
		t.Errorf("the database the variable names was not opened: %v", err)
	}
	if _, err := Open(context.Background(), "env:GALE_SINK_REF_UNSET"); err == nil || !strings.Contains(err.Error(), "GALE_SINK_REF_UNSET is not set") {
		t.Errorf("Open of an unset variable: %v", err)
	}
}

// Found by a breaker: sslpassword slipped past HoldsSecret and the redaction, a
// URL typed after env: or @ was echoed in the error.
func TestSecretsFoundByReview(t *testing.T) {
	for _, s := range []string{"postgres://u@h/db?sslpassword=pw", "host=h sslpassword=pw"} {
		if !HoldsSecret(s) {
			t.Errorf("HoldsSecret(%q) = false", s)
		}
	}
	if r := redact("postgres://u@h/db?sslpassword=secretpw&sslmode=require"); strings.Contains(r, "secretpw") {
		t.Errorf("redact left the sslpassword: %s", r)
	}
	for _, s := range []string{"env:postgres://u:secretpw@h/db", "@postgres://u:secretpw@h/db"} {
		_, err := ResolveURL(s)
		if err == nil || strings.Contains(err.Error(), "secretpw") || !strings.Contains(err.Error(), "holds a URL") {
			t.Errorf("ResolveURL(%q): %v, want an error that does not echo it", s, err)
		}
	}
}

// Found by a breaker: libpq and pgx take a keyword/value string with spaces
// around '=' ("password = pw"), and a URL with blanks around it is still read as
// one by the person who wrote it; HoldsSecret let both through, so a Flux file's
// gale.sink.SQL url carried the password in clear to the cluster's KV.
func TestHoldsSecretSpacedForms(t *testing.T) {
	for in, want := range map[string]bool{
		"host=db user=u password = pw":      true,
		"host=db user=u password= pw":       true,
		"host=db user=u password =pw":       true,
		"host=db user=u\tPASSWORD\t=\tpw":   true,
		"host=db sslpassword = pw":          true,
		" postgres://u:pw@db/x":             true,
		"\tpostgresql://u@db/x?password=pw": true,
		" postgres://u@db/x":                false,
		"host=db user=password dbname=x":    false, // a user named password
		"host=db user=u dbname=x":           false,
	} {
		if got := HoldsSecret(in); got != want {
			t.Errorf("HoldsSecret(%q) = %v, want %v", in, got, want)
		}
	}
}
