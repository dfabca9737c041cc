package modal

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"maps"
	"strings"
	"time"

	"github.com/canvasapp/companion/e2e/emulators/emulator"
	pb "github.com/modal-labs/modal-client/go/proto/modal_proto"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/emptypb"
)

const alnum = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"

// newID mints an id like Modal's: a prefix and 22 characters of
// [0-9A-Za-z]. The SDK treats "sb-" ids of exactly that shape as V1
// sandboxes (§3.4).
func newID(prefix string) string { return prefix + "-" + emulator.RandomString(22, alnum) }

// jwt makes an unsigned token with claims as its payload: the SDK only
// reads exp from it.
func jwt(claims map[string]any) string {
	enc := base64.RawURLEncoding
	h, _ := json.Marshal(map[string]string{"alg": "none", "typ": "JWT"})
	p, _ := json.Marshal(claims)
	return enc.EncodeToString(h) + "." + enc.EncodeToString(p) + "." + enc.EncodeToString([]byte("emulator"))
}

func cutBearer(v string) (string, bool) {
	return strings.CutPrefix(v, "Bearer ")
}

func (s *Server) routerJWTValid(tok string) bool {
	s.st.mu.Lock()
	defer s.st.mu.Unlock()
	_, ok := s.st.routerJWT[tok]
	return ok
}

// AuthTokenGet issues the short-lived token the SDK sends as
// x-modal-auth-token. Its exp is on the wall clock: the SDK refreshes it
// by its own clock.
func (s *Server) AuthTokenGet(ctx context.Context, _ *pb.AuthTokenGetRequest) (*pb.AuthTokenGetResponse, error) {
	return pb.AuthTokenGetResponse_builder{Token: jwt(map[string]any{"exp": time.Now().Add(time.Hour).Unix()})}.Build(), nil
}

// EnvironmentGetOrCreate answers for the image builder version.
func (s *Server) EnvironmentGetOrCreate(ctx context.Context, req *pb.EnvironmentGetOrCreateRequest) (*pb.EnvironmentGetOrCreateResponse, error) {
	name := req.GetDeploymentName()
	if name == "" {
		name = "main"
	}
	return pb.EnvironmentGetOrCreateResponse_builder{EnvironmentId: "en-" + name,
		Metadata: pb.EnvironmentMetadata_builder{Name: name,
			Settings: pb.EnvironmentSettings_builder{ImageBuilderVersion: "2025.06"}.Build()}.Build()}.Build(), nil
}

// AppGetOrCreate finds an app by name and environment, creating it when
// asked to.
func (s *Server) AppGetOrCreate(ctx context.Context, req *pb.AppGetOrCreateRequest) (*pb.AppGetOrCreateResponse, error) {
	if req.GetAppName() == "" {
		return nil, status.Error(codes.InvalidArgument, "App name is required")
	}
	key := req.GetAppName() + "/" + req.GetEnvironmentName()
	s.st.mu.Lock()
	defer s.st.mu.Unlock()
	id, ok := s.st.apps[key]
	if !ok {
		if req.GetObjectCreationType() != pb.ObjectCreationType_OBJECT_CREATION_TYPE_CREATE_IF_MISSING {
			return nil, notFound("App", req.GetAppName())
		}
		id = newID("ap")
		s.st.apps[key] = id
	}
	return pb.AppGetOrCreateResponse_builder{AppId: id}.Build(), nil
}

// SecretGetOrCreate stores an ephemeral secret (the SDK turns a sandbox's
// env into one).
func (s *Server) SecretGetOrCreate(ctx context.Context, req *pb.SecretGetOrCreateRequest) (*pb.SecretGetOrCreateResponse, error) {
	if req.GetObjectCreationType() != pb.ObjectCreationType_OBJECT_CREATION_TYPE_EPHEMERAL {
		return nil, status.Error(codes.Unimplemented, "only ephemeral secrets are emulated")
	}
	s.st.mu.Lock()
	defer s.st.mu.Unlock()
	id := newID("st")
	s.st.secrets[id] = maps.Clone(req.GetEnvDict())
	return pb.SecretGetOrCreateResponse_builder{SecretId: id}.Build(), nil
}

