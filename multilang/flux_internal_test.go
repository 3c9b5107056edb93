package multilang

import (
	"testing"
	"time"

	"github.com/gale-stream/gale/component"
	"github.com/gale-stream/gale/topology"
)

// A topology file's topology.subprocess.timeout.secs is the shell components'
// timeout (and what their handshake's conf says); without it, Storm's 30 s.
func TestFluxSubprocessTimeout(t *testing.T) {
	ds := Components()
	for _, c := range []struct {
		config map[string]any
		want   time.Duration
	}{
		{nil, DefaultTimeout},
		{map[string]any{SubprocessTimeoutKey: 4, "my.setting": "x"}, 4 * time.Second},
	} {
		spec := component.Spec{Args: []any{[]any{"python3", "x.py"}, []any{"word"}}, Config: c.config}
		spout, err := ds[0].Spout(spec)
		if err != nil {
			t.Fatal(err)
		}
		bolt, err := ds[1].Bolt(spec)
		if err != nil {
			t.Fatal(err)
		}
		if got := spout().(*shellSpout).o.timeout; got != c.want {
			t.Errorf("config %v: spout timeout %v, want %v", c.config, got, c.want)
		}
		b := bolt().(*shellBolt)
		if got := b.o.timeout; got != c.want {
			t.Errorf("config %v: bolt timeout %v, want %v", c.config, got, c.want)
		}
		conf := b.o.setup(topology.TaskContext{Component: "split", TaskID: 1})["conf"].(map[string]any)
		if got := conf[SubprocessTimeoutKey]; got != int(c.want.Seconds()) {
			t.Errorf("config %v: the handshake's conf says %v, want %d", c.config, got, int(c.want.Seconds()))
		}
		// The file's config is the conf the program gets, as Storm sends its own.
		if c.config != nil && conf["my.setting"] != "x" {
			t.Errorf("the handshake's conf %v lacks the file's my.setting", conf)
		}
	}
}
