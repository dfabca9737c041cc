package uibridge

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/canvasapp/companion/core"
)

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

// TestNewEntriesEncodesEveryWorkspaceInOrder: encoding split across
// goroutines gives each workspace the entry encoding it alone would,
// in the list's order, for lists shorter and longer than one chunk.
func TestNewEntriesEncodesEveryWorkspaceInOrder(t *testing.T) {
	for _, n := range []int{0, 1, entryChunk - 1, entryChunk, 3*entryChunk + 7} {
		list := make([]core.Workspace, n)
		for i := range list {
			list[i] = core.Workspace{ID: fmt.Sprintf("ws_%05d", i), Name: fmt.Sprintf("w %d", i), Owner: "u", State: core.StateRunning}
		}
		got := newEntries(list)
		if len(got) != n {
			t.Fatalf("%d workspaces: %d entries", n, len(got))
		}
		for i, e := range got {
			want := newEntry(list[i])
			if e == nil || e.id != want.id || !bytes.Equal(e.json, want.json) || !bytes.Equal(e.row, want.row) {
				t.Fatalf("%d workspaces: entry %d is %+v, want %+v", n, i, e, want)
			}
		}
	}
}
