// Package wire holds the JSON the host exchanges with a module (ABI.md is
// the normative description) and the conversions to and from core types.
package wire

import (
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/canvasapp/companion/core"
)

// Export names of ABI v1.
const (
	ExportABIVersion = "companion_abi_version"
	ExportAlloc      = "companion_alloc"
	ExportFree       = "companion_free"
	ExportMemory     = "memory"
)

// Ops and their exports.
const (
	OpDescribe = "describe"
	OpList     = "list"
	OpGet      = "get"
	OpCreate   = "create"
	OpSuspend  = "suspend"
	OpResume   = "resume"
	OpDelete   = "delete"
	// OpEndpoint is optional and newer than the first ABI v1 modules: a
	// module without its export still loads (ABI.md §5a).
	OpEndpoint = "endpoint"
)

// Ops lists every op; OpExport gives its export name.
var Ops = []string{OpDescribe, OpList, OpGet, OpCreate, OpSuspend, OpResume, OpDelete, OpEndpoint}

// OpExport is the export that implements op.
func OpExport(op string) string { return "companion_" + op }

// Host import namespace and functions.
const (
	ImportModule     = "companion"
	ImportHTTP       = "http_request"
	ImportHTTPResult = "http_result"
	WASIModule       = "wasi_snapshot_preview1"
)

// Account is what a module learns of an account: never its credentials.
type Account struct {
	ID     string            `json:"id"`
	Config map[string]string `json:"config"`
}

// Input is the JSON handed to every op.
type Input struct {
	// DeadlineUnixMS is when the host stops the call, in Unix milliseconds.
	DeadlineUnixMS int64       `json:"deadline_unix_ms"`
	Account        *Account    `json:"account,omitempty"`
	BoxID          string      `json:"box_id,omitempty"`
	Spec           *CreateSpec `json:"spec,omitempty"`
}

// CreateSpec mirrors core.CreateSpec.
type CreateSpec struct {
	WorkspaceID string            `json:"workspace_id"`
	Name        string            `json:"name"`
	Lifecycle   Lifecycle         `json:"lifecycle"`
	Options     map[string]string `json:"options"`
	Labels      map[string]string `json:"labels"`
	// AgentKey is the agent-server key companion generated (ABI.md §5);
	// omitted when empty, so ABI v1 modules see the input they always did.
	AgentKey string `json:"agent_key,omitempty"`
}

// Lifecycle mirrors core.Lifecycle in whole seconds (0 = provider default).
type Lifecycle struct {
	IdlePauseAfterSeconds int64 `json:"idle_pause_after_seconds,omitempty"`
	PausedTTLSeconds      int64 `json:"paused_ttl_seconds,omitempty"`
}

// Envelope is what every op returns: exactly one of OK and Error.
type Envelope struct {
	OK    json.RawMessage `json:"ok,omitempty"`
	Error *ErrorBody      `json:"error,omitempty"`
}

// ErrorBody is a failure reported by the module (or, inside an HTTP result,
// by the host).
type ErrorBody struct {
	Kind              string  `json:"kind"`
	Message           string  `json:"message"`
	RetryAfterSeconds float64 `json:"retry_after,omitempty"`
}

// Host-only error kind in HTTP results: the host refused the request under
// a sandbox rule; the instance is discarded after the call.
const KindForbidden = "forbidden"

// DescribeOut is the result of describe.
type DescribeOut struct {
	Name         string             `json:"name"`
	Version      string             `json:"version"`
	Capabilities *core.Capabilities `json:"capabilities,omitempty"`
}

// ListOut is the result of list.
type ListOut struct {
	Boxes []Box `json:"boxes"`
}

// BoxOut is the result of get, create, suspend and resume.
type BoxOut struct {
	Box *Box `json:"box"`
}

// Box mirrors core.Box. Times are RFC 3339; empty means unknown.
type Box struct {
	ID             string            `json:"id"`
	Name           string            `json:"name,omitempty"`
	URL            string            `json:"url,omitempty"`
	Key            string            `json:"key,omitempty"`
	State          string            `json:"state"`
	Labels         map[string]string `json:"labels,omitempty"`
	CreatedAt      string            `json:"created_at,omitempty"`
	PausedAt       string            `json:"paused_at,omitempty"`
	LastActivityAt string            `json:"last_activity_at,omitempty"`
	Size           *Size             `json:"size,omitempty"`
}

// Size mirrors core.Size.
type Size struct {
	Bytes  int64  `json:"bytes"`
	Source string `json:"source"`
	At     string `json:"at,omitempty"`
}

// NewInput builds the input of an op for acct.
func NewInput(deadline time.Time, acct *core.Account) Input {
	in := Input{DeadlineUnixMS: deadline.UnixMilli()}
	if acct != nil {
		cfg := acct.Config
		if cfg == nil {
			cfg = map[string]string{}
		}
		in.Account = &Account{ID: acct.ID, Config: cfg}
	}
	return in
}

