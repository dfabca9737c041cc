package boximage

import (
	"context"
	"fmt"
	"net/netip"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/network"
	"github.com/moby/moby/client"
)

// RunTestBox starts a container of img labelled as a test box in scope
// (so Cleanup(ctx, "companion.scope", scope) removes it), with env set and
// the agent-server's port 8000 published on a free loopback port. It
// returns the container's id and the agent-server's base URL.
func RunTestBox(ctx context.Context, cli *client.Client, img, scope string, env []string) (id, url string, err error) {
	port := network.MustParsePort("8000/tcp")
	created, err := cli.ContainerCreate(ctx, client.ContainerCreateOptions{
		Config: &container.Config{
			Image:        img,
			Env:          env,
			Labels:       map[string]string{TestLabelKey: "1", "companion.scope": scope},
			ExposedPorts: network.PortSet{port: {}},
		},
		HostConfig: &container.HostConfig{
			PortBindings: network.PortMap{port: {{HostIP: netip.MustParseAddr("127.0.0.1")}}},
		},
	})
	if err != nil {
		return "", "", fmt.Errorf("create a test box: %w", err)
	}
	if _, err := cli.ContainerStart(ctx, created.ID, client.ContainerStartOptions{}); err != nil {
		return created.ID, "", fmt.Errorf("start test box %s: %w", created.ID, err)
	}
	ins, err := cli.ContainerInspect(ctx, created.ID, client.ContainerInspectOptions{})
	if err != nil {
		return created.ID, "", fmt.Errorf("inspect test box %s: %w", created.ID, err)
	}
	b := ins.Container.NetworkSettings.Ports[port]
	if len(b) == 0 {
		return created.ID, "", fmt.Errorf("test box %s published no port: %v", created.ID, ins.Container.NetworkSettings.Ports)
	}
	return created.ID, "http://127.0.0.1:" + b[0].HostPort, nil
}
