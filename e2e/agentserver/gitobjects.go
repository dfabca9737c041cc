package main

import (
	"bufio"
	"bytes"
	"compress/zlib"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// looseRepo reads a git repository's loose objects and refs without the
// git binary, for the FROM-scratch box image. Packed objects are not
// read: a repository whose objects were packed (a clone, a gc) fails with
// errPacked, a 500 like any git failure upstream.
//
// A linked worktree or a submodule has a .git file naming its git
// directory; a worktree's git directory keeps HEAD and the index, and
// names (in "commondir") the directory with the objects, refs and config.
type looseRepo struct {
	gitDir    string // HEAD, per-worktree refs
	commonDir string // objects, refs, packed-refs, config
}

var errPacked = errors.New("object is packed; the emulator's pure-Go git reads loose objects only")

// openGitDir opens the repository whose work tree is dir, when dir/.git
// is a git directory or a "gitdir:" file pointing at one.
func openGitDir(dir string) (looseRepo, bool) {
	dotgit := filepath.Join(dir, ".git")
	fi, err := os.Stat(dotgit)
	if err != nil {
		return looseRepo{}, false
	}
	gd := dotgit
	if !fi.IsDir() {
		b, err := os.ReadFile(dotgit)
		if err != nil {
			return looseRepo{}, false
		}
		target, ok := strings.CutPrefix(strings.TrimSpace(string(b)), "gitdir:")
		if !ok {
			return looseRepo{}, false
		}
		gd = strings.TrimSpace(target)
		if !filepath.IsAbs(gd) {
			gd = filepath.Join(dir, gd)
		}
	}
	if _, err := os.Stat(filepath.Join(gd, "HEAD")); err != nil {
		return looseRepo{}, false
	}
	g := looseRepo{gitDir: gd, commonDir: gd}
	if b, err := os.ReadFile(filepath.Join(gd, "commondir")); err == nil {
		cd := strings.TrimSpace(string(b))
		if !filepath.IsAbs(cd) {
			cd = filepath.Join(gd, cd)
		}
		g.commonDir = filepath.Clean(cd)
	}
	return g, true
}

// discoverRepo finds the repository dir belongs to, looking upward as git
// does but never above ceiling (when set), and returns it with its work
// tree's top directory. None is errNotRepo.
func discoverRepo(dir, ceiling string) (looseRepo, string, error) {
	for d := dir; ; d = filepath.Dir(d) {
		if ceiling != "" && d == ceiling {
			break
		}
		if g, ok := openGitDir(d); ok {
			return g, d, nil
		}
		if filepath.Dir(d) == d {
			break
		}
	}
	return looseRepo{}, "", errNotRepo
}

func (g looseRepo) object(sha string) (typ string, data []byte, err error) {
	if len(sha) != 40 {
		return "", nil, fmt.Errorf("bad object id %q", sha)
	}
	f, err := os.Open(filepath.Join(g.commonDir, "objects", sha[:2], sha[2:]))
	if errors.Is(err, os.ErrNotExist) {
		return "", nil, fmt.Errorf("%s: %w", sha, errPacked)
	}
	if err != nil {
		return "", nil, err
	}
	defer f.Close()
	zr, err := zlib.NewReader(f)
	if err != nil {
		return "", nil, fmt.Errorf("object %s: %w", sha, err)
	}
	raw, err := io.ReadAll(zr)
	if err != nil {
		return "", nil, fmt.Errorf("object %s: %w", sha, err)
	}
	hdr, body, ok := bytes.Cut(raw, []byte{0})
	typ, size, _ := strings.Cut(string(hdr), " ")
	if n, err := strconv.Atoi(size); !ok || err != nil || n != len(body) {
		return "", nil, fmt.Errorf("object %s: malformed header", sha)
	}
	return typ, body, nil
}

// peel follows annotated tags to the object they name.
func (g looseRepo) peel(sha string) (typ, id string, data []byte, err error) {
	for range 10 {
		typ, data, err = g.object(sha)
		if err != nil || typ != "tag" {
			return typ, sha, data, err
		}
		first, _, _ := strings.Cut(string(data), "\n")
		next, ok := strings.CutPrefix(first, "object ")
		if !ok {
			return "", "", nil, fmt.Errorf("tag %s: malformed", sha)
		}
		sha = next
	}
	return "", "", nil, fmt.Errorf("tag %s: too deep", sha)
}

// commit returns a commit's tree and parents (a tag is peeled first).
func (g looseRepo) commit(sha string) (tree string, parents []string, err error) {
	typ, id, data, err := g.peel(sha)
	if err != nil {
		return "", nil, err
	}
	if typ != "commit" {
		return "", nil, fmt.Errorf("%s is a %s, not a commit", id, typ)
	}
	for line := range strings.SplitSeq(string(data), "\n") {
		if line == "" {
			break
		}
		if v, ok := strings.CutPrefix(line, "tree "); ok {
			tree = v
		} else if v, ok := strings.CutPrefix(line, "parent "); ok {
			parents = append(parents, v)
		}
	}
	return tree, parents, nil
}

// entry is a path in a tree: its mode ("100644", "100755", "120000",
// "160000" for a submodule's commit) and object id.
type entry struct{ mode, sha string }

// files lists a tree's entries by slash path, recursively.
func (g looseRepo) files(tree string, prefix string, out map[string]entry) error {
	typ, data, err := g.object(tree)
	if err != nil {
		return err
	}
	if typ != "tree" {
		return fmt.Errorf("%s is a %s, not a tree", tree, typ)
	}
	for len(data) > 0 {
		sp := bytes.IndexByte(data, ' ')
		nul := bytes.IndexByte(data, 0)
		if sp < 0 || nul < sp || len(data) < nul+21 {
			return fmt.Errorf("tree %s: malformed", tree)
		}
		mode, name := string(data[:sp]), string(data[sp+1:nul])
		sha := hex.EncodeToString(data[nul+1 : nul+21])
		data = data[nul+21:]
		if mode == "40000" {
			if err := g.files(sha, prefix+name+"/", out); err != nil {
				return err
			}
			continue
		}
		out[prefix+name] = entry{mode, sha}
	}
	return nil
}

// refFile is where a ref lives: HEAD and per-worktree refs in the git
// directory, the rest in the common one.
func (g looseRepo) refFile(name string) string {
	dir := g.commonDir
	if !strings.HasPrefix(name, "refs/") || strings.HasPrefix(name, "refs/worktree/") || strings.HasPrefix(name, "refs/bisect/") {
		dir = g.gitDir
	}
	return filepath.Join(dir, filepath.FromSlash(name))
}

// ref reads a ref, following symbolic ones; "" when it does not exist.
func (g looseRepo) ref(name string) string {
	for range 5 {
		b, err := os.ReadFile(g.refFile(name))
		if err != nil {
			return g.packedRef(name)
		}
		v := strings.TrimSpace(string(b))
		target, sym := strings.CutPrefix(v, "ref: ")
		if !sym {
			return v
		}
		name = target
	}
	return ""
}

// refExists says whether a ref of this name exists (even unborn-free).
func (g looseRepo) refExists(name string) bool {
	if fi, err := os.Stat(g.refFile(name)); err == nil && !fi.IsDir() {
		return true
	}
	return g.packedRef(name) != ""
}

func (g looseRepo) packedRef(name string) string {
	f, err := os.Open(filepath.Join(g.commonDir, "packed-refs"))
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if sha, n, ok := strings.Cut(sc.Text(), " "); ok && n == name {
			return sha
		}
	}
	return ""
}

