package sink

import (
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"regexp"
	"strings"
)

// A database URL may be given by reference, so that the URL itself (and the
// password in it) is never written where the reference travels, such as the
// submit arguments of a cluster topology, which every worker reads from the
// cluster's KV:
//
//   - "env:NAME": the value of environment variable NAME in the process that
//     opens the database (gale serve, and each gale worker);
//   - "@PATH": the contents of file PATH (surrounding space trimmed), as Docker
//     and Kubernetes secrets are mounted.
//
// Anything else is the URL itself.

// ErrSecretInURL: a URL holding a password was given where it would be stored in
// clear; give it by reference (env:NAME or @PATH) instead.
var ErrSecretInURL = errors.New("sink: the database URL holds a password")

// IsRef reports whether s names a URL by reference (env:NAME or @PATH).
func IsRef(s string) bool { return strings.HasPrefix(s, "env:") || strings.HasPrefix(s, "@") }

// ResolveURL returns the URL s names: the variable's value for env:NAME, the
// file's contents for @PATH, s itself otherwise. An unset or empty variable, or
// an unreadable or empty file, is an error naming it (never its value).
func ResolveURL(s string) (string, error) {
	if IsRef(s) && strings.Contains(s, "://") {
		// A URL typed where its name was meant (env:postgres://u:pw@...): say so
		// without echoing it, password and all.
		return "", errors.New("sink: a reference (env:NAME or @PATH) holds a URL: give the variable's name or the file's path, not the URL itself")
	}
	switch {
	case strings.HasPrefix(s, "env:"):
		name := strings.TrimPrefix(s, "env:")
		if name == "" {
			return "", errors.New("sink: env: names no environment variable (want env:NAME)")
		}
		v := strings.TrimSpace(os.Getenv(name))
		if v == "" {
			return "", fmt.Errorf("sink: %s: environment variable %s is not set in this process (pid %d)", s, name, os.Getpid())
		}
		return v, nil
	case strings.HasPrefix(s, "@"):
		path := strings.TrimPrefix(s, "@")
		if path == "" {
			return "", errors.New("sink: @ names no file (want @PATH)")
		}
		b, err := readSmall(path, maxRefFile)
		if err != nil {
			return "", fmt.Errorf("sink: %s: %w", s, err)
		}
		v := strings.TrimSpace(string(b))
		if v == "" {
			return "", fmt.Errorf("sink: %s: the file is empty", s)
		}
		return v, nil
	}
	return s, nil
}

// HoldsSecret reports whether the database URL s (not a reference) carries a
// password: in its user info or a password parameter of a postgres:// URL, or a
// password= key of a key=value connection string.
func HoldsSecret(s string) bool {
	s = strings.TrimSpace(s) // " postgres://u:pw@..." is still a URL with a password
	if IsRef(s) {
		return false
	}
	if hasPrefixFold(s, "postgres://") || hasPrefixFold(s, "postgresql://") {
		u, err := url.Parse(s)
		if err != nil {
			return true // unparsable: it may hold one, and is not echoed
		}
		if _, ok := u.User.Password(); ok {
			return true
		}
		q := u.Query()
		return q.Has("password") || q.Has("sslpassword")
	}
	return passwordKey.MatchString(s)
}

// passwordKey matches a password keyword of a keyword/value connection string:
// libpq and pgx allow blanks around the '=' ("password = pw").
var passwordKey = regexp.MustCompile(`(?i)(^|\s)(ssl)?password\s*=`)

// maxRefFile bounds what @PATH reads: a URL is short, and @/dev/zero must end.
const maxRefFile = 64 << 10

// readSmall reads the file at path, refusing one longer than max bytes.
func readSmall(path string, max int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > max {
		return nil, fmt.Errorf("longer than %d KiB: a file named by @PATH holds one database URL", max>>10)
	}
	return b, nil
}
