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
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// looseRepo reads a git repository's loose objects and refs without the
// git binary, for git-delta in the FROM-scratch box image. Packed objects
// are not read: a repository whose objects were packed (a clone, a gc)
// fails with errPacked, a 500 like any git failure upstream.
type looseRepo struct{ gitDir string }

var errPacked = errors.New("object is packed; the emulator's pure-Go git reads loose objects only")

func (g looseRepo) object(sha string) (typ string, data []byte, err error) {
	if len(sha) != 40 {
		return "", nil, fmt.Errorf("bad object id %q", sha)
	}
	f, err := os.Open(filepath.Join(g.gitDir, "objects", sha[:2], sha[2:]))
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

// commit returns a commit's tree and parents.
func (g looseRepo) commit(sha string) (tree string, parents []string, err error) {
	typ, data, err := g.object(sha)
	if err != nil {
		return "", nil, err
	}
	if typ != "commit" {
		return "", nil, fmt.Errorf("%s is a %s, not a commit", sha, typ)
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

// entry is a file in a tree: its mode ("100644", "100755", "120000") and
// blob id.
type entry struct{ mode, sha string }

// files lists a tree's files by slash path, recursively.
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
		switch mode {
		case "40000":
			if err := g.files(sha, prefix+name+"/", out); err != nil {
				return err
			}
		case "160000": // a submodule: not a file of this repository
		default:
			out[prefix+name] = entry{mode, sha}
		}
	}
	return nil
}

// resolve turns a ref name or a full id into a commit id, "" if unknown.
func (g looseRepo) resolve(ref string) string {
	if len(ref) == 40 {
		if _, err := hex.DecodeString(ref); err == nil {
			if _, _, err := g.commit(ref); err == nil {
				return ref
			}
		}
	}
	for _, full := range []string{ref, "refs/" + ref, "refs/heads/" + ref, "refs/tags/" + ref, "refs/remotes/" + ref} {
		if sha := g.ref(full); sha != "" {
			if _, _, err := g.commit(sha); err == nil {
				return sha
			}
		}
	}
	return ""
}

// ref reads a ref, following symbolic ones.
func (g looseRepo) ref(name string) string {
	for range 5 {
		b, err := os.ReadFile(filepath.Join(g.gitDir, filepath.FromSlash(name)))
		if err != nil {
			return resolveRef(g.gitDir, name)
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

// upstream is the current branch's configured upstream, else origin/HEAD.
func (g looseRepo) upstream(branch string) string {
	f, err := os.Open(filepath.Join(g.gitDir, "config"))
	if err == nil {
		defer f.Close()
		sc := bufio.NewScanner(f)
		in := false
		remote, merge := "", ""
		for sc.Scan() {
			line := strings.TrimSpace(sc.Text())
			if strings.HasPrefix(line, "[") {
				in = line == fmt.Sprintf("[branch %q]", branch)
				continue
			}
			k, v, ok := strings.Cut(line, "=")
			if !in || !ok {
				continue
			}
			switch strings.TrimSpace(k) {
			case "remote":
				remote = strings.TrimSpace(v)
			case "merge":
				merge = strings.TrimSpace(v)
			}
		}
		if remote != "" && remote != "." && merge != "" {
			if sha := g.ref("refs/remotes/" + remote + "/" + strings.TrimPrefix(merge, "refs/heads/")); sha != "" {
				return sha
			}
		}
	}
	return g.ref("refs/remotes/origin/HEAD")
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
