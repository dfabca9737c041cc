//go:build linux || darwin

package sandbox

import (
	"syscall"

	"github.com/tetratelabs/wazero/experimental"
)

// mappedMemory is linear memory the host maps itself: the whole maximum is
// reserved once (address space only, PROT_NONE), growing commits pages in
// place (no copy, unlike a Go slice that doubles), and Free unmaps it, so
// the pages go back to the OS as soon as the instance closes instead of
// waiting for the garbage collector.
type mappedMemory struct {
	b         *budget
	mem       []byte // the whole reservation
	committed uint64
	first     bool
}

const pageSize = 65536 // wasm pages are a multiple of every OS page size in use

func newLinearMemory(b *budget, max uint64) experimental.LinearMemory {
	if max == 0 {
		return newGoMemory(b, 0)
	}
	mem, err := syscall.Mmap(-1, 0, int(max), syscall.PROT_NONE, syscall.MAP_PRIVATE|syscall.MAP_ANON|syscall.MAP_NORESERVE)
	if err != nil {
		return newGoMemory(b, max)
	}
	return &mappedMemory{b: b, mem: mem, first: true}
}

func (m *mappedMemory) Reallocate(size uint64) []byte {
	if m.mem == nil || size > uint64(len(m.mem)) {
		return nil
	}
	if size > m.committed {
		end := (size + pageSize - 1) / pageSize * pageSize
		end = min(end, uint64(len(m.mem)))
		if !m.b.reserve(end-m.committed, m.first) {
			return nil
		}
		if err := syscall.Mprotect(m.mem[m.committed:end], syscall.PROT_READ|syscall.PROT_WRITE); err != nil {
			m.b.release(end - m.committed)
			return nil
		}
		m.committed = end
	}
	m.first = false
	return m.mem[:size:size]
}

func (m *mappedMemory) Free() {
	if m.mem == nil {
		return
	}
	_ = syscall.Munmap(m.mem)
	m.b.release(m.committed)
	m.mem, m.committed = nil, 0
}
