package flux

import (
	"unicode"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"
)

// inner returns how to find a place inside the value n: the string the path
// reaches (map keys, list positions) and the character at byte offset at-1 of it
// (at 0: the string's own position). A class reports such a place for a problem at
// one character of a string (component.SpecError's Path and At): an expression's
// syntax error points at its character in the file, not at the start of the value.
func (p *parser) inner(n *yaml.Node) func(path []any, at int) (Pos, bool) {
	lines := p.lines
	return func(path []any, at int) (Pos, bool) {
		n := deref(n)
		for _, step := range path {
			switch k := step.(type) {
			case string:
				if n.Kind != yaml.MappingNode {
					return Pos{}, false
				}
				var next *yaml.Node
				for i := 0; i+1 < len(n.Content); i += 2 {
					if deref(n.Content[i]).Value == k {
						next = deref(n.Content[i+1])
					}
				}
				if next == nil {
					return Pos{}, false
				}
				n = next
			case int:
				if n.Kind != yaml.SequenceNode || k < 0 || k >= len(n.Content) {
					return Pos{}, false
				}
				n = deref(n.Content[k])
			default:
				return Pos{}, false
			}
		}
		if at <= 0 || n.Kind != yaml.ScalarNode {
			return p.pos(n), true
		}
		line, col, ok := scalarChar(lines, n, at-1)
		if !ok {
			return p.pos(n), true
		}
		return p.at(line, col), true
	}
}

// scalarChar is the line and column (1-based, in characters, as the YAML decoder
// counts them) of the character at byte offset off of scalar n's value, found in
// the source lines. A value's characters are its source's but for the quotes,
// escapes ("\n", "\u00e9", ” in single quotes), line folding and block indentation,
// all of which add or remove only white space except the escapes: so the source is
// walked decoding escapes, and the character is the one after as many non-space
// characters as the value has before off. An offset at the value's end is the
// column after its last character (where a parser says "unexpected end").
func scalarChar(lines []string, n *yaml.Node, off int) (int, int, bool) {
	if off < 0 || off > len(n.Value) {
		return 0, 0, false
	}
	want := 0 // the non-space characters before off
	for _, r := range n.Value[:off] {
		if !unicode.IsSpace(r) {
			want++
		}
	}
	// 1-based; col counts characters. The node's position is that of its first
	// property (a tag, an anchor) if it has any: its text is after them.
	line, col := skipProperties(lines, n.Line, n.Column)
	quote := rune(0)
	switch n.Style &^ yaml.TaggedStyle { // a tag (!!str) is a bit of the style
	case yaml.DoubleQuotedStyle:
		quote, col = '"', col+1
	case yaml.SingleQuotedStyle:
		quote, col = '\'', col+1
	case yaml.LiteralStyle, yaml.FoldedStyle:
		line, col = line+1, 1 // the text starts on the line after | or >
	}
	total := countNonSpace(n.Value)
	if total == 0 {
		return n.Line, n.Column, true
	}
	seen := 0
	for ; line-1 < len(lines); line, col = line+1, 1 {
		runes := []rune(lines[line-1])
		for col-1 < len(runes) {
			i := col - 1
			r, width := runes[i], 1
			switch {
			case quote == '"' && r == '"', quote == '\'' && r == '\'' && (i+1 >= len(runes) || runes[i+1] != '\''):
				return line, col, true // the closing quote: off is the value's end
			case quote == '\'' && r == '\'':
				width = 2 // '' is one '
			case quote == '"' && r == '\\':
				if i+1 >= len(runes) {
					r = ' ' // an escaped line break: nothing
				} else {
					r, width = escape(runes, i)
				}
			}
			if !unicode.IsSpace(r) {
				if seen == want {
					return line, col, true
				}
				seen++
				if seen == total && quote == 0 {
					return line, col + width, true // off is the end: just after the last character
				}
			}
			col += width
		}
	}
	return 0, 0, false
}

// skipProperties returns where a node's text starts, given where the node starts:
// after its properties, a tag (!...) and an anchor (&...) in either order, each
// followed by spaces, a comment or line breaks. A node that starts with neither
// starts with its text (no scalar's text starts with ! or &).
func skipProperties(lines []string, line, col int) (int, int) {
	at := func(l, c int) (rune, bool) {
		if l-1 >= len(lines) {
			return 0, false
		}
		runes := []rune(lines[l-1])
		if c-1 >= len(runes) {
			return '\n', true
		}
		return runes[c-1], true
	}
	for {
		r, ok := at(line, col)
		if !ok || (r != '!' && r != '&') {
			return line, col
		}
		for ok && r != '\n' && !unicode.IsSpace(r) { // the property (a verbatim tag may hold a comma)
			col++
			r, ok = at(line, col)
		}
		for ok { // the space after it
			switch {
			case r == '\n' || r == '#':
				line, col = line+1, 1
			case unicode.IsSpace(r):
				col++
			default:
				ok = false
				continue
			}
			r, ok = at(line, col)
		}
		if _, ok := at(line, col); !ok {
			return line, col
		}
	}
}

func countNonSpace(s string) int {
	k := 0
	for _, r := range s {
		if !unicode.IsSpace(r) {
			k++
		}
	}
	return k
}

// escape decodes the double-quoted escape at runes[i] ('\\'): the character it
// stands for and how many source characters it takes.
func escape(runes []rune, i int) (rune, int) {
	hex := func(n int) (rune, int) {
		if i+2+n > len(runes) {
			return 'x', 2
		}
		v := rune(0)
		for _, h := range runes[i+2 : i+2+n] {
			v <<= 4
			switch {
			case h >= '0' && h <= '9':
				v |= h - '0'
			case h >= 'a' && h <= 'f':
				v |= h - 'a' + 10
			case h >= 'A' && h <= 'F':
				v |= h - 'A' + 10
			}
		}
		if !utf8.ValidRune(v) {
			v = 'x'
		}
		return v, 2 + n
	}
	switch runes[i+1] {
	case 'x':
		return hex(2)
	case 'u':
		return hex(4)
	case 'U':
		return hex(8)
	case 'n', 'r', 't', 'v', 'f', '0', ' ', '\t', 'N', '_', 'L', 'P', 'e', 'a', 'b':
		switch runes[i+1] {
		case 'n', 'r', 't', 'v', 'f', ' ', '\t', 'N', '_', 'L', 'P':
			return ' ', 2 // white space (as the value counts it)
		}
		return 'x', 2
	}
	return runes[i+1], 2 // \" \\ \/
}
