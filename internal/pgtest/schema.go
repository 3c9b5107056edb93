package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"strings"
	"testing"

	"github.com/gale-stream/gale/sink"
)

// Schema makes a fresh schema named prefix_<random> on the server of url (the
// caller's, e.g. GALE_TEST_POSTGRES_URL), drops it when the test ends, and returns
// url with search_path set to it: the test's tables are its own, whatever else
// runs on that server at the same time.
func Schema(t testing.TB, url, prefix string) string {
	t.Helper()
	admin, err := sink.Open(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	schema := prefix + "_" + hex.EncodeToString(b[:])
	if _, err := admin.SQL.Exec(`CREATE SCHEMA ` + schema); err != nil {
		admin.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if _, err := admin.SQL.Exec(`DROP SCHEMA ` + schema + ` CASCADE`); err != nil {
			t.Errorf("drop schema %s: %v", schema, err)
		}
		admin.Close()
	})
	sep := "?"
	if strings.Contains(url, "?") {
		sep = "&"
	}
	return url + sep + "search_path=" + schema
}
