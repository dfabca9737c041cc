package sdk

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"
)

type fake struct {
	Unimplemented
	gotAcct Account
	gotSpec CreateSpec
	gotID   string
	dl      time.Time
}

func (f *fake) Describe(context.Context) (Info, error) {
	return Info{Name: "x", Version: "1.0.0", Capabilities: &Capabilities{List: true}}, nil
}

func (f *fake) List(ctx context.Context, acct Account) ([]Box, error) {
	f.gotAcct = acct
	f.dl, _ = ctx.Deadline()
	if acct.Config["fail"] == "rate" {
		return nil, RateLimitedError(1500*time.Millisecond, "slow down %d", 1)
	}
	if acct.Config["fail"] == "panic" {
		panic("boom")
	}
	return []Box{{ID: "b1", State: Paused, PausedAt: time.Date(2025, 1, 2, 3, 4, 5, 0, time.FixedZone("x", 3600)), Size: &Size{Bytes: 5, Source: SizeUsed}}, {ID: "b2"}}, nil
}

func (f *fake) Create(_ context.Context, _ Account, spec CreateSpec) (Box, error) {
	f.gotSpec = spec
	return Box{ID: "new", State: Creating, Labels: spec.Labels}, nil
}

func (f *fake) Delete(_ context.Context, _ Account, id string) error { f.gotID = id; return nil }

func TestDispatch(t *testing.T) {
	f := &fake{}
	Register(f)
	defer Register(nil)

	out := Dispatch("describe", []byte(`{"deadline_unix_ms":1}`))
	if string(out) != `{"ok":{"name":"x","version":"1.0.0","capabilities":{"list":true,"last_activity":false,"suspend":false,"suspend_keeps_files":false,"suspend_keeps_memory":false,"resume_same_identity":false,"delete":false,"native_idle_pause":false,"native_paused_ttl":false}}}` {
		t.Fatalf("%s", out)
	}

	out = Dispatch("list", []byte(`{"deadline_unix_ms":1700000000000,"account":{"id":"acc","config":{"region":"eu"}}}`))
	if string(out) != `{"ok":{"boxes":[{"id":"b1","state":"paused","paused_at":"2025-01-02T02:04:05Z","size":{"bytes":5,"source":"provider_api:used"}},{"id":"b2","state":"unknown"}]}}` {
		t.Fatalf("%s", out)
	}
	if f.gotAcct.ID != "acc" || f.gotAcct.Config["region"] != "eu" || f.dl.UnixMilli() != 1700000000000 {
		t.Fatalf("%+v %v", f.gotAcct, f.dl)
	}

	out = Dispatch("create", []byte(`{"account":{"id":"a","config":{}},"spec":{"workspace_id":"ws","name":"n","lifecycle":{"idle_pause_after_seconds":60},"options":{"image":"i"},"labels":{"companion.workspace":"ws"}}}`))
	if f.gotSpec.Lifecycle.IdlePauseAfter != time.Minute || f.gotSpec.Options["image"] != "i" || f.gotSpec.Labels[LabelWorkspace] != "ws" {
		t.Fatalf("%+v", f.gotSpec)
	}
	if !strings.Contains(string(out), `"labels":{"companion.workspace":"ws"}`) {
		t.Fatalf("%s", out)
	}

	if out := Dispatch("delete", []byte(`{"box_id":"b9"}`)); string(out) != `{"ok":{}}` || f.gotID != "b9" {
		t.Fatalf("%s %q", out, f.gotID)
	}
	if out := Dispatch("suspend", []byte(`{"box_id":"b9"}`)); string(out) != `{"error":{"kind":"invalid","message":"this provider does not support suspend"}}` {
		t.Fatalf("%s", out)
	}
	if out := Dispatch("list", []byte(`{"account":{"id":"a","config":{"fail":"rate"}}}`)); string(out) != `{"error":{"kind":"rate_limited","message":"slow down 1","retry_after":1.5}}` {
		t.Fatalf("%s", out)
	}
	if out := Dispatch("list", []byte(`{"account":{"id":"a","config":{"fail":"panic"}}}`)); !strings.Contains(string(out), `"kind":"internal","message":"list panicked: boom"`) {
		t.Fatalf("%s", out)
	}
	if out := Dispatch("list", []byte(`{`)); !strings.Contains(string(out), `"kind":"invalid"`) {
		t.Fatalf("%s", out)
	}
}

func TestDispatchWithoutRegister(t *testing.T) {
	Register(nil)
	out := Dispatch("list", nil)
	var env struct{ Error errorJSON }
	if err := json.Unmarshal(out, &env); err != nil || env.Error.Kind != Internal || !strings.Contains(env.Error.Message, "sdk.Register") {
		t.Fatalf("%s", out)
	}
}

func TestResponseErr(t *testing.T) {
	now := time.Now()
	cases := []struct {
		status int
		hdr    map[string]string
		body   string
		kind   Kind
		msg    string
		retry  time.Duration
	}{
		{200, nil, "", "", "", 0},
		{302, nil, "", "", "", 0},
		{400, nil, `{"message":"bad field"}`, Invalid, "HTTP 400: bad field", 0},
		{401, nil, `{"error":"nope"}`, Unauthorized, "HTTP 401: nope", 0},
		{403, nil, `{"error":{"message":"denied"}}`, Unauthorized, "HTTP 403: denied", 0},
		{404, nil, `not json`, NotFound, "HTTP 404", 0},
		{409, nil, ``, Conflict, "HTTP 409", 0},
		{429, map[string]string{"Retry-After": "12"}, ``, RateLimited, "HTTP 429", 12 * time.Second},
		{503, map[string]string{"Retry-After": now.Add(time.Minute).UTC().Format(httpTime)}, ``, Unavailable, "HTTP 503", time.Minute},
		{500, nil, `{"detail":"` + strings.Repeat("x", 300) + `"}`, Unavailable, "…", 0},
	}
	for _, c := range cases {
		r := &Response{Status: c.status, Headers: c.hdr, Body: []byte(c.body)}
		err := r.Err()
		if c.kind == "" {
			if err != nil {
				t.Fatalf("%d: %v", c.status, err)
			}
			continue
		}
		e, ok := err.(*Error)
		if !ok || e.Kind != c.kind || !strings.Contains(e.Message, c.msg) {
			t.Fatalf("%d: %v", c.status, err)
		}
		if d := e.RetryAfter - c.retry; d < -2*time.Second || d > 2*time.Second {
			t.Fatalf("%d: retry after %v", c.status, e.RetryAfter)
		}
	}
}

func TestHeaderLookup(t *testing.T) {
	r := &Response{Headers: map[string]string{"Content-Type": "a", "X-Request-Id": "b"}}
	if r.Header("content-type") != "a" || r.Header("x-request-id") != "b" || r.Header("X-REQUEST-ID") != "b" {
		t.Fatal("canonical lookup")
	}
}

func TestHTTPOutsideTheHost(t *testing.T) {
	_, err := HTTP(context.Background()).Do(Request{Upstream: "api", Path: "/"})
	if e, ok := err.(*Error); !ok || e.Kind != Unavailable || !e.FromHost {
		t.Fatalf("%v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := HTTP(ctx).Do(Request{Upstream: "api", Path: "/"}); err == nil || !strings.Contains(err.Error(), "deadline") {
		t.Fatalf("%v", err)
	}
}
