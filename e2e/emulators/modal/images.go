package modal

import (
	"context"
	"strings"
	"time"

	pb "github.com/modal-labs/modal-client/go/proto/modal_proto"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/emptypb"
)

// ImageGetOrCreate "builds" a registry image at once: FROM <tag> with no
// other commands. The same tag gives the same image.
func (s *Server) ImageGetOrCreate(ctx context.Context, req *pb.ImageGetOrCreateRequest) (*pb.ImageGetOrCreateResponse, error) {
	cmds := req.GetImage().GetDockerfileCommands()
	if len(cmds) == 0 || !strings.HasPrefix(cmds[0], "FROM ") {
		return nil, status.Error(codes.InvalidArgument, "image has no FROM")
	}
	tag := strings.TrimPrefix(cmds[0], "FROM ")
	s.st.mu.Lock()
	defer s.st.mu.Unlock()
	for _, im := range s.st.images {
		if im.Tag == tag && !im.Deleted {
			return pb.ImageGetOrCreateResponse_builder{ImageId: im.ID, Result: success()}.Build(), nil
		}
	}
	im := &Image{ID: newID("im"), Tag: tag, CreatedAt: s.clock.Now()}
	s.st.images[im.ID] = im
	// No result: the client joins the build stream, as for a real build.
	return pb.ImageGetOrCreateResponse_builder{ImageId: im.ID}.Build(), nil
}

// ImageJoinStreaming reports a build done.
func (s *Server) ImageJoinStreaming(req *pb.ImageJoinStreamingRequest, stream grpc.ServerStreamingServer[pb.ImageJoinStreamingResponse]) error {
	s.st.mu.Lock()
	_, ok := s.st.images[req.GetImageId()]
	s.st.mu.Unlock()
	if !ok {
		return notFound("Image", req.GetImageId())
	}
	return stream.Send(pb.ImageJoinStreamingResponse_builder{Result: success(), EntryId: "1", Eof: true}.Build())
}

// ImageFromId finds a live image; an expired or deleted snapshot is
// NotFound.
func (s *Server) ImageFromId(ctx context.Context, req *pb.ImageFromIdRequest) (*pb.ImageFromIdResponse, error) {
	s.st.mu.Lock()
	defer s.st.mu.Unlock()
	s.tick()
	im, ok := s.st.images[req.GetImageId()]
	if !ok || im.Deleted {
		return nil, notFound("Image", req.GetImageId())
	}
	return pb.ImageFromIdResponse_builder{ImageId: im.ID}.Build(), nil
}

// ImageDelete deletes an image; a gone one is NotFound.
func (s *Server) ImageDelete(ctx context.Context, req *pb.ImageDeleteRequest) (*emptypb.Empty, error) {
	s.st.mu.Lock()
	defer s.st.mu.Unlock()
	s.tick()
	im, ok := s.st.images[req.GetImageId()]
	if !ok || im.Deleted {
		return nil, notFound("Image", req.GetImageId())
	}
	im.Deleted = true
	return &emptypb.Empty{}, nil
}

// TaskGetCommandRouterAccess hands out the command router's address (this
// server, named https as the SDK requires; it dials plaintext because the
// control plane is on localhost) and a token for it.
func (s *Server) TaskGetCommandRouterAccess(ctx context.Context, req *pb.TaskGetCommandRouterAccessRequest) (*pb.TaskGetCommandRouterAccessResponse, error) {
	s.st.mu.Lock()
	defer s.st.mu.Unlock()
	s.tick()
	for _, sb := range s.st.sandboxes {
		if sb.TaskID == req.GetTaskId() {
			if sb.State != StateRunning {
				return nil, status.Errorf(codes.FailedPrecondition, "task %s has finished", sb.TaskID)
			}
			tok := jwt(map[string]any{"task_id": sb.TaskID, "exp": time.Now().Add(time.Hour).Unix()})
			s.st.routerJWT[tok] = sb.TaskID
			return pb.TaskGetCommandRouterAccessResponse_builder{Jwt: tok, Url: "https://" + s.ln.Addr().String()}.Build(), nil
		}
	}
	return nil, notFound("Task", req.GetTaskId())
}

// TaskSnapshotFilesystem snapshots a running sandbox's filesystem into a
// new image that expires after ttl_seconds (30 days when unset, never
// when negative).
func (r *router) TaskSnapshotFilesystem(ctx context.Context, req *pb.TaskSnapshotFilesystemRequest) (*pb.TaskSnapshotFilesystemResponse, error) {
	s := r.s
	s.st.mu.Lock()
	defer s.st.mu.Unlock()
	s.tick()
	for _, sb := range s.st.sandboxes {
		if sb.TaskID != req.GetTaskId() {
			continue
		}
		if sb.State != StateRunning {
			return nil, status.Errorf(codes.FailedPrecondition, "task %s has finished", sb.TaskID)
		}
		now := s.clock.Now()
		im := &Image{ID: newID("im"), Snapshot: sb.ID, CreatedAt: now}
		ttl := DefaultSnapshotTTL
		if req.HasTtlSeconds() {
			ttl = time.Duration(req.GetTtlSeconds()) * time.Second
		}
		if ttl > 0 {
			im.ExpiresAt = now.Add(ttl)
		}
		s.st.images[im.ID] = im
		return pb.TaskSnapshotFilesystemResponse_builder{ImageId: im.ID}.Build(), nil
	}
	return nil, notFound("Task", req.GetTaskId())
}
