package wasm

import "github.com/canvasapp/companion/providers/wasm/internal/sandbox"

// MemoryStats describe a module's host memory budget (ABI.md, Limits) and
// what its instances hold, in bytes.
type MemoryStats = sandbox.MemoryStats

// Memory returns the module's memory budget and use; zero before the
// module is loaded.
func (a *Adapter) Memory() MemoryStats {
	select {
	case <-a.ready:
		if mod := a.mod.Load(); mod != nil {
			return mod.Memory()
		}
	default:
	}
	return MemoryStats{}
}

// Memory sums the budgets and use of every loaded module.
func (h *Host) Memory() MemoryStats {
	h.mu.Lock()
	all := make([]*Adapter, 0, len(h.adapters))
	for _, a := range h.adapters {
		all = append(all, a)
	}
	h.mu.Unlock()
	var sum MemoryStats
	for _, a := range all {
		m := a.Memory()
		sum.BudgetBytes += m.BudgetBytes
		sum.ShareBytes += m.ShareBytes
		sum.PooledBytes += m.PooledBytes
		sum.CommittedBytes += m.CommittedBytes
		sum.PeakBytes += m.PeakBytes
	}
	return sum
}
