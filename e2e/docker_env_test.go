package e2e

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"companion/core"
	"companion/e2e/boximage"
	"companion/providers/builtin/docker"
)

var (
	imageOnce sync.Once
	imageTag  string
	imageErr  error
)

// boxImage builds (once per run) the agent-server emulator image.
func boxImage(t *testing.T) string {
	t.Helper()
	imageOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		imageTag, imageErr = boximage.Ensure(ctx)
	})
	if imageErr != nil {
		t.Fatalf("box image (needs the Docker Engine): %v", imageErr)
	}
	return imageTag
}

// dockerScope returns a scope unique to the test and removes every
// container and volume in it when the test ends.
func dockerScope(t *testing.T) string {
	t.Helper()
	scope := strings.ToLower(core.NewID("e2e"))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := boximage.Cleanup(ctx, docker.LabelScope, scope); err != nil {
			t.Errorf("cleanup scope %s: %v", scope, err)
		}
	})
	return scope
}

// containerExists asks the Docker Engine directly, bypassing companion.
func containerExists(t *testing.T, id string) bool {
	t.Helper()
	cli, err := client.New(client.FromEnv)
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	_, err = cli.ContainerInspect(context.Background(), id, client.ContainerInspectOptions{})
	if err == nil {
		return true
	}
	if strings.Contains(strings.ToLower(err.Error()), "no such container") {
		return false
	}
	t.Fatalf("inspect %s: %v", id, err)
	return false
}

func removeContainer(t *testing.T, id string) {
	t.Helper()
	cli, err := client.New(client.FromEnv)
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	if _, err := cli.ContainerRemove(context.Background(), id, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true}); err != nil {
		t.Fatalf("remove %s: %v", id, err)
	}
}
