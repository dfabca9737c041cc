package uibridge

import (
	"context"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/canvasapp/companion/core"
)

// TestGoneExportsRoute: GET /v1/exports?gone=true lists the caller's
// exports whose workspace is gone, newest first, as the same wire exports
// as GET /v1/exports/{id} (what they were of included), paged with
// before and next_before; another user's never show, and anything but
// gone=true, a bad limit or a cursor that is not yours is 400.
func TestGoneExportsRoute(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.Authenticators = []Authenticator{headerAuth{}} })
	ctx := context.Background()
	as := func(user string) []string { return []string{"Authorization", "", "X-Test-User", user} }
	live := testWorkspace("still here")
	live.Owner = "alice"
	live = e.save(live)
	t0 := time.Date(2026, 4, 1, 8, 0, 0, 0, time.UTC)
	put := func(id, owner, ws string, m int, verified bool) {
		t.Helper()
		at := t0.Add(time.Duration(m) * time.Minute)
		r := core.ExportRecord{ID: id, WorkspaceID: ws, Owner: owner, WorkspaceName: "the " + ws, Provider: "docker",
			AccountID: "local-docker", CreatedAt: at, UpdatedAt: at, State: core.ExportFailed, Error: "box went away"}
		if verified {
			r.State, r.Error, r.Verified, r.Dir, r.Bytes, r.ArchiveSHA256 = core.ExportVerified, "", true, t.TempDir(), 5, "ab"
			r.Files = []core.ExportFile{{Name: "workspace.tar.gz", Kind: "archive", Format: "tar.gz", Bytes: 5, SHA256: "ab"}}
		}
		if err := e.st.PutExport(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	put("exp_live", "alice", live.ID, 1, true)
	put("exp_a1", "alice", "ws_gone", 2, false)
	put("exp_a2", "alice", "ws_gone", 3, true)
	put("exp_a3", "alice", "ws_other", 4, false)
	put("exp_b1", "bob", "ws_bobs", 5, true)

	type page struct {
		Exports    []Export `json:"exports"`
		NextBefore *string  `json:"next_before"`
	}
	get := func(user, query string) (page, []byte) {
		t.Helper()
		resp, body := e.do("GET", "/v1/exports"+query, "", as(user)...)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET /v1/exports%s as %s: %d %s", query, user, resp.StatusCode, body)
		}
		if cc := resp.Header.Get("Cache-Control"); cc != "no-store" {
			t.Errorf("Cache-Control %q, want no-store", cc)
		}
		return decode[page](t, body), body
	}
	ids := func(p page) []string {
		var out []string
		for _, x := range p.Exports {
			out = append(out, x.ID)
		}
		return out
	}

	all, raw := get("alice", "?gone=true")
	if !reflect.DeepEqual(ids(all), []string{"exp_a3", "exp_a2", "exp_a1"}) || all.NextBefore != nil || !strings.Contains(string(raw), `"next_before":null`) {
		t.Fatalf("alice's gone exports: %s", raw)
	}
	one := all.Exports[1]
	rec, err := e.svc.Export(ctx, "alice", "exp_a2")
	if err != nil {
		t.Fatal(err)
	}
	if want := toWireExport(rec); !reflect.DeepEqual(one, want) {
		t.Errorf("listed export %+v\nwant GET /v1/exports/{id}'s %+v", one, want)
	}
	for _, f := range []string{`"workspace_name":"the ws_gone"`, `"provider":"docker"`, `"account_id":"local-docker"`, `"restorable":true`,
		`"url":"/v1/exports/exp_a2/files/workspace.tar.gz"`} {
		if !strings.Contains(string(raw), f) {
			t.Errorf("the list lacks %s: %s", f, raw)
		}
	}

	first, _ := get("alice", "?gone=true&limit=2")
	if !reflect.DeepEqual(ids(first), []string{"exp_a3", "exp_a2"}) || first.NextBefore == nil || *first.NextBefore != "exp_a2" {
		t.Fatalf("first page of 2: %v next %v", ids(first), first.NextBefore)
	}
	rest, _ := get("alice", "?gone=true&limit=2&before="+*first.NextBefore)
	if !reflect.DeepEqual(ids(rest), []string{"exp_a1"}) || rest.NextBefore != nil {
		t.Fatalf("second page: %v next %v", ids(rest), rest.NextBefore)
	}
	if bobs, _ := get("bob", "?gone=true"); !reflect.DeepEqual(ids(bobs), []string{"exp_b1"}) {
		t.Errorf("bob's gone exports: %v", ids(bobs))
	}
	if none, raw := get("carol", "?gone=true"); none.Exports == nil || len(none.Exports) != 0 || none.NextBefore != nil {
		t.Errorf("carol's gone exports: %s, want an empty list", raw)
	}

	for _, q := range []string{"", "?gone=false", "?gone=maybe", "?gone=true&limit=0", "?gone=true&limit=501", "?gone=true&limit=x",
		"?gone=true&before=exp_b1", "?gone=true&before=exp_nope"} {
		resp, body := e.do("GET", "/v1/exports"+q, "", as("alice")...)
		d := e.expectError(resp, body, http.StatusBadRequest, "invalid")
		if q == "" && !strings.Contains(d.Message, "gone=true") {
			t.Errorf("without gone=true the error says %q; want it to name gone=true", d.Message)
		}
	}
	resp, body := e.do("GET", "/v1/exports?gone=true", "", "Authorization", "")
	e.expectError(resp, body, http.StatusUnauthorized, "unauthorized")
}
