package wire

import (
	"encoding/json"
	"errors"
	"io"
	"math"
	"math/rand/v2"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/canvasapp/companion/core"
)

func TestDecodeList(t *testing.T) {
	var out ListOut
	eb, err := DecodeList([]byte(` {"ok": {"boxes": [
		{"id":"b-1","state":"running","name":"one","labels":{"companion.workspace":"ws-1"},"created_at":"2025-01-01T00:00:00Z","future":[1,{"x":null}]},
		{"id":"b-\u00e9\ud83d\ude00\n","state":"paused","url":"https://x","key":"k","paused_at":"p","last_activity_at":"l",
		 "size":{"bytes":-0,"source":"provider_api:used","at":"a"}},
		null,
		{"id":"b-3","state":"running","size":{"bytes":1073741824,"source":"s"}}
	], "next": "ignored"}, "extra": true} `), &out)
	if err != nil || eb != nil {
		t.Fatal(eb, err)
	}
	want := ListOut{Boxes: []Box{
		{ID: "b-1", State: "running", Name: "one", Labels: map[string]string{"companion.workspace": "ws-1"}, CreatedAt: "2025-01-01T00:00:00Z"},
		{ID: "b-é😀\n", State: "paused", URL: "https://x", Key: "k", PausedAt: "p", LastActivityAt: "l", Size: &Size{Bytes: 0, Source: "provider_api:used", At: "a"}},
		{},
		{ID: "b-3", State: "running", Size: &Size{Bytes: 1 << 30, Source: "s"}},
	}}
	if !reflect.DeepEqual(out, want) {
		t.Fatalf("got  %+v\nwant %+v", out, want)
	}
}

func TestDecodeOthers(t *testing.T) {
	var d DescribeOut
	if eb, err := DecodeDescribe([]byte(`{"ok":{"name":"acme","version":"1.2.0","capabilities":{"list":true,"suspend":false,"delete":true,"new_flag":true}}}`), &d); err != nil || eb != nil {
		t.Fatal(eb, err)
	}
	if d.Name != "acme" || d.Version != "1.2.0" || *d.Capabilities != (core.Capabilities{List: true, Delete: true}) {
		t.Fatalf("%+v", d)
	}
	var b BoxOut
	if eb, err := DecodeBox([]byte(`{"ok":{"box":{"id":"x","state":"creating"}}}`), &b); err != nil || eb != nil || b.Box == nil || b.Box.ID != "x" {
		t.Fatal(eb, err)
	}
	b = BoxOut{}
	if eb, err := DecodeBox([]byte(`{"ok":{"box":null}}`), &b); err != nil || eb != nil || b.Box != nil {
		t.Fatal(eb, err)
	}
	for _, in := range []string{`{"ok":{}}`, `{"ok":null}`, `{"ok":{"anything":[1,2]}}`} {
		if eb, err := DecodeEmpty([]byte(in)); err != nil || eb != nil {
			t.Fatal(in, eb, err)
		}
	}
	eb, err := DecodeEmpty([]byte(`{"error":{"kind":"rate_limited","message":"slow \"down\"","retry_after":1.5e0}}`))
	if err != nil || eb == nil || *eb != (ErrorBody{Kind: "rate_limited", Message: `slow "down"`, RetryAfterSeconds: 1.5}) {
		t.Fatal(eb, err)
	}
}

