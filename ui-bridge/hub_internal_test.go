package uibridge

// clientCount is the number of attached clients. Only tests ask; it lives
// here so the server carries no code that nothing calls.
func (h *hub) clientCount() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, set := range h.clients {
		n += len(set)
	}
	return n
}
