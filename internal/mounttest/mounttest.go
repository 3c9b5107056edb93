// Package mounttest says whether a test may mount file systems and attach loop
// devices: root is not enough, as root in a container without CAP_SYS_ADMIN is
// refused every mount, and a test that only checked the user id then failed with
// "permission denied" where it should have skipped.
package mounttest

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// capSysAdmin is CAP_SYS_ADMIN's bit in the capability sets (linux/capability.h).
const capSysAdmin = 21

// Missing returns why this process cannot mount, or "" if it can: it must be root
// with CAP_SYS_ADMIN in its effective set.
func Missing() string {
	if os.Geteuid() != 0 {
		return "needs root to mount, as .ci/run runs"
	}
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return fmt.Sprintf("cannot tell whether this process may mount: %v", err)
	}
	return missingIn(string(b))
}

// missingIn reads CapEff from the text of /proc/self/status.
func missingIn(status string) string {
	for _, line := range strings.Split(status, "\n") {
		v, ok := strings.CutPrefix(line, "CapEff:")
		if !ok {
			continue
		}
		caps, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
		if err != nil {
			return fmt.Sprintf("cannot read CapEff %q: %v", strings.TrimSpace(v), err)
		}
		if caps&(1<<capSysAdmin) == 0 {
			return "root without CAP_SYS_ADMIN (as in a container) cannot mount"
		}
		return ""
	}
	return "no CapEff in /proc/self/status: cannot tell whether this process may mount"
}
