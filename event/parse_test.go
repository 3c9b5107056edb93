package event

import (
	"bytes"
	"crypto/sha256"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"reflect"
	"strings"
	"testing"
)

var parseCases = []string{
	`{"event_id":"a","source":"s","type":"t","payload":{}}`,
	`  {"event_id":"a" , "source":"s","type":"t","payload":{"x":[1,2,{"y":"}"}],"z":null}}  `,
	`{"event_id":"a","source":"s","type":"t","key":"k","version":3,"payload":{}}`,
	`{"event_id":"a","source":"s","type":"t","key":"k","version":-1,"payload":{}}`,
	`{"event_id":"a","source":"s","type":"t","version":3,"payload":{}}`,
	`{"event_id":"a","source":"s","type":"t","key":"k","version":3.5,"payload":{}}`,
	`{"event_id":"a","source":"s","type":"t","key":"k","version":"3","payload":{}}`,
	`{"event_id":"a","source":"s","type":"t","key":"k","version":null,"payload":{}}`,
	`{"event_id":"a\u0062","source":"s\"q","type":"t\\","payload":{"s":"\u00e9"}}`,
	`{"event_id":"a","source":"s","type":"t","payload":[1]}`,
	`{"event_id":"a","source":"s","type":"t","payload":null}`,
	`{"event_id":"a","source":"s","type":"t","payload":"x"}`,
	`{"event_id":"a","source":"s","type":"t","payload":{"a":}}`,
	`{"event_id":"a","source":"s","type":"t","payload":{"a":1,}}`,
	`{"event_id":"a","source":"s","type":"t","payload":{"a" 1}}`,
	`{"event_id":"a","source":"s","type":"t","payload":{}} x`,
	`{"event_id":"a","source":"s","type":"t","payload":{}}{}`,
	`{"event_id":"a","source":"s","type":"t","payload":{},}`,
	`{"event_id":1,"source":"s","type":"t","payload":{}}`,
	`{"event_id":null,"source":"s","type":"t","payload":{}}`,
	`{"eventid":"a","source":"s","type":"t","payload":{}}`,
	`{"Event_ID":"a","source":"s","type":"t","payload":{}}`,
	`{"event_id":"a","Source":"s","type":"t","payload":{}}`,
	`{"event_id":"a","source":"s","type":"t","PAYLOAD":{}}`,
	`{"event_id":"a","source":"s","type":"t","payload":{},"Version":1}`,
	`{"source":"s","type":"t","payload":{}}`,
	`{"event_id":"a b","source":"s","type":"t","payload":{}}`,
	`{"event_id":"\u00e9","source":"s","type":"t","payload":{}}`,
	"{\"event_id\":\"a\",\"source\":\"s\xff\",\"type\":\"t\",\"payload\":{}}",
	"{\"event_id\":\"a\tb\",\"source\":\"s\",\"type\":\"t\",\"payload\":{}}",
	`{"event_id":"a","source":"s","type":"t","payload":{"deep":[[[[[[[[[[1]]]]]]]]]]}}`,
	`{"event_id":"a","source":"s","type":"t","payload":{"n":1e400}}`,
	`{"event_id":"a","source":"s","type":"t","payload":{"n":01}}`,
	`{"event_id":"a","source":"s","type":"t","payload":{"t":tru}}`,
	`{"event_id":"a","source":"s","type":"t","payload":{"s":"unterminated}}`,
	`[]`, `{}`, ``, `   `, `null`, `"x"`, `{`, `{"event_id"`, `{"event_id":`, `{"event_id":"a"`,
}

// The fast parser agrees with encoding/json (plus the exact-case key check) on
// whether an event is valid, and on every field when it is. The one deliberate
// difference, a key given twice, is tested apart.
func TestParseAgreesWithEncodingJSON(t *testing.T) {
	cases := append([]string(nil), parseCases...)
	// Every real order line of the testdata, as the ingest tool sends it.
	for _, name := range []string{"2010-12-01", "2010-12-02", "2010-12-03"} {
		f, err := os.Open("../testdata/retail/" + name + ".csv")
		if err != nil {
			t.Fatal(err)
		}
		rows, err := csv.NewReader(f).ReadAll()
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		for i, r := range rows[1:] {
			p, _ := json.Marshal(map[string]string{"invoice_no": r[0], "stock_code": r[1], "description": r[2]})
			b, _ := json.Marshal(Event{ID: name + ":" + string(rune('0'+i%10)), Source: "retail", Type: "order_line", Key: r[0], Payload: p})
			cases = append(cases, string(b))
		}
	}
	for _, c := range cases {
		fast, ferr := Parse([]byte(c))
		std, serr := parseStd([]byte(c))
		if (ferr == nil) != (serr == nil) {
			t.Errorf("%q: fast err %v, encoding/json err %v", c, ferr, serr)
			continue
		}
		if ferr != nil {
			if !errors.Is(ferr, ErrInvalid) {
				t.Errorf("%q: error %v does not wrap ErrInvalid", c, ferr)
			}
			continue
		}
		std.Payload = bytes.TrimSpace(std.Payload)
		if !reflect.DeepEqual(fast, std) {
			t.Errorf("%q:\n fast %+v\n std  %+v", c, fast, std)
		}
	}
}

