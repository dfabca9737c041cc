package main

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/canvasapp/companion/agentclient"
	"github.com/canvasapp/companion/exports"
)

// BenchmarkExportArchive streams a tar.gz of a workspace holding one
// incompressible file (COMPANION_BENCH_EXPORT_MIB, default 1024) from the
// emulator over real HTTP into a verified export, and, in the same run,
// the same route's bytes with a raw io.Copy to a file on the same disk.
// Only the body phase is timed (the emulator builds the archive before it
// answers, the same for both). It reports both rates and the peak growth of
// this process's resident memory during the export.
func BenchmarkExportArchive(b *testing.B) {
	mib := 1024
	if v := os.Getenv("COMPANION_BENCH_EXPORT_MIB"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			b.Fatalf("COMPANION_BENCH_EXPORT_MIB=%q: want a positive number", v)
		}
		mib = n
	}
	work := b.TempDir()
	proj := filepath.Join(work, "proj")
	if err := os.MkdirAll(proj, 0o755); err != nil {
		b.Fatal(err)
	}
	f, err := os.Create(filepath.Join(proj, "data.bin"))
	if err != nil {
		b.Fatal(err)
	}
	bw := bufio.NewWriterSize(f, 1<<20)
	if _, err := io.CopyN(bw, &lcg{}, int64(mib)<<20); err != nil {
		b.Fatal(err)
	}
	if err := bw.Flush(); err != nil {
		b.Fatal(err)
	}
	f.Close()
	s, err := NewServer(Config{ConversationsPath: filepath.Join(work, "conversations")}, nil)
	if err != nil {
		b.Fatal(err)
	}
	ts := httptest.NewServer(s)
	defer ts.Close()
	c, err := agentclient.New(agentclient.Endpoint{URL: ts.URL}, nil)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	out := b.TempDir()
	req := agentclient.ArchiveRequest{Path: proj, Format: agentclient.FormatTarGz}
	var exportRate, rawRate, rssGrowth float64
	for i := 0; i < b.N; i++ {
		// Raw baseline: the same route, io.Copy into a file.
		resp, err := http.Get(ts.URL + "/api/file/archive?" + url.Values{"path": {proj}, "format": {"tar.gz"}, "use_default_excludes": {"false"}}.Encode())
		if err != nil || resp.StatusCode != 200 {
			b.Fatalf("raw archive: %v %v", resp, err)
		}
		rf, err := os.Create(filepath.Join(out, "raw.tar.gz"))
		if err != nil {
			b.Fatal(err)
		}
		t0 := time.Now()
		n, err := io.Copy(rf, resp.Body)
		rawDur := time.Since(t0)
		resp.Body.Close()
		rf.Close()
		if err != nil {
			b.Fatal(err)
		}
		os.Remove(rf.Name())

		a, err := c.Archive(ctx, req)
		if err != nil {
			b.Fatal(err)
		}
		stop := sampleRSS()
		t0 = time.Now()
		ex, err := (&exports.Writer{Root: out}).Begin("ws", "box")
		if err != nil {
			b.Fatal(err)
		}
		if _, err := ex.Add(exports.File{Name: a.Filename, Kind: exports.KindArchive, Format: a.Format}, a.Body); err != nil {
			b.Fatal(err)
		}
		a.Body.Close()
		m, dir, err := ex.Commit()
		exDur := time.Since(t0)
		peak := stop()
		if err != nil || m.Bytes != n {
			b.Fatalf("export: %d bytes (raw %d), %v", m.Bytes, n, err)
		}
		os.RemoveAll(dir)
		mb := float64(n) / (1 << 20)
		exportRate, rawRate, rssGrowth = mb/exDur.Seconds(), mb/rawDur.Seconds(), peak/(1<<20)
	}
	b.ReportMetric(exportRate, "export-MiB/s")
	b.ReportMetric(rawRate, "raw-MiB/s")
	b.ReportMetric(rssGrowth, "rss-growth-MiB")
}

// lcg is a fast, incompressible byte stream.
type lcg struct{ x uint64 }

func (l *lcg) Read(p []byte) (int, error) {
	for i := 0; i+8 <= len(p); i += 8 {
		l.x = l.x*6364136223846793005 + 1442695040888963407
		v := l.x
		for k := 0; k < 8; k++ {
			p[i+k] = byte(v >> (8 * k))
		}
	}
	return len(p) &^ 7, nil
}

// sampleRSS polls this process's resident set (Linux /proc) until the
// returned stop is called, which answers the peak growth in bytes over the
// value at the start (0 where /proc is absent).
func sampleRSS() (stop func() float64) {
	if runtime.GOOS != "linux" {
		return func() float64 { return 0 }
	}
	start := rss()
	var peak atomic.Int64
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTicker(5 * time.Millisecond)
		defer t.Stop()
		for {
			if r := rss(); r > peak.Load() {
				peak.Store(r)
			}
			select {
			case <-done:
				return
			case <-t.C:
			}
		}
	}()
	return func() float64 {
		close(done)
		<-finished
		return float64(max(0, peak.Load()-start))
	}
}

func rss() int64 {
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) < 2 {
		return 0
	}
	pages, _ := strconv.ParseInt(f[1], 10, 64)
	return pages * int64(os.Getpagesize())
}
