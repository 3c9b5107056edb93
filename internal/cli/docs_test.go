package cli

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"runtime/debug"
	"slices"
	"strings"
	"testing"
	"unicode"

	"github.com/spf13/cobra"
)

// The README and the pages of docs/ describe commands, flags and each other; these
// tests keep them true as the code moves: a renamed flag, a removed command or a
// heading that changed its name fails here, naming the file and line, instead of
// misleading the next reader.

// repoRoot is where the README is, seen from this package's directory.
const repoRoot = "../.."

// oldReadmeHeadings is every heading of the README before it became a front page
// (issue 26), with where its text lives now: "FILE" when FILE has a heading of the
// same text, "FILE#anchor" when the heading was renamed. Nothing the README said
// may lose its place.
var oldReadmeHeadings = []struct{ heading, home string }{
	{"gale", "README.md"},
	{"The two commands", "README.md"},
	{"A topology in Go", "docs/topologies.md"},
	{"One topology, several engines", "docs/topologies.md"},
	{"Across processes and machines, on NATS", "docs/cluster.md"},
	{"Sources and sinks", "docs/connectors.md"},
	{"Honest acks at the edge: `gale serve`", "docs/ingest.md"},
	{"Replicated log", "docs/ingest.md"},
	{"Running gale serve on a network", "docs/ingest.md"},
	{"The orders pipeline (`gale orders`, `gale ingest`)", "docs/ingest.md"},
	{"What can still go wrong", "docs/repair.md"},
	{"A damaged log: `gale log check` and `gale log salvage`", "docs/repair.md"},
	{"Rebuild the sink from the log", "docs/repair.md"},
	{"See what happened to a message: UI, metrics, lineage, logs", "docs/monitoring.md"},
	{"Monitoring", "docs/monitoring.md#metrics-dashboard-and-alerts"},
	{"What the reliability words mean in gale", "README.md"},
	{"Layout", "docs/layout.md"},
	{"Performance", "docs/performance.md"},
	{"Several engines, the codec, and memory per task", "docs/performance.md"},
	{"On worker processes (`gale bench cluster`)", "docs/performance.md"},
	{"The cost of metrics and lineage", "docs/performance.md"},
	{"Ingest (`gale bench ingest`)", "docs/performance.md"},
	{"License", "README.md"},
	// Bold leads of the old README that became headings.
	{"Several serve processes on one stream", "docs/ingest.md"},
	{"Lost records in JetStream", "docs/repair.md"},
}

// runnableMarker, alone on the line before a code block, makes the test run the
// block's gale commands (in this process, from the repository root): only cheap ones.
const runnableMarker = "<!-- runnable -->"

// mdFile is a Markdown file of the documentation, split into lines.
type mdFile struct {
	name  string // relative to the repository root, e.g. docs/ingest.md
	lines []string
}

