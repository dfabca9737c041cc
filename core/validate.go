package core

import (
	"sort"
	"strings"
	"unicode"
	"unicode/utf8"
)

// MaxNameRunes bounds a workspace name: it is shown in lists and put on
// the box as a label or tag, where providers have limits of their own.
const MaxNameRunes = 100

// validateName refuses names that are empty, too long, or carry control or
// format characters: a newline or NUL would reach provider labels and
// logs, and an invisible bidi override would make two names look alike.
func validateName(name string) error {
	trimmed := strings.TrimSpace(name)
	if trimmed == "" {
		return Errorf(KindInvalid, "name is required")
	}
	if n := utf8.RuneCountInString(trimmed); n > MaxNameRunes {
		return Errorf(KindInvalid, "name is longer than %d characters (it has %d)", MaxNameRunes, n)
	}
	return checkPrintable("name", name)
}

// checkPrintable refuses invalid UTF-8 and any Unicode control (Cc) or
// format (Cf) character in the value of field, naming the field and where.
// The zero-width joiner and non-joiner are format characters that emoji
// sequences and several scripts need, so they pass.
func checkPrintable(field, v string) error {
	if !utf8.ValidString(v) {
		return Errorf(KindInvalid, "%s is not valid UTF-8", field)
	}
	pos := 0
	for _, r := range v {
		pos++
		if r == '\u200c' || r == '\u200d' {
			continue
		}
		if unicode.IsControl(r) || unicode.Is(unicode.Cf, r) {
			return Errorf(KindInvalid, "%s contains the control or format character %U at character %d; use printable characters only", field, r, pos)
		}
	}
	return nil
}

// checkOptions refuses creation options the provider did not declare, so
// a typo is a 400 now instead of a failed create later. A provider that
// declares no list (nil) gets every option passed through.
func checkOptions(info ProviderInfo, opts map[string]string) error {
	if info.Options == nil || len(opts) == 0 {
		return nil
	}
	known := make(map[string]bool, len(info.Options))
	names := make([]string, 0, len(info.Options))
	for _, o := range info.Options {
		known[o.Name] = true
		names = append(names, o.Name)
	}
	keys := make([]string, 0, len(opts))
	for k := range opts {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if known[k] {
			continue
		}
		takes := "no options"
		if len(names) > 0 {
			takes = "only " + strings.Join(names, ", ")
		}
		return Errorf(KindInvalid, "options.%s: provider %s has no option %q; it takes %s", k, info.Name, k, takes)
	}
	return nil
}
