package exportstore

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"github.com/canvasapp/companion/internal/testsupport/s3server"
	"io"
	"net"
	"slices"
	"strings"
	"testing"
)

func TestRoundTripManifestLast(t *testing.T) {
	eachBackend(t, func(t *testing.T, b *backend) {
		s := b.open(t)
		ctx := context.Background()
		files := map[string][]byte{
			"trajectory-c1.zip": bytes.Repeat([]byte("trajectory "), 1000),
			"workspace.tar.gz":  readAllT(t, gen(1, 3<<20+17)),
			"empty.txt":         {},
		}
		names := []string{"trajectory-c1.zip", "workspace.tar.gz", "empty.txt"}
		up, err := s.Begin("", "ws-1", "exp1")
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range names {
			o, err := up.Add(ctx, n, bytes.NewReader(files[n]))
			if err != nil {
				t.Fatalf("add %s: %v", n, err)
			}
			sum := sha256.Sum256(files[n])
			if o.Bytes != int64(len(files[n])) || o.SHA256 != hex.EncodeToString(sum[:]) {
				t.Fatalf("add %s: got %+v", n, o)
			}
		}
		// Every file is in the store, read back; nothing reads as
		// committed before the manifest.
		if refs, err := s.List(ctx, "", "ws-1"); err != nil || len(refs) != 0 {
			t.Fatalf("before commit: list %v, %v; want nothing", refs, err)
		}
		if _, err := s.Open(ctx, up.Ref(), names[0]); err == nil {
			t.Fatal("before commit: a file opened")
		} else {
			wantKind(t, err, ErrNotFound)
		}
		if !b.raw(t, s.key(up.Ref(), names[1])) {
			t.Fatalf("%s not in the store before commit", names[1])
		}
		manifest := []byte(`{"version":1,"files":3}` + "\n")
		ref, err := up.Commit(ctx, manifest)
		if err != nil {
			t.Fatal(err)
		}
		// Layout: <prefix>/_/ws-1/<stamp>-exp1/<file>.
		if got := s.key(ref, "x"); !strings.HasPrefix(got, s.prefix+"_/ws-1/") || !strings.HasSuffix(got, "Z-exp1/x") {
			t.Fatalf("key %q is not in the layout", got)
		}
		refs, err := s.List(ctx, "", "ws-1")
		if err != nil || len(refs) != 1 || refs[0] != ref {
			t.Fatalf("list: %v, %v; want [%v]", refs, err, ref)
		}
		if got, err := s.Manifest(ctx, ref); err != nil || !bytes.Equal(got, manifest) {
			t.Fatalf("manifest: %q, %v", got, err)
		}
		for _, n := range names {
			r, err := s.Open(ctx, ref, n)
			if err != nil {
				t.Fatalf("open %s: %v", n, err)
			}
			if got := readAllT(t, r); !bytes.Equal(got, files[n]) || r.Size() != int64(len(files[n])) {
				t.Fatalf("read %s: %d bytes, size %d; want %d", n, len(got), r.Size(), len(files[n]))
			}
			r.Close()
			if err := s.Verify(ctx, ref, n, int64(len(files[n])), up.Objects()[slices.Index(names, n)].SHA256); err != nil {
				t.Fatalf("verify %s: %v", n, err)
			}
		}
		if err := s.Verify(ctx, ref, names[0], int64(len(files[names[0]])), strings.Repeat("0", 64)); err == nil {
			t.Fatal("verify with a wrong hash passed")
		} else {
			wantKind(t, err, ErrMismatch)
		}
		if _, err := s.Open(ctx, ref, "nope"); err == nil {
			t.Fatal("a missing file opened")
		} else {
			wantKind(t, err, ErrNotFound)
		}
		// Ranges, as an HTTP handler would ask for them.
		big := files["workspace.tar.gz"]
		info, err := s.Stat(ctx, ref, "workspace.tar.gz")
		if err != nil || info.Size != int64(len(big)) || info.ModTime.IsZero() {
			t.Fatalf("stat: %+v, %v", info, err)
		}
		for _, rg := range [][2]int64{{0, 1}, {5, 100}, {1 << 20, 1 << 20}, {int64(len(big)) - 10, -1}, {int64(len(big)) - 10, 50}} {
			r, err := s.ReadRange(ctx, ref, "workspace.tar.gz", rg[0], rg[1])
			if err != nil {
				t.Fatalf("range %v: %v", rg, err)
			}
			end := int64(len(big))
			if rg[1] >= 0 && rg[0]+rg[1] < end {
				end = rg[0] + rg[1]
			}
			if got := readAllT(t, r); !bytes.Equal(got, big[rg[0]:end]) {
				t.Fatalf("range %v: got %d bytes, want %d", rg, len(got), end-rg[0])
			}
			r.Close()
		}
		// Seek, as http.ServeContent does.
		r, err := s.Open(ctx, ref, "workspace.tar.gz")
		if err != nil {
			t.Fatal(err)
		}
		if n, err := r.Seek(0, io.SeekEnd); err != nil || n != int64(len(big)) {
			t.Fatalf("seek end: %d, %v", n, err)
		}
		if _, err := r.Seek(1000, io.SeekStart); err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 64)
		if _, err := io.ReadFull(r, buf); err != nil || !bytes.Equal(buf, big[1000:1064]) {
			t.Fatalf("read after seek: %v", err)
		}
		r.Close()
	})
}

