package db

import (
	"database/sql"
	"encoding/json"
	"fmt"
	"math"
	"time"

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

// mapOf decodes a JSON object column; NULL is a nil map.
func mapOf(field string, s sql.NullString) (map[string]string, error) {
	if !s.Valid {
		return nil, nil
	}
	if s.String == "{}" {
		return map[string]string{}, nil
	}
	var m map[string]string
	if err := json.Unmarshal([]byte(s.String), &m); err != nil {
		return nil, fmt.Errorf("decode %s: %w", field, err)
	}
	return m, nil
}

// listOf decodes a JSON array column; NULL is a nil slice.
func listOf(field string, s sql.NullString) ([]string, error) {
	if !s.Valid {
		return nil, nil
	}
	l := []string{}
	if err := json.Unmarshal([]byte(s.String), &l); err != nil {
		return nil, fmt.Errorf("decode %s: %w", field, err)
	}
	return l, nil
}
