package mounttest

import (
	"strings"
	"testing"
)

// CapEff lines as /proc/self/status gave them on the CI machine: root, and root
// under capsh --drop=cap_sys_admin (the container case).
func TestMissingIn(t *testing.T) {
	for _, c := range []struct{ status, want string }{
		{"Name:\tcat\nCapInh:\t0000000000000000\nCapEff:\t000001fffeffffff\n", ""},
		{"Name:\tcat\nCapEff:\t000001fffedfffff\n", "CAP_SYS_ADMIN"},
		{"Name:\tcat\nCapEff:\tzz\n", "cannot read CapEff"},
		{"Name:\tcat\n", "no CapEff"},
	} {
		got := missingIn(c.status)
		if (c.want == "") != (got == "") || !strings.Contains(got, c.want) {
			t.Errorf("missingIn(%q) = %q, want %q", c.status, got, c.want)
		}
	}
}
