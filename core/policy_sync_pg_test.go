package core_test

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/canvasapp/companion/core"
	"github.com/canvasapp/companion/db"
	"github.com/canvasapp/companion/internal/testsupport"
	"github.com/canvasapp/companion/internal/testsupport/pgtest"
)

// policyReplicas starts two serve-mode services on one PostgreSQL
// database with alice's account acc-p; deafB makes B's store hear
// nothing of A (no change feed, no relay), as after lost notifications.
func policyReplicas(t *testing.T, deafB bool) (a, b *core.Service, bs *db.PGStore) {
	t.Helper()
	ctx := context.Background()
	url := pgtest.NewDatabase(t)
	var svcs [2]*core.Service
	for i := range svcs {
		st := openPG(t, url)
		if i == 0 {
			if err := st.PutAccount(ctx, core.Account{ID: "acc-p", Owner: "alice", Provider: "flaky", Label: "p"}); err != nil {
				t.Fatal(err)
			}
		}
		var store core.Store = st
		if i == 1 {
			bs = st
			if deafB {
				store = deafStore{st, st}
			}
		}
		reg := &core.Registry{}
		reg.Register("flaky", &flakyProvider{})
		svc := newTestService(t, ctx, core.Config{Store: store, Retention: st, Providers: reg, ScheduledDeletion: true,
			Logger: slog.New(slog.NewTextHandler(&testsupport.SyncBuffer{}, nil))})
		svcs[i] = svc
	}
	return svcs[0], svcs[1], bs
}

// pausedWorkspace saves a workspace of acc-p paused since pausedAt
// through svc.
func pausedWorkspace(t *testing.T, svc *core.Service, id string, pausedAt time.Time) {
	t.Helper()
	if _, err := svc.Feed().Save(context.Background(), core.Workspace{ID: id, Owner: "alice", Name: id, AccountID: "acc-p", Provider: "flaky",
		State: core.StatePaused, StopReason: core.StopCompanion, BoxID: "box-" + id, PausedAt: pausedAt, CreatedAt: pausedAt.Add(-time.Hour)}); err != nil {
		t.Fatal(err)
	}
}

