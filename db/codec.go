package db

import (
	"database/sql"
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/canvasapp/companion/core"
)

// The range of times a unix-nanosecond int64 can hold.
var (
	minTime = time.Unix(0, math.MinInt64)
	maxTime = time.Unix(0, math.MaxInt64)
)

// enc turns Go values into column values, remembering the first value that
// cannot be stored so call sites can encode a whole row and check once.
type enc struct{ err error }

// time encodes t as unix nanoseconds, or NULL for the zero time.
func (e *enc) time(field string, t time.Time) any {
	if t.IsZero() {
		return nil
	}
	if t.Before(minTime) || t.After(maxTime) {
		if e.err == nil {
			e.err = core.Errorf(core.KindInvalid, "%s %s is outside the range companion can store (years 1678 to 2262)", field, t.UTC().Format(time.RFC3339))
		}
		return nil
	}
	return t.UnixNano()
}

// json encodes v as JSON text, or NULL when v is a nil map or slice.
func (e *enc) json(field string, v any, isNil bool) any {
	if isNil {
		return nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		if e.err == nil {
			e.err = fmt.Errorf("encode %s: %w", field, err)
		}
		return nil
	}
	return string(b)
}

// timeOf decodes a column written by enc.time.
func timeOf(n sql.NullInt64) time.Time {
	if !n.Valid {
		return time.Time{}
	}
	return time.Unix(0, n.Int64).UTC()
}

// nanos is t as unix nanoseconds for a comparison in a query, clamped to
// the storable range (the zero time sorts first).
func nanos(t time.Time) int64 {
	switch {
	case t.Before(minTime):
		return math.MinInt64
	case t.After(maxTime):
		return math.MaxInt64
	}
	return t.UnixNano()
}

// mapOf decodes a JSON object column (the field named what of the row
// id); NULL is a nil map.
func mapOf(what, id string, s sql.NullString) (map[string]string, error) {
	if !s.Valid {
		return nil, nil
	}
	if m, ok := flatObject(s.String); ok {
		return m, nil
	}
	var m map[string]string
	if err := json.Unmarshal([]byte(s.String), &m); err != nil {
		return nil, fmt.Errorf("decode %s %s: %w", what, id, err)
	}
	return m, nil
}

// flatObject decodes the JSON that json.Marshal writes for a small
// map[string]string whose strings need no escaping ({"k":"v",...}, no
// spaces), which is what every options and config column holds, without
// encoding/json's reflection: listing 10,000 workspaces spent a fifth of
// its time there. Anything else (an escape, a space, bytes that are not
// UTF-8, a control character) is left to json.Unmarshal: ok is false.
func flatObject(s string) (m map[string]string, ok bool) {
	if len(s) < 2 || s[0] != '{' || s[len(s)-1] != '}' {
		return nil, false
	}
	body := s[1 : len(s)-1]
	m = make(map[string]string, strings.Count(body, `":"`))
	for len(body) > 0 {
		k, rest, ok := flatString(body)
		if !ok || len(rest) == 0 || rest[0] != ':' {
			return nil, false
		}
		v, rest, ok := flatString(rest[1:])
		if !ok {
			return nil, false
		}
		m[k] = v
		if len(rest) == 0 {
			break
		}
		if rest[0] != ',' || len(rest) == 1 {
			return nil, false
		}
		body = rest[1:]
	}
	return m, true
}

// flatString reads one JSON string without escapes from the start of s
// and returns its contents and what follows it.
func flatString(s string) (v, rest string, ok bool) {
	if len(s) == 0 || s[0] != '"' {
		return "", "", false
	}
	for i := 1; i < len(s); i++ {
		switch c := s[i]; {
		case c == '"':
			v = s[1:i]
			return v, s[i+1:], utf8.ValidString(v)
		case c == '\\' || c < 0x20:
			return "", "", false
		}
	}
	return "", "", false
}

// listOf decodes a JSON array column (the field named what of the row
// id); NULL is a nil slice.
func listOf(what, id string, s sql.NullString) ([]string, error) {
	if !s.Valid {
		return nil, nil
	}
	l := []string{}
	if err := json.Unmarshal([]byte(s.String), &l); err != nil {
		return nil, fmt.Errorf("decode %s %s: %w", what, id, err)
	}
	return l, nil
}
