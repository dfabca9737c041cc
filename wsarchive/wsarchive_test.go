package wsarchive

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"strings"
	"testing"
	"time"
)

// member is one member of a hand-made archive.
type member struct {
	name  string
	typ   byte
	body  string
	mtime time.Time
	mode  int64
}

func tgz(t *testing.T, ms ...member) []byte {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for _, m := range ms {
		if m.typ == 0 {
			m.typ = tar.TypeReg
		}
		if m.mtime.IsZero() {
			m.mtime = time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
		}
		if m.mode == 0 {
			m.mode = 0o644
		}
		h := &tar.Header{Name: m.name, Typeflag: m.typ, Mode: m.mode, ModTime: m.mtime}
		if m.typ == tar.TypeReg {
			h.Size = int64(len(m.body))
		}
		if m.typ == tar.TypeSymlink {
			h.Linkname = m.body
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if m.typ == tar.TypeReg {
			io.WriteString(tw, m.body)
		}
	}
	tw.Close()
	gz.Close()
	return buf.Bytes()
}

func synthetic(t *testing.T, top string, files, bytes int) member {
	t.Helper()
	b, err := manifestJSON(AgentManifest{Format: "tar.gz", Source: top, FileCount: int64(files), TotalBytes: int64(bytes), Excludes: []string{}})
	if err != nil {
		t.Fatal(err)
	}
	return member{name: top + "/" + ManifestName, body: string(b), mtime: time.Unix(0, 0)}
}

func readAll(t *testing.T, b []byte) (Summary, map[string]string, error) {
	t.Helper()
	got := map[string]string{}
	sum, err := Read(bytes.NewReader(b), func(m Member) error {
		body, err := io.ReadAll(m.Body)
		if m.Header.Typeflag == tar.TypeDir {
			got[m.Rel+"/"] = ""
		} else {
			got[m.Rel] = string(body)
		}
		return err
	})
	return sum, got, err
}

// TestReadDropsOnlyTheSyntheticManifest: the agent-server's own manifest,
// last and dated 1970, is read as the archive's manifest and its counts
// are checked; a workspace file of the same name (dated, or followed by
// other members) is a file like any other.
func TestReadDropsOnlyTheSyntheticManifest(t *testing.T) {
	b := tgz(t, member{name: "workspace/", typ: tar.TypeDir}, member{name: "workspace/a.txt", body: "aa"},
		member{name: "workspace/d/", typ: tar.TypeDir}, member{name: "workspace/d/b", body: "bbb"}, synthetic(t, "workspace", 2, 5))
	sum, got, err := readAll(t, b)
	if err != nil || sum.Top != "workspace" || sum.Files != 2 || sum.Bytes != 5 || sum.Manifest == nil {
		t.Fatalf("%+v %v", sum, err)
	}
	if _, ok := got[ManifestName]; ok || got["a.txt"] != "aa" || got["d/b"] != "bbb" || len(got) != 4 {
		t.Errorf("members: %v", got)
	}

	// The user's own file: dated, so not the synthetic one.
	b = tgz(t, member{name: "workspace/", typ: tar.TypeDir}, member{name: "workspace/" + ManifestName, body: `{"mine":true}`})
	sum, got, err = readAll(t, b)
	if err != nil || sum.Manifest != nil || got[ManifestName] != `{"mine":true}` {
		t.Errorf("user's manifest: %+v %v %v", sum, got, err)
	}
	// Dated 1970 and shaped like the synthetic one, but not last.
	s := synthetic(t, "workspace", 0, 0)
	b = tgz(t, member{name: "workspace/", typ: tar.TypeDir}, s, member{name: "workspace/z", body: "z"})
	sum, got, err = readAll(t, b)
	if err != nil || sum.Manifest != nil || got[ManifestName] != s.body || got["z"] != "z" {
		t.Errorf("manifest not last: %+v %v %v", sum, got, err)
	}
}

// TestReadRefusesWhatItCannotTrust: counts that disagree with the
// manifest, members outside the top directory, links and unclean names
// are errors.
func TestReadRefusesWhatItCannotTrust(t *testing.T) {
	cases := map[string][]member{
		"incomplete":   {{name: "w/", typ: tar.TypeDir}, {name: "w/a", body: "a"}, synthetic(t, "w", 2, 2)},
		"outside":      {{name: "w/", typ: tar.TypeDir}, {name: "x/a", body: "a"}},
		"dotdot":       {{name: "w/", typ: tar.TypeDir}, {name: "w/../a", body: "a"}},
		"absolute":     {{name: "/w/a", body: "a"}},
		"symlink":      {{name: "w/", typ: tar.TypeDir}, {name: "w/l", typ: tar.TypeSymlink, body: "/etc/passwd"}},
		"top is file":  {{name: "w", body: "a"}},
		"double slash": {{name: "w/", typ: tar.TypeDir}, {name: "w//a", body: "a"}},
	}
	for name, ms := range cases {
		if _, _, err := readAll(t, tgz(t, ms...)); err == nil {
			t.Errorf("%s: read without an error", name)
		}
	}
	if _, err := Read(strings.NewReader("not gzip"), func(Member) error { return nil }); err == nil {
		t.Error("not gzip: no error")
	}
}

// TestBuilderRoundTrip: what a Builder writes reads back with Read, the
// index lists every directory and file in the archive's order with the
// right hashes, and the synthetic manifest counts what was written.
func TestBuilderRoundTrip(t *testing.T) {
	var arc, idx bytes.Buffer
	b, err := NewBuilder(&arc, "workspace", &idx)
	if err != nil {
		t.Fatal(err)
	}
	src := tgz(t, member{name: "repo/", typ: tar.TypeDir}, member{name: "repo/main.go", body: "package main\n", mode: 0o755},
		synthetic(t, "repo", 1, 13))
	if err := b.Dir("a", 0o750, time.Time{}); err != nil {
		t.Fatal(err)
	}
	if _, err := Read(bytes.NewReader(src), func(m Member) error { return b.Copy("a/repo", m) }); err != nil {
		t.Fatal(err)
	}
	if err := b.File("notes with spaces ü.txt", 0o644, 5, time.Time{}, strings.NewReader("notes")); err != nil {
		t.Fatal(err)
	}
	if err := b.File("dup", 0o644, 1, time.Time{}, strings.NewReader("x")); err != nil {
		t.Fatal(err)
	}
	if err := b.File("dup", 0o644, 1, time.Time{}, strings.NewReader("x")); err == nil {
		t.Error("a path added twice was accepted")
	}
	if err := b.File("../escape", 0o644, 1, time.Time{}, strings.NewReader("x")); err == nil {
		t.Error("an unclean path was accepted")
	}
	if err := b.Close(nil); err != nil {
		t.Fatal(err)
	}
	// A short file spoils its builder: the caller must abort.
	if b2, _ := NewBuilder(io.Discard, "w", io.Discard); b2.File("short", 0o644, 10, time.Time{}, strings.NewReader("x")) == nil {
		t.Error("a file shorter than its size was accepted")
	}
	sum, got, err := readAll(t, arc.Bytes())
	if err != nil || sum.Manifest == nil || sum.Files != 3 || sum.Top != "workspace" {
		t.Fatalf("%+v %v", sum, err)
	}
	if got["a/repo/main.go"] != "package main\n" || got["notes with spaces ü.txt"] != "notes" {
		t.Errorf("members: %v", got)
	}
	var lines []Entry
	sc := bufio.NewScanner(&idx)
	for sc.Scan() {
		var e Entry
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatal(err)
		}
		lines = append(lines, e)
	}
	want := []string{"a", "a/repo", "a/repo/main.go", "notes with spaces ü.txt", "dup"}
	if len(lines) != len(want) {
		t.Fatalf("index: %+v", lines)
	}
	for i, e := range lines {
		if e.Path != want[i] {
			t.Errorf("index line %d is %s, want %s", i, e.Path, want[i])
		}
	}
	h := sha256.Sum256([]byte("package main\n"))
	if m := lines[2]; m.Type != TypeFile || m.Mode != 0o755 || m.Size != 13 || m.SHA256 != hex.EncodeToString(h[:]) {
		t.Errorf("main.go's entry: %+v", m)
	}
	if d := lines[0]; d.Type != TypeDir || d.Mode != 0o750 {
		t.Errorf("a's entry: %+v", d)
	}
}

// TestIndexEntryHashesWhatIsRead: the entry of a file member gets its
// SHA-256 once its body has been read to the end.
func TestIndexEntryHashesWhatIsRead(t *testing.T) {
	b := tgz(t, member{name: "w/", typ: tar.TypeDir}, member{name: "w/f", body: "hello"}, member{name: "w/empty", body: ""})
	var got []Entry
	_, err := Read(bytes.NewReader(b), func(m Member) error {
		e, body := IndexEntry(m)
		if _, err := io.Copy(io.Discard, body); err != nil {
			return err
		}
		got = append(got, *e)
		return nil
	})
	if err != nil || len(got) != 3 {
		t.Fatalf("%+v %v", got, err)
	}
	h := sha256.Sum256([]byte("hello"))
	e0 := sha256.Sum256(nil)
	if got[1].SHA256 != hex.EncodeToString(h[:]) || got[2].SHA256 != hex.EncodeToString(e0[:]) || got[0].Type != TypeDir {
		t.Errorf("%+v", got)
	}
}
