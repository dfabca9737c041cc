package api

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/canvasapp/companion/providers/wasm/sdk"
)

func TestErrorFromStatuses(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	cases := []struct {
		status int
		body   string
		kind   sdk.Kind
		msg    string
	}{
		{401, `{"statusCode":401,"error":"Unauthorized","message":"Invalid API key"}`, sdk.Unauthorized, "refused the account's API token (HTTP 401: Invalid API key)"},
		{403, `{"id":"forbidden","message":"You are not authorized","request_id":"r"}`, sdk.Unauthorized, "You are not authorized"},
		{404, `{"code":404,"message":"Sandbox \"x\" doesn't exist"}`, sdk.NotFound, `Sandbox "x" doesn't exist`},
		{410, ``, sdk.NotFound, "HTTP 410"},
		{409, `{"error":{"code":"FAILED_PRECONDITION","message":"session is PAUSED"}}`, sdk.Conflict, "session is PAUSED"},
		{423, `{"error":{"code":"LOCKED","message":"locked by staff"}}`, sdk.Conflict, "locked by staff"},
		{429, `{"statusCode":429,"message":"Rate limit exceeded","error":"Too Many Requests"}`, sdk.RateLimited, "Rate limit exceeded"},
		{500, `not json`, sdk.Unavailable, "HTTP 500"},
		{504, `{"message":"gateway timeout"}`, sdk.Unavailable, "gateway timeout"},
		{408, ``, sdk.Unavailable, "HTTP 408"},
		{501, `{"error":{"code":"UNIMPLEMENTED","message":"pause is not available on docker substrates"}}`, sdk.Invalid, "does not support"},
		{400, `{"statusCode":400,"message":["autoStopInterval must not be less than 0","name must be a string"],"error":"Bad Request"}`, sdk.Invalid, "autoStopInterval must not be less than 0; name must be a string"},
		{422, `{"message":"Pausing is not supported for this sandbox"}`, sdk.Invalid, "Pausing is not supported"},
	}
	for _, c := range cases {
		e := ErrorFrom("Acme", &sdk.Response{Status: c.status, Body: []byte(c.body), Headers: map[string]string{}}, now)
		if e.Kind != c.kind || !strings.Contains(e.Message, c.msg) || !strings.HasPrefix(e.Message, "Acme") {
			t.Errorf("%d %s: got %s %q", c.status, c.body, e.Kind, e.Message)
		}
	}
}

