package db_test

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/canvasapp/companion/core"
)

func TestAccountRoundTrip(t *testing.T) {
	ctx := context.Background()
	s, path := openTemp(t)
	in := core.Account{
		ID:          "acc_1",
		Owner:       "user_1",
		Provider:    "daytona",
		Label:       "work",
		Config:      map[string]string{"region": "eu", "base_url": "https://example.test/api"},
		Credentials: []string{"api_key", "org-id"},
		CreatedAt:   time.Date(2025, 2, 3, 4, 5, 6, 7, time.UTC),
	}
	if err := s.PutAccount(ctx, in); err != nil {
		t.Fatal(err)
	}
	bare := core.Account{ID: "acc_0", Provider: "docker", CreatedAt: in.CreatedAt.Add(-time.Hour)}
	if err := s.PutAccount(ctx, bare); err != nil {
		t.Fatal(err)
	}
	empty := core.Account{ID: "acc_2", Provider: "docker", Config: map[string]string{}, Credentials: []string{}, CreatedAt: in.CreatedAt.Add(time.Hour)}
	if err := s.PutAccount(ctx, empty); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s = openAt(t, path)
	defer s.Close()

	got, err := s.GetAccount(ctx, "acc_1")
	if err != nil || !reflect.DeepEqual(got, in) {
		t.Fatalf("GetAccount = %+v, %v; want %+v", got, err, in)
	}
	list, err := s.ListAccounts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if want := []core.Account{bare, in, empty}; !reflect.DeepEqual(list, want) {
		t.Fatalf("ListAccounts =\n%#v\nwant (oldest first, nil and empty kept apart)\n%#v", list, want)
	}
}

func TestPutAccountReplaces(t *testing.T) {
	ctx := context.Background()
	s, _ := openTemp(t)
	a := core.Account{ID: "acc_1", Provider: "e2b", Label: "old", Config: map[string]string{"x": "1"}}
	if err := s.PutAccount(ctx, a); err != nil {
		t.Fatal(err)
	}
	a.Label, a.Config = "new", nil
	if err := s.PutAccount(ctx, a); err != nil {
		t.Fatal(err)
	}
	got, _ := s.GetAccount(ctx, "acc_1")
	if got.Label != "new" || got.Config != nil {
		t.Fatalf("after replace: %+v", got)
	}
}

func TestAccountErrors(t *testing.T) {
	ctx := context.Background()
	s, _ := openTemp(t)
	_, err := s.GetAccount(ctx, "acc_none")
	wantKind(t, err, core.KindNotFound)
	wantKind(t, s.DeleteAccount(ctx, "acc_none"), core.KindNotFound)
	wantKind(t, s.PutAccount(ctx, core.Account{}), core.KindInvalid)

	// Something that looks like a secret value rather than a name is not
	// written to disk.
	for _, bad := range []string{"", "Bearer abc.def", "ghp/" + "x", string(make([]byte, 65))} {
		err := s.PutAccount(ctx, core.Account{ID: "acc_x", Provider: "p", Credentials: []string{bad}})
		wantKind(t, err, core.KindInvalid)
	}
	if _, err := s.GetAccount(ctx, "acc_x"); !core.IsKind(err, core.KindNotFound) {
		t.Fatalf("refused account was stored: %v", err)
	}
}

func TestDeleteAccount(t *testing.T) {
	ctx := context.Background()
	s, _ := openTemp(t)
	if err := s.PutAccount(ctx, core.Account{ID: "acc_1", Provider: "docker"}); err != nil {
		t.Fatal(err)
	}
	// A workspace (or tombstone) of the account does not block its removal.
	save(t, s, core.Workspace{ID: "ws_1", AccountID: "acc_1", Removed: true})
	if err := s.DeleteAccount(ctx, "acc_1"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetAccount(ctx, "acc_1"); !core.IsKind(err, core.KindNotFound) {
		t.Fatalf("deleted account still there: %v", err)
	}
	if ws, err := s.GetWorkspace(ctx, "ws_1"); err != nil || ws.AccountID != "acc_1" {
		t.Fatalf("tombstone of the deleted account: %+v, %v", ws, err)
	}
	wantKind(t, s.DeleteAccount(ctx, "acc_1"), core.KindNotFound)
}
