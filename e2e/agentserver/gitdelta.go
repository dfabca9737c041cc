package main

import (
	"bufio"
	"compress/zlib"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
)

// Pure-Go git-delta, used when the box has no git binary (the FROM-scratch
// box image). It follows what upstream builds with git: HEAD's tree plus
// the work tree (untracked files included, .gitignore respected, tracked
// files kept even when ignored), diffed against the base the same rules
// pick. Every changed file is written as a GIT binary patch (full index,
// zlib literal), which `git apply` takes for text and binary files alike.

const zeroID = "0000000000000000000000000000000000000000"

// gitDeltaPure writes the patch and returns the base commit ("" for the
// empty tree). baseRef resolves as in gitDelta; an unknown one is badRef.
func gitDeltaPure(w io.Writer, root, baseRef string, excludes []string) (string, error) {
	g := looseRepo{gitDir: filepath.Join(root, ".git")}
	headRaw, _ := os.ReadFile(filepath.Join(g.gitDir, "HEAD"))
	headRef, onBranch := strings.CutPrefix(strings.TrimSpace(string(headRaw)), "ref: ")
	head := strings.TrimSpace(string(headRaw))
	if onBranch {
		head = g.ref(headRef)
	}
	base := ""
	switch {
	case baseRef != "":
		if base = g.resolve(baseRef); base == "" {
			return "", badRef{baseRef}
		}
	case head == "":
		// An unborn branch: against the empty tree.
	case !onBranch:
		base = head
	default:
		if up := g.upstream(strings.TrimPrefix(headRef, "refs/heads/")); up != "" {
			mb, err := g.mergeBase(head, up)
			if err != nil {
				return "", err
			}
			base = mb
		}
	}
	baseFiles := map[string]entry{}
	if base != "" {
		tree, _, err := g.commit(base)
		if err != nil {
			return "", err
		}
		if err := g.files(tree, "", baseFiles); err != nil {
			return "", err
		}
	}
	headFiles := map[string]entry{}
	if head != "" {
		tree, _, err := g.commit(head)
		if err != nil {
			return "", err
		}
		if err := g.files(tree, "", headFiles); err != nil {
			return "", err
		}
	}
	work, err := workTree(root, headFiles, excludes)
	if err != nil {
		return "", err
	}
	bw := bufio.NewWriterSize(w, 64<<10)
	paths := map[string]bool{}
	for p := range baseFiles {
		paths[p] = true
	}
	for p := range work {
		paths[p] = true
	}
	sorted := make([]string, 0, len(paths))
	for p := range paths {
		sorted = append(sorted, p)
	}
	sort.Strings(sorted)
	for _, p := range sorted {
		if err := writeFileDiff(bw, g, root, p, baseFiles[p], work[p]); err != nil {
			return "", err
		}
	}
	return base, bw.Flush()
}

// workTree lists the files `git add -A` over HEAD's index would stage:
// mode and blob id by slash path.
func workTree(root string, head map[string]entry, excludes []string) (map[string]entry, error) {
	headDirs := map[string]bool{}
	for p := range head {
		for d := path.Dir(p); d != "."; d = path.Dir(d) {
			headDirs[d] = true
		}
	}
	ign := &ignorer{}
	ign.load(filepath.Join(root, ".git", "info", "exclude"), "")
	out := map[string]entry{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if rel == "." {
				ign.load(filepath.Join(p, ".gitignore"), "")
				return nil
			}
			if d.Name() == ".git" {
				return filepath.SkipDir
			}
			if _, err := os.Lstat(filepath.Join(p, ".git")); err == nil {
				return filepath.SkipDir // a nested repository is not this one's content
			}
			if !headDirs[rel] && (excluded(rel, true, excludes) || ign.ignored(rel, true)) {
				return filepath.SkipDir
			}
			ign.load(filepath.Join(p, ".gitignore"), rel)
			return nil
		}
		tracked, isTracked := head[rel]
		if excluded(rel, false, excludes) {
			if isTracked {
				out[rel] = tracked // left as HEAD has it, as a pathspec exclude does
			}
			return nil
		}
		if !isTracked && ign.ignored(rel, false) {
			return nil
		}
		e, ok, err := workEntry(p, d)
		if err != nil {
			return err
		}
		if ok {
			out[rel] = e
		}
		return nil
	})
	return out, err
}