// Spec converts a core.CreateSpec.
func Spec(s core.CreateSpec) *CreateSpec {
	opts := s.Options
	if opts == nil {
		opts = map[string]string{}
	}
	return &CreateSpec{
		WorkspaceID: s.WorkspaceID,
		Name:        s.Name,
		Lifecycle: Lifecycle{
			IdlePauseAfterSeconds: ceilSeconds(s.Lifecycle.IdlePauseAfter),
			PausedTTLSeconds:      ceilSeconds(s.Lifecycle.PausedTTL),
		},
		Options:  opts,
		Labels:   map[string]string{core.LabelWorkspace: s.WorkspaceID},
		AgentKey: s.AgentKey,
	}
}

func ceilSeconds(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return int64((d + time.Second - 1) / time.Second)
}

// Limits on what a module may put in a box.
const (
	maxField  = 4096
	maxLabels = 64
)

// ToCore validates b and converts it. The box shares b's labels map.
func (b *Box) ToCore() (core.Box, error) {
	if b == nil {
		return core.Box{}, fmt.Errorf("box is missing")
	}
	if b.ID == "" {
		return core.Box{}, fmt.Errorf("box has no id")
	}
	for _, f := range [...]struct{ name, v string }{{"id", b.ID}, {"name", b.Name}, {"url", b.URL}, {"key", b.Key}} {
		if len(f.v) > maxField || !utf8.ValidString(f.v) {
			return core.Box{}, fmt.Errorf("box field %s is not valid UTF-8 of at most %d bytes", f.name, maxField)
		}
	}
	st := core.State(b.State)
	if !st.Valid() {
		return core.Box{}, fmt.Errorf("box %s has unknown state %q", b.ID, b.State)
	}
	if len(b.Labels) > maxLabels {
		return core.Box{}, fmt.Errorf("box %s has more than %d labels", b.ID, maxLabels)
	}
	out := core.Box{ID: b.ID, Name: b.Name, URL: b.URL, Key: b.Key, State: st}
	if len(b.Labels) > 0 {
		for k, v := range b.Labels {
			if len(k)+len(v) > maxField {
				return core.Box{}, fmt.Errorf("box %s has an oversized label", b.ID)
			}
		}
		out.Labels = b.Labels // b was decoded for this call alone
	}
	var err error
	if out.CreatedAt, err = parseTime("created_at", b.CreatedAt); err != nil {
		return core.Box{}, err
	}
	if out.PausedAt, err = parseTime("paused_at", b.PausedAt); err != nil {
		return core.Box{}, err
	}
	if out.LastActivityAt, err = parseTime("last_activity_at", b.LastActivityAt); err != nil {
		return core.Box{}, err
	}
	if b.Size != nil {
		src := core.SizeSource(b.Size.Source)
		switch src {
		case core.SizeProviderAPIUsed, core.SizeProviderAPIAllocated, core.SizeAgentServerUsed:
		default:
			return core.Box{}, fmt.Errorf("box %s has size source %q; modules may report provider_api:used, provider_api:allocated or agent_server:used", b.ID, b.Size.Source)
		}
		if b.Size.Bytes < 0 {
			return core.Box{}, fmt.Errorf("box %s has a negative size", b.ID)
		}
		at, err := parseTime("size.at", b.Size.At)
		if err != nil {
			return core.Box{}, err
		}
		out.Size = &core.Size{Bytes: b.Size.Bytes, Source: src, At: at}
	}
	return out, nil
}

func parseTime(field, s string) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("%s %q is not an RFC 3339 time", field, s)
	}
	return t.UTC(), nil
}

// MaxMessage bounds a module's error message as shown to people.
const MaxMessage = 300

// ToCore converts a module's error. Unknown kinds become KindInternal.
func (e *ErrorBody) ToCore(module string) *core.Error {
	kind := core.ErrorKind(e.Kind)
	switch kind {
	case core.KindNotFound, core.KindConflict, core.KindRateLimited, core.KindUnauthorized,
		core.KindUnavailable, core.KindInvalid, core.KindInternal:
	default:
		kind = core.KindInternal
	}
	msg := CleanMessage(e.Message)
	if msg == "" {
		msg = "provider module " + module + " reported " + string(kind)
	}
	out := &core.Error{Kind: kind, Message: msg}
	if r := e.RetryAfterSeconds; r > 0 && !math.IsInf(r, 0) && !math.IsNaN(r) {
		out.RetryAfter = time.Duration(math.Min(r, 86400) * float64(time.Second))
	}
	return out
}

// CleanMessage makes guest text fit to show: valid UTF-8, one line, no
// control characters, at most MaxMessage characters.
func CleanMessage(s string) string {
	s = strings.ToValidUTF8(s, "?")
	var b strings.Builder
	n := 0
	for _, r := range s {
		if n == MaxMessage {
			b.WriteString("…")
			break
		}
		if r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) {
			r = ' '
		}
		b.WriteRune(r)
		n++
	}
	return strings.TrimSpace(b.String())
}
