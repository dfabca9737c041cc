package wsarchive

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"math/rand/v2"
	"testing"
	"time"
)

// sample is a tar.gz of n files of size bytes each (pseudo-random, so
// gzip does not shrink them away), in dirs directories.
func sample(b *testing.B, n, size, dirs int) []byte {
	b.Helper()
	var buf bytes.Buffer
	gz, _ := gzip.NewWriterLevel(&buf, gzip.BestSpeed)
	tw := tar.NewWriter(gz)
	tw.WriteHeader(&tar.Header{Name: "workspace/", Typeflag: tar.TypeDir, Mode: 0o755})
	for d := range dirs {
		tw.WriteHeader(&tar.Header{Name: fmt.Sprintf("workspace/d%d/", d), Typeflag: tar.TypeDir, Mode: 0o755})
	}
	r := rand.New(rand.NewPCG(1, 2))
	body := make([]byte, size)
	for i := range n {
		for j := range body {
			body[j] = byte(r.Uint32())
		}
		tw.WriteHeader(&tar.Header{Name: fmt.Sprintf("workspace/d%d/f%d", i%dirs, i), Typeflag: tar.TypeReg, Mode: 0o644,
			Size: int64(size), ModTime: time.Unix(1, 0)})
		tw.Write(body)
	}
	tw.Close()
	gz.Close()
	return buf.Bytes()
}

// The three ways an archive passes through companion: read as it came
// (the baseline: an export of an archive the agent-server did not
// narrow, which is indexed on the way), and re-packed (a narrowed one).
// b.SetBytes is the archive's uncompressed content, so MB/s compare.
func benchArchive(b *testing.B, n, size int) {
	arc := sample(b, n, size, 64)
	content := int64(n * size)
	b.Run("read-and-index", func(b *testing.B) {
		b.SetBytes(content)
		for b.Loop() {
			if _, err := Read(bytes.NewReader(arc), indexOnly); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("repack", func(b *testing.B) {
		b.SetBytes(content)
		for b.Loop() {
			bd, err := NewBuilder(io.Discard, "workspace", io.Discard)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := Read(bytes.NewReader(arc), func(m Member) error { return bd.Copy("", m) }); err != nil {
				b.Fatal(err)
			}
			if err := bd.Close(nil); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func indexOnly(m Member) error {
	_, body := IndexEntry(m)
	_, err := io.Copy(io.Discard, body)
	return err
}

// BenchmarkArchive10kSmallFiles: a dependency tree's worth of 1 KiB files.
func BenchmarkArchive10kSmallFiles(b *testing.B) { benchArchive(b, 10000, 1<<10) }

// BenchmarkArchiveLargeFiles: eight 16 MiB files.
func BenchmarkArchiveLargeFiles(b *testing.B) { benchArchive(b, 8, 16<<20) }
