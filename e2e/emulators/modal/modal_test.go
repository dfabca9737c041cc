package modal_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/canvasapp/companion/e2e/emulators/emulator"
	modalemu "github.com/canvasapp/companion/e2e/emulators/modal"
	modalsdk "github.com/modal-labs/modal-client/go"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// start runs the emulator and returns an SDK client pointed at it the way
// the reference says (MODAL_SERVER_URL), with secret as the token secret.
func start(t *testing.T, secret string) (*modalemu.Server, *modalsdk.Client) {
	t.Helper()
	emu := modalemu.New(modalemu.Options{TokenID: "ak-id", TokenSecret: "as-secret",
		Clock: emulator.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))})
	if err := emu.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(emu.Close)
	t.Setenv("MODAL_SERVER_URL", emu.URL())
	t.Setenv("MODAL_SANDBOX_V2", "0")
	t.Setenv("MODAL_CONFIG_PATH", t.TempDir()+"/none.toml")
	zero := time.Duration(0)
	c, err := modalsdk.NewClientWithOptions(&modalsdk.ClientParams{TokenID: "ak-id", TokenSecret: secret, MaxThrottleWait: &zero})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return emu, c
}

func create(t *testing.T, c *modalsdk.Client, tags map[string]string, idle time.Duration) *modalsdk.Sandbox {
	t.Helper()
	ctx := context.Background()
	app, err := c.Apps.FromName(ctx, "emu", &modalsdk.AppFromNameParams{CreateIfMissing: true})
	if err != nil {
		t.Fatal(err)
	}
	sb, err := c.Sandboxes.Create(ctx, app, c.Images.FromRegistry("alpine:3", nil), &modalsdk.SandboxCreateParams{
		Timeout: time.Hour, IdleTimeout: idle, EncryptedPorts: []int{8000}, Tags: tags, Env: map[string]string{"K": "v"}})
	if err != nil {
		t.Fatal(err)
	}
	return sb
}

func TestWrongTokenIsUnauthenticated(t *testing.T) {
	_, c := start(t, "as-wrong")
	_, err := c.Apps.FromName(context.Background(), "emu", &modalsdk.AppFromNameParams{CreateIfMissing: true})
	if status.Code(errors.Unwrap(err)) != codes.Unauthenticated && status.Code(err) != codes.Unauthenticated {
		t.Fatalf("wrong token: %v", err)
	}
}

// TestLifecycle: create, list by tags across pages, tags on an ended
// sandbox, idle timeout and timeout on the clock, a snapshot's TTL.
func TestLifecycle(t *testing.T) {
	emu, c := start(t, "as-secret")
	ctx := context.Background()
	var ids []string
	for range 3 {
		ids = append(ids, create(t, c, map[string]string{"who": "us"}, 0).SandboxID)
		emu.Clock().Advance(time.Second)
	}
	other := create(t, c, map[string]string{"who": "them"}, 10*time.Minute)
	seq, err := c.Sandboxes.List(ctx, &modalsdk.SandboxListParams{Tags: map[string]string{"who": "us"}})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for sb, err := range seq {
		if err != nil {
			t.Fatal(err)
		}
		if sb.SandboxID == other.SandboxID {
			t.Fatal("list ignored the tag filter")
		}
		n++
	}
	if n != 3 {
		t.Fatalf("listed %d of our 3 sandboxes (pages of 2)", n)
	}
	if sb, _ := emu.Sandbox(ids[0]); sb.Env["K"] != "v" {
		t.Fatalf("env through the ephemeral secret: %+v", sb.Env)
	}

	sb, _ := c.Sandboxes.FromID(ctx, ids[0], nil)
	img, err := sb.SnapshotFilesystem(ctx, &modalsdk.SandboxSnapshotFilesystemParams{TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sb.Terminate(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if code, err := sb.Poll(ctx, nil); err != nil || code == nil {
		t.Fatalf("poll of a terminated sandbox: %v %v", code, err)
	}
	if tags, err := sb.GetTags(ctx, nil); err != nil || tags["who"] != "us" {
		t.Fatalf("tags of an ended sandbox: %v %v", tags, err)
	}

	emu.Clock().Advance(11 * time.Minute) // past the other's idle timeout
	if s, _ := emu.Sandbox(other.SandboxID); s.State != modalemu.StateTerminated || s.Result.String() != "GENERIC_STATUS_IDLE_TIMEOUT" {
		t.Fatalf("idle sandbox: %s %s", s.State, s.Result)
	}
	if _, err := c.Images.FromID(ctx, img.ImageID, nil); err != nil {
		t.Fatalf("snapshot within its TTL: %v", err)
	}
	emu.Clock().Advance(time.Hour) // past the snapshot's TTL and the others' timeout
	var nf modalsdk.NotFoundError
	if _, err := c.Images.FromID(ctx, img.ImageID, nil); !errors.As(err, &nf) {
		t.Fatalf("expired snapshot: %v", err)
	}
	if s, _ := emu.Sandbox(ids[1]); s.Result.String() != "GENERIC_STATUS_TIMEOUT" {
		t.Fatalf("sandbox past its timeout: %s %s", s.State, s.Result)
	}
	if _, err := c.Sandboxes.FromID(ctx, "sb-AAAAAAAAAAAAAAAAAAAAAA", nil); err != nil {
		t.Fatal(err) // no RPC
	}
	missing, _ := c.Sandboxes.FromID(ctx, "sb-AAAAAAAAAAAAAAAAAAAAAA", nil)
	if _, err := missing.Poll(ctx, nil); status.Code(err) != codes.NotFound {
		t.Fatalf("poll of a sandbox that never existed: %v", err)
	}
}