func TestLargeUploadStreamsAndVerifies(t *testing.T) {
	size := int64(64 << 20)
	if testing.Short() {
		size = 12 << 20
	}
	eachBackend(t, func(t *testing.T, b *backend) {
		b.opts.PartSize = 5 << 20
		s := b.open(t)
		ctx := context.Background()
		up, err := s.Begin("owner-1", "ws-big", "exp-big")
		if err != nil {
			t.Fatal(err)
		}
		o, err := up.Add(ctx, "workspace.tar.gz", gen(7, size))
		if err != nil {
			t.Fatal(err)
		}
		h := sha256.New()
		io.Copy(h, gen(7, size))
		if o.Bytes != size || o.SHA256 != hex.EncodeToString(h.Sum(nil)) {
			t.Fatalf("got %+v; want %d bytes sha256 %x", o, size, h.Sum(nil))
		}
		ref, err := up.Commit(ctx, []byte("{}"))
		if err != nil {
			t.Fatal(err)
		}
		r, err := s.ReadRange(ctx, ref, "workspace.tar.gz", size-(1<<20), 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		want := readAllT(t, gen(7, size))[size-(1<<20):]
		if got := readAllT(t, r); !bytes.Equal(got, want) {
			t.Fatalf("last MiB differs (%d bytes read)", len(got))
		}
	})
}

func TestKilledUploadIsNeverVerifiedAndIsSwept(t *testing.T) {
	eachBackend(t, func(t *testing.T, b *backend) {
		s := b.open(t)
		ctx := context.Background()
		add := func(up *Upload, n int) {
			t.Helper()
			for i := range n {
				if _, err := up.Add(ctx, "f"+string(rune('a'+i)), gen(uint64(i), 1000)); err != nil {
					t.Fatal(err)
				}
			}
		}
		// A committed export the sweep must keep.
		kept, _ := s.Begin("", "ws", "kept")
		add(kept, 1)
		keptRef, err := kept.Commit(ctx, []byte("{}"))
		if err != nil {
			t.Fatal(err)
		}
		// Aborted: nothing left.
		aborted, _ := s.Begin("", "ws", "aborted")
		add(aborted, 2)
		if err := aborted.Abort(ctx); err != nil {
			t.Fatal(err)
		}
		if b.raw(t, s.key(aborted.Ref(), "fa")) {
			t.Fatal("abort left an object")
		}
		// Never committed (its writer was killed): staging, and only
		// the sweep removes it once nobody is writing.
		dead, _ := s.Begin("", "ws", "dead")
		add(dead, 2)
		// And one still being written, in another workspace.
		running, _ := s.Begin("", "ws2", "running")
		add(running, 1)

		refs, err := s.List(ctx, "", "ws")
		if err != nil || len(refs) != 1 || refs[0] != keptRef {
			t.Fatalf("list: %v, %v; want only %v", refs, err, keptRef)
		}
		if _, err := s.Manifest(ctx, dead.Ref()); err == nil {
			t.Fatal("an uncommitted export has a manifest")
		} else {
			wantKind(t, err, ErrNotFound)
		}
		if _, err := s.ReadRange(ctx, dead.Ref(), "fa", 0, 10); err == nil {
			t.Fatal("an uncommitted export's file opened")
		}

		var asked []string
		swept, err := s.Sweep(ctx, func(r Ref) bool { asked = append(asked, r.ID); return true })
		if err != nil || len(swept) != 0 {
			t.Fatalf("sweep with all alive: %v, %v", swept, err)
		}
		slices.Sort(asked)
		if !slices.Equal(asked, []string{"dead", "running"}) {
			t.Fatalf("alive asked about %v; want the two staging exports", asked)
		}
		if !b.raw(t, s.key(dead.Ref(), "fb")) {
			t.Fatal("sweep removed an export alive said was running")
		}
		swept, err = s.SweepWorkspace(ctx, "", "ws", func(r Ref) bool { return false })
		if err != nil || len(swept) != 1 || swept[0].Ref != dead.Ref() || swept[0].Objects != 2 || swept[0].Bytes != 2000 {
			t.Fatalf("sweep: %+v, %v; want dead's 2 objects", swept, err)
		}
		if b.raw(t, s.key(dead.Ref(), "fa")) || b.raw(t, s.key(dead.Ref(), "fb")) {
			t.Fatal("sweep left an object of the dead export")
		}
		if !b.raw(t, s.key(running.Ref(), "fa")) {
			t.Fatal("a workspace sweep touched another workspace")
		}
		swept, err = s.Sweep(ctx, func(r Ref) bool { return r.ID == "running" })
		if err != nil || len(swept) != 0 {
			t.Fatalf("second sweep: %v, %v", swept, err)
		}
		if got, err := s.Manifest(ctx, keptRef); err != nil || string(got) != "{}" {
			t.Fatalf("committed export after sweeps: %q, %v", got, err)
		}
		// The running one can still commit.
		if _, err := running.Commit(ctx, []byte("{}")); err != nil {
			t.Fatal(err)
		}
	})
}

func TestCorruptedObjectFailsVerification(t *testing.T) {
	eachBackend(t, func(t *testing.T, b *backend) {
		s := b.open(t)
		ctx := context.Background()
		s.beforeVerify = func(key string) {
			if strings.HasSuffix(key, "/bad.bin") {
				b.corrupt(t, key)
			}
		}
		up, _ := s.Begin("", "ws", "corrupt")
		if _, err := up.Add(ctx, "good.bin", gen(1, 4096)); err != nil {
			t.Fatal(err)
		}
		_, err := up.Add(ctx, "bad.bin", gen(2, 1<<20))
		if err == nil {
			t.Fatal("a corrupted object verified")
		}
		wantKind(t, err, ErrMismatch)
		if !strings.Contains(err.Error(), "bad.bin") {
			t.Fatalf("error does not name the file: %v", err)
		}
		if b.raw(t, s.key(up.Ref(), "good.bin")) || b.raw(t, s.key(up.Ref(), "bad.bin")) {
			t.Fatal("a failed upload left objects")
		}
		if _, err := up.Commit(ctx, []byte("{}")); err == nil {
			t.Fatal("commit after a failed add succeeded")
		}
		if refs, _ := s.List(ctx, "", "ws"); len(refs) != 0 {
			t.Fatalf("listed %v", refs)
		}
	})
}

func TestUnknownBucket(t *testing.T) {
	eachBackend(t, func(t *testing.T, b *backend) {
		u := strings.Replace(b.url, testBucket, "no-such-bucket", 1)
		if b.name == "file" {
			u = b.url + "/missing"
		}
		_, err := Open(context.Background(), u, b.opts)
		if err == nil {
			t.Fatalf("%s opened", u)
		}
		wantKind(t, err, ErrNoBucket)
		noSecret(t, err, b.opts.SecretAccessKey)
	})
}

func TestWrongCredentials(t *testing.T) {
	b := s3Backend(t)
	ctx := context.Background()
	for _, o := range []Options{
		{AccessKeyID: s3server.AccessKey, SecretAccessKey: "wrong-secret-value-xyz"},
		{AccessKeyID: "AKIAUNKNOWNKEY123", SecretAccessKey: "another-secret-value-abc"},
	} {
		_, err := Open(ctx, b.url, o)
		if err == nil {
			t.Fatalf("opened with %s", o.AccessKeyID)
		}
		wantKind(t, err, ErrDenied)
		noSecret(t, err, o.SecretAccessKey, o.AccessKeyID)
	}
	// A Google key that cannot be used is refused without its text.
	g := gcsBackend(t)
	secret := "-----BEGIN PRIVATE KEY-----not-a-key"
	_, err := Open(ctx, g.url, Options{GoogleCredentialsJSON: []byte(`{"type":"service_account","private_key":"` + secret + `"}`)})
	if err == nil {
		t.Fatal("opened with a broken Google key")
	}
	noSecret(t, err, secret, "not-a-key")
}

func TestBadURLRefused(t *testing.T) {
	for _, u := range []string{
		"", "exports", "/var/exports", "ftp://host/x", "s3://", "s3:///prefix", "gs://", "file://relative/dir",
		"s3://bucket/../x", "s3://bucket/a//b", "gs://bucket?foo=bar", "s3://bucket?endpoint=ftp://x",
		"s3://bucket?use_path_style=maybe", "file:///tmp?x=1", "s3://AKIAKEY:topsecret@bucket/x",
	} {
		_, err := Open(context.Background(), u, Options{})
		if err == nil {
			t.Fatalf("%q opened", u)
		}
		wantKind(t, err, ErrBadURL)
		if !strings.Contains(err.Error(), "s3://bucket[/prefix]") || !strings.Contains(err.Error(), "file:///") {
			t.Fatalf("%q: error does not say the accepted forms: %v", u, err)
		}
		noSecret(t, err, "topsecret")
	}
}

func TestBeginRefusesUnsafeSegments(t *testing.T) {
	s := fileBackend(t).open(t)
	for _, seg := range [][3]string{{"..", "ws", "e"}, {"", "../ws", "e"}, {"", "ws", "a/b"}, {"", "", "e"}, {"_", "ws", "e"}, {"", "ws", ""}} {
		if _, err := s.Begin(seg[0], seg[1], seg[2]); err == nil {
			t.Fatalf("Begin%q accepted", seg)
		}
	}
	for _, n := range []string{"manifest.json", "../x", ".hidden", "a/b"} {
		up, err := s.Begin("", "ws", "e")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := up.Add(context.Background(), n, strings.NewReader("x")); err == nil {
			t.Fatalf("file name %q accepted", n)
		}
	}
}

// failingSource fails after n bytes with an error that looks like a
// network failure (as a box's stream would).
type failingSource struct{ n int }

func (f *failingSource) Read(p []byte) (int, error) {
	if f.n <= 0 {
		return 0, &net.OpError{Op: "read", Net: "tcp", Err: errors.New("connection reset by box")}
	}
	k := min(len(p), f.n)
	f.n -= k
	return k, nil
}

// A source that fails mid-stream fails the upload, which leaves nothing,
// and its error is not taken for the store's.
func TestSourceFailureIsNotAStoreError(t *testing.T) {
	eachBackend(t, func(t *testing.T, b *backend) {
		s := b.open(t)
		ctx := context.Background()
		up, _ := s.Begin("", "ws", "src")
		_, err := up.Add(ctx, "workspace.tar.gz", &failingSource{n: 6 << 20})
		if err == nil {
			t.Fatal("a failing source uploaded")
		}
		if k := kindOf(err); k != nil {
			t.Fatalf("source failure classified as %q: %v", k, err)
		}
		if !strings.Contains(err.Error(), "connection reset by box") || !strings.Contains(err.Error(), "source") {
			t.Fatalf("error does not say the source failed: %v", err)
		}
		if b.raw(t, s.key(up.Ref(), "workspace.tar.gz")) {
			t.Fatal("a partial object was left")
		}
		if swept, err := s.Sweep(ctx, func(Ref) bool { return false }); err != nil || len(swept) != 0 {
			t.Fatalf("sweep after the failed upload: %+v, %v", swept, err)
		}
	})
}
