package ui_test

import (
	"regexp"
	"strings"
	"testing"
)

// rowOf returns the <tr data-id="id"> element of the table with the given id.
func rowOf(t *testing.T, dom, table, id string) string {
	t.Helper()
	i := strings.Index(dom, `id="`+table+`"`)
	if i < 0 {
		t.Fatalf("no #%s in the page", table)
	}
	j := strings.Index(dom[i:], `<tr data-id="`+id+`"`)
	if j < 0 {
		t.Fatalf("no row %q in #%s", id, table)
	}
	row := dom[i+j:]
	return row[:strings.Index(row, "</tr>")]
}

// element returns the element of the page with the given id, up to its closing tag.
func element(t *testing.T, dom, id, closing string) string {
	t.Helper()
	i := strings.Index(dom, `id="`+id+`"`)
	if i < 0 {
		t.Fatalf("no #%s in the page: %.3000s", id, dom)
	}
	e := dom[i:]
	return e[:strings.Index(e, closing)]
}

// page loads url and checks the page rendered with data and shows want.
func page(t *testing.T, url, want string) string {
	t.Helper()
	dom := headlessDOM(t, url)
	if !strings.Contains(dom, `data-ready="1"`) || !strings.Contains(dom, want) {
		t.Fatalf("page %s not ready or without %q: %.3000s", url, want, dom)
	}
	return dom
}

func cell(t *testing.T, row, col string) string {
	t.Helper()
	m := regexp.MustCompile(`data-col="` + col + `"[^>]*>([^<]*)<`).FindStringSubmatch(row)
	if m == nil {
		t.Fatalf("no %s cell in %.300s", col, row)
	}
	return m[1]
}

// TestBrowserTopologyPage loads the UI in headless Chromium against a running topology
// (1,000 roots, fan-out 3, 5% failed, one tree whose ack is dropped) and checks what the
// page shows: the graph, Storm's table with the exact counts, and the failed and
// timed-out trees.
func TestBrowserTopologyPage(t *testing.T) {
	srv, _ := startCounted(t, "")
	dom := page(t, srv.URL+"/?window=all", `id="dag"`)
	for _, want := range []string{`data-id="src"`, `data-id="fan"`, `data-id="sink"`, `data-from="fan" data-to="sink"`} {
		if !strings.Contains(dom[strings.Index(dom, `id="dag"`):], want) {
			t.Errorf("the graph lacks %s", want)
		}
	}
	src := rowOf(t, dom, "spouts", "src")
	for col, want := range map[string]string{"emitted": "1,000", "acked": "949", "failed": "50", "timed_out": "1"} {
		if got := cell(t, src, col); got != want {
			t.Errorf("spout %s = %q, want %s", col, got, want)
		}
	}
	fan := rowOf(t, dom, "bolts", "fan")
	for col, want := range map[string]string{"executed": "1,000", "emitted": "2,850", "acked": "950", "failed": "50"} {
		if got := cell(t, fan, col); got != want {
			t.Errorf("fan %s = %q, want %s", col, got, want)
		}
	}
	if got := cell(t, rowOf(t, dom, "bolts", "sink"), "acked"); got != "2,847" {
		t.Errorf("sink acked = %q, want 2,847", got)
	}
	if got := element(t, dom, "live", "</span>"); !strings.Contains(got, "live · updated") {
		t.Errorf("a running job's header: %s", got)
	}
	if n := strings.Count(element(t, dom, "recent-failed", "</ul>"), "<li"); n != 50 {
		t.Errorf("%d recent failed trees listed, want 50", n)
	}
	for chart, series := range map[string][]string{
		"chart-throughput": {"emitted", "acked", "failed"},
		"chart-latency":    {"p50", "p99"},
		"chart-capacity":   {"fan", "sink"},
	} {
		c := element(t, dom, chart, "</svg>")
		for _, name := range series {
			if !strings.Contains(c, `data-series="`+name+`"`) {
				t.Errorf("#%s has no %s line: %.500s", chart, name, c)
			}
		}
	}
	if timedOut := element(t, dom, "recent-timed-out", "</ul>"); strings.Count(timedOut, "<li") != 1 || !strings.Contains(timedOut, "#/tree/") {
		t.Errorf("timed-out list: %s", timedOut)
	}
}

// TestBrowserStuckTree opens the message page of the tree whose ack was dropped: it
// names the bolt and the task holding each pending tuple.
func TestBrowserStuckTree(t *testing.T) {
	srv, _ := startCounted(t, "")
	dom := page(t, srv.URL+"/#/tree/7", "outcome-timed_out")
	if name := element(t, dom, "topo-name", "</span>"); name != `id="topo-name">counted` {
		t.Errorf("the tree page's header lacks the topology's name: %s", name)
	}
	if !strings.Contains(dom, "<title>gale · counted · tree ") {
		t.Errorf("the tree page's title lacks the topology's name: %.300s", dom)
	}
	pending := element(t, dom, "pending", "</table>")
	// Each of root 7's 3 tuples is held by sink, task 3 or 4 (shuffle picks).
	if n := strings.Count(pending, `data-col="component">sink<`); n != 3 {
		t.Errorf("%d pending rows name sink, want root 7's 3 tuples: %s", n, pending)
	}
	if n := len(regexp.MustCompile(`data-col="task"[^>]*>[34]<`).FindAllString(pending, -1)); n != 3 {
		t.Errorf("%d pending rows name task 3 or 4, want 3: %s", n, pending)
	}
}

// TestBrowserFailedTree: the page of an unsampled failed tree names its fail point.
func TestBrowserFailedTree(t *testing.T) {
	srv, _ := startCounted(t, "")
	dom := page(t, srv.URL+"/#/tree/20", "outcome-failed")
	if strings.Contains(element(t, dom, "tree", "<script"), "null") {
		t.Errorf("the tree page shows the text null: %.3000s", element(t, dom, "tree", "<script"))
	}
	fails := element(t, dom, "fails", "</table>")
	for _, want := range []string{`data-col="component">fan<`, `data-col="task" class="num">2<`, `data-col="from">src[1]<`, "root 20: injected failure"} {
		if !strings.Contains(fails, want) {
			t.Errorf("fail points lack %s: %s", want, fails)
		}
	}
}