// allRefs lists the ids of every ref under refs/ (loose and packed).
func (g looseRepo) allRefs() []string {
	var ids []string
	filepath.WalkDir(filepath.Join(g.commonDir, "refs"), func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if b, err := os.ReadFile(p); err == nil {
				ids = append(ids, strings.TrimSpace(string(b)))
			}
		}
		return nil
	})
	if b, err := os.ReadFile(filepath.Join(g.commonDir, "packed-refs")); err == nil {
		for line := range strings.SplitSeq(string(b), "\n") {
			if sha, _, ok := strings.Cut(line, " "); ok && len(sha) == 40 {
				ids = append(ids, sha)
			}
		}
	}
	return ids
}

// hasCommits is `git rev-list --count --all` != 0: HEAD or some ref
// names a commit.
func (g looseRepo) hasCommits() bool {
	if _, ok := g.resolveCommit("HEAD"); ok {
		return true
	}
	for _, id := range g.allRefs() {
		if _, _, err := g.commit(id); err == nil {
			return true
		}
	}
	return false
}

// dwim are git's rules for a short ref name, in the order rev-parse
// tries them.
var dwim = []string{"%s", "refs/%s", "refs/tags/%s", "refs/heads/%s", "refs/remotes/%s", "refs/remotes/%s/HEAD"}