func workEntry(p string, d fs.DirEntry) (entry, bool, error) {
	switch {
	case d.Type()&fs.ModeSymlink != 0:
		target, err := os.Readlink(p)
		if err != nil {
			return entry{}, false, err
		}
		id, err := blobID(strings.NewReader(target), int64(len(target)))
		return entry{"120000", id}, err == nil, err
	case d.Type().IsRegular():
		fi, err := d.Info()
		if err != nil {
			return entry{}, false, err
		}
		f, err := os.Open(p)
		if err != nil {
			return entry{}, false, err
		}
		defer f.Close()
		id, err := blobID(f, fi.Size())
		mode := "100644"
		if fi.Mode()&0o111 != 0 {
			mode = "100755"
		}
		return entry{mode, id}, err == nil, err
	}
	return entry{}, false, nil
}

// writeFileDiff writes one file's section; a zero entry means absent.
func writeFileDiff(w *bufio.Writer, g looseRepo, root, p string, old, cur entry) error {
	if old == cur {
		return nil
	}
	fmt.Fprintf(w, "diff --git %s %s\n", quotePath("a/"+p), quotePath("b/"+p))
	switch {
	case old.sha == "":
		fmt.Fprintf(w, "new file mode %s\n", cur.mode)
	case cur.sha == "":
		fmt.Fprintf(w, "deleted file mode %s\n", old.mode)
	case old.mode != cur.mode:
		fmt.Fprintf(w, "old mode %s\nnew mode %s\n", old.mode, cur.mode)
	}
	if old.sha == cur.sha {
		return nil // a mode change only
	}
	oldID, curID := old.sha, cur.sha
	if oldID == "" {
		oldID = zeroID
	}
	if curID == "" {
		curID = zeroID
	}
	fmt.Fprintf(w, "index %s..%s", oldID, curID)
	if old.sha != "" && cur.sha != "" && old.mode == cur.mode {
		fmt.Fprintf(w, " %s", cur.mode)
	}
	w.WriteString("\n")
	const emptyBlob = "e69de29bb2d1d6434b8b29ae775ad8c2e48c5391"
	if (old.sha == "" && cur.sha == emptyBlob) || (cur.sha == "" && old.sha == emptyBlob) {
		return nil // an empty file added or removed: the header says it all
	}
	w.WriteString("GIT binary patch\n")
	// Forward (to the new content), then reverse (to the old).
	if err := writeSide(w, g, root, p, cur, true); err != nil {
		return err
	}
	return writeSide(w, g, root, p, old, false)
}

// writeSide writes one literal: the work-tree file for the new side
// (streamed), the stored blob for the old side, nothing (literal 0) for an
// absent side.
func writeSide(w *bufio.Writer, g looseRepo, root, p string, e entry, fromWork bool) error {
	var r io.Reader = strings.NewReader("")
	var size int64
	switch {
	case e.sha == "":
	case !fromWork:
		_, data, err := g.object(e.sha)
		if err != nil {
			return err
		}
		r, size = strings.NewReader(string(data)), int64(len(data))
	case e.mode == "120000":
		t, err := os.Readlink(filepath.Join(root, filepath.FromSlash(p)))
		if err != nil {
			return err
		}
		r, size = strings.NewReader(t), int64(len(t))
	default:
		f, err := os.Open(filepath.Join(root, filepath.FromSlash(p)))
		if err != nil {
			return err
		}
		defer f.Close()
		fi, err := f.Stat()
		if err != nil {
			return err
		}
		r, size = io.LimitReader(f, fi.Size()), fi.Size()
	}
	fmt.Fprintf(w, "literal %d\n", size)
	lw := &b85Lines{w: w}
	zw := zlib.NewWriter(lw)
	if _, err := io.Copy(zw, r); err != nil {
		return err
	}
	if err := zw.Close(); err != nil {
		return err
	}
	lw.flush()
	w.WriteString("\n")
	return nil
}

// b85Lines writes git's base85 patch lines: a length letter ('A'..'Z' for
// 1..26 bytes, 'a'..'z' for 27..52) and 5 characters per 4 bytes.
type b85Lines struct {
	w   *bufio.Writer
	buf [52]byte
	n   int
}

const b85 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz!#$%&()*+-;<=>?@^_`{|}~"

func (l *b85Lines) Write(p []byte) (int, error) {
	total := len(p)
	for len(p) > 0 {
		k := copy(l.buf[l.n:], p)
		l.n += k
		p = p[k:]
		if l.n == len(l.buf) {
			l.flush()
		}
	}
	return total, nil
}

