package modal

import (
	"context"
	"maps"
	"strings"

	pb "github.com/modal-labs/modal-client/go/proto/modal_proto"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// SandboxSnapshot takes a memory snapshot of a running sandbox created
// with enable_snapshot; the sandbox keeps running.
func (s *Server) SandboxSnapshot(ctx context.Context, req *pb.SandboxSnapshotRequest) (*pb.SandboxSnapshotResponse, error) {
	s.st.mu.Lock()
	defer s.st.mu.Unlock()
	sb, err := s.sandbox(req.GetSandboxId())
	if err != nil {
		return nil, err
	}
	if sb.State != StateRunning {
		return nil, status.Errorf(codes.FailedPrecondition, "Sandbox %s has already finished", sb.ID)
	}
	if !sb.EnableSnapshot {
		return nil, status.Errorf(codes.FailedPrecondition, "Sandbox %s was not created with snapshots enabled", sb.ID)
	}
	now := s.clock.Now()
	m := &MemorySnapshot{ID: newID("sn"), Sandbox: sb.ID, CreatedAt: now, ExpiresAt: now.Add(MemorySnapshotTTL)}
	s.st.memory[m.ID] = m
	return pb.SandboxSnapshotResponse_builder{SnapshotId: m.ID}.Build(), nil
}

// memorySnapshot returns a live memory snapshot or NotFound. Call with mu.
func (s *Server) memorySnapshot(id string) (*MemorySnapshot, error) {
	m, ok := s.st.memory[id]
	if !ok || !s.clock.Now().Before(m.ExpiresAt) {
		return nil, notFound("Snapshot", id)
	}
	return m, nil
}

// SandboxSnapshotWait reports a memory snapshot done.
func (s *Server) SandboxSnapshotWait(ctx context.Context, req *pb.SandboxSnapshotWaitRequest) (*pb.SandboxSnapshotWaitResponse, error) {
	s.st.mu.Lock()
	defer s.st.mu.Unlock()
	if _, err := s.memorySnapshot(req.GetSnapshotId()); err != nil {
		return nil, err
	}
	return pb.SandboxSnapshotWaitResponse_builder{Result: success()}.Build(), nil
}

// SandboxSnapshotGet validates a memory snapshot id (V1).
func (s *Server) SandboxSnapshotGet(ctx context.Context, req *pb.SandboxSnapshotGetRequest) (*pb.SandboxSnapshotGetResponse, error) {
	s.st.mu.Lock()
	defer s.st.mu.Unlock()
	m, err := s.memorySnapshot(req.GetSnapshotId())
	if err != nil {
		return nil, err
	}
	return pb.SandboxSnapshotGetResponse_builder{SnapshotId: m.ID}.Build(), nil
}

// SandboxRestore starts a new sandbox from a memory snapshot: a new id,
// the original's image, env (its processes' memory, keys included),
// ports and timeouts; tags are not carried over.
func (s *Server) SandboxRestore(ctx context.Context, req *pb.SandboxRestoreRequest) (*pb.SandboxRestoreResponse, error) {
	s.st.mu.Lock()
	defer s.st.mu.Unlock()
	s.tick()
	m, err := s.memorySnapshot(req.GetSnapshotId())
	if err != nil {
		return nil, err
	}
	orig := s.st.sandboxes[m.Sandbox]
	sb := &Sandbox{AppID: orig.AppID, ImageID: orig.ImageID, Env: maps.Clone(orig.Env), Tags: map[string]string{},
		Ports: orig.Ports, Timeout: orig.Timeout, IdleTimeout: orig.IdleTimeout, EnableSnapshot: true, RestoredFrom: orig.ID}
	switch req.GetSandboxNameOverrideType() {
	case pb.SandboxRestoreRequest_SANDBOX_NAME_OVERRIDE_TYPE_STRING:
		sb.Name = req.GetSandboxNameOverride()
	case pb.SandboxRestoreRequest_SANDBOX_NAME_OVERRIDE_TYPE_NONE:
	default:
		sb.Name = orig.Name
	}
	if err := s.launch(sb); err != nil {
		return nil, err
	}
	return pb.SandboxRestoreResponse_builder{SandboxId: sb.ID}.Build(), nil
}

// SandboxGetFromName finds a running sandbox by app and name.
func (s *Server) SandboxGetFromName(ctx context.Context, req *pb.SandboxGetFromNameRequest) (*pb.SandboxGetFromNameResponse, error) {
	s.st.mu.Lock()
	defer s.st.mu.Unlock()
	s.tick()
	var appID string
	for k, id := range s.st.apps {
		if strings.HasPrefix(k, req.GetAppName()+"/") && (req.GetEnvironmentName() == "" || k == req.GetAppName()+"/"+req.GetEnvironmentName()) {
			appID = id
		}
	}
	for _, sb := range s.st.sandboxes {
		if sb.AppID == appID && appID != "" && sb.Name == req.GetSandboxName() && (sb.State == StateRunning || req.GetIncludeTerminated()) {
			return pb.SandboxGetFromNameResponse_builder{SandboxId: sb.ID}.Build(), nil
		}
	}
	return nil, notFound("Sandbox", req.GetSandboxName())
}