// resolveCommit is `git rev-parse --verify <rev>^{commit}` for the
// revisions an archive request names: a full or abbreviated (loose) id, a
// ref by git's rules, HEAD, each optionally followed by ~N, ^N or ^.
func (g looseRepo) resolveCommit(rev string) (string, bool) {
	rev = strings.TrimSuffix(rev, "^{commit}")
	base, ops := rev, ""
	if i := strings.IndexAny(rev, "~^"); i > 0 {
		base, ops = rev[:i], rev[i:]
	}
	sha := g.resolveName(base)
	if sha == "" {
		return "", false
	}
	if _, _, err := g.commit(sha); err != nil {
		return "", false
	}
	_, sha, _, _ = g.peel(sha)
	for ops != "" {
		op := ops[0]
		ops = ops[1:]
		n := 1
		j := 0
		for j < len(ops) && '0' <= ops[j] && ops[j] <= '9' {
			j++
		}
		if j > 0 {
			n, _ = strconv.Atoi(ops[:j])
			ops = ops[j:]
		}
		_, parents, err := g.commit(sha)
		if err != nil {
			return "", false
		}
		switch {
		case op == '~':
			for range n {
				if _, parents, err = g.commit(sha); err != nil || len(parents) == 0 {
					return "", false
				}
				sha = parents[0]
			}
		case n == 0:
		case n > len(parents):
			return "", false
		default:
			sha = parents[n-1]
		}
	}
	return sha, true
}

// resolveName turns a ref name or an object id into an object id.
func (g looseRepo) resolveName(name string) string {
	if len(name) >= 4 && len(name) <= 40 {
		if _, err := hex.DecodeString(name + strings.Repeat("0", len(name)%2)); err == nil {
			if sha := g.expandID(strings.ToLower(name)); sha != "" {
				return sha
			}
		}
	}
	for _, rule := range dwim {
		if sha := g.ref(fmt.Sprintf(rule, name)); sha != "" {
			return sha
		}
	}
	return ""
}

// expandID finds the one loose object whose id starts with prefix.
func (g looseRepo) expandID(prefix string) string {
	if len(prefix) == 40 {
		if _, err := os.Stat(filepath.Join(g.commonDir, "objects", prefix[:2], prefix[2:])); err == nil {
			return prefix
		}
		return ""
	}
	ents, err := os.ReadDir(filepath.Join(g.commonDir, "objects", prefix[:2]))
	if err != nil {
		return ""
	}
	found := ""
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), prefix[2:]) {
			if found != "" {
				return "" // ambiguous
			}
			found = prefix[:2] + e.Name()
		}
	}
	return found
}

// abbrevHead is `git rev-parse --abbrev-ref HEAD`: the branch's short
// name ("heads/<name>" when a tag or a top-level ref has the same name),
// "HEAD" when detached, "" when HEAD has no commit.
func (g looseRepo) abbrevHead() string {
	if _, ok := g.resolveCommit("HEAD"); !ok {
		return ""
	}
	b, _ := os.ReadFile(filepath.Join(g.gitDir, "HEAD"))
	target, sym := strings.CutPrefix(strings.TrimSpace(string(b)), "ref: ")
	if !sym {
		return "HEAD"
	}
	short, ok := strings.CutPrefix(target, "refs/heads/")
	if !ok {
		return strings.TrimPrefix(target, "refs/")
	}
	if g.refExists(short) || g.refExists("refs/"+short) || g.refExists("refs/tags/"+short) {
		return "heads/" + short
	}
	return short
}