// docFiles reads README.md and every docs/*.md.
func docFiles(t *testing.T) []mdFile {
	t.Helper()
	names, err := filepath.Glob(filepath.Join(repoRoot, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	names = append([]string{filepath.Join(repoRoot, "README.md")}, names...)
	var files []mdFile
	for _, n := range names {
		b, err := os.ReadFile(n)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(repoRoot, n)
		files = append(files, mdFile{name: filepath.ToSlash(rel), lines: strings.Split(string(b), "\n")})
	}
	return files
}

// codeBlock is a fenced block: its first content line's number (1-based), its
// lines, and whether the runnable marker precedes it.
type codeBlock struct {
	start    int
	lines    []string
	runnable bool
}

// blocks returns f's fenced code blocks.
func (f mdFile) blocks() []codeBlock {
	var out []codeBlock
	var cur *codeBlock
	for i, l := range f.lines {
		if strings.HasPrefix(strings.TrimSpace(l), "```") {
			if cur == nil {
				cur = &codeBlock{start: i + 2, runnable: i > 0 && strings.TrimSpace(f.lines[i-1]) == runnableMarker}
			} else {
				out = append(out, *cur)
				cur = nil
			}
			continue
		}
		if cur != nil {
			cur.lines = append(cur.lines, l)
		}
	}
	return out
}

// prose calls fn with every line of f outside code blocks and its number.
func (f mdFile) prose(fn func(n int, line string)) {
	in := false
	for i, l := range f.lines {
		if strings.HasPrefix(strings.TrimSpace(l), "```") {
			in = !in
			continue
		}
		if !in {
			fn(i+1, l)
		}
	}
}

// headings returns the text of every heading of f outside code blocks.
func (f mdFile) headings() []string {
	var hs []string
	f.prose(func(_ int, l string) {
		if m := headingRE.FindStringSubmatch(l); m != nil {
			hs = append(hs, strings.TrimSpace(m[1]))
		}
	})
	return hs
}

var headingRE = regexp.MustCompile(`^#{1,6} (.+)$`)

// anchors returns the anchors GitHub gives f's headings: lower case, punctuation
// dropped, spaces as hyphens, a repeated one suffixed -1, -2...
func (f mdFile) anchors() map[string]bool {
	out := map[string]bool{}
	seen := map[string]int{}
	for _, h := range f.headings() {
		s := slug(h)
		if n := seen[s]; n > 0 {
			out[fmt.Sprintf("%s-%d", s, n)] = true
		} else {
			out[s] = true
		}
		seen[s]++
	}
	return out
}

func slug(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case unicode.IsLetter(r) || unicode.IsDigit(r) || r == '-' || r == '_':
			b.WriteRune(r)
		case r == ' ':
			b.WriteByte('-')
		}
	}
	return b.String()
}

// A command line as the docs show it, split into words as a shell would, up to the
// first pipe, redirection, separator or comment; a line ending in \ goes on.
// Quotes and backslashes are honoured; nothing is expanded.
func shellWords(line string) []string {
	var words []string
	var cur strings.Builder
	inWord := false
	flush := func() {
		if inWord {
			words = append(words, cur.String())
			cur.Reset()
			inWord = false
		}
	}
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case c == ' ' || c == '\t':
			flush()
		case c == '\'':
			j := strings.IndexByte(line[i+1:], '\'')
			if j < 0 {
				j = len(line) - i - 1
			}
			cur.WriteString(line[i+1 : i+1+j])
			inWord = true
			i += j + 1
		case c == '"':
			inWord = true
			for i++; i < len(line) && line[i] != '"'; i++ {
				if line[i] == '\\' && i+1 < len(line) {
					i++
				}
				cur.WriteByte(line[i])
			}
		case c == '\\' && i+1 < len(line):
			i++
			cur.WriteByte(line[i])
			inWord = true
		case c == '#' && !inWord, c == '|', c == ';', c == '&':
			flush()
			return words
		case c == '>' || c == '<':
			if s := cur.String(); inWord && strings.Trim(s, "0123456789") == "" {
				cur.Reset() // the 2 of 2>
				inWord = false
			}
			flush()
			return words
		default:
			cur.WriteByte(c)
			inWord = true
		}
	}
	flush()
	return words
}

// galeArgs returns the arguments of a gale command line ("gale ...", "./gale ...",
// "/tmp/gale ...", "go run ./cmd/gale ...", after "$ " and VAR=value words), or
// false if the line runs something else.
func galeArgs(line string) ([]string, bool) {
	w := shellWords(strings.TrimPrefix(strings.TrimSpace(line), "$ "))
	for len(w) > 0 && envAssignRE.MatchString(w[0]) {
		w = w[1:]
	}
	switch {
	case len(w) >= 3 && w[0] == "go" && w[1] == "run" && w[2] == "./cmd/gale":
		return w[3:], true
	case len(w) >= 1 && (w[0] == "gale" || strings.HasSuffix(w[0], "/gale")):
		return w[1:], true
	}
	return nil, false
}

// docCommand is one gale command shown in the docs.
type docCommand struct {
	where    string // file:line
	args     []string
	inline   bool // in inline code in prose: a flag may be named without its value
	runnable bool
}

