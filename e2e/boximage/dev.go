package boximage

import "context"

// DevRepository is the image `make run` uses. It is the same emulator as
// the test image but without the companion.test label, which containers
// inherit from their image: a developer's boxes must not look like a
// test's leftovers (and be swept with them).
const DevRepository = "companion-dev-box"

// EnsureDev returns the tag of the development box image, building it when
// missing.
func EnsureDev(ctx context.Context) (string, error) {
	return ensure(ctx, DevRepository, map[string]string{"companion.dev": "1"}, nil)
}
