package docker_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"io"
	"log/slog"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/canvasapp/companion/core"
	"github.com/canvasapp/companion/providers/builtin/docker"
)

// missingImage names an image no engine has, on a registry address that
// refuses connections, so the pull fails at once with or without internet.
func missingImage(t *testing.T) string {
	var b [6]byte
	rand.Read(b[:])
	return "127.0.0.1:1/companion-missing:" + hex.EncodeToString(b[:])
}

// TestUnpullableImage: a default image the engine lacks and cannot pull
// (its registry cannot be reached) makes the
// provider unavailable with the reason and the fix, and Create says the
// same without making a container. An image named in a create's options
// is the caller's mistake: invalid, named as options.image.
func TestUnpullableImage(t *testing.T) {
	img := missingImage(t)
	f := newFixture(t, docker.Config{Image: img, ImageFlag: "--docker-image"})
	ctx := ctxT(t)

	err := f.p.Ping(ctx)
	wantKind(t, err, core.KindUnavailable, "ping with an unpullable image")
	for _, want := range []string{"Docker image " + img, "could not be pulled", "--docker-image"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("ping: %q does not say %q", err, want)
		}
	}
	if logs := f.logs.String(); !strings.Contains(logs, "pulling it") || !strings.Contains(logs, "image pull failed") {
		t.Errorf("the pull and its failure are not in the log:\n%s", logs)
	}

	_, err = f.p.Create(ctx, f.acct, core.CreateSpec{WorkspaceID: "ws_nopull", Name: "x"})
	wantKind(t, err, core.KindUnavailable, "create with an unpullable default image")
	if !strings.Contains(err.Error(), "could not be pulled") {
		t.Errorf("create: %v", err)
	}

	good := boxImage(t)
	bad := missingImage(t)
	if err := f.p.CheckCreate(ctx, f.acct, core.CreateSpec{Options: map[string]string{docker.OptionImage: good}}); err != nil {
		t.Errorf("CheckCreate with a present image: %v", err)
	}
	err = f.p.CheckCreate(ctx, f.acct, core.CreateSpec{Options: map[string]string{docker.OptionImage: bad}})
	wantKind(t, err, core.KindInvalid, "CheckCreate with an unpullable option image")
	if !strings.HasPrefix(err.Error(), "options.image: Docker image "+bad) {
		t.Errorf("CheckCreate: %v", err)
	}
	if boxes, err := f.p.List(ctx, f.acct); err != nil || len(boxes) != 0 {
		t.Errorf("failed creates left boxes: %+v %v", boxes, err)
	}
}

// silentEngine is a unix socket that accepts connections, reads what is
// sent and never answers, like a wedged Docker Engine.
func silentEngine(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "silent.sock")
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			go io.Copy(io.Discard, c)
		}
	}()
	return "unix://" + path
}

// TestSilentEngineIsUnavailable: every call against an engine that never
// answers ends with an unavailable error of its own deadline, though the
// caller's context has none.
func TestSilentEngineIsUnavailable(t *testing.T) {
	host := silentEngine(t)
	p, err := docker.New(docker.Config{Image: "img", Host: host, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	acct := core.Account{ID: "acc_local", Provider: "docker"}
	calls := map[string]func(context.Context) error{
		"ping":    p.Ping,
		"list":    func(ctx context.Context) error { _, err := p.List(ctx, acct); return err },
		"get":     func(ctx context.Context) error { _, err := p.Get(ctx, acct, "x"); return err },
		"suspend": func(ctx context.Context) error { _, err := p.Suspend(ctx, acct, "x"); return err },
		"resume":  func(ctx context.Context) error { _, err := p.Resume(ctx, acct, "x"); return err },
		"delete":  func(ctx context.Context) error { return p.Delete(ctx, acct, "x") },
		"create": func(ctx context.Context) error {
			_, err := p.Create(ctx, acct, core.CreateSpec{WorkspaceID: "ws_silent"})
			return err
		},
	}
	var wg sync.WaitGroup
	for name, call := range calls {
		wg.Go(func() {
			done := make(chan error, 1)
			go func() { done <- call(context.Background()) }()
			select {
			case err := <-done:
				if !core.IsKind(err, core.KindUnavailable) || !strings.Contains(err.Error(), "did not answer in time") {
					t.Errorf("%s: %v, want unavailable: did not answer in time", name, err)
				}
			case <-time.After(time.Minute):
				// Far beyond any deadline of these calls: it has none.
				t.Errorf("%s against a silent engine is still waiting after a minute", name)
			}
		})
	}
	wg.Wait()
}