// detached says whether HEAD names a commit directly.
func (g looseRepo) detached() bool {
	return g.abbrevHead() == "HEAD"
}

// configValue reads the first value of key ("url") in a section
// ("remote") with a subsection ("origin") from the repository's config.
func (g looseRepo) configValue(section, sub, key string) string {
	f, err := os.Open(filepath.Join(g.commonDir, "config"))
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	in := false
	want := fmt.Sprintf("[%s %q]", strings.ToLower(section), sub)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(line, "[") {
			name, rest, _ := strings.Cut(line, " ")
			in = strings.ToLower(name)+" "+rest == want
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if in && ok && strings.EqualFold(strings.TrimSpace(k), key) {
			return configString(strings.TrimSpace(v))
		}
	}
	return ""
}

// configString decodes a git config value: quotes removed, escapes
// (\" \\ \n \t) undone, and a comment after an unquoted # or ; dropped.
func configString(v string) string {
	var b strings.Builder
	quoted := false
	for i := 0; i < len(v); i++ {
		switch c := v[i]; {
		case c == '"':
			quoted = !quoted
		case c == '\\' && i+1 < len(v):
			i++
			switch v[i] {
			case 'n':
				b.WriteByte('\n')
			case 't':
				b.WriteByte('\t')
			default:
				b.WriteByte(v[i])
			}
		case (c == '#' || c == ';') && !quoted:
			return strings.TrimSpace(b.String())
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

// remoteURL is `git remote get-url <name>` (without url.*.insteadOf).
func (g looseRepo) remoteURL(name string) string {
	return g.configValue("remote", name, "url")
}

// remoteDefaultBranch stands in for `git remote show origin`, which asks
// the remote for its HEAD: only a remote on this machine (a path or a
// file:// URL) can answer here; any other fails, as offline.
func (g looseRepo) remoteDefaultBranch() string {
	u := g.remoteURL("origin")
	u = strings.TrimPrefix(u, "file://")
	if !filepath.IsAbs(u) {
		return ""
	}
	r, ok := openGitDir(u)
	if !ok {
		if _, err := os.Stat(filepath.Join(u, "HEAD")); err != nil {
			return ""
		}
		r = looseRepo{gitDir: u, commonDir: u} // a bare repository
	}
	b, err := os.ReadFile(filepath.Join(r.gitDir, "HEAD"))
	if err != nil {
		return ""
	}
	target, ok := strings.CutPrefix(strings.TrimSpace(string(b)), "ref: refs/heads/")
	if !ok || r.ref("refs/heads/"+target) == "" {
		return "(unknown)"
	}
	return target
}

// mergeBase is the first ancestor of b (breadth first) that is also an
// ancestor of a: the merge base for the histories an agent makes (a branch
// off its upstream), though not git's best common ancestor in every
// criss-cross history.
func (g looseRepo) mergeBase(a, b string) (string, error) {
	seen := map[string]bool{}
	queue := []string{a}
	for len(queue) > 0 {
		c := queue[0]
		queue = queue[1:]
		if seen[c] {
			continue
		}
		seen[c] = true
		_, ps, err := g.commit(c)
		if err != nil {
			return "", err
		}
		queue = append(queue, ps...)
	}
	visited := map[string]bool{}
	queue = []string{b}
	for len(queue) > 0 {
		c := queue[0]
		queue = queue[1:]
		if seen[c] {
			return c, nil
		}
		if visited[c] {
			continue
		}
		visited[c] = true
		_, ps, err := g.commit(c)
		if err != nil {
			return "", err
		}
		queue = append(queue, ps...)
	}
	return "", nil
}

// blobID is git's id of a blob holding the n bytes read from r.
func blobID(r io.Reader, n int64) (string, error) {
	h := sha1.New()
	fmt.Fprintf(h, "blob %d\x00", n)
	if _, err := io.CopyN(h, r, n); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
