package sdk

import (
	"encoding/json"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"
	"unsafe"
)

func TestAppendRFC3339(t *testing.T) {
	times := []time.Time{
		time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC),
		time.Date(2025, 12, 31, 23, 59, 59, 123456789, time.FixedZone("x", -7200)),
		time.Date(1, 1, 1, 0, 0, 0, 1000, time.UTC),
		time.Date(0, 2, 29, 0, 0, 0, 0, time.UTC),
		time.Date(0, 3, 1, 0, 0, 0, 0, time.UTC),
		time.Date(1969, 12, 31, 23, 59, 59, 999999999, time.UTC),
		time.Date(1970, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(2000, 2, 29, 12, 0, 0, 0, time.UTC),
		time.Date(2100, 3, 1, 0, 0, 0, 0, time.UTC),
		time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC),
		time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(12345, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(-5, 6, 1, 0, 0, 0, 0, time.UTC),
		time.Now(), // with a monotonic reading
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range 200000 {
		sec := r.Int64N(int64(10500*365.25*86400)) - int64(2000*365.25*86400)
		times = append(times, time.Unix(sec, r.Int64N(1e9)*int64(r.IntN(2))).In(time.FixedZone("z", r.IntN(50000)-25000)))
	}
	for _, tm := range times {
		want := tm.UTC().Format(time.RFC3339Nano)
		if got := string(appendRFC3339(nil, tm)); got != want {
			t.Fatalf("%v: got %s want %s", tm, got, want)
		}
	}
}

func TestParseInput(t *testing.T) {
	in, err := parseInput([]byte(`{"future":[1,{"a":null},true,"x"],"box_id":"a\"b\u00e9\ud83d\ude00","account":{"id":"i","config":{"k\n":"v"},"more":false},"deadline_unix_ms":1.5e3}`))
	if err != nil {
		t.Fatal(err)
	}
	if in.BoxID != "a\"bé😀" || in.Account.Config["k\n"] != "v" || in.DeadlineUnixMS != 1500 {
		t.Fatalf("%+v", in)
	}
	in, err = parseInput([]byte(` { "deadline_unix_ms" : 1767225600123 , "account" : { "id" : "acc_7f3a" , "config" : { "region" : "eu" , "api_url" : "" } } ,
		"spec": {"workspace_id": "ws_9c1", "name": "my-box", "lifecycle": {"idle_pause_after_seconds": 900, "paused_ttl_seconds": 604800, "x": 1},
		"options": {"image": "python:3.12"}, "labels": {"companion.workspace": "ws_9c1"}}} `))
	if err != nil {
		t.Fatal(err)
	}
	sp := in.Spec
	if in.DeadlineUnixMS != 1767225600123 || in.Account.ID != "acc_7f3a" || len(in.Account.Config) != 2 || in.Account.Config["region"] != "eu" ||
		sp == nil || sp.WorkspaceID != "ws_9c1" || sp.Name != "my-box" || sp.Lifecycle.IdlePauseAfterSeconds != 900 || sp.Lifecycle.PausedTTLSeconds != 604800 ||
		sp.Options["image"] != "python:3.12" || sp.Labels["companion.workspace"] != "ws_9c1" {
		t.Fatalf("%+v %+v", in, sp)
	}
	// Keys are matched exactly: near misses are unknown members.
	in, err = parseInput([]byte(`{"deadline_unix_mx":5,"deadline_unix_ms_":6,"Deadline_unix_ms":7,"accoun":{"id":"x"},"box_idd":"y","spec":{"lifecycle":{"idle_pause_after_secondz":1,"paused_ttl_seconds":-2}}}`))
	if err != nil || in.DeadlineUnixMS != 0 || in.Account.ID != "" || in.BoxID != "" || in.Spec.Lifecycle.IdlePauseAfterSeconds != 0 || in.Spec.Lifecycle.PausedTTLSeconds != -2 {
		t.Fatalf("%+v %v", in, err)
	}
	for _, c := range []struct {
		num  string
		want int64
	}{{"0", 0}, {"7", 7}, {"12345678", 12345678}, {"123456789", 123456789}, {"1234567890123456", 1234567890123456},
		{"999999999999999999", 999999999999999999}, {"-42", -42}, {"1e3", 1000}, {"2.9", 2}} {
		in, err := parseInput([]byte(`{"deadline_unix_ms":` + c.num + `}`))
		if err != nil || in.DeadlineUnixMS != c.want {
			t.Errorf("%s: %d %v", c.num, in.DeadlineUnixMS, err)
		}
	}
	for _, bad := range []string{``, `{`, `{"a":}`, `{"box_id":1}`, `{"a":"\x01"}`, `{} x`, `{}` + "\x00", `{"a":tru}`, `{"a":"\q"}`, `{,}`, `{"a":1,}`,
		`{"box_id":"x}`, `{"deadline_unix_ms":-}`, `{"deadline_unix_ms":"1"}`, `{"account":{"config":{"a":1}}}`, `[]`, `{"a" 1}`,
		`{"a":` + strings.Repeat("[", 200) + strings.Repeat("]", 200) + `}`} {
		if _, err := parseInput([]byte(bad)); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// TestDecodeStrings checks the word-at-a-time string scan against
// encoding/json on strings of every length and content near the word
// boundaries.
func TestDecodeStrings(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	alphabet := []string{"a", "Z", "0", " ", "\"", "\\", "\n", "\x01", "é", "😀", "/", "\u2028", "\x7f"}
	for range 20000 {
		var b strings.Builder
		for range r.IntN(40) {
			b.WriteString(alphabet[r.IntN(len(alphabet))])
		}
		want := b.String()
		enc, _ := json.Marshal(want)
		in, err := parseInput([]byte(`{"box_id":` + string(enc) + `,"account":{"id":` + string(enc) + `}}`))
		if err != nil || in.BoxID != want || in.Account.ID != want {
			t.Fatalf("%q (as %s): got %q %v", want, enc, in.BoxID, err)
		}
	}
}

func TestEncodeStrings(t *testing.T) {
	if got := string(appendStr(nil, "q\"\\\n\x01é\xff")); got != `"q\"\\\n\u0001é\ufffd"` {
		t.Fatal(got)
	}
	// The copy-then-check fast path must agree with the byte loop on
	// every string, and its output must be JSON for the same text.
	r := rand.New(rand.NewPCG(5, 6))
	alphabet := []string{"a", "Z", "0", " ", "\"", "\\", "\n", "\x1f", "é", "😀", "\xff", "\x7f", "~"}
	for range 50000 {
		var b strings.Builder
		for range r.IntN(30) {
			b.WriteString(alphabet[r.IntN(len(alphabet))])
		}
		s := b.String()
		fast := appendStr(make([]byte, r.IntN(3), r.IntN(64)+3), s) // any starting length and spare room
		slow := appendStrSlow(nil, s)
		if string(fast[len(fast)-len(slow):]) != string(slow) {
			t.Fatalf("%q: fast %q, slow %q", s, fast, slow)
		}
		var back string
		if err := json.Unmarshal(slow, &back); err != nil || back != string([]rune(s)) {
			t.Fatalf("%q: %s decodes to %q, %v", s, slow, back, err)
		}
	}
}

func TestDigits(t *testing.T) {
	for n := 0; n <= 8; n++ {
		for _, tail := range []string{"", "x", ",", "}", ":", "/", "\x00", "\xfa", "\xff9"} {
			num := "98765432"[:n]
			s := padded([]byte(num + tail))
			got, v := digits(load8(unsafeData(s)))
			want, _ := strconv.ParseUint(num, 10, 64)
			if got != n || v != want {
				t.Fatalf("%q: %d digits, %d; want %d, %d", num+tail, got, v, n, want)
			}
		}
	}
	for c := 0; c < 256; c++ {
		s := padded([]byte{'1', byte(c)})
		n, _ := digits(load8(unsafeData(s)))
		if want := 1 + btoi(c >= '0' && c <= '9'); n != want {
			t.Fatalf("byte %#x: %d digits", c, n)
		}
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

func TestEscapeMasks(t *testing.T) {
	for c := 0; c < 256; c++ {
		for pos := 0; pos < 8; pos++ {
			b := []byte("abcdefgh")
			b[pos] = byte(c)
			x := load8(unsafeData(padded(b)))
			if want := c < 0x20 || c == '"' || c == '\\' || c >= 0x80; (needsEscape(x) != 0) != want {
				t.Fatalf("needsEscape: byte %#x at %d", c, pos)
			}
			m := quoteOrControl(x)
			if want := c < 0x20 || c == '"' || c == '\\'; (m != 0) != want || want && firstByte(m) != pos {
				t.Fatalf("quoteOrControl: byte %#x at %d: first %d", c, pos, firstByte(m))
			}
		}
	}
	for n := -1; n <= 9; n++ {
		want := uint64(0)
		for i := 0; i < n && i < 8; i++ {
			want |= 0xff << (8 * i)
		}
		if got := lowBytes(n); got != want {
			t.Fatalf("lowBytes(%d) = %#x", n, got)
		}
	}
}

func TestKeys(t *testing.T) {
	all := []string{sDeadline, sAccount, sBoxID, sSpec, sID, sConfig, sWS, sName, sOptions, sLabels, sLife, sIdle, sTTL, "", "a", "deadline", "deadline_unix_m"}
	for _, a := range all {
		for _, b := range all {
			ka, kb := mkKey(a), mkKey(b)
			if got := is(ka, padded([]byte(a)), kb, b); got != (a == b) {
				t.Fatalf("%q is %q: %v", a, b, got)
			}
		}
	}
}

func unsafeData(s string) unsafe.Pointer { return unsafe.Pointer(unsafe.StringData(s)) }
