//go:build !unix

package boximage

import "context"

// lockFile does nothing where flock is missing: concurrent builds then
// both succeed and tag equivalent images.
func lockFile(ctx context.Context, path string) (unlock func(), err error) {
	return func() {}, nil
}
