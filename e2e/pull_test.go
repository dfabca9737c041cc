package e2e

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/client"
)

// registry serves one image over the registry API (v2) on loopback, which
// the Docker Engine pulls from without TLS. The image is the box image plus
// a layer of random bytes, so the engine has to download something; the
// download of that layer stops halfway until release is closed.
type registry struct {
	ref      string
	manifest []byte
	blobs    map[string][]byte // digest → bytes
	slowBlob string
	release  chan struct{}
}

func newRegistry(t *testing.T, base string) *registry {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cli, err := client.New(client.FromEnv)
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	saved, err := cli.ImageSave(ctx, []string{base})
	if err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{}
	tr := tar.NewReader(saved)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("read saved image: %v", err)
		}
		b, _ := io.ReadAll(tr)
		files[h.Name] = b
	}
	saved.Close()
	var man []struct {
		Config string
		Layers []string
	}
	if err := json.Unmarshal(files["manifest.json"], &man); err != nil || len(man) != 1 {
		t.Fatalf("saved image manifest: %v %s", err, files["manifest.json"])
	}

	r := &registry{blobs: map[string][]byte{}, release: make(chan struct{})}
	type desc struct {
		MediaType string `json:"mediaType"`
		Size      int    `json:"size"`
		Digest    string `json:"digest"`
	}
	add := func(b []byte) string {
		d := digest(b)
		r.blobs[d] = b
		return d
	}
	var layers []desc
	var diffIDs []string
	addLayer := func(raw []byte) string {
		var gz bytes.Buffer
		w := gzip.NewWriter(&gz)
		w.Write(raw)
		w.Close()
		d := add(gz.Bytes())
		layers = append(layers, desc{"application/vnd.docker.image.rootfs.diff.tar.gzip", gz.Len(), d})
		diffIDs = append(diffIDs, digest(raw))
		return d
	}
	for _, l := range man[0].Layers {
		addLayer(files[l])
	}
	// The extra layer: one file of random bytes (random compresses to
	// itself, so the download has a size worth reporting).
	var extra bytes.Buffer
	tw := tar.NewWriter(&extra)
	noise := make([]byte, 4<<20)
	rand.Read(noise)
	tw.WriteHeader(&tar.Header{Name: "pull-test-noise", Mode: 0o644, Size: int64(len(noise)), ModTime: time.Unix(0, 0), Typeflag: tar.TypeReg})
	tw.Write(noise)
	tw.Close()
	r.slowBlob = addLayer(extra.Bytes())

	var cfg map[string]any
	if err := json.Unmarshal(files[man[0].Config], &cfg); err != nil {
		t.Fatal(err)
	}
	cfg["rootfs"] = map[string]any{"type": "layers", "diff_ids": diffIDs}
	delete(cfg, "history")
	cfgBytes, _ := json.Marshal(cfg)
	cfgDigest := add(cfgBytes)
	r.manifest, _ = json.Marshal(map[string]any{
		"schemaVersion": 2,
		"mediaType":     "application/vnd.docker.distribution.manifest.v2+json",
		"config":        desc{"application/vnd.docker.container.image.v1+json", len(cfgBytes), cfgDigest},
		"layers":        layers,
	})

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: r}
	go srv.Serve(ln)
	var tag [6]byte
	rand.Read(tag[:])
	r.ref = fmt.Sprintf("%s/companion-pull-test:%s", ln.Addr(), hex.EncodeToString(tag[:]))
	t.Cleanup(func() {
		r.releaseOnce()
		srv.Close()
		cli, err := client.New(client.FromEnv)
		if err != nil {
			return
		}
		defer cli.Close()
		cli.ImageRemove(context.Background(), r.ref, client.ImageRemoveOptions{Force: true, PruneChildren: true})
	})
	return r
}

func (r *registry) releaseOnce() {
	select {
	case <-r.release:
	default:
		close(r.release)
	}
}

func digest(b []byte) string {
	s := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(s[:])
}

func (r *registry) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	w.Header().Set("Docker-Distribution-API-Version", "registry/2.0")
	path := req.URL.Path
	switch {
	case path == "/v2/" || path == "/v2":
		w.Write([]byte("{}"))
	case strings.HasPrefix(path, "/v2/companion-pull-test/manifests/"):
		w.Header().Set("Content-Type", "application/vnd.docker.distribution.manifest.v2+json")
		w.Header().Set("Docker-Content-Digest", digest(r.manifest))
		w.Header().Set("Content-Length", fmt.Sprint(len(r.manifest)))
		if req.Method != http.MethodHead {
			w.Write(r.manifest)
		}
	case strings.HasPrefix(path, "/v2/companion-pull-test/blobs/"):
		d := strings.TrimPrefix(path, "/v2/companion-pull-test/blobs/")
		b, ok := r.blobs[d]
		if !ok {
			http.Error(w, `{"errors":[{"code":"BLOB_UNKNOWN"}]}`, http.StatusNotFound)
			return
		}
		w.Header().Set("Content-Length", fmt.Sprint(len(b)))
		w.Header().Set("Docker-Content-Digest", d)
		if req.Method == http.MethodHead {
			return
		}
		if d != r.slowBlob {
			w.Write(b)
			return
		}
		half := len(b) / 2
		w.Write(b[:half])
		w.(http.Flusher).Flush()
		select {
		case <-r.release:
		case <-req.Context().Done():
			return
		}
		w.Write(b[half:])
	default:
		http.NotFound(w, req)
	}
}

// TestPullsMissingImageWithProgress: the default image is not at the
// engine but a registry has it. Creating a workspace pulls it; while the
// download is under way the creating workspace carries the pull's
// progress on the stream (and the log says so), and once it is done the
// box runs from the pulled image and the progress is cleared.
func TestPullsMissingImageWithProgress(t *testing.T) {
	reg := newRegistry(t, boxImage(t))
	p := start(t, options{dataDir: t.TempDir(), args: []string{"--docker-image", reg.ref, "--docker-scope", dockerScope(t)}})
	s := p.dial(-1)
	s.next(10 * time.Second)

	var created struct{ Workspace workspace }
	p.must(202, "POST", "/v1/workspaces", map[string]any{"account_id": "local-docker", "name": "pulled"}, &created)
	id := created.Workspace.ID
	progress := func(m wsMsg) string {
		var w struct {
			Workspace struct {
				Progress string `json:"progress"`
			} `json:"workspace"`
		}
		json.Unmarshal(m.Raw, &w)
		return w.Workspace.Progress
	}
	m := s.waitFor("pull progress on the creating workspace", 60*time.Second, func(m wsMsg) bool {
		return m.Type == "upsert" && m.Workspace != nil && m.Workspace.ID == id && m.Workspace.State == "creating" &&
			strings.HasPrefix(progress(m), "pulling image "+reg.ref)
	})
	t.Logf("progress: %s", progress(m))
	// While the image downloads, docker counts as available: creates wait
	// for the pull.
	var provs providerList
	p.must(200, "GET", "/v1/providers", nil, &provs)
	if !provs.available("docker") {
		t.Errorf("docker unavailable while its image is being pulled: %+v", provs)
	}
	reg.releaseOnce()
	done := s.waitFor("running", 90*time.Second, upsertOf(id, "running"))
	if got := progress(done); got != "" {
		t.Errorf("progress left on a running workspace: %q", got)
	}
	if logs := p.stderr.String(); !strings.Contains(logs, "pulling it") || !strings.Contains(logs, "image pulled") {
		t.Errorf("the pull is not in the log:\n%s", logs)
	}
}