func (l *b85Lines) flush() {
	if l.n == 0 {
		return
	}
	if l.n <= 26 {
		l.w.WriteByte(byte('A' + l.n - 1))
	} else {
		l.w.WriteByte(byte('a' + l.n - 27))
	}
	for i := 0; i < l.n; i += 4 {
		var v uint32
		for k := range 4 {
			v <<= 8
			if i+k < l.n {
				v |= uint32(l.buf[i+k])
			}
		}
		var out [5]byte
		for k := 4; k >= 0; k-- {
			out[k] = b85[v%85]
			v /= 85
		}
		l.w.Write(out[:])
	}
	l.w.WriteByte('\n')
	l.n = 0
}

// quotePath quotes a path as git does by default (core.quotePath): in
// double quotes with C escapes when it holds a control character, a quote,
// a backslash or any byte >= 0x80.
func quotePath(p string) string {
	needs := false
	for i := 0; i < len(p); i++ {
		if c := p[i]; c < 0x20 || c == '"' || c == '\\' || c >= 0x80 || c == 0x7f {
			needs = true
			break
		}
	}
	if !needs {
		return p
	}
	var b strings.Builder
	b.WriteByte('"')
	for i := 0; i < len(p); i++ {
		switch c := p[i]; c {
		case '"', '\\':
			b.WriteByte('\\')
			b.WriteByte(c)
		case '\n':
			b.WriteString(`\n`)
		case '\t':
			b.WriteString(`\t`)
		default:
			if c < 0x20 || c >= 0x7f {
				fmt.Fprintf(&b, `\%03o`, c)
			} else {
				b.WriteByte(c)
			}
		}
	}
	b.WriteByte('"')
	return b.String()
}

// ignorer is the subset of gitignore the emulator needs: per-directory
// files, "!" negation, trailing "/" for directories, anchoring by a
// leading or inner "/", and "*", "?", "[...]" and "**" globs. The last
// matching rule wins; a file under an ignored directory is never reached.
type ignorer struct{ rules []ignoreRule }

type ignoreRule struct {
	base     string // directory of the .gitignore, "" at the root
	re       *regexp.Regexp
	neg, dir bool
	anchored bool
}

func (ig *ignorer) load(file, base string) {
	b, err := os.ReadFile(file)
	if err != nil {
		return
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		line = strings.TrimRight(line, "\r")
		if strings.TrimSpace(line) == "" || strings.HasPrefix(line, "#") {
			continue
		}
		line = strings.TrimRight(line, " ")
		r := ignoreRule{base: base}
		if rest, ok := strings.CutPrefix(line, "!"); ok {
			r.neg, line = true, rest
		}
		if rest, ok := strings.CutSuffix(line, "/"); ok {
			r.dir, line = true, rest
		}
		if strings.Contains(line, "/") {
			r.anchored = true
			line = strings.TrimPrefix(line, "/")
		}
		re, err := regexp.Compile("^" + globRegexp(line) + "$")
		if err != nil {
			continue
		}
		r.re = re
		ig.rules = append(ig.rules, r)
	}
}

func (ig *ignorer) ignored(rel string, isDir bool) bool {
	out := false
	for _, r := range ig.rules {
		if r.dir && !isDir {
			continue
		}
		sub := rel
		if r.base != "" {
			var ok bool
			if sub, ok = strings.CutPrefix(rel, r.base+"/"); !ok {
				continue
			}
		}
		target := sub
		if !r.anchored {
			target = path.Base(sub)
		}
		if r.re.MatchString(target) {
			out = !r.neg
		}
	}
	return out
}

// globRegexp translates a gitignore glob to a regular expression.
func globRegexp(g string) string {
	var b strings.Builder
	for i := 0; i < len(g); i++ {
		switch c := g[i]; {
		case strings.HasPrefix(g[i:], "**/"):
			b.WriteString("(?:.*/)?")
			i += 2
		case strings.HasPrefix(g[i:], "/**") && i+3 == len(g):
			b.WriteString("/.*")
			i += 2
		case strings.HasPrefix(g[i:], "**"):
			b.WriteString(".*")
			i++
		case c == '*':
			b.WriteString("[^/]*")
		case c == '?':
			b.WriteString("[^/]")
		case c == '[':
			if j := strings.IndexByte(g[i:], ']'); j > 1 {
				class := g[i+1 : i+j]
				if class[0] == '!' {
					class = "^" + class[1:]
				}
				b.WriteString("[" + class + "]")
				i += j
			} else {
				b.WriteString(`\[`)
			}
		case c == '\\' && i+1 < len(g):
			i++
			b.WriteString(regexp.QuoteMeta(g[i : i+1]))
		default:
			b.WriteString(regexp.QuoteMeta(string(c)))
		}
	}
	return b.String()
}
