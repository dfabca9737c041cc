// Package boximage builds the box image companion's tests run against the
// machine's real Docker Engine: an image FROM scratch that holds only the
// agent-server emulator (e2e/agentserver), built as a static Go binary from
// this module's source tree.
//
// A test that needs boxes calls Ensure once and hands the tag to whatever
// creates containers (the docker provider's Config.Image, or companion's
// --docker-image flag in end-to-end tests):
//
//	img, err := boximage.Ensure(ctx)
//	if err != nil {
//		t.Fatal(err)
//	}
//	scope := "test-" + strconv.FormatInt(time.Now().UnixNano(), 36)
//	t.Cleanup(func() { boximage.Cleanup(context.Background(), "companion.scope", scope) })
//
// The tag is companion-e2e-box:<12 hex of the binary's SHA-256>, so the
// image is rebuilt exactly when the emulator changes and reused otherwise,
// across test binaries and runs. Several test binaries may call Ensure at
// once: a file lock in os.TempDir serializes the builds.
//
// EnsureEnv builds a variant with environment variables baked in, for
// emulator knobs a test cannot pass otherwise, e.g.
// EMULATOR_STOP_GRACE_SECONDS=30 to make stopping a box slow on purpose.
//
// Every image carries the label companion.test=1. Cleanup removes the
// containers and volumes a test labelled, running or not. Images are kept
// for the next run; old ones go with
// `docker image prune -a --filter label=companion.test=1`.
package boximage

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/jsonstream"
	"github.com/moby/moby/client"
)

const (
	// Repository is the image name; the tag is a content hash.
	Repository = "companion-e2e-box"
	// TestLabelKey marks every image (and should mark every container and
	// volume) that tests make.
	TestLabelKey = "companion.test"
	// Port is where the emulator listens inside the box.
	Port = 8000
)

// Ensure returns the tag of the box image, building it when no image with
// that tag exists yet.
func Ensure(ctx context.Context) (string, error) { return EnsureEnv(ctx, nil) }

// EnsureEnv is Ensure for an image with env baked in as ENV lines. The tag
// covers env too, so each variant is built once.
func EnsureEnv(ctx context.Context, env map[string]string) (string, error) {
	return ensure(ctx, Repository, map[string]string{TestLabelKey: "1"}, env)
}

// ensure builds repo:<content hash> with the image labels given (which
// every container made from it inherits).
func ensure(ctx context.Context, repo string, labels, env map[string]string) (string, error) {
	bin, sum, err := emulatorBinary(ctx)
	if err != nil {
		return "", err
	}
	dockerfile := renderDockerfile(env)
	h := sha256.New()
	h.Write(sum[:])
	h.Write([]byte(dockerfile))
	tag := repo + ":" + hex.EncodeToString(h.Sum(nil))[:12]

	cli, err := client.New(client.FromEnv)
	if err != nil {
		return "", fmt.Errorf("docker client: %w", err)
	}
	defer cli.Close()
	if exists, err := imageExists(ctx, cli, tag); err != nil || exists {
		return tag, err
	}
	unlock, err := lockFile(ctx, filepath.Join(os.TempDir(), "companion-e2e-boximage.lock"))
	if err != nil {
		return "", err
	}
	defer unlock()
	// Another process may have built it while we waited for the lock.
	if exists, err := imageExists(ctx, cli, tag); err != nil || exists {
		return tag, err
	}
	if err := build(ctx, cli, tag, bin, dockerfile, labels); err != nil {
		return "", fmt.Errorf("build box image %s: %w", tag, err)
	}
	if exists, err := imageExists(ctx, cli, tag); err != nil || !exists {
		return "", fmt.Errorf("build box image %s: the engine reported success but has no such image (%v)", tag, err)
	}
	return tag, nil
}

func imageExists(ctx context.Context, cli *client.Client, tag string) (bool, error) {
	_, err := cli.ImageInspect(ctx, tag)
	switch {
	case err == nil:
		return true, nil
	case cerrdefs.IsNotFound(err):
		return false, nil
	}
	return false, fmt.Errorf("inspect image %s: %w", tag, err)
}

// ImageFile is a file every box image holds, with ImageFileContent, for
// tests of what a box does to its image's files.
const (
	ImageFile        = "/etc/companion-box-image"
	ImageFileContent = "shipped in the box image\n"
)

func renderDockerfile(env map[string]string) string {
	var b strings.Builder
	b.WriteString("FROM scratch\n")
	b.WriteString("COPY agentserver /agentserver\n")
	// The same binary is the box's rm (its main looks at its name), and
	// ImageFile is a file of the image that tests may delete in a box.
	b.WriteString("COPY agentserver /bin/rm\n")
	b.WriteString("COPY etc /etc\n")
	// scratch has no mkdir: the build context carries an empty workspace
	// directory. It is where the box's volume is mounted and where the
	// emulator keeps conversations (workspace/conversations from /).
	b.WriteString("COPY workspace /workspace\n")
	names := make([]string, 0, len(env))
	for k := range env {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		fmt.Fprintf(&b, "ENV %s=%s\n", k, strconv.Quote(env[k]))
	}
	b.WriteString("WORKDIR /\n")
	fmt.Fprintf(&b, "EXPOSE %d\n", Port)
	b.WriteString(`ENTRYPOINT ["/agentserver"]` + "\n")
	return b.String()
}

