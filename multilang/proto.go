package multilang

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// MaxMessage bounds one message read from a subprocess (its JSON lines together): a
// longer one is a protocol error, so a runaway program cannot make gale's memory grow.
const MaxMessage = 16 << 20

// errTooLong: a message passed MaxMessage.
var errTooLong = fmt.Errorf("message longer than %d bytes", MaxMessage)

// msgReader reads the subprocess's messages: lines of JSON up to a line "end".
type msgReader struct {
	r   *bufio.Reader
	buf []byte
}

func newMsgReader(r io.Reader) *msgReader { return &msgReader{r: bufio.NewReaderSize(r, 64<<10)} }

// next returns the next message's JSON text (valid until the next call). io.EOF at a
// clean end between messages; io.ErrUnexpectedEOF inside one.
func (m *msgReader) next() ([]byte, error) {
	m.buf = m.buf[:0]
	lines := 0
	// A program may print blank lines between messages: they are skipped.
	for {
		line, err := m.line()
		if err != nil {
			if err == io.EOF && (lines > 0 || len(line) > 0) {
				return nil, io.ErrUnexpectedEOF
			}
			return nil, err
		}
		if lines == 0 && len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		if string(line) == "end" {
			return bytes.TrimSpace(m.buf), nil
		}
		if len(m.buf)+len(line)+1 > MaxMessage {
			return nil, errTooLong
		}
		m.buf = append(m.buf, line...)
		m.buf = append(m.buf, '\n')
		lines++
	}
}

// line reads one line without its "\n" (and "\r"), bounded by MaxMessage.
func (m *msgReader) line() ([]byte, error) {
	var line []byte
	for {
		frag, err := m.r.ReadSlice('\n')
		if len(line)+len(frag) > MaxMessage {
			return nil, errTooLong
		}
		line = append(line, frag...)
		switch err {
		case nil:
			return bytes.TrimSuffix(line[:len(line)-1], []byte("\r")), nil
		case bufio.ErrBufferFull:
			continue
		default:
			return line, err
		}
	}
}

// command is a message from the subprocess. Fields absent from a message stay zero;
// raw fields keep what the program sent.
type command struct {
	Command string          `json:"command"`
	ID      json.RawMessage `json:"id"`
	Stream  string          `json:"stream"`
	Task    *int            `json:"task"`
	Tuple   json.RawMessage `json:"tuple"`
	Anchors []string        `json:"anchors"`
	Msg     string          `json:"msg"`
	Level   *int            `json:"level"`
	Name    string          `json:"name"`
	Params  json.RawMessage `json:"params"`
	// NeedTaskIDs is "need_task_ids": false asks gale not to send the task ids.
	NeedTaskIDs *bool `json:"need_task_ids"`
	PID         *int  `json:"pid"` // the handshake's answer
}

// protocolError is a message gale cannot accept: the subprocess is restarted.
type protocolError struct {
	what string
	text []byte
}

func (e *protocolError) Error() string {
	t := e.text
	if len(t) > 512 {
		t = append(t[:512:512], "..."...)
	}
	return fmt.Sprintf("%s: %q", e.what, t)
}

func badMessage(what string, text []byte) error {
	return &protocolError{what: what, text: append([]byte(nil), text...)}
}

// parse decodes one message, which must be a JSON object.
func parse(text []byte) (*command, error) {
	var c command
	d := json.NewDecoder(bytes.NewReader(text))
	if err := d.Decode(&c); err != nil {
		return nil, badMessage("malformed message ("+err.Error()+")", text)
	}
	if d.More() {
		return nil, badMessage("malformed message (more than one JSON value)", text)
	}
	if len(text) == 0 || text[0] != '{' {
		return nil, badMessage("malformed message (not a JSON object)", text)
	}
	return &c, nil
}

// values decodes an emit's "tuple": a JSON array. Numbers become int64 when they are
// integers, float64 otherwise; objects become map[string]any, arrays []any.
func values(raw json.RawMessage) ([]any, error) {
	if len(raw) == 0 {
		return nil, errors.New(`emit has no "tuple"`)
	}
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	var vs []any
	if err := d.Decode(&vs); err != nil {
		return nil, fmt.Errorf(`emit's "tuple" is not a JSON array: %w`, err)
	}
	for i, v := range vs {
		vs[i] = number(v)
	}
	return vs, nil
}

func number(v any) any {
	switch x := v.(type) {
	case json.Number:
		if n, err := x.Int64(); err == nil {
			return n
		}
		f, _ := x.Float64()
		return f
	case []any:
		for i := range x {
			x[i] = number(x[i])
		}
	case map[string]any:
		for k := range x {
			x[k] = number(x[k])
		}
	}
	return v
}

// frame appends the message terminator to a JSON text.
func frame(js []byte) []byte { return append(js, "\nend\n"...) }
