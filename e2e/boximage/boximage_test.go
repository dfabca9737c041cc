package boximage

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"github.com/canvasapp/companion/internal/testsupport"
)

func dockerClient(t *testing.T) *client.Client {
	t.Helper()
	if testing.Short() {
		t.Skip("needs the Docker Engine; skipped with -short")
	}
	cli, err := client.New(client.FromEnv)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := cli.Ping(ctx, client.PingOptions{NegotiateAPIVersion: true}); err != nil {
		t.Fatalf("these tests need a reachable Docker Engine (run with -short to skip): %v", err)
	}
	return cli
}

func TestEnsureAndRun(t *testing.T) {
	cli := dockerClient(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	img, err := Ensure(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(img, Repository+":") || len(strings.TrimPrefix(img, Repository+":")) != 12 {
		t.Fatalf("tag %q", img)
	}
	ins, err := cli.ImageInspect(ctx, img)
	if err != nil {
		t.Fatal(err)
	}
	if ins.Config.Labels[TestLabelKey] != "1" {
		t.Errorf("image labels %v", ins.Config.Labels)
	}
	// A second call finds the tag and builds nothing.
	again, err := Ensure(ctx)
	if err != nil || again != img {
		t.Fatalf("second Ensure = %q, %v", again, err)
	}
	if ins2, err := cli.ImageInspect(ctx, img); err != nil || ins2.ID != ins.ID {
		t.Errorf("image rebuilt: %s -> %s (%v)", ins.ID, ins2.ID, err)
	}

	// The image runs: the emulator answers on the published port and keeps
	// conversations under /workspace.
	scope := "boximage-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	t.Cleanup(func() {
		if err := Cleanup(context.Background(), "companion.scope", scope); err != nil {
			t.Error(err)
		}
	})
	_, base, err := RunTestBox(ctx, cli, img, scope, []string{"OH_SESSION_API_KEYS_0=k"})
	if err != nil {
		t.Fatal(err)
	}
	var info struct {
		Title string `json:"title"`
	}
	waitFor(t, func() error { return getJSON(base+"/server_info", "", &info) })
	if info.Title != "OpenHands Agent Server" {
		t.Errorf("server_info title %q", info.Title)
	}
	req, _ := http.NewRequest("POST", base+"/api/conversations", strings.NewReader(`{}`))
	req.Header.Set("X-Session-API-Key", "k")
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != 201 {
		t.Fatalf("create conversation in the box: %v %v", resp, err)
	}
	resp.Body.Close()

	if err := Cleanup(ctx, "companion.scope", scope); err != nil {
		t.Fatal(err)
	}
	if list, err := cli.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: make(client.Filters).Add("label", "companion.scope="+scope)}); err != nil || len(list.Items) != 0 {
		t.Errorf("Cleanup left %d containers (%v)", len(list.Items), err)
	}
}

func TestEnsureEnvConcurrent(t *testing.T) {
	cli := dockerClient(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	base, err := Ensure(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// A variant no earlier run built, asked for by several callers at once.
	env := map[string]string{"EMULATOR_READY_DELAY_SECONDS": "0", "BOXIMAGE_TEST_NONCE": strconv.FormatInt(time.Now().UnixNano(), 36)}
	var wg sync.WaitGroup
	tags := make([]string, 3)
	errs := make([]error, 3)
	for i := range tags {
		wg.Go(func() { tags[i], errs[i] = EnsureEnv(ctx, env) })
	}
	wg.Wait()
	for i := range tags {
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
		if tags[i] != tags[0] {
			t.Fatalf("concurrent EnsureEnv gave different tags: %v", tags)
		}
	}
	if tags[0] == base {
		t.Fatal("a variant with env must have its own tag")
	}
	t.Cleanup(func() {
		cli.ImageRemove(context.Background(), tags[0], client.ImageRemoveOptions{Force: true, PruneChildren: true})
	})
	ins, err := cli.ImageInspect(ctx, tags[0])
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, e := range ins.Config.Env {
		found = found || e == "BOXIMAGE_TEST_NONCE="+env["BOXIMAGE_TEST_NONCE"]
	}
	if !found {
		t.Errorf("variant env not baked in: %v", ins.Config.Env)
	}
}

func TestRenderDockerfile(t *testing.T) {
	got := renderDockerfile(map[string]string{"B": `say "hi"`, "A": "1"})
	for _, want := range []string{"FROM scratch\n", "ENV A=\"1\"\nENV B=\"say \\\"hi\\\"\"\n", "EXPOSE 8000\n", `ENTRYPOINT ["/agentserver"]`} {
		if !strings.Contains(got, want) {
			t.Errorf("Dockerfile lacks %q:\n%s", want, got)
		}
	}
}

func TestModuleRoot(t *testing.T) {
	root, err := moduleRoot(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if !isCompanionRoot(root) {
		t.Fatalf("%s is not the module root", root)
	}
}

func waitFor(t *testing.T, f func() error) {
	t.Helper()
	testsupport.Poll(t, 30*time.Second, f)
}

func getJSON(url, key string, out any) error {
	req, _ := http.NewRequest("GET", url, nil)
	if key != "" {
		req.Header.Set("X-Session-API-Key", key)
	}
	c := http.Client{Timeout: 2 * time.Second}
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		return fmt.Errorf("%s: %s", url, resp.Status)
	}
	return json.NewDecoder(resp.Body).Decode(out)
}
