package jslog

import (
	"context"
	"strings"
	"testing"

	"github.com/gale-stream/gale/internal/natstest"
)

// Without a system-account connection the probe trusts an embedded node's record
// of itself, and says "unknown" when it has none: never "+fsync" on a guess.
func TestDurabilityProbeWithoutTheServers(t *testing.T) {
	l := open(t, openJS(t, natstest.Run(t, natstest.JetStream(t, "")).ClientURL()))
	for _, c := range []struct {
		p          DurabilityProbe
		word, says string
	}{
		{DurabilityProbe{}, "unknown", "not told"},
		{DurabilityProbe{Node: &NodeSync{ServerName: "n1", SyncAlways: true, Record: "gale-sync.json"}}, "replicated:1+fsync", "gale-sync.json of n1"},
		{DurabilityProbe{Node: &NodeSync{ServerName: "n1"}}, "replicated:1", "n1 does not fsync every write"},
	} {
		word, why := c.p.Durability(context.Background(), l.Stream())
		if word != c.word || !strings.Contains(why, c.says) {
			t.Errorf("%+v: %q, %q; want %q, saying %q", c.p, word, why, c.word, c.says)
		}
	}
}
