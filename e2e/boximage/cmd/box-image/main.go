// Command box-image builds the agent-server emulator box image (FROM
// scratch, no registry needed) if it does not exist yet and prints its tag.
// `make run` uses it so that Docker workspaces work on a fresh machine. It
// carries no test label, so boxes made from it are not taken for a test's.
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
	// The build (first run only) compiles the emulator and sends it to
	// the engine; the tag goes to stdout, so progress goes to stderr.
	fmt.Fprintln(os.Stderr, "box-image: looking for "+boximage.DevRepository+", building it if missing")
	image, err := boximage.EnsureDev(ctx)
	if err != nil {
		fmt.Fprintln(os.Stderr, "box-image:", err)
		os.Exit(1)
	}
	fmt.Println(image)
}
