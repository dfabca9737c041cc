package sandbox

import (
	"sync/atomic"

	"github.com/tetratelabs/wazero/experimental"

	"github.com/canvasapp/companion/providers/wasm/internal/manifest"
	"github.com/canvasapp/companion/providers/wasm/internal/wasmbin"
)

// budget is a module's host memory budget. alloc maps each instance's
// linear memory, refusing to grow past the pool's budget (the guest's
// memory.grow then returns -1).
//
// The budget covers: every instance's linear memory
// and tables. Linear memory is mapped by the host (memory_unix.go), so
// what an instance commits is counted here and unmapped when the instance
// closes; tables are bounded by Check and counted at their maxima.
type budget struct {
	share     uint64 // one instance: its memory limit plus its tables
	pooled    uint64 // the most linear memory an idle, pooled instance may hold
	tables    uint64 // one instance's tables at their maxima
	limit     uint64 // the pool: PoolSize shares
	memLimit  uint64 // linear memory of the whole pool
	alloc     experimental.MemoryAllocator
	committed atomic.Int64
	peak      atomic.Int64
}

func newBudget(l manifest.Limits, s *wasmbin.Shape, pool int) *budget {
	mem := uint64(l.MemoryPages()) * 65536
	b := &budget{tables: s.TableBytes()}
	b.share = mem + b.tables
	b.limit = b.share * uint64(pool)
	b.memLimit = mem * uint64(pool)
	b.pooled = max(mem/2, uint64(s.MemoryMin)*65536)
	b.alloc = experimental.MemoryAllocatorFunc(func(_, max uint64) experimental.LinearMemory {
		return newLinearMemory(b, max)
	})
	return b
}

// reserve counts delta more committed bytes unless that would pass the
// pool's linear memory budget. first is the instance's initial memory,
// which is always granted: its size was checked before compiling, the pool
// bounds the instances, and wazero cannot handle a refusal there.
func (b *budget) reserve(delta uint64, first bool) bool {
	for {
		cur := b.committed.Load()
		next := cur + int64(delta)
		if !first && uint64(next) > b.memLimit {
			return false
		}
		if b.committed.CompareAndSwap(cur, next) {
			for {
				p := b.peak.Load()
				if next <= p || b.peak.CompareAndSwap(p, next) {
					return true
				}
			}
		}
	}
}

func (b *budget) release(n uint64) { b.committed.Add(-int64(n)) }

// goMemory is linear memory on the Go heap, for systems without mmap or
// when a mapping fails: it grows inside one slice of the maximum capacity,
// so it never moves or copies; the pages are returned when the instance is
// garbage collected.
type goMemory struct {
	b     *budget
	buf   []byte
	used  uint64
	grown bool
}

func newGoMemory(b *budget, max uint64) *goMemory {
	return &goMemory{b: b, buf: make([]byte, 0, max)}
}

func (m *goMemory) Reallocate(size uint64) []byte {
	if size > uint64(cap(m.buf)) {
		return nil
	}
	if size > m.used {
		if !m.b.reserve(size-m.used, !m.grown) {
			return nil
		}
		m.used = size
	}
	m.grown = true
	return m.buf[:size]
}

func (m *goMemory) Free() {
	m.b.release(m.used)
	m.used, m.buf = 0, nil
}
