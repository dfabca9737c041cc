package main

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"
	"unicode"
)

// defaultExcludes are upstream's default archive excludes: a trailing "/"
// marks a directory-only pattern.
var defaultExcludes = []string{".git/", "node_modules/", ".venv/", "venv/", "__pycache__/", ".mypy_cache/",
	".pytest_cache/", ".ruff_cache/", "dist/", "build/", ".next/", "target/", "*.pyc"}

// pathExcluded says whether the path with these parts (relative to the
// archive root) is excluded, with upstream's rules for both formats:
//   - a trailing "/" makes a pattern directory-only: it matches a
//     directory (and so everything below it) but never a file's own name;
//   - a pattern with a "/" inside is anchored at the root and matched part
//     by part ("*" does not cross "/"), against the path or any prefix of
//     it;
//   - a bare pattern matches any single part, at any depth.
//
// Parts are matched with Python's fnmatch rules (see fnmatch).
func pathExcluded(parts []string, patterns []string, isDir bool) bool {
	for _, raw := range patterns {
		dirOnly := strings.HasSuffix(raw, "/")
		pattern := strings.TrimRight(raw, "/")
		if strings.Contains(pattern, "/") {
			pp := strings.Split(pattern, "/")
			if len(parts) < len(pp) {
				continue
			}
			match := true
			for i, p := range pp {
				if !fnmatch(parts[i], p) {
					match = false
					break
				}
			}
			if !match || dirOnly && !isDir && len(parts) == len(pp) {
				continue
			}
			return true
		}
		candidates := parts
		if dirOnly && !isDir {
			candidates = parts[:len(parts)-1]
		}
		if slices.ContainsFunc(candidates, func(part string) bool { return fnmatch(part, pattern) }) {
			return true
		}
	}
	return false
}

// sensitiveGitNames are the git internals that may hold credentials (a
// tokenized remote URL in config or FETCH_HEAD, saved credentials). They
// are never archived, even with the default excludes off.
var sensitiveGitNames = map[string]bool{"config": true, "config.worktree": true, "credentials": true,
	".git-credentials": true, "FETCH_HEAD": true}

// sensitiveGit says whether the path with these parts lies inside a .git
// directory (the first one in the path, at any depth, so a submodule's
// .git/modules/x/ counts) and is one of sensitiveGitNames or anything with
// a "logs" part (reflogs). It applies to directories too, which are then
// not descended.
func sensitiveGit(parts []string) bool {
	i := slices.Index(parts, ".git")
	if i < 0 || i == len(parts)-1 {
		return false
	}
	inside := parts[i+1:]
	return slices.Contains(inside, "logs") || sensitiveGitNames[inside[len(inside)-1]]
}

var fnmatchCache sync.Map // pattern -> *regexp.Regexp

// fnmatch is Python's fnmatch.fnmatch on POSIX: "*" is any run of
// characters, "?" one, "[seq]" and "[!seq]" a set (a "]" first is
// literal, "a-z" a range, a reversed range matches nothing, an unclosed
// "[" is literal); a backslash is an ordinary character.
func fnmatch(name, pattern string) bool {
	re, ok := fnmatchCache.Load(pattern)
	if !ok {
		re, _ = fnmatchCache.LoadOrStore(pattern, regexp.MustCompile(fnmatchRegexp(pattern)))
	}
	return re.(*regexp.Regexp).MatchString(name)
}

func fnmatchRegexp(pat string) string {
	var b strings.Builder
	b.WriteString(`(?s)\A`)
	rs := []rune(pat)
	for i := 0; i < len(rs); i++ {
		switch c := rs[i]; c {
		case '*':
			for i+1 < len(rs) && rs[i+1] == '*' {
				i++
			}
			b.WriteString(".*")
		case '?':
			b.WriteString(".")
		case '[':
			j := i + 1
			if j < len(rs) && rs[j] == '!' {
				j++
			}
			if j < len(rs) && rs[j] == ']' {
				j++
			}
			for j < len(rs) && rs[j] != ']' {
				j++
			}
			if j >= len(rs) {
				b.WriteString(`\[`)
				continue
			}
			b.WriteString(fnmatchClass(rs[i+1 : j]))
			i = j
		default:
			b.WriteString(regexp.QuoteMeta(string(c)))
		}
	}
	b.WriteString(`\z`)
	return b.String()
}

// fnmatchClass turns the inside of a "[...]" into a regexp class.
func fnmatchClass(in []rune) string {
	neg := len(in) > 0 && in[0] == '!'
	if neg {
		in = in[1:]
	}
	var items strings.Builder
	for k := 0; k < len(in); k++ {
		lo := in[k]
		if k+2 < len(in) && in[k+1] == '-' {
			hi := in[k+2]
			k += 2
			if lo > hi {
				continue // an empty range
			}
			items.WriteString(classChar(lo) + "-" + classChar(hi))
			continue
		}
		items.WriteString(classChar(lo))
	}
	switch {
	case items.Len() == 0 && neg:
		return "." // a negated empty set: any character
	case items.Len() == 0:
		return `[^\x00-\x{10FFFF}]` // an empty set: nothing
	case neg:
		return "[^" + items.String() + "]"
	}
	return "[" + items.String() + "]"
}

// classChar writes one character for inside a regexp class, as an escape
// unless it is a letter or digit.
func classChar(r rune) string {
	if unicode.IsLetter(r) || unicode.IsDigit(r) {
		return string(r)
	}
	return fmt.Sprintf(`\x{%x}`, r)
}