func build(ctx context.Context, cli *client.Client, tag string, bin []byte, dockerfile string, labels map[string]string) error {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	now := time.Now()
	files := []struct {
		name string
		mode int64
		data []byte
		dir  bool
	}{
		{name: "Dockerfile", mode: 0o644, data: []byte(dockerfile)},
		{name: "agentserver", mode: 0o755, data: bin},
		{name: "workspace/", mode: 0o755, dir: true},
		{name: "etc/", mode: 0o755, dir: true},
		{name: "etc/" + path.Base(ImageFile), mode: 0o644, data: []byte(ImageFileContent)},
	}
	for _, f := range files {
		hdr := &tar.Header{Name: f.name, Mode: f.mode, Size: int64(len(f.data)), ModTime: now, Typeflag: tar.TypeReg}
		if f.dir {
			hdr.Typeflag, hdr.Size = tar.TypeDir, 0
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if _, err := tw.Write(f.data); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	res, err := cli.ImageBuild(ctx, &buf, client.ImageBuildOptions{
		Tags:        []string{tag},
		Labels:      labels,
		Remove:      true,
		ForceRemove: true,
	})
	if err != nil {
		return err
	}
	defer res.Body.Close()
	// The answer is a JSON stream; a failed step arrives as a message in
	// it, not as an HTTP status.
	var log strings.Builder
	dec := json.NewDecoder(res.Body)
	for {
		var m jsonstream.Message
		if err := dec.Decode(&m); err == io.EOF {
			return nil
		} else if err != nil {
			return fmt.Errorf("read build output: %w", err)
		}
		log.WriteString(m.Stream)
		if m.Error != nil {
			return fmt.Errorf("%s\n%s", m.Error.Message, log.String())
		}
	}
}

var (
	binMu  sync.Mutex
	binOut []byte
	binSum [32]byte
)

// emulatorBinary builds e2e/agentserver for linux, static, once per
// process. -trimpath and -buildvcs=false make the output depend only on the
// source, so the content hash (and the image tag) is stable.
func emulatorBinary(ctx context.Context) ([]byte, [32]byte, error) {
	binMu.Lock()
	defer binMu.Unlock()
	if binOut != nil {
		return binOut, binSum, nil
	}
	root, err := moduleRoot(ctx)
	if err != nil {
		return nil, binSum, err
	}
	dir, err := os.MkdirTemp("", "companion-boximage-")
	if err != nil {
		return nil, binSum, err
	}
	defer os.RemoveAll(dir)
	out := filepath.Join(dir, "agentserver")
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-buildvcs=false", "-ldflags=-s -w", "-o", out, "./e2e/agentserver")
	cmd.Dir = root
	// GOFLAGS is cleared so that, say, GOFLAGS=-race for the tests does not
	// reach a build that must be static.
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+runtime.GOARCH, "GOFLAGS=")
	if msg, err := cmd.CombinedOutput(); err != nil {
		return nil, binSum, fmt.Errorf("build agent-server emulator: %v\n%s", err, msg)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		return nil, binSum, err
	}
	binOut, binSum = b, sha256.Sum256(b)
	return binOut, binSum, nil
}

// moduleRoot finds the companion module's root: from this file's own path
// when the binary was built without -trimpath, else from `go env GOMOD` in
// the working directory (tests run in their package's directory).
func moduleRoot(ctx context.Context) (string, error) {
	if _, file, _, ok := runtime.Caller(0); ok && filepath.IsAbs(file) {
		for dir := filepath.Dir(file); ; dir = filepath.Dir(dir) {
			if isCompanionRoot(dir) {
				return dir, nil
			}
			if parent := filepath.Dir(dir); parent == dir {
				break
			}
		}
	}
	out, err := exec.CommandContext(ctx, "go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("find module root: go env GOMOD: %w", err)
	}
	gomod := strings.TrimSpace(string(out))
	if gomod == "" || gomod == os.DevNull {
		return "", errors.New("find module root: not inside the companion module (go env GOMOD is empty)")
	}
	if dir := filepath.Dir(gomod); isCompanionRoot(dir) {
		return dir, nil
	}
	return "", fmt.Errorf("find module root: %s is not the companion module", gomod)
}

func isCompanionRoot(dir string) bool {
	b, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) == 2 && f[0] == "module" {
			return f[1] == "github.com/canvasapp/companion"
		}
	}
	return false
}

// Cleanup removes every container (running or not, with its anonymous
// volumes) and every volume labelled labelKey=labelValue. It keeps going
// after a failure and returns all of them.
func Cleanup(ctx context.Context, labelKey, labelValue string) error {
	cli, err := client.New(client.FromEnv)
	if err != nil {
		return err
	}
	defer cli.Close()
	label := labelKey + "=" + labelValue
	var errs []error
	cs, err := cli.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: make(client.Filters).Add("label", label)})
	if err != nil {
		return fmt.Errorf("list containers labelled %s: %w", label, err)
	}
	for _, c := range cs.Items {
		_, err := cli.ContainerRemove(ctx, c.ID, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true})
		if err != nil && !cerrdefs.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("remove container %s: %w", c.ID, err))
		}
	}
	vs, err := cli.VolumeList(ctx, client.VolumeListOptions{Filters: make(client.Filters).Add("label", label)})
	if err != nil {
		return errors.Join(append(errs, fmt.Errorf("list volumes labelled %s: %w", label, err))...)
	}
	for _, v := range vs.Items {
		_, err := cli.VolumeRemove(ctx, v.Name, client.VolumeRemoveOptions{Force: true})
		if err != nil && !cerrdefs.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("remove volume %s: %w", v.Name, err))
		}
	}
	return errors.Join(errs...)
}
