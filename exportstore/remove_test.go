package exportstore

import (
	"bytes"
	"context"
	"testing"
)

// TestRemoveTakesTheManifestFirst: a removed export no longer lists or
// opens, every one of its objects is gone, another export of the same
// workspace is untouched, and removing it again is no error.
func TestRemoveTakesTheManifestFirst(t *testing.T) {
	eachBackend(t, func(t *testing.T, b *backend) {
		s := b.open(t)
		ctx := context.Background()
		commit := func(id string) Ref {
			up, err := s.Begin("alice", "ws-r", id)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := up.Add(ctx, "workspace.tar.gz", bytes.NewReader(readAllT(t, gen(7, 1<<20)))); err != nil {
				t.Fatal(err)
			}
			ref, err := up.Commit(ctx, []byte(`{"version":1}`+"\n"))
			if err != nil {
				t.Fatal(err)
			}
			return ref
		}
		gone, kept := commit("exp-old"), commit("exp-new")
		n, err := s.Remove(ctx, gone)
		if err != nil || n < 1<<20 {
			t.Fatalf("remove: %d bytes, %v; want the export's bytes", n, err)
		}
		for _, name := range []string{ManifestName, "workspace.tar.gz"} {
			if b.raw(t, s.key(gone, name)) {
				t.Errorf("%s of the removed export is still in the store", name)
			}
		}
		if _, err := s.Open(ctx, gone, "workspace.tar.gz"); err == nil {
			t.Error("a removed export's file opened")
		} else {
			wantKind(t, err, ErrNotFound)
		}
		refs, err := s.List(ctx, "alice", "ws-r")
		if err != nil || len(refs) != 1 || refs[0] != kept {
			t.Fatalf("list after remove: %v, %v; want only %v", refs, err, kept)
		}
		if _, err := s.Remove(ctx, gone); err != nil {
			t.Fatalf("removing again: %v", err)
		}
		if err := s.Verify(ctx, kept, "workspace.tar.gz", 1<<20, ""); err == nil {
			t.Fatal("verify with an empty hash passed") // the other export still reads
		} else {
			wantKind(t, err, ErrMismatch)
		}
	})
}
