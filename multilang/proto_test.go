package multilang

import (
	"errors"
	"io"
	"strings"
	"testing"
)

func TestMsgReader(t *testing.T) {
	r := newMsgReader(strings.NewReader("\n{\"a\":\r\n1}\r\nend\r\n[1,2]\nend\n{\"b\":2}\n"))
	for _, want := range []string{"{\"a\":\n1}", "[1,2]"} {
		got, err := r.next()
		if err != nil || string(got) != want {
			t.Fatalf("next = %q, %v; want %q", got, err, want)
		}
	}
	if _, err := r.next(); err != io.ErrUnexpectedEOF {
		t.Fatalf("a message cut by EOF: %v, want io.ErrUnexpectedEOF", err)
	}
	if _, err := newMsgReader(strings.NewReader("")).next(); err != io.EOF {
		t.Fatalf("empty input: %v, want io.EOF", err)
	}
}

// A message longer than MaxMessage is refused without being kept whole.
func TestMsgReaderBound(t *testing.T) {
	long := strings.Repeat("x", MaxMessage+1)
	for _, in := range []string{long + "\nend\n", strings.Repeat(long[:1<<20]+"\n", 17) + "end\n"} {
		if _, err := newMsgReader(strings.NewReader(in)).next(); !errors.Is(err, errTooLong) {
			t.Fatalf("a %d-byte message: %v, want errTooLong", len(in), err)
		}
	}
}

func TestParse(t *testing.T) {
	for _, bad := range []string{"not json", "[1]", `{"command":"emit"} {}`, `"x"`} {
		if _, err := parse([]byte(bad)); err == nil {
			t.Errorf("parse(%q) accepted", bad)
		}
	}
	c, err := parse([]byte(`{"command":"emit","tuple":[1,1.5,"a",[2],{"k":3},null,true],"need_task_ids":false}`))
	if err != nil {
		t.Fatal(err)
	}
	vs, err := values(c.Tuple)
	if err != nil {
		t.Fatal(err)
	}
	if vs[0] != int64(1) || vs[1] != 1.5 || vs[3].([]any)[0] != int64(2) || vs[4].(map[string]any)["k"] != int64(3) || *c.NeedTaskIDs {
		t.Fatalf("values = %#v", vs)
	}
}
