package main

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// What a socket reads: the handshake's query parameters (validated by
// FastAPI before the endpoint runs) and the frames a client sends
// (validated by pydantic models inside the endpoint, whose errors go back
// as error events with the ValidationError's text).

// pydanticVersion is the major.minor of pydantic in upstream's lock file,
// which its error links name.
const pydanticVersion = "2.12"

// lineError is one problem in a pydantic ValidationError. loc is relative
// to the validated value; input is what pydantic shows for it.
type lineError struct {
	typ, msg string
	loc      []any
	input    any
}

// pydanticText is str(ValidationError) for a model named title: a count,
// then per problem its location, message, type, the input's repr (cut to
// 50 bytes around the middle) and type, and a link.
func pydanticText(title string, errs []lineError) string {
	var b strings.Builder
	plural := "s"
	if len(errs) == 1 {
		plural = ""
	}
	fmt.Fprintf(&b, "%d validation error%s for %s\n", len(errs), plural, title)
	for i, e := range errs {
		if i > 0 {
			b.WriteByte('\n')
		}
		if len(e.loc) > 0 {
			parts := make([]string, len(e.loc))
			for j, l := range e.loc {
				parts[j] = fmt.Sprint(l)
				if strings.Contains(parts[j], ".") {
					parts[j] = "`" + parts[j] + "`"
				}
			}
			b.WriteString(strings.Join(parts, ".") + "\n")
		}
		fmt.Fprintf(&b, "  %s [type=%s, input_value=%s, input_type=%s]\n    For further information visit https://errors.pydantic.dev/%s/v/%s",
			e.msg, e.typ, cutMiddle(pyValueRepr(e.input), 50), pyTypeName(e.input), pydanticVersion, e.typ)
	}
	return b.String()
}

// cutMiddle keeps a repr longer than max bytes as its first half and its
// last half less one, around "...", on character boundaries.
func cutMiddle(s string, max int) string {
	if len(s) <= max {
		return s
	}
	half := (max + 1) / 2
	head := half
	for head > 0 && !isRuneStart(s[head]) {
		head--
	}
	tail := len(s) - (half - 1)
	for tail < len(s) && !isRuneStart(s[tail]) {
		tail++
	}
	return s[:head] + "..." + s[tail:]
}

func isRuneStart(b byte) bool { return b&0xc0 != 0x80 }

// pyAt is the decoded value at loc, or nil.
func pyAt(v any, loc []any) any {
	for _, l := range loc {
		switch l := l.(type) {
		case string:
			d, ok := v.(*pyDict)
			if !ok {
				return nil
			}
			v = d.vals[l]
		case int:
			list, ok := v.([]any)
			if !ok || l >= len(list) {
				return nil
			}
			v = list[l]
		}
	}
	return v
}

// isAuthControl is upstream's test for a redundant auth frame: an object
// whose type is "auth" and whose keys are at most type and
// session_api_key. The socket ignores it.
func isAuthControl(v any) bool {
	d, ok := v.(*pyDict)
	if !ok {
		return false
	}
	if t, _ := d.get("type"); t != "auth" {
		return false
	}
	for _, k := range d.keys {
		if k != "type" && k != "session_api_key" {
			return false
		}
	}
	return true
}

// socketMessage validates a frame as the SDK's Message model: role one of
// four literals, content null (none), a string (one text part) or a list
// (kept as sent: the emulator does not check its parts); other keys are
// ignored. The error text is "" when it is valid.
func socketMessage(v any) (*messageRequest, string) {
	d, ok := v.(*pyDict)
	if !ok {
		return nil, pydanticText("Message", []lineError{{typ: "model_type", msg: "Input should be a valid dictionary or instance of Message", input: v}})
	}
	var errs []lineError
	m := &messageRequest{}
	switch role, ok := d.get("role"); {
	case !ok:
		errs = append(errs, lineError{typ: "missing", loc: []any{"role"}, msg: "Field required", input: d})
	case role == "user" || role == "system" || role == "assistant" || role == "tool":
		m.Role = role.(string)
	default:
		errs = append(errs, lineError{typ: "literal_error", loc: []any{"role"},
			msg: "Input should be 'user', 'system', 'assistant' or 'tool'", input: role})
	}
	content, _ := d.get("content")
	switch c := content.(type) {
	case nil:
		m.Content = []byte("[]")
	case string:
		b, err := compactJSON([]any{map[string]any{"type": "text", "text": c}})
		if err != nil {
			return nil, err.Error()
		}
		m.Content = b
	case []any:
		b, err := compactJSON(plain(c))
		if err != nil {
			return nil, err.Error()
		}
		m.Content = b
	default:
		// Uncertain: the text pydantic gives for a Sequence field given
		// something that is not one.
		errs = append(errs, lineError{typ: "is_instance_of", loc: []any{"content"},
			msg: "Input should be an instance of Sequence", input: c})
	}
	if len(errs) > 0 {
		return nil, pydanticText("Message", errs)
	}
	return m, ""
}

