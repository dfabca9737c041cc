package e2e

import (
	"bufio"
	"crypto/rand"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestDeployCaddyfilesValidate: the deployment Caddyfiles are valid Caddy
// configuration as shipped (their defaults) and with a site filled in.
// (Caddyfile.replicas is also the ingress of the replica e2e tests.)
func TestDeployCaddyfilesValidate(t *testing.T) {
	bin, err := exec.LookPath("caddy")
	if err != nil {
		t.Fatalf("caddy is needed (apt-get install caddy; make test installs it): %v", err)
	}
	for _, f := range []string{"Caddyfile", "Caddyfile.replicas"} {
		for _, env := range [][]string{nil, caddyEnv(t.TempDir(), "http://127.0.0.1:9", "127.0.0.1:8080 127.0.0.1:8081")} {
			dir := t.TempDir()
			cmd := exec.Command(bin, "validate", "--config", filepath.Join("..", "deploy", f), "--adapter", "caddyfile")
			cmd.Env = append(os.Environ(), append([]string{"HOME=" + dir, "XDG_DATA_HOME=" + dir, "XDG_CONFIG_HOME=" + dir}, env...)...)
			if out, err := cmd.CombinedOutput(); err != nil || !strings.Contains(string(out), "Valid configuration") {
				t.Errorf("caddy validate %s (env %v): %v\n%s", f, env, err, out)
			}
		}
	}
}

// TestDeploySystemdUnit: every flag the unit's ExecStart passes is one
// `companion serve` knows, the key comes as the credential serve looks for,
// and, where systemd-analyze exists, the unit verifies.
func TestDeploySystemdUnit(t *testing.T) {
	unit := filepath.Join("..", "deploy", "companion.service")
	raw, err := os.ReadFile(unit)
	if err != nil {
		t.Fatal(err)
	}
	var exec_, cred string
	sc := bufio.NewScanner(strings.NewReader(strings.ReplaceAll(string(raw), "\\\n", " ")))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if v, ok := strings.CutPrefix(line, "ExecStart="); ok {
			exec_ = v
		}
		if v, ok := strings.CutPrefix(line, "LoadCredential="); ok {
			cred, _, _ = strings.Cut(v, ":")
		}
	}
	if cred != "companion-secret-key" {
		t.Errorf("LoadCredential names %q; serve reads the credential companion-secret-key", cred)
	}
	help, _ := exec.Command(companionBin, "serve", "--help").CombinedOutput()
	flags := regexp.MustCompile(`--[a-z-]+`).FindAllString(exec_, -1)
	if len(flags) < 4 || !strings.Contains(exec_, "companion serve") {
		t.Fatalf("ExecStart %q does not run companion serve with its flags", exec_)
	}
	for _, f := range flags {
		if !strings.Contains(string(help), "  "+f+" ") && !strings.Contains(string(help), "  "+f+"\n") {
			t.Errorf("ExecStart passes %s, which companion serve --help does not list", f)
		}
	}
	if sa, err := exec.LookPath("systemd-analyze"); err == nil {
		out, err := exec.Command(sa, "verify", unit).CombinedOutput()
		if err != nil && !strings.Contains(string(out), "/usr/local/bin/companion") {
			t.Errorf("systemd-analyze verify: %v\n%s", err, out)
		}
	} else {
		t.Log("systemd-analyze is not installed here: the unit was checked against companion serve --help only")
	}
}

// TestDeployContainerImage: deploy/Dockerfile builds an image FROM scratch
// around the static binary (CGO off, as make dist builds it), and the
// image runs it.
func TestDeployContainerImage(t *testing.T) {
	ctxDir := t.TempDir()
	build := exec.Command("go", "build", "-trimpath", "-ldflags", "-X main.version=e2e-image", "-o", filepath.Join(ctxDir, "companion"),
		"github.com/canvasapp/companion/cmd/companion")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("static build: %v\n%s", err, out)
	}
	certs, err := os.ReadFile("/etc/ssl/certs/ca-certificates.crt")
	if err != nil {
		t.Fatalf("the image needs the host's CA bundle: %v", err)
	}
	if err := os.WriteFile(filepath.Join(ctxDir, "ca-certificates.crt"), certs, 0o644); err != nil {
		t.Fatal(err)
	}
	var rnd [4]byte
	rand.Read(rnd[:])
	tag := "companion-deploy-test:" + hex.EncodeToString(rnd[:])
	if out, err := exec.Command("docker", "build", "-q", "-t", tag, "-f", filepath.Join("..", "deploy", "Dockerfile"), ctxDir).CombinedOutput(); err != nil {
		t.Fatalf("docker build: %v\n%s", err, out)
	}
	t.Cleanup(func() { exec.Command("docker", "rmi", "-f", tag).Run() })
	out, err := exec.Command("docker", "run", "--rm", tag, "version").CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "companion e2e-image" {
		t.Fatalf("docker run %s version: %v\n%s", tag, err, out)
	}
	// The default command is serve, refusing to start without its key
	// rather than running with secrets in plain text.
	data := t.TempDir()
	if err := os.Chmod(data, 0o777); err != nil {
		t.Fatal(err)
	}
	out, err = exec.Command("docker", "run", "--rm", "-v", data+":/data", tag).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "secret") {
		t.Fatalf("the image's serve without a key: %v\n%s\nwant a refusal naming the secret key", err, out)
	}
}
