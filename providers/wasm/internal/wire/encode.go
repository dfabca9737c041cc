package wire

import (
	"strconv"
	"unicode/utf8"
)

// AppendInput appends in as JSON to b: the same document json.Marshal
// makes, but without reflection (map members come in map order).
func AppendInput(b []byte, in *Input) []byte {
	b = append(b, `{"deadline_unix_ms":`...)
	b = strconv.AppendInt(b, in.DeadlineUnixMS, 10)
	if a := in.Account; a != nil {
		b = append(b, `,"account":{"id":`...)
		b = appendString(b, a.ID)
		b = append(b, `,"config":`...)
		b = appendStringMap(b, a.Config)
		b = append(b, '}')
	}
	if in.BoxID != "" {
		b = append(b, `,"box_id":`...)
		b = appendString(b, in.BoxID)
	}
	if s := in.Spec; s != nil {
		b = append(b, `,"spec":{"workspace_id":`...)
		b = appendString(b, s.WorkspaceID)
		b = append(b, `,"name":`...)
		b = appendString(b, s.Name)
		b = append(b, `,"lifecycle":{`...)
		comma := false
		if v := s.Lifecycle.IdlePauseAfterSeconds; v != 0 {
			b = append(b, `"idle_pause_after_seconds":`...)
			b = strconv.AppendInt(b, v, 10)
			comma = true
		}
		if v := s.Lifecycle.PausedTTLSeconds; v != 0 {
			if comma {
				b = append(b, ',')
			}
			b = append(b, `"paused_ttl_seconds":`...)
			b = strconv.AppendInt(b, v, 10)
		}
		b = append(b, `},"options":`...)
		b = appendStringMap(b, s.Options)
		b = append(b, `,"labels":`...)
		b = appendStringMap(b, s.Labels)
		if s.AgentKey != "" {
			b = append(b, `,"agent_key":`...)
			b = appendString(b, s.AgentKey)
		}
		b = append(b, '}')
	}
	return append(b, '}')
}

func appendStringMap(b []byte, m map[string]string) []byte {
	if m == nil {
		return append(b, "null"...)
	}
	b = append(b, '{')
	first := true
	for k, v := range m {
		if !first {
			b = append(b, ',')
		}
		first = false
		b = appendString(b, k)
		b = append(b, ':')
		b = appendString(b, v)
	}
	return append(b, '}')
}

// appendString appends s as a JSON string, with invalid UTF-8 replaced by
// U+FFFD as json.Marshal does.
func appendString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' && c < utf8.RuneSelf {
			i++
			continue
		}
		if c >= utf8.RuneSelf {
			r, size := utf8.DecodeRuneInString(s[i:])
			if r != utf8.RuneError || size != 1 {
				i += size
				continue
			}
		}
		b = append(b, s[start:i]...)
		switch c {
		case '"', '\\':
			b = append(b, '\\', c)
		case '\n':
			b = append(b, '\\', 'n')
		case '\r':
			b = append(b, '\\', 'r')
		case '\t':
			b = append(b, '\\', 't')
		default:
			if c < 0x20 {
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			} else {
				b = append(b, `\ufffd`...)
			}
		}
		i++
		start = i
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
