package boximage

import (
	"context"
	"strings"
	"testing"
	"time"
)

// TestDevImageHasNoTestLabel: the image `make run` uses is the emulator,
// but without the test label its containers would inherit.
func TestDevImageHasNoTestLabel(t *testing.T) {
	cli := dockerClient(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	img, err := EnsureDev(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(img, DevRepository+":") {
		t.Fatalf("dev image tag %q", img)
	}
	ins, err := cli.ImageInspect(ctx, img)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := ins.Config.Labels[TestLabelKey]; ok {
		t.Fatalf("dev image carries %s: %v", TestLabelKey, ins.Config.Labels)
	}
	if ins.Config.Labels["companion.dev"] != "1" {
		t.Errorf("dev image labels %v", ins.Config.Labels)
	}
}
