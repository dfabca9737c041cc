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
// box image). It builds what upstream's git commands build: the base's
// tree as the index, the work tree staged on top of it as `git add -A`
// stages it (untracked files included, .gitignore respected, tracked files
// updated even when ignored, an embedded repository as its HEAD commit),
// both limited to the archived directory and to what the excludes leave,
// then the difference. Every changed file is written as a GIT binary
// patch (full index, zlib literal), which `git apply` takes for text and
// binary files alike.

const zeroID = "0000000000000000000000000000000000000000"

// gitDeltaPure writes the patch of root (which may be a subdirectory of
// its repository) and returns the base commit ("" for the empty tree).
// The base is chosen as binBase chooses it, except that the remote's
// default branch is known only for a remote on this machine.
func gitDeltaPure(w io.Writer, root string, baseRef *string, excludes []string, ceiling string) (string, error) {
	g, top, err := discoverRepo(root, ceiling)
	if err != nil {
		return "", err
	}
	scope, _ := filepath.Rel(top, root)
	scope = filepath.ToSlash(scope)
	if scope == "." {
		scope = ""
	}
	ref, err := pureBase(g, baseRef)
	if err != nil {
		return "", err
	}
	baseFiles := map[string]entry{}
	if ref != emptyTree {
		tree, _, err := g.commit(ref)
		if err != nil {
			return "", err
		}
		if err := g.files(tree, "", baseFiles); err != nil {
			return "", err
		}
	}
	wt := &workTree{top: top, scope: scope, base: baseFiles, excludes: excludes, out: map[string]entry{}}
	if err := wt.collect(); err != nil {
		return "", err
	}
	paths := map[string]bool{}
	for p := range baseFiles {
		if wt.diffed(p) {
			paths[p] = true
		}
	}
	for p := range wt.out {
		paths[p] = true
	}
	sorted := make([]string, 0, len(paths))
	for p := range paths {
		sorted = append(sorted, p)
	}
	sort.Strings(sorted)
	bw := bufio.NewWriterSize(w, 64<<10)
	for _, p := range sorted {
		if err := writeFileDiff(bw, g, top, p, baseFiles[p], wt.out[p]); err != nil {
			return "", err
		}
	}
	if err := bw.Flush(); err != nil {
		return "", err
	}
	if ref == emptyTree {
		return "", nil
	}
	return ref, nil
}

// pureBase is binBase over the loose repository; it returns a commit id
// or emptyTree.
func pureBase(g looseRepo, baseRef *string) (string, error) {
	if baseRef == nil && g.detached() {
		head := "HEAD"
		baseRef = &head
	}
	if baseRef != nil {
		if sha, ok := g.resolveCommit(*baseRef); ok {
			return sha, nil
		}
		if *baseRef == "HEAD" {
			return emptyTree, nil
		}
		return "", badRef{*baseRef}
	}
	if !g.hasCommits() {
		return emptyTree, nil
	}
	var try []string
	if b := g.abbrevHead(); b != "" && b != "HEAD" {
		try = append(try, "origin/"+b)
	}
	if def := g.remoteDefaultBranch(); def != "" {
		try = append(try, "origin/"+def)
		head, okH := g.resolveCommit("HEAD")
		other, okO := g.resolveCommit("origin/" + def)
		if okH && okO {
			if mb, err := g.mergeBase(head, other); err == nil && mb != "" {
				try = append(try, mb)
			}
		}
	}
	for _, ref := range try {
		if sha, ok := g.resolveCommit(ref); ok {
			return sha, nil
		}
	}
	return emptyTree, nil
}

// workTree collects what `git add -A -- . <excludes>` stages below scope
// (a slash path from the top, "" for all): mode and id by slash path.
type workTree struct {
	top, scope string
	base       map[string]entry // the index before staging
	excludes   []string
	out        map[string]entry

	baseDirs map[string]bool // directories holding tracked paths
}

// inScope says whether p (from the top) is inside the archived directory.
func (wt *workTree) inScope(p string) bool {
	return wt.scope == "" || p == wt.scope || strings.HasPrefix(p, wt.scope+"/")
}

// parts are p's parts relative to the archived directory, where the
// excludes are anchored.
func (wt *workTree) parts(p string) []string {
	rel := p
	if wt.scope != "" {
		rel = strings.TrimPrefix(strings.TrimPrefix(p, wt.scope), "/")
	}
	return strings.Split(rel, "/")
}

