// Command box-image builds the agent-server emulator box image (FROM
// scratch, no registry needed) if it does not exist yet and prints its tag.
// `make run` uses it so that Docker workspaces work on a fresh machine.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"

	"github.com/canvasapp/companion/e2e/boximage"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	image, err := boximage.Ensure(ctx)
	if err != nil {
		fmt.Fprintln(os.Stderr, "box-image:", err)
		os.Exit(1)
	}
	fmt.Println(image)
}
