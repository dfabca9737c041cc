package main

import (
	"bytes"
	"crypto/md5"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"mime/multipart"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// raw sends a request with the env's key and returns status, headers and
// body.
func (e *env) raw(method, path string, hdr http.Header, body io.Reader) (int, http.Header, []byte) {
	e.t.Helper()
	req, err := http.NewRequest(method, e.srv.URL+path, body)
	if err != nil {
		e.t.Fatal(err)
	}
	for k, v := range hdr {
		req.Header[k] = v
	}
	if e.key != "" {
		req.Header.Set("X-Session-API-Key", e.key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		e.t.Fatal(err)
	}
	return resp.StatusCode, resp.Header, b
}

func TestDownload(t *testing.T) {
	e := newEnv(t, Config{Keys: []string{testKey}})
	dir := t.TempDir()
	plain := filepath.Join(dir, "report.txt")
	writeFile(t, plain, "0123456789")
	mtime := time.Date(2026, 8, 22, 10, 0, 0, 500_000_000, time.UTC)
	os.Chtimes(plain, mtime, mtime)
	e.clock.Advance(time.Minute)

	code, h, body := e.raw("GET", "/api/file/download?path="+url.QueryEscape(plain), nil, nil)
	if code != 200 || string(body) != "0123456789" {
		t.Fatalf("download: %d %q", code, body)
	}
	if e.idle() != 0 {
		t.Error("download did not move the idle clock")
	}
	sum := md5.Sum([]byte("1787392800.5-10"))
	for k, want := range map[string]string{
		"Content-Type":        "application/octet-stream",
		"Content-Length":      "10",
		"Content-Disposition": `attachment; filename="report.txt"`,
		"Accept-Ranges":       "bytes",
		"Last-Modified":       "Sat, 22 Aug 2026 10:00:00 GMT",
		"Etag":                `"` + hex.EncodeToString(sum[:]) + `"`,
	} {
		if got := h.Get(k); got != want {
			t.Errorf("%s: %q, want %q", k, got, want)
		}
	}

	// Names quote() changes get the RFC 5987 form, spaces included.
	for name, want := range map[string]string{
		"my report.txt": "attachment; filename*=utf-8''my%20report.txt",
		"résumé.pdf":    "attachment; filename*=utf-8''r%C3%A9sum%C3%A9.pdf",
		"a-b_c.~d":      `attachment; filename="a-b_c.~d"`,
	} {
		p := filepath.Join(dir, name)
		writeFile(t, p, "x")
		if _, h, _ := e.raw("GET", "/api/file/download?path="+url.QueryEscape(p), nil, nil); h.Get("Content-Disposition") != want {
			t.Errorf("%s: Content-Disposition %q, want %q", name, h.Get("Content-Disposition"), want)
		}
	}
	// A symlink to a file is followed and named as asked.
	os.Symlink(plain, filepath.Join(dir, "link"))
	if code, h, body := e.raw("GET", "/api/file/download?path="+url.QueryEscape(filepath.Join(dir, "link")), nil, nil); code != 200 ||
		string(body) != "0123456789" || h.Get("Content-Disposition") != `attachment; filename="link"` {
		t.Errorf("through a symlink: %d %q %v", code, body, h)
	}

	for _, c := range []struct {
		query  string
		code   int
		detail string
	}{
		{"?path=" + url.QueryEscape(filepath.Join(dir, "nope")), 404, "File not found"},
		{"?path=" + url.QueryEscape(dir), 400, "Path is not a file"},
		{"?path=relative.txt", 400, "Path must be absolute"},
		{"", 422, `[{"input":null,"loc":["query","path"],"msg":"Field required","type":"missing"}]`},
	} {
		code, _, body := e.raw("GET", "/api/file/download"+c.query, nil, nil)
		if code != c.code || detailOf(body) != c.detail {
			t.Errorf("download%s: %d %s, want %d %s", c.query, code, body, c.code, c.detail)
		}
	}
}

// multipartBody streams a form with the given parts: name -> content,
// with a filename when file is set. It returns the body and its
// Content-Type.
type formPart struct {
	name, filename string
	file           bool
	body           io.Reader
}

func multipartBody(parts ...formPart) (io.Reader, string) {
	pr, pw := io.Pipe()
	mw := multipart.NewWriter(pw)
	go func() {
		for _, p := range parts {
			var w io.Writer
			var err error
			if p.file {
				w, err = mw.CreateFormFile(p.name, p.filename)
			} else {
				w, err = mw.CreateFormField(p.name)
			}
			if err == nil {
				_, err = io.Copy(w, p.body)
			}
			if err != nil {
				pw.CloseWithError(err)
				return
			}
		}
		pw.CloseWithError(mw.Close())
	}()
	return pr, mw.FormDataContentType()
}

func (e *env) upload(path string, parts ...formPart) (int, []byte) {
	e.t.Helper()
	body, ctype := multipartBody(parts...)
	q := ""
	if path != "" {
		q = "?path=" + url.QueryEscape(path)
	}
	code, _, b := e.raw("POST", "/api/file/upload"+q, http.Header{"Content-Type": {ctype}}, body)
	return code, b
}

// patterned is a deterministic stream of n bytes.
type patterned struct{ n, off int64 }

func (p *patterned) Read(b []byte) (int, error) {
	if p.off >= p.n {
		return 0, io.EOF
	}
	k := min(int64(len(b)), p.n-p.off)
	for i := range k {
		b[i] = byte((p.off + i) * 7 % 251)
	}
	p.off += k
	return int(k), nil
}

func TestUpload(t *testing.T) {
	e := newEnv(t, Config{})
	dir := t.TempDir()
	e.clock.Advance(time.Minute)

	target := filepath.Join(dir, "new", "deeper", "f.txt")
	if code, b := e.upload(target, formPart{name: "file", filename: "f.txt", file: true, body: strings.NewReader("hello")}); code != 200 || string(b) != `{"success":true}` {
		t.Fatalf("upload: %d %s", code, b)
	}
	if got, _ := os.ReadFile(target); string(got) != "hello" {
		t.Errorf("uploaded %q", got)
	}
	if e.idle() != 0 {
		t.Error("upload did not move the idle clock")
	}
	// Overwrites; the part's filename does not matter.
	if code, _ := e.upload(target, formPart{name: "file", filename: "other", file: true, body: strings.NewReader("v2")}); code != 200 {
		t.Fatal(code)
	}
	if got, _ := os.ReadFile(target); string(got) != "v2" {
		t.Errorf("overwritten %q", got)
	}

	// A large file streams through (spooled to disk past 1 MiB) and lands
	// byte for byte.
	const size = 48 << 20
	big := filepath.Join(dir, "big.bin")
	if code, b := e.upload(big, formPart{name: "other", body: strings.NewReader("field")},
		formPart{name: "file", filename: "big.bin", file: true, body: &patterned{n: size}}); code != 200 {
		t.Fatalf("large upload: %d %s", code, b)
	}
	want := sha256.New()
	io.Copy(want, &patterned{n: size})
	f, err := os.Open(big)
	if err != nil {
		t.Fatal(err)
	}
	got := sha256.New()
	n, _ := io.Copy(got, f)
	f.Close()
	if n != size || !bytes.Equal(got.Sum(nil), want.Sum(nil)) {
		t.Errorf("large upload: %d bytes, digest mismatch=%v", n, !bytes.Equal(got.Sum(nil), want.Sum(nil)))
	}

	// The last "file" part counts.
	last := filepath.Join(dir, "last.txt")
	e.upload(last, formPart{name: "file", filename: "a", file: true, body: strings.NewReader("first")},
		formPart{name: "file", filename: "b", file: true, body: strings.NewReader("second")})
	if got, _ := os.ReadFile(last); string(got) != "second" {
		t.Errorf("two file parts: %q", got)
	}

	os.MkdirAll(filepath.Join(dir, "adir"), 0o755)
	writeFile(t, filepath.Join(dir, "afile"), "x")
	fileBody := func() formPart {
		return formPart{name: "file", filename: "x", file: true, body: strings.NewReader("x")}
	}
	cases := []struct {
		name   string
		path   string
		parts  []formPart
		code   int
		detail string
	}{
		{"no file part", target, []formPart{{name: "other", body: strings.NewReader("v")}}, 422,
			`[{"input":null,"loc":["body","file"],"msg":"Field required","type":"missing"}]`},
		{"neither path nor file", "", nil, 422,
			`[{"input":null,"loc":["query","path"],"msg":"Field required","type":"missing"},{"input":null,"loc":["body","file"],"msg":"Field required","type":"missing"}]`},
		{"file as a text field", target, []formPart{{name: "file", body: strings.NewReader("text")}}, 422,
			`[{"ctx":{"error":"Expected UploadFile, received: <class 'str'>"},"input":"text","loc":["body","file"],"msg":"Value error, Expected UploadFile, received: <class 'str'>","type":"value_error"}]`},
		{"relative path", "rel/x", []formPart{fileBody()}, 400, "Path must be absolute"},
		{"onto a directory", filepath.Join(dir, "adir"), []formPart{fileBody()}, 500,
			"Internal Server Error / 500: Failed to upload file: [Errno 21] Is a directory: '" + filepath.Join(dir, "adir") + "'"},
		{"under a file", filepath.Join(dir, "afile", "x"), []formPart{fileBody()}, 500,
			"Internal Server Error / 500: Failed to upload file: [Errno 17] File exists: '" + filepath.Join(dir, "afile") + "'"},
	}
	for _, c := range cases {
		code, b := e.upload(c.path, c.parts...)
		if code != c.code || detailOf(b) != c.detail {
			t.Errorf("%s: %d %s\nwant %d %s", c.name, code, b, c.code, c.detail)
		}
	}
	// Not multipart: an empty form.
	code, _, b := e.raw("POST", "/api/file/upload?path="+url.QueryEscape(target), http.Header{"Content-Type": {"application/json"}}, strings.NewReader(`{}`))
	if code != 422 || !strings.Contains(string(b), `"loc":["body","file"]`) {
		t.Errorf("JSON body: %d %s", code, b)
	}
	// A cut multipart body is a 400 and leaves the target as it was.
	code, _, b = e.raw("POST", "/api/file/upload?path="+url.QueryEscape(target),
		http.Header{"Content-Type": {"multipart/form-data; boundary=XYZ"}},
		strings.NewReader("--XYZ\r\nContent-Disposition: form-data; name=\"file\"; filename=\"f\"\r\n\r\npartial"))
	if code != 400 || detailOf(b) != "There was an error parsing the body" {
		t.Errorf("cut body: %d %s", code, b)
	}
	if got, _ := os.ReadFile(target); string(got) != "v2" {
		t.Errorf("a failed upload changed the target: %q", got)
	}
}

func TestCreateDirectory(t *testing.T) {
	e := newEnv(t, Config{})
	dir := t.TempDir()
	e.clock.Advance(time.Minute)
	p := filepath.Join(dir, "a", "b", "c")
	for range 2 { // idempotent
		if code, b := e.do("POST", "/api/file/create_directory?path="+url.QueryEscape(p), nil, nil); code != 200 || string(b) != `{"success":true}` {
			t.Fatalf("create_directory: %d %s", code, b)
		}
	}
	if fi, err := os.Stat(p); err != nil || !fi.IsDir() {
		t.Fatalf("not created: %v", err)
	}
	if e.idle() != 0 {
		t.Error("create_directory did not move the idle clock")
	}
	writeFile(t, filepath.Join(dir, "f"), "x")
	for _, c := range []struct {
		path   string
		code   int
		detail string
	}{
		{filepath.Join(dir, "f"), 400, "Path exists and is not a directory"},
		{filepath.Join(dir, "f", "sub"), 400, "Path exists and is not a directory"},
		{"relative", 400, "Path must be absolute"},
	} {
		code, b := e.do("POST", "/api/file/create_directory?path="+url.QueryEscape(c.path), nil, nil)
		if code != c.code || detailOf(b) != c.detail {
			t.Errorf("%s: %d %s", c.path, code, b)
		}
	}
	if code, _ := e.do("POST", "/api/file/create_directory", nil, nil); code != 422 {
		t.Errorf("no path: %d", code)
	}
}

type subdirPage struct {
	Items []struct {
		Name string `json:"name"`
		Path string `json:"path"`
	} `json:"items"`
	NextPageID *string `json:"next_page_id"`
}

func TestSearchSubdirs(t *testing.T) {
	e := newEnv(t, Config{})
	dir := t.TempDir()
	for _, d := range []string{"beta", "Alpha", "gamma", "delta", ".hidden", "Émile", "zeta"} {
		os.MkdirAll(filepath.Join(dir, d), 0o755)
	}
	writeFile(t, filepath.Join(dir, "afile"), "x")
	os.Symlink(filepath.Join(dir, "beta"), filepath.Join(dir, "blink"))
	e.clock.Advance(time.Minute)

	get := func(q url.Values) (int, subdirPage, []byte) {
		code, _, b := e.raw("GET", "/api/file/search_subdirs?"+q.Encode(), nil, nil)
		var p subdirPage
		json.Unmarshal(b, &p)
		return code, p, b
	}
	listed := func(p subdirPage) string {
		var ns []string
		for _, it := range p.Items {
			ns = append(ns, it.Name)
		}
		return strings.Join(ns, ",")
	}
	code, p, b := get(url.Values{"path": {dir + "/"}})
	if code != 200 || listed(p) != "Alpha,beta,delta,gamma,zeta,Émile" || p.NextPageID != nil {
		t.Fatalf("all: %d %s", code, b)
	}
	if p.Items[0].Path != dir+"/Alpha" {
		t.Errorf("item path %q, want the path as given joined with the name", p.Items[0].Path)
	}
	if e.idle() == 0 {
		t.Error("search_subdirs moved the idle clock")
	}
	_, p, _ = get(url.Values{"path": {dir}, "include_hidden": {"true"}})
	if listed(p) != ".hidden,Alpha,beta,delta,gamma,zeta,Émile" {
		t.Errorf("with hidden: %s", listed(p))
	}
	// Paging: next_page_id is the next page's first name, lower-cased.
	var all []string
	q := url.Values{"path": {dir}, "limit": {"2"}}
	for range 10 {
		_, p, _ = get(q)
		all = append(all, listed(p))
		if p.NextPageID == nil {
			break
		}
		q.Set("page_id", *p.NextPageID)
	}
	if strings.Join(all, "|") != "Alpha,beta|delta,gamma|zeta,Émile" {
		t.Errorf("pages %v", all)
	}
	_, p, _ = get(url.Values{"path": {dir}, "limit": {"2"}})
	if p.NextPageID == nil || *p.NextPageID != "delta" {
		t.Errorf("next_page_id %v", p.NextPageID)
	}
	_, p, _ = get(url.Values{"path": {dir}, "limit": {"1"}, "page_id": {"Alpha"}}) // ids are lower-case: no match, first page
	if listed(p) != "Alpha" {
		t.Errorf("unknown page_id: %s", listed(p))
	}

	for _, c := range []struct {
		q      url.Values
		code   int
		detail string
	}{
		{url.Values{"path": {filepath.Join(dir, "nope")}}, 404, "Directory not found"},
		{url.Values{"path": {filepath.Join(dir, "afile")}}, 400, "Path is not a directory"},
		{url.Values{"path": {"rel"}}, 400, "Path must be absolute"},
		{url.Values{"path": {dir}, "limit": {"0"}}, 422,
			`[{"ctx":{"gt":0},"input":"0","loc":["query","limit"],"msg":"Input should be greater than 0","type":"greater_than"}]`},
		{url.Values{"path": {dir}, "limit": {"x"}}, 422,
			`[{"input":"x","loc":["query","limit"],"msg":"Input should be a valid integer, unable to parse string as an integer","type":"int_parsing"}]`},
		{url.Values{"limit": {"5"}}, 422, `[{"input":null,"loc":["query","path"],"msg":"Field required","type":"missing"}]`},
		{url.Values{"path": {dir}, "limit": {"101"}}, 500, "Internal Server Error / "}, // upstream's assert
	} {
		code, _, b := get(c.q)
		if code != c.code || detailOf(b) != c.detail {
			t.Errorf("%v: %d %s\nwant %d %s", c.q, code, b, c.code, c.detail)
		}
	}
}

func TestHome(t *testing.T) {
	home := t.TempDir()
	os.MkdirAll(filepath.Join(home, "proj"), 0o755)
	os.MkdirAll(filepath.Join(home, ".config"), 0o755)
	t.Setenv("HOME", home)
	e := newEnv(t, Config{})
	e.clock.Advance(time.Minute)
	var got struct {
		Home      string `json:"home"`
		Favorites []struct {
			Label, Path string
		} `json:"favorites"`
		Locations []struct{ Label, Path string } `json:"locations"`
	}
	if code, b := e.do("GET", "/api/file/home", nil, &got); code != 200 || got.Home != home || len(got.Favorites) != 1 ||
		got.Favorites[0].Path != filepath.Join(home, "proj") || len(got.Locations) != 1 || got.Locations[0].Path != "/" {
		t.Errorf("home: %d %s", code, b)
	}
	if e.idle() == 0 {
		t.Error("home moved the idle clock")
	}
}
