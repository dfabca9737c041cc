package main

import (
	"bytes"
	"compress/zlib"
	"crypto/sha1"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"time"
)

// seedRepo makes dir a real git repository without the git binary (the
// box image has none), so a box has work to export: a base commit that
// origin/main points at, on branch main, then uncommitted work on top (a
// changed file and an untracked one). It does nothing when dir already
// holds a .git. Objects are written loose, as git itself writes them.
func seedRepo(dir string, now time.Time) error {
	if _, err := os.Stat(filepath.Join(dir, ".git")); err == nil {
		return nil
	}
	committed := map[string]string{
		"README.md":   "# demo\n\nA project an agent works on.\n",
		"src/main.go": "package main\n\nfunc main() {}\n",
		".gitignore":  "*.log\n",
	}
	for name, body := range committed {
		if err := writeSeedFile(filepath.Join(dir, filepath.FromSlash(name)), body); err != nil {
			return err
		}
	}
	gd := filepath.Join(dir, ".git")
	for _, d := range []string{"objects", "refs/heads", "refs/remotes/origin", "refs/tags"} {
		if err := os.MkdirAll(filepath.Join(gd, d), 0o755); err != nil {
			return err
		}
	}
	w := objWriter{gitDir: gd}
	ids := map[string]string{}
	tree, err := w.tree(committed, "", ids)
	if err != nil {
		return err
	}
	who := fmt.Sprintf("Agent <agent@example.invalid> %d +0000", now.Unix())
	commit, err := w.write("commit", []byte(fmt.Sprintf("tree %s\nauthor %s\ncommitter %s\n\nInitial commit\n", tree, who, who)))
	if err != nil {
		return err
	}
	files := map[string]string{
		"HEAD":                     "ref: refs/heads/main\n",
		"refs/heads/main":          commit + "\n",
		"refs/remotes/origin/main": commit + "\n",
		"refs/remotes/origin/HEAD": "ref: refs/remotes/origin/main\n",
		"config":                   "[core]\n\trepositoryformatversion = 0\n\tfilemode = true\n\tbare = false\n[remote \"origin\"]\n\turl = https://example.invalid/canvas/demo.git\n\tfetch = +refs/heads/*:refs/remotes/origin/*\n[branch \"main\"]\n\tremote = origin\n\tmerge = refs/heads/main\n",
		"description":              "seeded by the agent-server emulator\n",
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(gd, filepath.FromSlash(name)), []byte(body), 0o644); err != nil {
			return err
		}
	}
	if err := writeIndex(gd, ids); err != nil {
		return err
	}
	// The agent's uncommitted work.
	if err := writeSeedFile(filepath.Join(dir, "README.md"), committed["README.md"]+"\nWork in progress.\n"); err != nil {
		return err
	}
	return writeSeedFile(filepath.Join(dir, "notes.md"), "uncommitted notes\n")
}

func writeSeedFile(p, body string) error {
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	return os.WriteFile(p, []byte(body), 0o644)
}

type objWriter struct{ gitDir string }

// write stores one loose object and returns its id.
func (w objWriter) write(typ string, body []byte) (string, error) {
	raw := append([]byte(fmt.Sprintf("%s %d\x00", typ, len(body))), body...)
	sum := sha1.Sum(raw)
	id := hex.EncodeToString(sum[:])
	var z bytes.Buffer
	zw := zlib.NewWriter(&z)
	zw.Write(raw)
	zw.Close()
	p := filepath.Join(w.gitDir, "objects", id[:2], id[2:])
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return "", err
	}
	return id, os.WriteFile(p, z.Bytes(), 0o444)
}

// tree stores the blobs and trees for files (slash paths) and returns the
// root tree's id. Entries sort as git sorts them: by name, a directory
// compared as if its name ended in "/".
func (w objWriter) tree(files map[string]string, prefix string, ids map[string]string) (string, error) {
	type node struct {
		mode, name, id string
	}
	direct := map[string]string{}
	sub := map[string]map[string]string{}
	for p, body := range files {
		if d, rest, ok := cut(p); ok {
			if sub[d] == nil {
				sub[d] = map[string]string{}
			}
			sub[d][rest] = body
		} else {
			direct[p] = body
		}
	}
	var nodes []node
	for name, body := range direct {
		id, err := w.write("blob", []byte(body))
		if err != nil {
			return "", err
		}
		ids[prefix+name] = id
		nodes = append(nodes, node{"100644", name, id})
	}
	for name, fs := range sub {
		id, err := w.tree(fs, prefix+name+"/", ids)
		if err != nil {
			return "", err
		}
		nodes = append(nodes, node{"40000", name, id})
	}
	key := func(n node) string {
		if n.mode == "40000" {
			return n.name + "/"
		}
		return n.name
	}
	sort.Slice(nodes, func(i, j int) bool { return key(nodes[i]) < key(nodes[j]) })
	var b bytes.Buffer
	for _, n := range nodes {
		raw, _ := hex.DecodeString(n.id)
		fmt.Fprintf(&b, "%s %s\x00", n.mode, n.name)
		b.Write(raw)
	}
	return w.write("tree", b.Bytes())
}

func cut(p string) (dir, rest string, ok bool) {
	for i := 0; i < len(p); i++ {
		if p[i] == '/' {
			return p[:i], p[i+1:], true
		}
	}
	return "", "", false
}

// writeIndex writes .git/index (version 2) staging exactly the committed
// blobs. Stat fields are zero, so git re-reads each file once to refresh
// them, which is all it needs to see the tree as clean.
func writeIndex(gitDir string, ids map[string]string) error {
	paths := make([]string, 0, len(ids))
	for p := range ids {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	var b bytes.Buffer
	b.WriteString("DIRC")
	binary.Write(&b, binary.BigEndian, uint32(2))
	binary.Write(&b, binary.BigEndian, uint32(len(paths)))
	for _, p := range paths {
		start := b.Len()
		b.Write(make([]byte, 24)) // ctime, mtime, dev, ino
		binary.Write(&b, binary.BigEndian, uint32(0o100644))
		b.Write(make([]byte, 12)) // uid, gid, size
		raw, _ := hex.DecodeString(ids[p])
		b.Write(raw)
		binary.Write(&b, binary.BigEndian, uint16(min(len(p), 0xfff)))
		b.WriteString(p)
		for pad := 8 - (b.Len()-start)%8; pad > 0; pad-- {
			b.WriteByte(0)
		}
	}
	sum := sha1.Sum(b.Bytes())
	b.Write(sum[:])
	return os.WriteFile(filepath.Join(gitDir, "index"), b.Bytes(), 0o644)
}