func TestRetryAfterReadsEveryShape(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	cases := []struct {
		name string
		hdr  map[string]string
		want time.Duration
	}{
		{"plain seconds", map[string]string{"Retry-After": "7"}, 7 * time.Second},
		{"http date", map[string]string{"Retry-After": now.Add(90 * time.Second).Format("Mon, 02 Jan 2006 15:04:05 GMT")}, 90 * time.Second},
		{"daytona per throttler, longest wins", map[string]string{"Retry-After-Sandbox-Create": "12", "Retry-After-Authenticated": "3"}, 12 * time.Second},
		{"daytona reset only", map[string]string{"X-Ratelimit-Reset-Sandbox-Lifecycle": "20"}, 20 * time.Second},
		{"e2b reset seconds", map[string]string{"Ratelimit-Reset": "5"}, 5 * time.Second},
		{"digitalocean reset epoch", map[string]string{"Ratelimit-Reset": fmt.Sprint(now.Add(40 * time.Second).Unix())}, 40 * time.Second},
		{"epoch in the past", map[string]string{"Ratelimit-Reset": fmt.Sprint(now.Add(-time.Minute).Unix())}, 0},
		{"Retry-After beats the rest", map[string]string{"Retry-After": "2", "Retry-After-Sandbox-Create": "30"}, 2 * time.Second},
		{"garbage", map[string]string{"Retry-After": "soon", "Ratelimit-Reset": "x"}, 0},
		{"nothing", nil, 0},
	}
	for _, c := range cases {
		if got := RetryAfter(&sdk.Response{Status: 429, Headers: c.hdr}, now); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
	e := ErrorFrom("Acme", &sdk.Response{Status: 429, Headers: map[string]string{"Retry-After-Sandbox-Create": "4"}}, now)
	if e.Kind != sdk.RateLimited || e.RetryAfter != 4*time.Second {
		t.Fatalf("%+v", e)
	}
}

func TestDetailAndCode(t *testing.T) {
	long := strings.Repeat("é", 300)
	if d := Detail([]byte(`{"message":"` + long + `"}`)); len(d) > 210 || !strings.HasSuffix(d, "…") || !json.Valid([]byte(`"`+d+`"`)) {
		t.Fatalf("clipped detail %q", d)
	}
	if d := Detail([]byte(`{"error":"Not Found","message":"  spaced\n out  "}`)); d != "spaced out" {
		t.Fatalf("%q", d)
	}
	if d := Detail([]byte(`[1,2]`)); d != "" {
		t.Fatalf("%q", d)
	}
	for body, want := range map[string]string{
		`{"statusCode":400,"code":"SANDBOX_STATE_ERROR"}`:    "SANDBOX_STATE_ERROR",
		`{"error":{"code":"NOT_FOUND","message":"x"}}`:       "NOT_FOUND",
		`{"id":"not_found","message":"x","request_id":"r"}`:  "not_found",
		`{"code":404,"message":"numeric codes are not ids"}`: "",
		`nope`: "",
	} {
		if got := Code([]byte(body)); got != want {
			t.Errorf("Code(%s) = %q, want %q", body, got, want)
		}
	}
}

func TestTimeIsTolerant(t *testing.T) {
	var v struct{ A, B, C, D, E Time }
	err := json.Unmarshal([]byte(`{"A":"2026-01-02T03:04:05.678Z","B":"2026-01-02T03:04:05+02:00","C":null,"D":"","E":"yesterday"}`), &v)
	if err != nil {
		t.Fatal(err)
	}
	if v.A.Nanosecond() != 678000000 || v.B.Hour() != 1 || v.B.Location() != time.UTC || !v.C.IsZero() || !v.D.IsZero() || !v.E.IsZero() {
		t.Fatalf("%+v", v)
	}
}

func TestLabelsKeepCompanionsOwn(t *testing.T) {
	in := map[string]string{sdk.LabelWorkspace: "ws_1", LabelName: "n", "huge": strings.Repeat("x", 5000)}
	for i := range 100 {
		in[fmt.Sprintf("a%03d", i)] = "v"
	}
	out := Labels(in)
	if len(out) != 64 || out[sdk.LabelWorkspace] != "ws_1" || out[LabelName] != "n" || out["huge"] != "" || out["a000"] != "v" {
		t.Fatalf("%d labels: ws=%q", len(out), out[sdk.LabelWorkspace])
	}
	if Labels(nil) != nil {
		t.Fatal("nil in, nil out")
	}
	got := CreateLabels(sdk.CreateSpec{WorkspaceID: "ws_2", Name: "x", Labels: map[string]string{"k": "v"}})
	if got[sdk.LabelWorkspace] != "ws_2" || got[LabelName] != "x" || got["k"] != "v" {
		t.Fatalf("%v", got)
	}
}

func TestRounding(t *testing.T) {
	if CeilMinutes(61*time.Second) != 2 || CeilMinutes(time.Minute) != 1 || CeilMinutes(0) != 0 || CeilSeconds(1500*time.Millisecond) != 2 {
		t.Fatal("rounding")
	}
}

func TestCheckOptions(t *testing.T) {
	if err := CheckOptions(map[string]string{"a": "1"}, "a", "b"); err != nil {
		t.Fatal(err)
	}
	err := CheckOptions(map[string]string{"c": "1"}, "a", "b")
	if !IsKind(err, sdk.Invalid) || !strings.Contains(err.Error(), `"c"`) || !strings.Contains(err.Error(), "a, b") {
		t.Fatalf("%v", err)
	}
}
