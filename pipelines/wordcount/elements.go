package wordcount

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/gale-stream/gale/topology"
	"github.com/gale-stream/gale/tuple"
)

// elements is split's JSON mode: the field holds a JSON array (text, or a []any
// already decoded), and each element is a piece, emitted as (element, pos, off).
// off is the byte offset where the element starts in the text (its index for a
// []any), so that line_id+off names the occurrence as a word's offset does. A
// value that is not an array is reported and the line acked: a replay would bring
// the same value.
func (b *splitBolt) elements(t *tuple.Tuple, at int, pos any, out topology.BasicCollector) error {
	var err error
	emit := func(v any, off int) {
		if e := out.Emit(tuple.Values{v, pos, off}); e != nil && err == nil {
			err = e
		}
	}
	switch v := t.Value(at).(type) {
	case []any:
		for i, e := range v {
			emit(e, i)
		}
		return err
	case string:
		if perr := JSONElements(v, emit); perr != nil {
			out.ReportError(fmt.Errorf("split: field %s of %s: %w", b.in.names[0], t.SourceComponent(), perr))
		}
		return err
	default:
		out.ReportError(fmt.Errorf("split: field %s of %s is %T, not a JSON array", b.in.names[0], t.SourceComponent(), v))
		return nil
	}
}

// JSONElements calls fn for each element of the JSON array text with the byte
// offset where it starts. An element is given as a tuple value: a string, an int
// (an integral number that fits), a float64, a bool, nil, or an object or array
// as its compact JSON text. An error (text that is not one JSON array) comes
// after the elements before it were given.
func JSONElements(text string, fn func(v any, off int)) error {
	dec := json.NewDecoder(strings.NewReader(text))
	tok, err := dec.Token()
	if err != nil {
		return fmt.Errorf("not a JSON array: %w", err)
	}
	if d, ok := tok.(json.Delim); !ok || d != '[' {
		return fmt.Errorf("not a JSON array: starts with %v", tok)
	}
	for dec.More() {
		// The element starts after the blanks and the comma that follow the
		// previous token.
		off := int(dec.InputOffset())
		for off < len(text) && strings.IndexByte(" \t\r\n,", text[off]) >= 0 {
			off++
		}
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return fmt.Errorf("element at byte %d: %w", off, err)
		}
		v, err := elementValue(raw)
		if err != nil {
			return fmt.Errorf("element at byte %d: %w", off, err)
		}
		fn(v, off)
	}
	if _, err := dec.Token(); err != nil { // the closing ']'
		return fmt.Errorf("not a JSON array: %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("not one JSON array: text after its closing ]")
	}
	return nil
}

func elementValue(raw json.RawMessage) (any, error) {
	switch raw[0] {
	case '"':
		var s string
		err := json.Unmarshal(raw, &s)
		return s, err
	case '{', '[':
		var buf bytes.Buffer
		err := json.Compact(&buf, raw)
		return buf.String(), err
	case 't':
		return true, nil
	case 'f':
		return false, nil
	case 'n':
		return nil, nil
	}
	if i, err := strconv.Atoi(string(raw)); err == nil {
		return i, nil
	}
	return strconv.ParseFloat(string(raw), 64)
}
