package lineage

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"
)

// TestRecorderDataDriven runs the scripts in testdata/: each command is one event the
// runtime would send, or a query, and the expected output is what the recorder keeps.
//
//	new sample=S trees=N nodes=M
//	start t=T root=R msg=M nodes=ID,ID...        (spout tuples of a sampled root)
//	emit root=R id=ID parents=ID,... t=T         (a bolt's tuple of a sampled tree)
//	done root=R id=ID task=K t=T [failed]
//	fail root=R comp=C task=K t=T reason=...     (an explicit fail, any tree)
//	end root=R msg=M t=T outcome=O [reason=...]
//	hold root=R comp=C task=K since=T t=T [id=ID]
//	lookup id=X    recent outcome=O    stats
func TestRecorderDataDriven(t *testing.T) {
	datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
		var r *Recorder
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			str := func(key string) string {
				if a, ok := d.Arg(key); ok {
					return strings.Join(a.Vals, ",")
				}
				return ""
			}
			num := func(key string) uint64 {
				v, err := strconv.ParseUint(str(key), 0, 64)
				if err != nil && str(key) != "" {
					d.Fatalf(t, "%s: bad %s: %v", d.Cmd, key, err)
				}
				return v
			}
			ids := func(key string) []uint64 {
				var out []uint64
				if s := str(key); s != "" {
					for _, f := range strings.Split(s, ",") {
						v, _ := strconv.ParseUint(f, 0, 64)
						out = append(out, v)
					}
				}
				return out
			}
			if d.Cmd == "new" {
				f, _ := strconv.ParseFloat(str("sample"), 64)
				var err error
				if r, err = New(Config{Sample: f, MaxTrees: int(num("trees")), MaxNodes: int(num("nodes"))}); err != nil {
					return err.Error()
				}
				return "ok"
			}
			T := int64(num("t"))
			root := num("root")
			switch d.Cmd {
			case "start":
				var nodes []Node
				for _, id := range ids("nodes") {
					nodes = append(nodes, Node{ID: id, Component: "spout", Task: 1, ToComponent: "bolt", ToTask: 2, EmittedAt: T})
				}
				r.Start(T, root, str("msg"), "spout", 1, nodes)
			case "emit":
				r.Emit(root, Node{ID: num("id"), Parents: ids("parents"), Component: "bolt", Task: 2, ToComponent: "sink", ToTask: 3, EmittedAt: T})
			case "done":
				r.Done(T, root, num("id"), int(num("task")), d.HasArg("failed"), str("reason"))
			case "fail":
				r.Fail(root, FailPoint{Component: str("comp"), Task: int(num("task")), At: T, Reason: str("reason")})
			case "end":
				r.End(T, root, str("msg"), "spout", 1, 0, Outcome(str("outcome")), str("reason"))
			case "hold":
				r.Hold(root, Holder{Node: num("id"), Component: str("comp"), Task: int(num("task")), Since: int64(num("since")), FoundAt: T})
			case "lookup":
				tr, ok := r.Lookup(str("id"))
				if !ok {
					return "not found"
				}
				return show(tr)
			case "recent":
				var b strings.Builder
				for _, tr := range r.Recent(Outcome(str("outcome")), 100) {
					fmt.Fprintf(&b, "root=%d msg=%s %s\n", tr.Root, tr.MsgID, tr.Outcome)
				}
				return b.String()
			case "stats":
				s := r.Stats()
				return fmt.Sprintf("sampled=%d failures=%d evicted=%d truncated=%d", s.Sampled, s.Failures, s.Evicted, s.Truncated)
			default:
				d.Fatalf(t, "unknown command %s", d.Cmd)
			}
			return ""
		})
	})
}

func show(tr Tree) string {
	var b strings.Builder
	fmt.Fprintf(&b, "root=%d msg=%s sampled=%v outcome=%s reason=%q\n", tr.Root, tr.MsgID, tr.Sampled, tr.Outcome, tr.Reason)
	for _, n := range tr.Nodes {
		fmt.Fprintf(&b, "  node %d %s[%d]->%s[%d] parents=%v %s", n.ID, n.Component, n.Task, n.ToComponent, n.ToTask, n.Parents, n.State)
		if n.State != NodePending {
			fmt.Fprintf(&b, " by %d at %d", n.DoneByTask, n.DoneAt)
		}
		b.WriteString("\n")
	}
	for _, f := range tr.Fails {
		fmt.Fprintf(&b, "  fail %s[%d] at %d: %s\n", f.Component, f.Task, f.At, f.Reason)
	}
	for _, h := range tr.Holders {
		fmt.Fprintf(&b, "  held by %s[%d] node=%d since %d found %d lineage=%v\n", h.Component, h.Task, h.Node, h.Since, h.FoundAt, h.FromLineage)
	}
	if tr.Truncated > 0 {
		fmt.Fprintf(&b, "  truncated %d\n", tr.Truncated)
	}
	return b.String()
}
