package main

import (
	"testing"
	"time"
)

func TestCutMiddle(t *testing.T) {
	s := "{'content': 'hi', 'type': 'auth', 'session_api_key': 1}"
	if got, want := cutMiddle(s, 50), "{'content': 'hi', 'type':...', 'session_api_key': 1}"; got != want {
		t.Errorf("cutMiddle = %q, want %q", got, want)
	}
	if got := cutMiddle("short", 50); got != "short" {
		t.Errorf("cutMiddle(short) = %q", got)
	}
}

func TestPyDateTime(t *testing.T) {
	utc := func(s string) time.Time { v, _ := time.Parse(time.RFC3339Nano, s); return v }
	for in, want := range map[string]struct {
		t     time.Time
		aware bool
	}{
		"2026-08-22T10:00:10":            {utc("2026-08-22T10:00:10Z"), false},
		"2026-08-22 10:00:10.5":          {utc("2026-08-22T10:00:10.5Z"), false},
		"2026-08-22T10:00":               {utc("2026-08-22T10:00:00Z"), false},
		"2026-08-22":                     {utc("2026-08-22T00:00:00Z"), false},
		"2026-08-22T10:00:10.123456789Z": {utc("2026-08-22T10:00:10.123456Z"), true},
		"2026-08-22T12:00:10+02:00":      {utc("2026-08-22T10:00:10Z"), true},
		"2026-08-22T05:00:10-0500":       {utc("2026-08-22T10:00:10Z"), true},
		"1787392810":                     {utc("2026-08-22T10:00:10Z"), true},
		"1787392810500":                  {utc("2026-08-22T10:00:10.5Z"), true},
		"1787392810.25":                  {utc("2026-08-22T10:00:10.25Z"), true},
	} {
		got, aware, ok := pyDateTime(in)
		if !ok || !got.Equal(want.t) || aware != want.aware {
			t.Errorf("%s: %v aware=%v ok=%v, want %v aware=%v", in, got, aware, ok, want.t, want.aware)
		}
	}
	for _, bad := range []string{"", "yesterday", "2026-13-01", "2026-04-31T00:00:00", "2026-08-22T25:00"} {
		if _, _, ok := pyDateTime(bad); ok {
			t.Errorf("%q accepted", bad)
		}
	}
	if got := sinceBound(utc("2026-08-22T10:00:10Z"), false); got != "2026-08-22T10:00:10" {
		t.Errorf("naive bound %q", got)
	}
}
