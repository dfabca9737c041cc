package exportstore

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/canvasapp/companion/internal/testsupport/gcsserver"
	"github.com/canvasapp/companion/internal/testsupport/s3server"
	"github.com/fsouza/fake-gcs-server/fakestorage"
)

const testBucket = "exports"

// backend is one kind of store a test runs against.
type backend struct {
	name string
	url  string
	opts Options
	// corrupt changes the stored bytes of key behind the store's back.
	corrupt func(t *testing.T, key string)
	// raw says whether key exists behind the store's back.
	raw func(t *testing.T, key string) bool
	// s3 is set for the S3 backend.
	s3 *s3server.Server
}

// eachBackend runs fn against file://, versitygw (s3://) and
// fake-gcs-server (gs://), each started for the subtest.
func eachBackend(t *testing.T, fn func(t *testing.T, b *backend)) {
	t.Run("file", func(t *testing.T) { fn(t, fileBackend(t)) })
	t.Run("s3", func(t *testing.T) { fn(t, s3Backend(t)) })
	t.Run("gcs", func(t *testing.T) { fn(t, gcsBackend(t)) })
}

func flipByte(t *testing.T, path string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatalf("corrupt: %v", err)
	}
	defer f.Close()
	var b [1]byte
	if _, err := f.ReadAt(b[:], 0); err != nil {
		t.Fatalf("corrupt: %v", err)
	}
	b[0] ^= 0xff
	if _, err := f.WriteAt(b[:], 0); err != nil {
		t.Fatalf("corrupt: %v", err)
	}
}

func exists(path string) bool { _, err := os.Stat(path); return err == nil }

func fileBackend(t *testing.T) *backend {
	dir := t.TempDir()
	return &backend{
		name:    "file",
		url:     "file://" + filepath.ToSlash(dir),
		corrupt: func(t *testing.T, key string) { flipByte(t, filepath.Join(dir, filepath.FromSlash(key))) },
		raw:     func(t *testing.T, key string) bool { return exists(filepath.Join(dir, filepath.FromSlash(key))) },
	}
}

func s3Backend(t *testing.T) *backend {
	srv := s3server.Start(t, testBucket)
	return &backend{
		name:    "s3",
		url:     srv.URL(testBucket, "team/exports"),
		opts:    Options{AccessKeyID: s3server.AccessKey, SecretAccessKey: s3server.SecretKey},
		corrupt: func(t *testing.T, key string) { flipByte(t, srv.ObjectPath(testBucket, key)) },
		raw:     func(t *testing.T, key string) bool { return exists(srv.ObjectPath(testBucket, key)) },
		s3:      srv,
	}
}

func gcsBackend(t *testing.T) *backend {
	srv := gcsserver.Start(t, testBucket)
	return &backend{
		name: "gcs",
		url:  srv.URL(testBucket, "exports"),
		corrupt: func(t *testing.T, key string) {
			o, err := srv.Fake.GetObject(testBucket, key)
			if err != nil {
				t.Fatalf("corrupt: %v", err)
			}
			c := bytes.Clone(o.Content)
			c[0] ^= 0xff
			srv.Fake.CreateObject(fakestorage.Object{ObjectAttrs: fakestorage.ObjectAttrs{BucketName: testBucket, Name: key}, Content: c})
		},
		raw: func(t *testing.T, key string) bool {
			_, err := srv.Fake.GetObject(testBucket, key)
			return err == nil
		},
	}
}

func (b *backend) open(t *testing.T) *Store {
	t.Helper()
	s, err := Open(context.Background(), b.url, b.opts)
	if err != nil {
		t.Fatalf("open %s: %v", b.url, err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// gen is a deterministic byte stream of n bytes that is never held in
// memory whole.
func gen(seed uint64, n int64) io.Reader {
	return io.LimitReader(rand.NewChaCha8([32]byte{byte(seed), byte(seed >> 8)}), n)
}

func readAllT(t *testing.T, r io.Reader) []byte {
	t.Helper()
	b, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func wantKind(t *testing.T, err, kind error) {
	t.Helper()
	if !errors.Is(err, kind) {
		t.Fatalf("error %v: want it to match %q", err, kind)
	}
}

func noSecret(t *testing.T, err error, secrets ...string) {
	t.Helper()
	for _, s := range secrets {
		if s != "" && strings.Contains(err.Error(), s) {
			t.Fatalf("error text carries a secret: %v", err)
		}
	}
}