func TestDecodeRefuses(t *testing.T) {
	syntax := []string{
		``, ` `, `null`, `[]`, `"ok"`, `{}`, `{"other":1}`, `{"ok":{},"error":{"kind":"x"}}`, `{"error":null}`,
		`{"ok":{}} x`, `{"ok":{}}}`, `{"ok":{},}`, `{"ok":{"boxes":[1,]}}`, `{"ok":{"boxes":[01]}}`, `{"ok":{"a":1.}}`,
		`{"ok":{"a":-}}`, `{"ok":{"a":1e}}`, `{"ok":{"a":tru}}`, `{"ok":{"a":nul}}`, `{"ok":{"a":"x` + "\x01" + `"}}`,
		`{"ok":{"a":"\x"}}`, `{"ok":{"a":"\u12"}}`, `{'ok':{}}`, `{"ok"{}}`, `{"ok":{"boxes":[{"id":"a"}}}`,
		`{"ok":{"boxes":[{"id":1}]}} x`, // a syntax error anywhere wins over a type error
		`{"ok":` + strings.Repeat(`{"a":`, 2000) + `1` + strings.Repeat(`}`, 2000) + `}`,
		`{"OK":{}}`, // names match exactly
	}
	for _, in := range syntax {
		var out ListOut
		if _, err := DecodeList([]byte(in), &out); !errors.Is(err, ErrSyntax) {
			t.Errorf("%.80q: %v, want a syntax error", in, err)
		}
	}
	types := map[string]string{
		`{"ok":5}`:            "ok: want an object, got a number",
		`{"ok":{"boxes":{}}}`: "ok.boxes: want an array, got an object",
		`{"ok":{"boxes":[{"id":"a"},{"id":true}]}}`:                  "ok.boxes[1].id: want a string, got a boolean",
		`{"ok":{"boxes":[{"labels":{"a":"b","c":1}}]}}`:              "ok.boxes[0].labels.c: want a string, got a number",
		`{"ok":{"boxes":[{"size":{"bytes":1.5}}]}}`:                  "ok.boxes[0].size.bytes: want an integer, got 1.5",
		`{"ok":{"boxes":[{"size":{"bytes":99999999999999999999}}]}}`: "ok.boxes[0].size.bytes: want an integer",
		`{"ok":{"boxes":[{"size":[]}]}}`:                             "ok.boxes[0].size: want an object, got an array",
		`{"ok":{"boxes":["x"]}}`:                                     "ok.boxes[0]: want an object, got a string",
		`{"error":{"kind":"x","retry_after":1e999}}`:                 "error.retry_after: 1e999 is out of range",
		`{"error":{"kind":["x"]}}`:                                   "error.kind: want a string, got an array",
		`{"error":"boom"}`:                                           "error: want an object, got a string",
	}
	for in, want := range types {
		var out ListOut
		_, err := DecodeList([]byte(in), &out)
		if err == nil || errors.Is(err, ErrSyntax) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", in, err, want)
		}
	}
	var d DescribeOut
	if _, err := DecodeDescribe([]byte(`{"ok":{"capabilities":{"list":"yes"}}}`), &d); err == nil || !strings.Contains(err.Error(), "ok.capabilities.list: want a boolean") {
		t.Error(err)
	}
}

// refList decodes a list result with encoding/json's tokenizer into a
// tree that keeps every member in order (so names match exactly and
// duplicates are seen), then applies the rules of a typed decode: each
// member in turn, the last one winning, null leaving a value alone, any
// value of the wrong type an error. It is the reference the hand-written
// reader is checked against.
func refList(b []byte) (ListOut, *ErrorBody, string) {
	var out ListOut
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.UseNumber()
	top, err := tree(dec, 0)
	if err != nil {
		return out, nil, "syntax"
	}
	if _, err := dec.Token(); err != io.EOF {
		return out, nil, "syntax"
	}
	env, ok := top.(object)
	if !ok {
		return out, nil, "syntax"
	}
	bad := false
	str := func(v any, dst *string) {
		switch v := v.(type) {
		case string:
			*dst = v
		case nil:
		default:
			bad = true
		}
	}
	hasOK := false
	var eb *ErrorBody
	for _, m := range env {
		switch m.name {
		case "ok":
			hasOK = true
			switch okv := m.v.(type) {
			case nil:
			case object:
				for _, m := range okv {
					if m.name != "boxes" {
						continue
					}
					switch arr := m.v.(type) {
					case nil:
						out.Boxes = nil
					case []any:
						out.Boxes = []Box{}
						for _, e := range arr {
							out.Boxes = append(out.Boxes, refBox(e, str, &bad))
						}
					default:
						bad = true
					}
				}
			default:
				bad = true
			}
		case "error":
			switch e := m.v.(type) {
			case nil:
				eb = nil
			case object:
				if eb == nil {
					eb = &ErrorBody{}
				}
				for _, m := range e {
					switch m.name {
					case "kind":
						str(m.v, &eb.Kind)
					case "message":
						str(m.v, &eb.Message)
					case "retry_after":
						switch n := m.v.(type) {
						case nil:
						case json.Number:
							f, err := strconv.ParseFloat(string(n), 64)
							bad = bad || err != nil || math.IsInf(f, 0)
							eb.RetryAfterSeconds = f
						default:
							bad = true
						}
					}
				}
			default:
				bad = true
			}
		}
	}
	switch {
	case bad:
		return out, nil, "type"
	case hasOK == (eb != nil):
		return out, nil, "syntax"
	}
	return out, eb, ""
}