// storedDeleteAfter is a workspace's delete_after in the database.
func storedDeleteAfter(t *testing.T, st *db.PGStore, id string) time.Time {
	t.Helper()
	ws, err := st.GetWorkspace(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return ws.DeleteAfter
}

// TestPolicyChangeReachesTheOtherReplica: a policy enabled through
// replica A is in replica B's memory at once (announced, not waiting for
// B's retention tick), so B's next save of the account's workspace keeps
// the schedule A derived; a later change and disabling follow the same
// way, and B's saves keep following them.
func TestPolicyChangeReachesTheOtherReplica(t *testing.T) {
	ctx := context.Background()
	a, b, bs := policyReplicas(t, false)
	pausedAt := time.Now().UTC().Add(-time.Hour).Truncate(time.Second)
	pausedWorkspace(t, a, "ws_p1", pausedAt)

	policies := []core.RetentionPolicy{
		{AccountID: "acc-p", Enabled: true, PausedFor: 3 * time.Hour, WarnBefore: time.Hour},
		{AccountID: "acc-p", Enabled: true, PausedFor: 5 * time.Hour, WarnBefore: time.Hour},
		{AccountID: "acc-p", Enabled: false, WarnBefore: time.Hour},
	}
	for i, p := range policies {
		if _, err := a.SetRetentionPolicy(ctx, "alice", p); err != nil {
			t.Fatal(err)
		}
		want := time.Time{}
		if p.Enabled {
			want = pausedAt.Add(p.PausedFor)
		}
		// A's pass, or B's if B holds the workspace at that moment for its
		// own pass after the announcement.
		testsupport.Until(t, 20*time.Second, fmt.Sprintf("delete_after of policy %d stored", i), func() bool {
			return storedDeleteAfter(t, bs, "ws_p1").Equal(want)
		})
		testsupport.Until(t, 20*time.Second, fmt.Sprintf("B holds policy %d without a retention tick", i), func() bool {
			got, err := b.RetentionPolicyOf(ctx, "alice", "acc-p")
			return err == nil && got.Enabled == p.Enabled && got.PausedFor == p.PausedFor
		})
		// B's save of something else (a size the reconciler measured,
		// say) derives delete_after from the policy in force.
		cur, err := bs.GetWorkspace(ctx, "ws_p1")
		if err != nil {
			t.Fatal(err)
		}
		cur.Size = &core.Size{Bytes: int64(1000 + i), Source: "provider", At: time.Now().UTC()}
		saved, err := b.Feed().Save(ctx, cur)
		if err != nil {
			t.Fatal(err)
		}
		if !saved.DeleteAfter.Equal(want) || !storedDeleteAfter(t, bs, "ws_p1").Equal(want) {
			t.Fatalf("policy %d: B's save wrote delete_after %v, want %v", i, saved.DeleteAfter, want)
		}
	}
}

// TestStaleReplicaConfirmsThePolicyBeforeItsSave: replica B hears
// nothing of A (the announcement is lost), and no tick has run on B. A
// enables a policy; B's next save of the workspace would clear the
// schedule A derived: it reads the account's policy from the store first
// and keeps it. B then has the policy in memory for the account's other
// workspaces too.
func TestStaleReplicaConfirmsThePolicyBeforeItsSave(t *testing.T) {
	ctx := context.Background()
	a, b, bs := policyReplicas(t, true)
	pausedAt := time.Now().UTC().Add(-time.Hour).Truncate(time.Second)
	pausedWorkspace(t, a, "ws_s1", pausedAt)
	if _, err := a.SetRetentionPolicy(ctx, "alice", core.RetentionPolicy{AccountID: "acc-p", Enabled: true, PausedFor: 2 * time.Hour, WarnBefore: time.Hour}); err != nil {
		t.Fatal(err)
	}
	want := pausedAt.Add(2 * time.Hour)
	if got, _ := b.RetentionPolicyOf(ctx, "alice", "acc-p"); got.Enabled {
		t.Fatal("B already holds the policy; the test needs it stale")
	}
	cur, err := bs.GetWorkspace(ctx, "ws_s1")
	if err != nil {
		t.Fatal(err)
	}
	if !cur.DeleteAfter.Equal(want) {
		t.Fatalf("A stored delete_after %v, want %v", cur.DeleteAfter, want)
	}
	cur.Size = &core.Size{Bytes: 42, Source: "provider", At: time.Now().UTC()}
	if _, err := b.Feed().Save(ctx, cur); err != nil {
		t.Fatal(err)
	}
	if got := storedDeleteAfter(t, bs, "ws_s1"); !got.Equal(want) {
		t.Fatalf("B's save left delete_after %v, want %v (A's schedule)", got, want)
	}
	if got, _ := b.RetentionPolicyOf(ctx, "alice", "acc-p"); !got.Enabled || got.PausedFor != 2*time.Hour {
		t.Fatalf("B's policy after its save: %+v, want A's", got)
	}
}

// TestBusyWorkspaceScheduledWhenItsActionEnds: a policy is enabled while
// the account's workspaces are busy (an action's last save came before
// the policy, its lock is still held): one on the replica that changes
// the policy, one on the other. Neither is scheduled while busy; each is
// once its action releases it, by the replica that ran the action, with
// no retention tick on either.
func TestBusyWorkspaceScheduledWhenItsActionEnds(t *testing.T) {
	ctx := context.Background()
	a, b, bs := policyReplicas(t, false)
	pausedAt := time.Now().UTC().Add(-time.Hour).Truncate(time.Second)
	pausedWorkspace(t, a, "ws_on_a", pausedAt)
	pausedWorkspace(t, b, "ws_on_b", pausedAt)
	unlockA, ok := a.LockForTest("ws_on_a")
	if !ok {
		t.Fatal("A could not take ws_on_a")
	}
	unlockB, ok := b.LockForTest("ws_on_b")
	if !ok {
		t.Fatal("B could not take ws_on_b")
	}
	if _, err := a.SetRetentionPolicy(ctx, "alice", core.RetentionPolicy{AccountID: "acc-p", Enabled: true, PausedFor: 2 * time.Hour, WarnBefore: time.Hour}); err != nil {
		t.Fatal(err)
	}
	want := pausedAt.Add(2 * time.Hour)
	testsupport.Until(t, 20*time.Second, "B holds the policy", func() bool {
		got, err := b.RetentionPolicyOf(ctx, "alice", "acc-p")
		return err == nil && got.Enabled
	})
	for _, id := range []string{"ws_on_a", "ws_on_b"} {
		if got := storedDeleteAfter(t, bs, id); !got.IsZero() {
			t.Fatalf("%s was scheduled (%v) while its action held it", id, got)
		}
	}
	unlockB()
	testsupport.Until(t, 20*time.Second, "ws_on_b scheduled once B's action ended", func() bool {
		return storedDeleteAfter(t, bs, "ws_on_b").Equal(want)
	})
	unlockA()
	testsupport.Until(t, 20*time.Second, "ws_on_a scheduled once A's action ended", func() bool {
		return storedDeleteAfter(t, bs, "ws_on_a").Equal(want)
	})
}

// TestRetentionDeletesOnlyUnderThePolicyInForce: a workspace's stored
// delete_after is earlier than the policy in force says (a replica with a
// stale policy saved it). The tick that finds it due re-checks it against
// the policy, neither warns about nor deletes it, and puts the schedule
// right.
func TestRetentionDeletesOnlyUnderThePolicyInForce(t *testing.T) {
	ctx := context.Background()
	a, b, bs := policyReplicas(t, false)
	// Only B runs: A would hear the policy's announcement and re-derive
	// the account in the background, putting the stale schedule below
	// right (or holding the workspace's lease) before B's tick looks.
	a.Close(ctx)
	if _, err := b.SetRetentionPolicy(ctx, "alice", core.RetentionPolicy{AccountID: "acc-p", Enabled: true, PausedFor: 10 * time.Hour, WarnBefore: time.Hour}); err != nil {
		t.Fatal(err)
	}
	pausedAt := time.Now().UTC().Add(-time.Hour).Truncate(time.Second)
	pausedWorkspace(t, b, "ws_early", pausedAt)
	ws, err := bs.GetWorkspace(ctx, "ws_early")
	if err != nil {
		t.Fatal(err)
	}
	want := pausedAt.Add(10 * time.Hour)
	if !ws.DeleteAfter.Equal(want) {
		t.Fatalf("delete_after %v, want %v", ws.DeleteAfter, want)
	}
	// What a replica still holding a one-hour policy would have written.
	ws.DeleteAfter = pausedAt.Add(time.Hour)
	if _, err := bs.SaveWorkspace(ctx, ws); err != nil {
		t.Fatal(err)
	}
	warned, stop := b.SubscribeNotices(8)
	defer stop()
	rep := b.RetentionTick(ctx, core.RetentionConfig{})
	if rep.Err != nil || rep.Started != 0 || rep.Warned != 0 || rep.BackedOff != 0 || rep.Skipped != 1 {
		t.Fatalf("tick: %+v; want the workspace skipped, nothing warned, started or backed off", rep)
	}
	select {
	case n := <-warned:
		t.Fatalf("warned about a delete the policy does not make: %+v", n)
	default:
	}
	if got := storedDeleteAfter(t, bs, "ws_early"); !got.Equal(want) {
		t.Fatalf("after the tick delete_after is %v, want %v (the policy in force)", got, want)
	}
}

// countingPolicies counts the reads of single accounts' policies.
type countingPolicies struct {
	core.RetentionStore
	reads atomic.Int64
}

func (c *countingPolicies) RetentionPolicy(ctx context.Context, accountID string) (core.RetentionPolicy, bool, error) {
	c.reads.Add(1)
	return c.RetentionStore.RetentionPolicy(ctx, accountID)
}

// TestPolicyChangeReadsThePolicyOnce: enabling a policy on an account of
// 40 paused workspaces (on PostgreSQL, where a save that moves
// delete_after first confirms the policy in the store) schedules every
// one of them without reading the policy again for each save: the pass
// follows the policy just written.
func TestPolicyChangeReadsThePolicyOnce(t *testing.T) {
	ctx := context.Background()
	st := openPG(t, pgtest.NewDatabase(t))
	if err := st.PutAccount(ctx, core.Account{ID: "acc-p", Owner: "alice", Provider: "flaky", Label: "p"}); err != nil {
		t.Fatal(err)
	}
	policies := &countingPolicies{RetentionStore: st}
	reg := &core.Registry{}
	reg.Register("flaky", &flakyProvider{})
	svc := newTestService(t, ctx, core.Config{Store: st, Retention: policies, Providers: reg, ScheduledDeletion: true,
		Logger: slog.New(slog.NewTextHandler(&testsupport.SyncBuffer{}, nil))})
	pausedAt := time.Now().UTC().Add(-time.Hour).Truncate(time.Second)
	const n = 40
	for i := range n {
		pausedWorkspace(t, svc, fmt.Sprintf("ws_c%02d", i), pausedAt)
	}
	before := policies.reads.Load()
	if _, err := svc.SetRetentionPolicy(ctx, "alice", core.RetentionPolicy{AccountID: "acc-p", Enabled: true, PausedFor: 2 * time.Hour, WarnBefore: time.Hour}); err != nil {
		t.Fatal(err)
	}
	reads := policies.reads.Load() - before
	want := pausedAt.Add(2 * time.Hour)
	for i := range n {
		if got := storedDeleteAfter(t, st, fmt.Sprintf("ws_c%02d", i)); !got.Equal(want) {
			t.Fatalf("ws_c%02d: delete_after %v, want %v", i, got, want)
		}
	}
	if reads > 1 {
		t.Fatalf("enabling the policy read it %d times for %d workspaces; want the pass to follow the policy it wrote", reads, n)
	}
}