// SandboxCreate starts a sandbox at once (it is scheduled immediately) and
// opens a tunnel for its first encrypted port.
func (s *Server) SandboxCreate(ctx context.Context, req *pb.SandboxCreateRequest) (*pb.SandboxCreateResponse, error) {
	def := req.GetDefinition()
	if def == nil {
		return nil, status.Error(codes.InvalidArgument, "sandbox definition is required")
	}
	timeout := time.Duration(def.GetTimeoutSecs()) * time.Second
	if timeout == 0 {
		timeout = DefaultTimeout
	}
	if timeout > MaxTimeout {
		return nil, status.Errorf(codes.InvalidArgument, "timeout must be at most %d seconds", int(MaxTimeout.Seconds()))
	}
	s.st.mu.Lock()
	defer s.st.mu.Unlock()
	s.tick()
	if !s.appExists(req.GetAppId()) {
		return nil, notFound("App", req.GetAppId())
	}
	im, ok := s.st.images[def.GetImageId()]
	if !ok || im.Deleted {
		return nil, notFound("Image", def.GetImageId())
	}
	env := map[string]string{}
	for _, sid := range def.GetSecretIds() {
		sec, ok := s.st.secrets[sid]
		if !ok {
			return nil, notFound("Secret", sid)
		}
		maps.Copy(env, sec)
	}
	tags := map[string]string{}
	for _, t := range req.GetTags() {
		tags[t.GetTagName()] = t.GetTagValue()
	}
	sb := &Sandbox{AppID: req.GetAppId(), ImageID: im.ID, Env: env, Tags: tags, Name: def.GetName(),
		Timeout: timeout, IdleTimeout: time.Duration(def.GetIdleTimeoutSecs()) * time.Second,
		EnableSnapshot: def.GetEnableSnapshot()}
	for _, p := range def.GetOpenPorts().GetPorts() {
		sb.Ports = append(sb.Ports, int(p.GetPort()))
	}
	if err := s.launch(sb); err != nil {
		return nil, err
	}
	return pb.SandboxCreateResponse_builder{SandboxId: sb.ID}.Build(), nil
}

// launch starts sb: an id, a task, a tunnel. Call with mu held.
func (s *Server) launch(sb *Sandbox) error {
	if sb.Name != "" {
		for _, o := range s.st.sandboxes {
			if o.AppID == sb.AppID && o.Name == sb.Name && o.State == StateRunning {
				return status.Errorf(codes.AlreadyExists, "Sandbox with name '%s' already exists", sb.Name)
			}
		}
	}
	now := s.clock.Now()
	sb.ID, sb.TaskID, sb.CreatedAt, sb.LastActivity, sb.State = newID("sb"), newID("ta"), now, now, StateRunning
	if len(sb.Ports) > 0 {
		t, err := s.openTunnel(sb.ID)
		if err != nil {
			return status.Errorf(codes.Internal, "tunnel: %v", err)
		}
		sb.tunnel = t
	}
	s.st.sandboxes[sb.ID] = sb
	s.st.order = append(s.st.order, sb.ID)
	return nil
}

func (s *Server) appExists(id string) bool {
	for _, a := range s.st.apps {
		if a == id {
			return true
		}
	}
	return false
}

// sandbox returns sandbox id after the clock, or NotFound. Call with mu.
func (s *Server) sandbox(id string) (*Sandbox, error) {
	s.tick()
	sb, ok := s.st.sandboxes[id]
	if !ok {
		return nil, notFound("Sandbox", id)
	}
	return sb, nil
}

func success() *pb.GenericResult {
	return pb.GenericResult_builder{Status: pb.GenericResult_GENERIC_STATUS_SUCCESS}.Build()
}

func result(sb *Sandbox) *pb.GenericResult {
	if sb.State == StateRunning {
		return nil
	}
	msg := ""
	switch sb.Result {
	case pb.GenericResult_GENERIC_STATUS_IDLE_TIMEOUT:
		msg = "Sandbox idle timeout"
	case pb.GenericResult_GENERIC_STATUS_TIMEOUT:
		msg = "Sandbox timed out"
	case pb.GenericResult_GENERIC_STATUS_TERMINATED:
		msg = "Sandbox terminated"
	}
	return pb.GenericResult_builder{Status: sb.Result, Exception: msg, Exitcode: 137}.Build()
}

// SandboxGetTaskId answers the sandbox's task at once (it is scheduled
// immediately), or its result once it ended.
func (s *Server) SandboxGetTaskId(ctx context.Context, req *pb.SandboxGetTaskIdRequest) (*pb.SandboxGetTaskIdResponse, error) {
	s.st.mu.Lock()
	defer s.st.mu.Unlock()
	sb, err := s.sandbox(req.GetSandboxId())
	if err != nil {
		return nil, err
	}
	if sb.State != StateRunning {
		return pb.SandboxGetTaskIdResponse_builder{TaskResult: result(sb)}.Build(), nil
	}
	return pb.SandboxGetTaskIdResponse_builder{TaskId: &sb.TaskID}.Build(), nil
}

// SandboxWait answers at once: the emulated clock, not the request's
// timeout, moves sandboxes to their end.
func (s *Server) SandboxWait(ctx context.Context, req *pb.SandboxWaitRequest) (*pb.SandboxWaitResponse, error) {
	s.st.mu.Lock()
	defer s.st.mu.Unlock()
	sb, err := s.sandbox(req.GetSandboxId())
	if err != nil {
		return nil, err
	}
	return pb.SandboxWaitResponse_builder{Result: result(sb)}.Build(), nil
}