func refBox(e any, str func(any, *string), bad *bool) Box {
	var box Box
	switch e := e.(type) {
	case nil:
	case object:
		for _, m := range e {
			switch m.name {
			case "id":
				str(m.v, &box.ID)
			case "name":
				str(m.v, &box.Name)
			case "url":
				str(m.v, &box.URL)
			case "key":
				str(m.v, &box.Key)
			case "state":
				str(m.v, &box.State)
			case "created_at":
				str(m.v, &box.CreatedAt)
			case "paused_at":
				str(m.v, &box.PausedAt)
			case "last_activity_at":
				str(m.v, &box.LastActivityAt)
			case "labels":
				switch l := m.v.(type) {
				case nil:
					box.Labels = nil
				case object:
					if box.Labels == nil {
						box.Labels = map[string]string{}
					}
					for _, lm := range l {
						var s string
						str(lm.v, &s)
						box.Labels[lm.name] = s
					}
				default:
					*bad = true
				}
			case "size":
				switch sz := m.v.(type) {
				case nil:
					box.Size = nil
				case object:
					if box.Size == nil {
						box.Size = &Size{}
					}
					for _, sm := range sz {
						switch sm.name {
						case "source":
							str(sm.v, &box.Size.Source)
						case "at":
							str(sm.v, &box.Size.At)
						case "bytes":
							switch n := sm.v.(type) {
							case nil:
							case json.Number:
								v, err := strconv.ParseInt(string(n), 10, 64)
								*bad = *bad || err != nil
								box.Size.Bytes = v
							default:
								*bad = true
							}
						}
					}
				default:
					*bad = true
				}
			}
		}
	default:
		*bad = true
	}
	return box
}

// object is a JSON object with its members in order, duplicates kept.
type object []member

type member struct {
	name string
	v    any
}

// tree reads one value: string, json.Number, bool, nil, []any or object.
func tree(dec *json.Decoder, depth int) (any, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	if d, ok := tok.(json.Delim); ok && d != '}' && d != ']' && depth >= maxDepth {
		return nil, errors.New("too deep")
	}
	switch tok {
	case json.Delim('{'):
		obj := object{}
		for dec.More() {
			k, err := dec.Token()
			if err != nil {
				return nil, err
			}
			v, err := tree(dec, depth+1)
			if err != nil {
				return nil, err
			}
			obj = append(obj, member{k.(string), v})
		}
		_, err := dec.Token()
		return obj, err
	case json.Delim('['):
		arr := []any{}
		for dec.More() {
			v, err := tree(dec, depth+1)
			if err != nil {
				return nil, err
			}
			arr = append(arr, v)
		}
		_, err := dec.Token()
		return arr, err
	}
	return tok, nil
}

