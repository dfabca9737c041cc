package e2e

import (
	"context"
	"strings"
	"testing"

	"github.com/moby/moby/client"

	"github.com/canvasapp/companion/internal/testsupport/dockertest"
)

// boxImage is the agent-server emulator image, built once per run.
func boxImage(t *testing.T) string { return dockertest.BoxImage(t) }

// idleBoxImage is a box image whose agent-server reports an hour of idle
// time from the start. Tests that preview a delete and then confirm it use
// it, so a slow idle-clock reading on a loaded machine is never taken for
// use since the preview.
func idleBoxImage(t *testing.T) string {
	return dockertest.BoxImageEnv(t, map[string]string{"EMULATOR_IDLE_AT_START_SECONDS": "3600"})
}

// dockerScope is a docker scope of the test's own, emptied when it ends.
func dockerScope(t *testing.T) string { return dockertest.Scope(t) }

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
