package db_test

import (
	"bytes"
	"context"
	"reflect"
	"testing"

	"github.com/canvasapp/companion/core"
)

func TestModulePins(t *testing.T) {
	ctx := context.Background()
	s, path := openTemp(t)

	names, err := s.ListModulePins(ctx)
	if err != nil || len(names) != 0 {
		t.Fatalf("ListModulePins on a new store = %v, %v", names, err)
	}
	manifest := []byte(`{"name":"e2b","hosts":["api.e2b.dev"]}`)
	for _, p := range []struct{ name, sum string }{{"e2b", "aa"}, {"daytona", "bb"}, {"Zeta", "cc"}} {
		if err := s.PutModulePin(ctx, p.name, p.sum, manifest); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.PutModulePin(ctx, "e2b", "dd", []byte(`{"v":2}`)); err != nil { // replace
		t.Fatal(err)
	}
	s.Close()
	s = openAt(t, path)
	defer s.Close()

	sum, m, err := s.ModulePin(ctx, "e2b")
	if err != nil || sum != "dd" || !bytes.Equal(m, []byte(`{"v":2}`)) {
		t.Fatalf("ModulePin(e2b) = %q, %q, %v", sum, m, err)
	}
	names, err = s.ListModulePins(ctx)
	if err != nil || !reflect.DeepEqual(names, []string{"Zeta", "daytona", "e2b"}) {
		t.Fatalf("ListModulePins = %v, %v", names, err)
	}

	if err := s.DeleteModulePin(ctx, "daytona"); err != nil {
		t.Fatal(err)
	}
	_, _, err = s.ModulePin(ctx, "daytona")
	wantKind(t, err, core.KindNotFound)
	wantKind(t, s.DeleteModulePin(ctx, "daytona"), core.KindNotFound)
	wantKind(t, s.PutModulePin(ctx, "", "aa", nil), core.KindInvalid)
	wantKind(t, s.PutModulePin(ctx, "x", "", nil), core.KindInvalid)

	if err := s.PutModulePin(ctx, "bare", "ee", nil); err != nil {
		t.Fatal(err)
	}
	if _, m, err := s.ModulePin(ctx, "bare"); err != nil || len(m) != 0 {
		t.Fatalf("nil manifest: %q, %v", m, err)
	}
}