func checkAgainstRef(t *testing.T, in []byte) {
	var got ListOut
	eb, err := DecodeList(in, &got)
	want, web, wkind := refList(in)
	kind := ""
	switch {
	case errors.Is(err, ErrSyntax):
		kind = "syntax"
	case err != nil:
		kind = "type"
	}
	if kind != wkind {
		t.Fatalf("%q: got %q (%v), reference %q", in, kind, err, wkind)
	}
	if kind != "" {
		return
	}
	if len(got.Boxes) == 0 && len(want.Boxes) == 0 {
		got.Boxes, want.Boxes = nil, nil
	}
	if !reflect.DeepEqual(got, want) || !reflect.DeepEqual(eb, web) {
		t.Fatalf("%q:\ngot  %+v %+v\nwant %+v %+v", in, got, eb, want, web)
	}
}

// TestDecodeAgainstEncodingJSON generates results with random shapes,
// types, escapes, invalid UTF-8, duplicates and unknown members and checks
// that the reader and encoding/json agree on each.
func TestDecodeAgainstEncodingJSON(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	n := 30000
	if testing.Short() {
		n = 3000
	}
	for range n {
		checkAgainstRef(t, []byte(genResult(r)))
	}
}

func FuzzDecodeList(f *testing.F) {
	r := rand.New(rand.NewPCG(9, 10))
	for range 50 {
		f.Add([]byte(genResult(r)))
	}
	f.Add([]byte(`{"ok":{"boxes":[{"id":"\ud800\udc00\ud800x"}]}}`))
	f.Fuzz(func(t *testing.T, in []byte) { checkAgainstRef(t, in) })
}

var boxFields = []string{"id", "name", "url", "key", "state", "created_at", "paused_at", "last_activity_at", "labels", "size"}

func genResult(r *rand.Rand) string {
	g := &gen{r: r}
	switch r.IntN(10) {
	case 0:
		return g.obj(map[string]func() string{"error": g.errBody, "ok": g.okList})
	case 1, 2:
		return g.obj(map[string]func() string{"error": g.errBody})
	default:
		return g.obj(map[string]func() string{"ok": g.okList})
	}
}

type gen struct{ r *rand.Rand }

func (g *gen) ws() string {
	if g.r.IntN(8) == 0 {
		return []string{" ", "\n", "\t ", "\r\n"}[g.r.IntN(4)]
	}
	return ""
}