// SandboxTerminate ends a running sandbox; an ended one keeps its result.
func (s *Server) SandboxTerminate(ctx context.Context, req *pb.SandboxTerminateRequest) (*pb.SandboxTerminateResponse, error) {
	s.st.mu.Lock()
	defer s.st.mu.Unlock()
	sb, err := s.sandbox(req.GetSandboxId())
	if err != nil {
		return nil, err
	}
	if sb.State == StateRunning {
		s.end(sb, pb.GenericResult_GENERIC_STATUS_TERMINATED, s.clock.Now())
		return pb.SandboxTerminateResponse_builder{}.Build(), nil
	}
	return pb.SandboxTerminateResponse_builder{ExistingResult: result(sb)}.Build(), nil
}

// SandboxList pages running sandboxes (finished ones with
// include_finished) newest first, before before_timestamp, filtered by
// app, and by tags (all must match).
func (s *Server) SandboxList(ctx context.Context, req *pb.SandboxListRequest) (*pb.SandboxListResponse, error) {
	const pageSize = 2 // small, so paging is exercised
	s.st.mu.Lock()
	defer s.st.mu.Unlock()
	s.tick()
	var out []*pb.SandboxInfo
	for i := len(s.st.order) - 1; i >= 0 && len(out) < pageSize; i-- {
		sb := s.st.sandboxes[s.st.order[i]]
		created := float64(sb.CreatedAt.UnixNano()) / 1e9
		if req.GetBeforeTimestamp() != 0 && created >= req.GetBeforeTimestamp() {
			continue
		}
		if sb.State != StateRunning && !req.GetIncludeFinished() {
			continue
		}
		if req.GetAppId() != "" && sb.AppID != req.GetAppId() {
			continue
		}
		match := true
		for _, t := range req.GetTags() {
			if sb.Tags[t.GetTagName()] != t.GetTagValue() {
				match = false
			}
		}
		if !match {
			continue
		}
		out = append(out, pb.SandboxInfo_builder{Id: sb.ID, CreatedAt: created, AppId: sb.AppID, ImageId: sb.ImageID,
			Tags: tagList(sb.Tags), TimeoutSecs: uint32(sb.Timeout.Seconds()),
			TaskInfo: pb.TaskInfo_builder{Id: sb.TaskID, StartedAt: created, Result: result(sb)}.Build()}.Build())
	}
	return pb.SandboxListResponse_builder{Sandboxes: out}.Build(), nil
}

func tagList(m map[string]string) []*pb.SandboxTag {
	var out []*pb.SandboxTag
	for k, v := range m {
		out = append(out, pb.SandboxTag_builder{TagName: k, TagValue: v}.Build())
	}
	return out
}

// SandboxTagsGet answers a sandbox's tags, ended or not.
func (s *Server) SandboxTagsGet(ctx context.Context, req *pb.SandboxTagsGetRequest) (*pb.SandboxTagsGetResponse, error) {
	s.st.mu.Lock()
	defer s.st.mu.Unlock()
	sb, err := s.sandbox(req.GetSandboxId())
	if err != nil {
		return nil, err
	}
	return pb.SandboxTagsGetResponse_builder{Tags: tagList(sb.Tags)}.Build(), nil
}

// SandboxTagsSet replaces a sandbox's tags.
func (s *Server) SandboxTagsSet(ctx context.Context, req *pb.SandboxTagsSetRequest) (*emptypb.Empty, error) {
	s.st.mu.Lock()
	defer s.st.mu.Unlock()
	sb, err := s.sandbox(req.GetSandboxId())
	if err != nil {
		return nil, err
	}
	tags := map[string]string{}
	for _, t := range req.GetTags() {
		tags[t.GetTagName()] = t.GetTagValue()
	}
	sb.Tags = tags
	return &emptypb.Empty{}, nil
}

// SandboxGetTunnels answers a running sandbox's tunnels. This is a
// control-plane call: it opens no connection to the sandbox.
func (s *Server) SandboxGetTunnels(ctx context.Context, req *pb.SandboxGetTunnelsRequest) (*pb.SandboxGetTunnelsResponse, error) {
	s.st.mu.Lock()
	defer s.st.mu.Unlock()
	sb, err := s.sandbox(req.GetSandboxId())
	if err != nil {
		return nil, err
	}
	if sb.State != StateRunning {
		return nil, status.Errorf(codes.FailedPrecondition, "Sandbox %s has already finished", sb.ID)
	}
	var tunnels []*pb.TunnelData
	if sb.tunnel != nil {
		host, port := splitAddr(sb.tunnel.ln.Addr().String())
		if s.st.tunnelHost != "" {
			host = s.st.tunnelHost
		}
		for _, p := range sb.Ports {
			tunnels = append(tunnels, pb.TunnelData_builder{Host: host, Port: port, ContainerPort: uint32(p)}.Build())
		}
	}
	return pb.SandboxGetTunnelsResponse_builder{Tunnels: tunnels}.Build(), nil
}

func splitAddr(a string) (string, uint32) {
	i := strings.LastIndexByte(a, ':')
	var p uint32
	fmt.Sscan(a[i+1:], &p)
	return a[:i], p
}