// socketBashRequest validates a frame as an ExecuteBashRequest.
func socketBashRequest(v any) (bashRequest, string) {
	d, ok := v.(*pyDict)
	if !ok {
		return bashRequest{}, pydanticText("ExecuteBashRequest", []lineError{{typ: "model_type",
			msg: "Input should be a valid dictionary or instance of ExecuteBashRequest", input: v}})
	}
	req, verrs := bashFields(plain(d).(map[string]any))
	if len(verrs) == 0 {
		return req, ""
	}
	errs := make([]lineError, len(verrs))
	for i, e := range verrs {
		loc := e["loc"].([]any)
		input := pyAt(d, loc) // the value as decoded: its repr keeps int and key order
		if e["type"] == "missing" {
			input = pyAt(d, loc[:len(loc)-1])
		}
		errs[i] = lineError{typ: e["type"].(string), msg: e["msg"].(string), loc: loc, input: input}
	}
	return req, pydanticText("ExecuteBashRequest", errs)
}

var (
	pyDateTimeRE = regexp.MustCompile(`^(\d{4})-(\d{2})-(\d{2})(?:[Tt _](\d{2}):(\d{2})(?::(\d{2})(?:\.(\d+))?)?([Zz]|[+-]\d{2}(?::?\d{2})?)?)?$`)
	pyNumberRE   = regexp.MustCompile(`^[+-]?(\d+\.?\d*|\.\d+)$`)
)

// pyDateTime reads a datetime query parameter as pydantic does (lax):
// an ISO 8601 date and time with an optional zone, a bare date
// (midnight), or a number of seconds since the epoch (milliseconds when
// it is above 2e10), which is UTC. aware tells whether it has a zone;
// a naive one is returned in UTC only as a holder of its fields.
func pyDateTime(s string) (t time.Time, aware, ok bool) {
	if pyNumberRE.MatchString(s) {
		f, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return t, false, false
		}
		if f > 2e10 || f < -2e10 {
			f /= 1000
		}
		sec := int64(f)
		return time.Unix(sec, int64((f-float64(sec))*1e6)*1000).UTC(), true, true
	}
	m := pyDateTimeRE.FindStringSubmatch(s)
	if m == nil {
		return t, false, false
	}
	n := func(s string) int { v, _ := strconv.Atoi(s); return v }
	frac := m[7]
	if len(frac) > 6 {
		frac = frac[:6] // pydantic truncates past microseconds
	}
	usec := 0
	if frac != "" {
		usec = n(frac + strings.Repeat("0", 6-len(frac)))
	}
	loc := time.UTC
	switch z := m[8]; {
	case z == "":
	case z == "Z" || z == "z":
		aware = true
	default:
		aware = true
		digits := strings.ReplaceAll(z[1:], ":", "")
		off := n(digits[:2]) * 3600
		if len(digits) == 4 {
			off += n(digits[2:]) * 60
		}
		if z[0] == '-' {
			off = -off
		}
		loc = time.FixedZone("", off)
	}
	y, mo, d, h, mi, sec := n(m[1]), n(m[2]), n(m[3]), n(m[4]), n(m[5]), n(m[6])
	if mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 || sec > 59 {
		return t, false, false
	}
	t = time.Date(y, time.Month(mo), d, h, mi, sec, usec*1000, loc)
	if t.Day() != d { // 31 April and the like
		return time.Time{}, false, false
	}
	return t, aware, true
}

// sinceBound is after_timestamp as upstream compares it with event
// timestamps: an aware time is taken to the server's local time and made
// naive, a naive one is kept, and the result is written as isoformat().
func sinceBound(t time.Time, aware bool) string {
	if aware {
		t = t.Local()
	}
	if t.Nanosecond() == 0 {
		return t.Format("2006-01-02T15:04:05")
	}
	return t.Format("2006-01-02T15:04:05.000000")
}