// obj writes an object with the given members (each possibly twice or
// with a wrong-typed value) and some unknown ones, in random order.
func (g *gen) obj(members map[string]func() string) string {
	var parts []string
	for k, v := range members {
		for range 1 + btoi(g.r.IntN(15) == 0) {
			val := v()
			if g.r.IntN(25) == 0 {
				val = g.any(2)
			}
			parts = append(parts, g.ws()+g.quote(k)+g.ws()+":"+g.ws()+val)
		}
	}
	for range g.r.IntN(3) {
		if g.r.IntN(3) == 0 {
			parts = append(parts, g.quote(g.word())+":"+g.any(3))
		}
	}
	g.r.Shuffle(len(parts), func(i, j int) { parts[i], parts[j] = parts[j], parts[i] })
	return "{" + strings.Join(parts, ",") + g.ws() + "}"
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

func (g *gen) okList() string {
	if g.r.IntN(20) == 0 {
		return "null"
	}
	return g.obj(map[string]func() string{"boxes": func() string {
		if g.r.IntN(20) == 0 {
			return "null"
		}
		var els []string
		for range g.r.IntN(4) {
			if g.r.IntN(15) == 0 {
				els = append(els, "null")
				continue
			}
			els = append(els, g.box())
		}
		return "[" + strings.Join(els, ",") + "]"
	}})
}

func (g *gen) box() string {
	m := map[string]func() string{}
	for _, f := range boxFields {
		if g.r.IntN(3) == 0 {
			continue
		}
		switch f {
		case "labels":
			m[f] = func() string {
				l := map[string]func() string{}
				for range g.r.IntN(3) {
					l[g.word()] = g.str
				}
				return g.obj(l)
			}
		case "size":
			m[f] = func() string {
				return g.obj(map[string]func() string{"bytes": g.num, "source": g.str, "at": g.str})
			}
		default:
			m[f] = g.str
		}
	}
	return g.obj(m)
}

func (g *gen) errBody() string {
	return g.obj(map[string]func() string{"kind": g.str, "message": g.str, "retry_after": g.num})
}

func (g *gen) word() string {
	words := append([]string{"x", "Id", "ID", "ok", "boxes", "error", "", "é"}, boxFields...)
	return words[g.r.IntN(len(words))]
}

func (g *gen) quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// str makes a JSON string with escapes of every kind, raw non-ASCII and
// sometimes invalid UTF-8 or a lone surrogate.
func (g *gen) str() string {
	pieces := []string{"a", "Z", "0", " ", `\"`, `\\`, `\/`, `\n`, `\t`, `\b`, `\f`, `\r`, `\u00e9`, `\u0000`, "é", "😀",
		`\ud83d\ude00`, `\ud800`, `\udc00x`, `\ud800\u0041`, "\xff", "\xe2\x82", "\x7f", `\u2028`}
	var b strings.Builder
	b.WriteByte('"')
	for range g.r.IntN(12) {
		b.WriteString(pieces[g.r.IntN(len(pieces))])
	}
	b.WriteByte('"')
	return b.String()
}

func (g *gen) num() string {
	nums := []string{"0", "-0", "7", "-12", "1.5", "1e3", "2E-2", "9223372036854775807", "9223372036854775808", "-9223372036854775808",
		"1e400", "0.000001", "123456789012345678901234567890", strconv.Itoa(g.r.IntN(1 << 40))}
	return nums[g.r.IntN(len(nums))]
}

func (g *gen) any(depth int) string {
	k := g.r.IntN(7)
	if depth <= 0 {
		k %= 4
	}
	switch k {
	case 0:
		return g.str()
	case 1:
		return g.num()
	case 2:
		return []string{"true", "false"}[g.r.IntN(2)]
	case 3:
		return "null"
	case 4, 5:
		var els []string
		for range g.r.IntN(3) {
			els = append(els, g.any(depth-1))
		}
		return "[" + strings.Join(els, ","+g.ws()) + "]"
	default:
		m := map[string]func() string{}
		for range g.r.IntN(3) {
			m[g.word()] = func() string { return g.any(depth - 1) }
		}
		return g.obj(m)
	}
}

func TestAppendInput(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	g := &gen{r: r}
	raw := func() string { // any bytes, including invalid UTF-8 and controls
		var s string
		if err := json.Unmarshal([]byte(g.str()), &s); err != nil {
			t.Fatal(err)
		}
		return s + string([]byte{byte(r.IntN(256))})
	}
	for i := range 3000 {
		acct := &core.Account{ID: raw(), Config: map[string]string{}}
		for range r.IntN(4) {
			// Keys stay valid UTF-8: two keys that differ only in invalid
			// bytes would encode alike.
			acct.Config[strings.ToValidUTF8(raw(), "?")] = raw()
		}
		if i%5 == 0 {
			acct = nil
		}
		in := NewInput(time.UnixMilli(r.Int64N(1<<45)), acct)
		if i%3 == 0 {
			in.BoxID = raw()
		}
		if i%4 == 0 {
			in.Spec = Spec(core.CreateSpec{WorkspaceID: raw(), Name: raw(), Options: map[string]string{strings.ToValidUTF8(raw(), "?"): raw()},
				Lifecycle: core.Lifecycle{IdlePauseAfter: time.Duration(r.IntN(3)) * time.Minute, PausedTTL: time.Duration(r.IntN(3)) * time.Hour}})
		}
		want, err := json.Marshal(in)
		if err != nil {
			t.Fatal(err)
		}
		got := AppendInput(nil, &in)
		var a, b any
		if err := json.Unmarshal(got, &a); err != nil {
			t.Fatalf("%s: %v", got, err)
		}
		if err := json.Unmarshal(want, &b); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(a, b) {
			t.Fatalf("got  %s\nwant %s", got, want)
		}
	}
}