// diffed says whether the diff covers a path: in scope and not excluded.
func (wt *workTree) diffed(p string) bool {
	return wt.inScope(p) && !pathExcluded(wt.parts(p), wt.excludes, false)
}

func (wt *workTree) collect() error {
	wt.baseDirs = map[string]bool{}
	for p := range wt.base {
		for d := path.Dir(p); d != "."; d = path.Dir(d) {
			wt.baseDirs[d] = true
		}
	}
	ign := &ignorer{}
	ign.load(filepath.Join(wt.top, ".git", "info", "exclude"), "")
	ign.load(filepath.Join(wt.top, ".gitignore"), "")
	return wt.walk(ign, wt.top, "", false)
}

// walk stages dir (rel from the top, "" for the top). ignored says an
// ancestor is ignored: its untracked files are then ignored too.
func (wt *workTree) walk(ign *ignorer, dir, rel string, ignored bool) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, d := range entries {
		p := d.Name()
		if rel != "" {
			p = rel + "/" + p
		}
		full := filepath.Join(dir, d.Name())
		if d.IsDir() {
			if d.Name() == ".git" {
				continue
			}
			onPath := wt.scope != "" && strings.HasPrefix(wt.scope+"/", p+"/") && p != wt.scope
			if !onPath && !wt.inScope(p) {
				continue
			}
			dirIgnored := ignored || ign.ignored(p, true)
			if !onPath && p != wt.scope && pathExcluded(wt.parts(p), wt.excludes, true) {
				continue
			}
			if _, err := os.Lstat(filepath.Join(full, ".git")); err == nil && !onPath {
				// An embedded repository is staged as its HEAD commit.
				if _, tracked := wt.base[p]; dirIgnored && !tracked {
					continue
				}
				e, err := gitlink(full, p)
				if err != nil {
					return err
				}
				wt.out[p] = e
				continue
			}
			if dirIgnored && !wt.baseDirs[p] {
				continue
			}
			sub := *ign
			sub.rules = append([]ignoreRule(nil), ign.rules...)
			sub.load(filepath.Join(full, ".gitignore"), p)
			if err := wt.walk(&sub, full, p, dirIgnored); err != nil {
				return err
			}
			continue
		}
		if !wt.diffed(p) {
			continue
		}
		if _, tracked := wt.base[p]; !tracked && (ignored || ign.ignored(p, false)) {
			continue
		}
		e, ok, err := workEntry(full, d)
		if err != nil {
			return err
		}
		if ok {
			wt.out[p] = e
		}
	}
	return nil
}

// gitlink is an embedded repository's entry: its HEAD commit. Without one
// `git add` fails, and so does the delta.
func gitlink(dir, p string) (entry, error) {
	g, ok := openGitDir(dir)
	if ok {
		if sha, ok := g.resolveCommit("HEAD"); ok {
			return entry{"160000", sha}, nil
		}
	}
	return entry{}, gitCommandError{"Failed to generate git delta", fmt.Sprintf("'%s/' does not have a commit checked out", p)}
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
	if old.sha != "" && cur.sha != "" && modeKind(old.mode) != modeKind(cur.mode) {
		// A change of kind is a deletion and an addition, as git writes it.
		if err := writeFileDiff(w, g, root, p, old, entry{}); err != nil {
			return err
		}
		return writeFileDiff(w, g, root, p, entry{}, cur)
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
	if modeKind(old.mode) == "160000" || modeKind(cur.mode) == "160000" {
		writeGitlinkHunk(w, p, old.sha, cur.sha)
		return nil
	}
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

// modeKind is what a mode is: a file (either mode), a symlink, a gitlink.
func modeKind(mode string) string {
	if mode == "100755" {
		return "100644"
	}
	return mode
}

// writeGitlinkHunk writes a submodule's change as git's one-line text
// hunk ("Subproject commit <id>"); git writes no binary patch for it.
func writeGitlinkHunk(w *bufio.Writer, p, old, cur string) {
	from, to := quotePath("a/"+p), quotePath("b/"+p)
	switch {
	case old == "":
		fmt.Fprintf(w, "--- /dev/null\n+++ %s\n@@ -0,0 +1 @@\n+Subproject commit %s\n", to, cur)
	case cur == "":
		fmt.Fprintf(w, "--- %s\n+++ /dev/null\n@@ -1 +0,0 @@\n-Subproject commit %s\n", from, old)
	default:
		fmt.Fprintf(w, "--- %s\n+++ %s\n@@ -1 +1 @@\n-Subproject commit %s\n+Subproject commit %s\n", from, to, old, cur)
	}
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
