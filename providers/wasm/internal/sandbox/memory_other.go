//go:build !linux && !darwin

package sandbox

import "github.com/tetratelabs/wazero/experimental"

// newLinearMemory is the portable fallback: linear memory on the Go heap,
// within the same budget.
func newLinearMemory(b *budget, max uint64) experimental.LinearMemory {
	return newGoMemory(b, max)
}