func TestParseRefusesAFieldGivenTwice(t *testing.T) {
	_, err := Parse([]byte(`{"event_id":"a","source":"s","type":"t","event_id":"b","payload":{}}`))
	var fe *FieldError
	if !errors.As(err, &fe) || fe.Field != "event_id" || !strings.Contains(err.Error(), "given twice") {
		t.Fatalf("err = %v", err)
	}
}

// Keys are exact-case (event's doc): one in other case is refused with an error that
// names it and the field it was likely meant to be; encoding/json, which folds case,
// would have taken it as that field. FuzzParse found the disagreement.
func TestParseRefusesKeysInOtherCase(t *testing.T) {
	for in, want := range map[string]string{
		`{"Event_ID":"a","source":"s","type":"t","payload":{}}`:  `invalid event: unknown field "Event_ID": keys are case-sensitive; did you mean "event_id"?`,
		`{"event_id":"a","source":"s","type":"t","Payload":{}}`:  `invalid event: unknown field "Payload": keys are case-sensitive; did you mean "payload"?`,
		`{"event_id":"a","source":"s","type":"t","payloads":{}}`: `invalid event: unknown field "payloads" (an event has event_id, source, type, key, version and payload)`,
	} {
		for name, parse := range map[string]func([]byte) (Event, error){"Parse": Parse, "reference": parseStd} {
			_, err := parse([]byte(in))
			if !errors.Is(err, ErrInvalid) || err.Error() != want {
				t.Errorf("%s(%s) = %v, want %s", name, in, err, want)
			}
		}
	}
}

func FuzzParse(f *testing.F) {
	for _, c := range parseCases {
		f.Add(c)
	}
	f.Fuzz(func(t *testing.T, c string) {
		if strings.Count(c, `"event_id"`)+strings.Count(c, `"source"`)+strings.Count(c, `"type"`)+
			strings.Count(c, `"key"`)+strings.Count(c, `"version"`)+strings.Count(c, `"payload"`) > 6 || strings.Contains(c, `\u`) {
			t.Skip() // duplicate keys differ on purpose; escaped keys are not worth the noise
		}
		fast, ferr := Parse([]byte(c))
		std, serr := parseStd([]byte(c))
		if (ferr == nil) != (serr == nil) {
			t.Fatalf("%q: fast err %v, encoding/json err %v", c, ferr, serr)
		}
		if ferr == nil {
			std.Payload = bytes.TrimSpace(std.Payload)
			if !reflect.DeepEqual(fast, std) {
				t.Fatalf("%q:\n fast %+v\n std  %+v", c, fast, std)
			}
		}
	})
}

func TestValidateRefusesWhatSQLCannotStore(t *testing.T) {
	for in, want := range map[string]string{
		`{"event_id":"a","source":"s","type":"t","key":"k\u0000","payload":{}}`:             `field "key": control character 0x00`,
		`{"event_id":"a","source":"s\u0007","type":"t","payload":{}}`:                       `field "source": control character 0x07`,
		`{"event_id":"a","source":"s","type":"t","payload":{"x":"a\u0000b"}}`:               `field "payload": contains \u0000`,
		"{\"event_id\":\"a\",\"source\":\"s\",\"type\":\"t\",\"payload\":{\"x\":\"\xff\"}}": `not valid UTF-8`,
	} {
		if _, err := Parse([]byte(in)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want %q", in, err, want)
		}
	}
	// An escaped backslash before "u0000" is plain text, and fine.
	if _, err := Parse([]byte(`{"event_id":"a","source":"s","type":"t","payload":{"x":"\\u0000"}}`)); err != nil {
		t.Errorf("escaped backslash: %v", err)
	}
}

func TestParseRefusesNonJSONNumbersAndUnroutableIDs(t *testing.T) {
	for in, want := range map[string]string{
		`{"event_id":"a","source":"s","type":"t","key":"k","version":+1,"payload":{}}`:         "bad number",
		`{"event_id":"a","source":"s","type":"t","key":"k","version":01,"payload":{}}`:         "bad number",
		`{"event_id":"a/b","source":"s","type":"t","payload":{}}`:                              "'/'",
		`{"event_id":"..","source":"s","type":"t","payload":{}}`:                               "URL path",
		"{\"event_id\":\"a\",\"source\":\"s\",\"type\":\"t\",\"key\":\"\xfe\",\"payload\":{}}": "not valid UTF-8",
	} {
		if _, err := Parse([]byte(in)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want %q", in, err, want)
		}
	}
}

// The content hash is the documented concatenation, so stored hashes stay valid.
func TestHashIsTheDocumentedConcatenation(t *testing.T) {
	v := int64(7)
	long := strings.Repeat("k", 100)
	for _, e := range []Event{
		{Source: "retail", Type: "order_line", Key: "536365", Version: &v, Payload: []byte(`{"a":1}`)},
		{Source: "s", Type: "t", Payload: []byte(`{}`)},
		{Source: long, Type: long, Key: long, Payload: []byte(`{"x":"y"}`)},
	} {
		var ver int64 = -1
		if e.Version != nil {
			ver = *e.Version
		}
		want := sha256.Sum256([]byte(fmt.Sprintf("%d:%s|%d:%s|%d:%s|%d|%s", len(e.Source), e.Source, len(e.Type), e.Type, len(e.Key), e.Key, ver, e.Payload)))
		if got := e.HashAs(HashRaw); got.Sum != want || got.Rule != HashRaw {
			t.Errorf("%+v: raw hash differs from the documented form", e)
		}
	}
}
