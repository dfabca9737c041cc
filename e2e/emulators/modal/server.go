package modal

import (
	"context"
	"crypto/subtle"
	"fmt"
	"net"
	"net/http"
	"path"
	"slices"
	"time"

	"github.com/canvasapp/companion/e2e/emulators/emulator"
	pb "github.com/modal-labs/modal-client/go/proto/modal_proto"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// Options configure a Server.
type Options struct {
	// TokenID and TokenSecret are the one credential accepted.
	TokenID, TokenSecret string
	// Clock drives timeouts, idle timeouts and snapshot expiry; nil means
	// a wall clock.
	Clock *emulator.Clock
	// AgentServer answers authenticated requests through a sandbox's
	// tunnel; nil answers them 200 with {"sandbox_id": …}.
	AgentServer func(sandboxID string) http.Handler
}

// DefaultTimeout is a sandbox's lifetime when the create names none (the
// SDK always sends one; 5 minutes is its default), and MaxTimeout the most
// Modal allows (providers.md §3).
const (
	DefaultTimeout = 5 * time.Minute
	MaxTimeout     = 24 * time.Hour
	// DefaultSnapshotTTL is a filesystem snapshot's life when the request
	// names none (30 days, providers-wave3.md §3.4).
	DefaultSnapshotTTL = 30 * 24 * time.Hour
)

// Server is a Modal emulator. Start it, point the SDK at URL(), Close it.
type Server struct {
	pb.UnimplementedModalClientServer

	opts  Options
	clock *emulator.Clock
	st    store
	grpc  *grpc.Server
	ln    net.Listener
}

// New returns an emulator configured by o; Start serves it.
func New(o Options) *Server {
	c := o.Clock
	if c == nil {
		c = emulator.NewWallClock()
	}
	s := &Server{opts: o, clock: c}
	s.st = store{apps: map[string]string{}, images: map[string]*Image{}, secrets: map[string]map[string]string{},
		sandboxes: map[string]*Sandbox{}, memory: map[string]*MemorySnapshot{}, calls: map[string]int{}, tunnelHit: map[string]int{}, routerJWT: map[string]string{}}
	return s
}

// Start listens on 127.0.0.1 at a free port and serves both services
// there in plaintext HTTP/2 (the command router's URL names the same
// port).
func (s *Server) Start() error { return s.StartOn("127.0.0.1:0") }

// StartOn is Start on addr (the standalone command's -modal).
func (s *Server) StartOn(addr string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	s.ln = ln
	s.grpc = grpc.NewServer(grpc.ChainUnaryInterceptor(s.unary), grpc.ChainStreamInterceptor(s.stream))
	pb.RegisterModalClientServer(s.grpc, s)
	pb.RegisterTaskCommandRouterServer(s.grpc, &router{s: s})
	go s.grpc.Serve(ln)
	return nil
}

// URL is the control plane's address, for MODAL_SERVER_URL.
func (s *Server) URL() string { return "http://" + s.ln.Addr().String() }

// Clock is the emulator's clock.
func (s *Server) Clock() *emulator.Clock { return s.clock }

// Close stops serving and closes every tunnel.
func (s *Server) Close() {
	s.st.mu.Lock()
	for _, f := range s.st.faults {
		if f.Hold != nil {
			select {
			case <-f.Hold:
			default:
				close(f.Hold)
			}
		}
	}
	for _, sb := range s.st.sandboxes {
		s.closeTunnel(sb)
	}
	s.st.mu.Unlock()
	if s.grpc != nil {
		s.grpc.Stop()
	}
}

// AddFault queues f.
func (s *Server) AddFault(f *Fault) {
	s.st.mu.Lock()
	defer s.st.mu.Unlock()
	s.st.faults = append(s.st.faults, f)
}

// ClearFaults drops every queued fault.
func (s *Server) ClearFaults() {
	s.st.mu.Lock()
	defer s.st.mu.Unlock()
	s.st.faults = nil
}

// Calls is how many calls of method (short name) arrived, faulted or not.
func (s *Server) Calls(method string) int {
	s.st.mu.Lock()
	defer s.st.mu.Unlock()
	return s.st.calls[method]
}

// TunnelRequests is how many requests reached sandbox id's tunnel.
func (s *Server) TunnelRequests(id string) int {
	s.st.mu.Lock()
	defer s.st.mu.Unlock()
	return s.st.tunnelHit[id]
}

// Sandbox returns a copy of sandbox id, after applying the clock.
func (s *Server) Sandbox(id string) (Sandbox, bool) {
	s.st.mu.Lock()
	defer s.st.mu.Unlock()
	s.tick()
	sb, ok := s.st.sandboxes[id]
	if !ok {
		return Sandbox{}, false
	}
	c := *sb
	c.tunnel = nil
	return c, true
}

// Sandboxes returns copies of every sandbox, oldest first.
func (s *Server) Sandboxes() []Sandbox {
	s.st.mu.Lock()
	defer s.st.mu.Unlock()
	s.tick()
	var out []Sandbox
	for _, id := range s.st.order {
		c := *s.st.sandboxes[id]
		c.tunnel = nil
		out = append(out, c)
	}
	return out
}

// SetTunnelHost makes SandboxGetTunnels report host for every tunnel
// (a hostile or broken answer); "" restores the real one.
func (s *Server) SetTunnelHost(host string) {
	s.st.mu.Lock()
	defer s.st.mu.Unlock()
	s.st.tunnelHost = host
}

// TunnelAddr is sandbox id's tunnel address (host:port) while it runs.
func (s *Server) TunnelAddr(id string) (string, bool) {
	s.st.mu.Lock()
	defer s.st.mu.Unlock()
	s.tick()
	sb, ok := s.st.sandboxes[id]
	if !ok || sb.tunnel == nil {
		return "", false
	}
	return sb.tunnel.ln.Addr().String(), true
}

// Image returns a copy of image id, after applying the clock.
func (s *Server) Image(id string) (Image, bool) {
	s.st.mu.Lock()
	defer s.st.mu.Unlock()
	s.tick()
	im, ok := s.st.images[id]
	if !ok {
		return Image{}, false
	}
	return *im, true
}

// tick applies the clock: sandboxes past their timeout or idle timeout
// end, snapshots past their TTL are gone. Call with mu held.
func (s *Server) tick() {
	now := s.clock.Now()
	for _, sb := range s.st.sandboxes {
		if sb.State != StateRunning {
			continue
		}
		switch {
		case sb.IdleTimeout > 0 && !now.Before(sb.LastActivity.Add(sb.IdleTimeout)):
			s.end(sb, pb.GenericResult_GENERIC_STATUS_IDLE_TIMEOUT, sb.LastActivity.Add(sb.IdleTimeout))
		case !now.Before(sb.CreatedAt.Add(sb.Timeout)):
			s.end(sb, pb.GenericResult_GENERIC_STATUS_TIMEOUT, sb.CreatedAt.Add(sb.Timeout))
		}
	}
	for _, im := range s.st.images {
		if !im.ExpiresAt.IsZero() && !now.Before(im.ExpiresAt) {
			im.Deleted = true
		}
	}
}

func (s *Server) end(sb *Sandbox, why pb.GenericResult_GenericStatus, at time.Time) {
	sb.State, sb.Result, sb.FinishedAt = StateTerminated, why, at
	s.closeTunnel(sb)
}

func (s *Server) closeTunnel(sb *Sandbox) {
	if sb.tunnel != nil {
		sb.tunnel.srv.Close()
		sb.tunnel = nil
	}
}

// authorize checks the token metadata of a control-plane call, and the
// bearer JWT of a command router call.
// router is the task command router; a type of its own because both
// services have a SandboxWaitUntilReady, with different signatures.
type router struct {
	pb.UnimplementedTaskCommandRouterServer
	s *Server
}

func (s *Server) authorize(ctx context.Context, method string) error {
	md, _ := metadata.FromIncomingContext(ctx)
	if slices.Contains(routerMethods, method) {
		for _, v := range md.Get("authorization") {
			if tok, ok := cutBearer(v); ok && s.routerJWTValid(tok) {
				return nil
			}
		}
		return status.Error(codes.Unauthenticated, "invalid or missing command router token")
	}
	id, secret := first(md.Get("x-modal-token-id")), first(md.Get("x-modal-token-secret"))
	if id == "" || secret == "" {
		return status.Error(codes.Unauthenticated, "Token missing. Could not authenticate client.")
	}
	if subtle.ConstantTimeCompare([]byte(id), []byte(s.opts.TokenID)) != 1 ||
		subtle.ConstantTimeCompare([]byte(secret), []byte(s.opts.TokenSecret)) != 1 {
		return status.Error(codes.Unauthenticated, "Token ID or secret is invalid. Please check your Modal credentials.")
	}
	return nil
}

var routerMethods = []string{"TaskSnapshotFilesystem"}

func first(v []string) string {
	if len(v) == 0 {
		return ""
	}
	return v[0]
}

// gate counts the call, checks auth, applies the clock and takes the next
// matching fault. It returns the fault (nil if none) or an error to
// answer at once.
func (s *Server) gate(ctx context.Context, full string) (*Fault, error) {
	method := path.Base(full)
	s.st.mu.Lock()
	s.st.calls[method]++
	var f *Fault
	for i, q := range s.st.faults {
		if q.Method == method && q.Count != 0 {
			f = q
			if q.Count > 0 {
				q.Count--
			}
			if q.Count == 0 {
				s.st.faults = slices.Delete(s.st.faults, i, i+1)
			}
			break
		}
	}
	s.st.mu.Unlock()
	if err := s.authorize(ctx, method); err != nil {
		return nil, err
	}
	if f != nil && f.Hold == nil && f.Code != codes.OK {
		return nil, faultErr(f)
	}
	return f, nil
}

func faultErr(f *Fault) error {
	st := status.New(f.Code, f.Message)
	if f.RetryAfter > 0 {
		if d, err := st.WithDetails(pb.RPCRetryPolicy_builder{RetryAfterSecs: float32(f.RetryAfter.Seconds())}.Build()); err == nil {
			st = d
		}
	}
	return st.Err()
}

func (s *Server) hold(ctx context.Context, f *Fault) error {
	if f.Held != nil {
		close(f.Held)
	}
	select {
	case <-f.Hold:
	case <-ctx.Done():
		return ctx.Err()
	}
	if f.Code != codes.OK {
		return faultErr(f)
	}
	return nil
}

func (s *Server) unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	f, err := s.gate(ctx, info.FullMethod)
	if err != nil {
		return nil, err
	}
	if f != nil && f.Hold != nil && !f.After {
		if err := s.hold(ctx, f); err != nil {
			return nil, err
		}
	}
	resp, err := h(ctx, req)
	if f != nil && f.Hold != nil && f.After {
		if herr := s.hold(ctx, f); herr != nil {
			return nil, herr
		}
	}
	return resp, err
}

func (s *Server) stream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
	if _, err := s.gate(ss.Context(), info.FullMethod); err != nil {
		return err
	}
	return h(srv, ss)
}

func notFound(kind, id string) error {
	return status.Error(codes.NotFound, fmt.Sprintf("%s '%s' not found", kind, id))
}