// docCommands finds every gale command line in the code blocks of the README and
// docs/, and every inline code span in their prose that starts with one.
func docCommands(t *testing.T) []docCommand {
	var out []docCommand
	for _, f := range docFiles(t) {
		for _, b := range f.blocks() {
			for i := 0; i < len(b.lines); i++ {
				n, line := b.start+i, b.lines[i]
				for strings.HasSuffix(line, `\`) && i+1 < len(b.lines) {
					i++
					line = strings.TrimSuffix(line, `\`) + " " + b.lines[i]
				}
				if args, ok := galeArgs(line); ok {
					out = append(out, docCommand{where: fmt.Sprintf("%s:%d", f.name, n), args: args, runnable: b.runnable})
				} else if b.runnable && strings.TrimSpace(line) != "" {
					t.Errorf("%s:%d: a runnable block holds only gale commands, not %q", f.name, n, line)
				}
			}
		}
		f.prose(func(n int, l string) {
			for _, m := range inlineCodeRE.FindAllStringSubmatch(l, -1) {
				s := strings.TrimSpace(m[1])
				if !strings.HasPrefix(s, "gale ") && !strings.HasPrefix(s, "./gale ") && !strings.HasPrefix(s, "go run ./cmd/gale ") {
					continue // `gale` alone, gale_ metrics, other programs
				}
				args, _ := galeArgs(s)
				out = append(out, docCommand{where: fmt.Sprintf("%s:%d", f.name, n), args: args, inline: true})
			}
		})
	}
	return out
}

var (
	inlineCodeRE = regexp.MustCompile("`([^`]+)`")
	envAssignRE  = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*=`)
	linkRE       = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	schemeRE     = regexp.MustCompile(`^[a-z]+:`)
)

// checkCommand finds args' command in a fresh command tree and parses its flags,
// as cobra would before running it, without running it.
func checkCommand(c docCommand) error {
	root := newRoot()
	cmd, rest, err := root.Find(c.args)
	if err != nil {
		return err
	}
	if cmd == root && len(rest) > 0 && !strings.HasPrefix(rest[0], "-") {
		return fmt.Errorf("unknown command %q", rest[0])
	}
	if cmd.Name() == "submit" {
		return checkSubmit(cmd, rest, c.inline)
	}
	cmd.InitDefaultHelpFlag()
	if err := cmd.ParseFlags(rest); err != nil {
		err = cmd.FlagErrorFunc()(cmd, err) // as cobra reports it: a group names the unknown command
		if c.inline && strings.Contains(err.Error(), "needs an argument") {
			return nil
		}
		return err
	}
	if c.inline {
		return nil // prose names commands without their arguments
	}
	return cmd.ValidateArgs(cmd.Flags().Args())
}

// checkSubmit parses gale submit's flags and, after the topology's name, the
// topology's, as submit itself does (it parses its own flags).
func checkSubmit(cmd *cobra.Command, args []string, inline bool) error {
	cmd.InitDefaultHelpFlag()
	own, topo, rest, err := galeApp().splitSubmitArgs(cmd.Flags(), args)
	if err != nil {
		if inline && strings.Contains(err.Error(), "needs a value") {
			return nil
		}
		return err
	}
	if err := cmd.Flags().Parse(own); err != nil {
		return err
	}
	if topo == "" {
		return nil
	}
	if !slices.Contains(registry().Names(), topo) {
		return fmt.Errorf("no topology %q in this build (it has %s)", topo, strings.Join(registry().Names(), ", "))
	}
	if flags := galeApp().topologyFlags(topo); flags != nil {
		return flags.Parse(rest)
	}
	return nil
}

// Every gale command the README and docs/ show exists and takes the flags shown.
func TestDocsCommandsParse(t *testing.T) {
	cmds := docCommands(t)
	if len(cmds) < 50 {
		t.Fatalf("found only %d gale commands in the README and docs/: is the search broken?", len(cmds))
	}
	for _, c := range cmds {
		if err := checkCommand(c); err != nil {
			t.Errorf("%s: gale %s: %v", c.where, strings.Join(c.args, " "), err)
		}
	}
}

// The blocks marked runnable run, each command exiting 0.
func TestDocsRunnableBlocks(t *testing.T) {
	var run []docCommand
	for _, c := range docCommands(t) {
		if c.runnable {
			run = append(run, c)
		}
	}
	if len(run) == 0 {
		t.Fatalf("no block is marked %s", runnableMarker)
	}
	t.Chdir(repoRoot) // as the README says to run them
	// gale wordcount sets GOGC for its own process, which is this test's here.
	gc := debug.SetGCPercent(100)
	defer debug.SetGCPercent(gc)
	for _, c := range run {
		var o, e bytes.Buffer
		if code := runWith(c.args, &o, &e); code != 0 {
			t.Errorf("%s: gale %s: exit %d\nstdout:\n%s\nstderr:\n%s", c.where, strings.Join(c.args, " "), code, o.String(), e.String())
		} else if o.Len() == 0 {
			t.Errorf("%s: gale %s: printed nothing", c.where, strings.Join(c.args, " "))
		}
		debug.SetGCPercent(100)
	}
}

// Every relative link of the README and docs/ leads to a file that exists, and
// every #anchor to a heading of that file.
func TestDocsLinksResolve(t *testing.T) {
	files := map[string]mdFile{}
	for _, f := range docFiles(t) {
		files[f.name] = f
	}
	for _, f := range docFiles(t) {
		f.prose(func(n int, l string) {
			for _, m := range linkRE.FindAllStringSubmatch(inlineCodeRE.ReplaceAllString(l, ""), -1) {
				target := m[1]
				if schemeRE.MatchString(target) {
					continue // http:, https:, mailto:
				}
				path, anchor, _ := strings.Cut(target, "#")
				to := f.name
				if path != "" {
					to = filepath.ToSlash(filepath.Join(filepath.Dir(f.name), path))
					if _, err := os.Stat(filepath.Join(repoRoot, to)); err != nil {
						t.Errorf("%s:%d: link %s: no %s", f.name, n, target, to)
						continue
					}
				}
				if anchor == "" {
					continue
				}
				tf, ok := files[to]
				if !ok {
					t.Errorf("%s:%d: link %s: an anchor into %s, which is not a page of the docs", f.name, n, target, to)
				} else if !tf.anchors()[anchor] {
					t.Errorf("%s:%d: link %s: %s has no heading with anchor #%s", f.name, n, target, to, anchor)
				}
			}
		})
	}
}

// Every heading of the old README has a home.
func TestDocsOldHeadingsHaveAHome(t *testing.T) {
	files := map[string]mdFile{}
	for _, f := range docFiles(t) {
		files[f.name] = f
	}
	for _, h := range oldReadmeHeadings {
		name, anchor, _ := strings.Cut(h.home, "#")
		f, ok := files[name]
		switch {
		case !ok:
			t.Errorf("%q: its home %s does not exist", h.heading, name)
		case anchor != "" && !f.anchors()[anchor]:
			t.Errorf("%q: its home %s has no heading with anchor #%s", h.heading, name, anchor)
		case anchor == "" && !slices.Contains(f.headings(), h.heading):
			t.Errorf("%q: its home %s has no heading of that text", h.heading, name)
		}
	}
}

// The README stays a front page: short, the test command alone in its block under
// "The two commands" (CI runs "the README's test command"), the two main commands,
// and a link to every page of docs/.
func TestDocsReadmeIsAFrontPage(t *testing.T) {
	files := docFiles(t)
	readme := files[0]
	if n := len(readme.lines); n > 350 {
		t.Errorf("README.md has %d lines, more than 350: move detail to a page of docs/", n)
	}
	text := strings.Join(readme.lines, "\n")
	_, two, ok := strings.Cut(text, "\n## The two commands\n")
	two, _, _ = strings.Cut(two, "\n## ")
	if !ok {
		t.Fatal(`README.md has no "## The two commands"`)
	}
	for _, block := range []string{"go run ./cmd/gale wordcount", "go run ./cmd/gale orders", "go test -race ./..."} {
		if !strings.Contains(two, "\n```sh\n"+block+"\n```\n") {
			t.Errorf("README.md's \"The two commands\" lacks %q alone in a sh block", block)
		}
	}
	for _, f := range files[1:] {
		link := "](" + f.name + ")"
		if !strings.Contains(text, link) {
			t.Errorf("README.md does not link to %s in its table of contents", f.name)
		}
	}
}
