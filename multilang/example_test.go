package multilang_test

import (
	"time"

	"github.com/gale-stream/gale/multilang"
	"github.com/gale-stream/gale/topology"
)

// A word count whose spout is a Node program and whose bolts are Python programs,
// run in their directory as Storm would run them. The programs are those of
// testdata (lines.js, split.py, count.py); the outputs are declared on the topology
// as for any component. (Not run: it needs node and python3; see the tests.)
func Example() {
	b := topology.NewBuilder()
	b.SetSpout("lines", multilang.ShellSpout([]string{"node", "lines.js"}, "testdata",
		multilang.Env("GALE_LINES_FILE=../testdata/books/105.txt")), 1).
		Output("n", "line")
	b.SetBolt("split", multilang.ShellBolt([]string{"python3", "split.py"}, "testdata",
		multilang.Timeout(30*time.Second)), 2).
		ShuffleGrouping("lines").Output("word", "occurrence")
	b.SetBolt("count", multilang.ShellBolt([]string{"python3", "count.py"}, "testdata",
		multilang.Outputs("default", "word", "count")), 2).
		FieldsGrouping("split", "word").Output("word", "count")
	_, _ = b.Build() // then engine.Start, as for any topology
}
