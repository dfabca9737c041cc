package core

import (
	"sort"
	"sync"
)

// Registry maps provider names to adapters. Adapters can be added and
// removed while companion runs (Wasm modules are installed at runtime).
// The zero value is an empty registry ready to use.
type Registry struct {
	mu        sync.RWMutex
	providers map[string]Provider
}

// Register adds or replaces the adapter for name.
func (r *Registry) Register(name string, p Provider) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.providers == nil {
		r.providers = map[string]Provider{}
	}
	r.providers[name] = p
}

// Unregister removes the adapter for name.
func (r *Registry) Unregister(name string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.providers, name)
}

// Lookup returns the adapter for name.
func (r *Registry) Lookup(name string) (Provider, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	p, ok := r.providers[name]
	return p, ok
}

// Names returns the registered names, sorted.
func (r *Registry) Names() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	names := make([]string, 0, len(r.providers))
	for n := range r.providers {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}
