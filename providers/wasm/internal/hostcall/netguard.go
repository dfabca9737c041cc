package hostcall

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"
)

// BlockedAddrError is returned by the dialer when a name resolved to an
// address modules may not reach.
type BlockedAddrError struct{ Addr netip.Addr }

func (e *BlockedAddrError) Error() string {
	return fmt.Sprintf("address %s is private, loopback, link-local or otherwise not public", e.Addr)
}

// nonPublic are ranges that are not covered by netip's predicates but still
// must not be reachable: shared, documentation, benchmarking, reserved and
// translation ranges.
var nonPublic = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),
	netip.MustParsePrefix("100.64.0.0/10"),
	netip.MustParsePrefix("192.0.0.0/24"),
	netip.MustParsePrefix("192.0.2.0/24"),
	netip.MustParsePrefix("198.18.0.0/15"),
	netip.MustParsePrefix("198.51.100.0/24"),
	netip.MustParsePrefix("203.0.113.0/24"),
	netip.MustParsePrefix("240.0.0.0/4"),
	netip.MustParsePrefix("100::/64"),
	netip.MustParsePrefix("2001:db8::/32"),
	netip.MustParsePrefix("::/96"), // IPv4-compatible (deprecated)
}

// Blocked reports whether ip is an address modules may not reach unless an
// account configured it explicitly.
func Blocked(ip netip.Addr) bool {
	ip = ip.Unmap()
	if !ip.IsValid() || !ip.IsGlobalUnicast() || ip.IsPrivate() {
		// IsGlobalUnicast is false for loopback, link-local, multicast and
		// unspecified addresses.
		return true
	}
	for _, p := range nonPublic {
		if p.Contains(ip) {
			return true
		}
	}
	if ip.Is6() {
		b := ip.As16()
		// NAT64 (64:ff9b::/96) and 6to4 (2002::/16) embed an IPv4 address
		// that may well be private.
		if netip.MustParsePrefix("64:ff9b::/96").Contains(ip) {
			return Blocked(netip.AddrFrom4([4]byte{b[12], b[13], b[14], b[15]}))
		}
		if b[0] == 0x20 && b[1] == 0x02 {
			return Blocked(netip.AddrFrom4([4]byte{b[2], b[3], b[4], b[5]}))
		}
	}
	return false
}

// control runs after DNS resolution and before connect, for every address
// the dialer tries, so a name cannot be re-pointed between check and use.
func control(_, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("unexpected dial address %q", address)
	}
	if Blocked(ap.Addr()) {
		return &BlockedAddrError{Addr: ap.Addr().Unmap()}
	}
	return nil
}

// NotLoopbackError is returned by the dialer when a host reached over
// plain http (allowed toward loopback only) resolved to another address.
type NotLoopbackError struct{ Addr netip.Addr }

func (e *NotLoopbackError) Error() string {
	return fmt.Sprintf("address %s is not a loopback address, and plain http is allowed only toward loopback", e.Addr)
}

// loopbackOnly prefixes an allowed host:port that may be dialed only at a
// loopback address (a plain-http account override).
const loopbackOnly = "loopback:"

func controlLoopback(_, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("unexpected dial address %q", address)
	}
	if !ap.Addr().Unmap().IsLoopback() {
		return &NotLoopbackError{Addr: ap.Addr().Unmap()}
	}
	return nil
}

// Transports hands out HTTP transports whose dialer refuses non-public
// addresses except for an exact set of host:port pairs an account
// configured. Transports are shared per exception set, so a connection
// dialed under one account's exceptions is never reused for a request that
// did not have them.
type Transports struct {
	mu sync.Mutex
	m  map[string]*http.Transport
}

// NewTransports returns an empty set.
func NewTransports() *Transports { return &Transports{m: map[string]*http.Transport{}} }

// maxTransports bounds the cache; beyond it the set is flushed.
const maxTransports = 64

func (t *Transports) get(allow []string) *http.Transport {
	sort.Strings(allow)
	key := strings.Join(allow, ",")
	t.mu.Lock()
	defer t.mu.Unlock()
	if tr, ok := t.m[key]; ok {
		return tr
	}
	if len(t.m) >= maxTransports {
		for k, tr := range t.m {
			tr.CloseIdleConnections()
			delete(t.m, k)
		}
	}
	tr := newTransport(allow)
	t.m[key] = tr
	return tr
}

// Close drops idle connections.
func (t *Transports) Close() {
	t.mu.Lock()
	defer t.mu.Unlock()
	for k, tr := range t.m {
		tr.CloseIdleConnections()
		delete(t.m, k)
	}
}

func newTransport(allow []string) *http.Transport {
	allowed, loop := map[string]bool{}, map[string]bool{}
	for _, a := range allow {
		if hp, ok := strings.CutPrefix(a, loopbackOnly); ok {
			loop[hp] = true
		} else {
			allowed[a] = true
		}
	}
	strict := &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second, Control: control}
	open := &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}
	loopback := &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second, Control: controlLoopback}
	return &http.Transport{
		Proxy: nil, // never a proxy from the environment: it would hide the real destination
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			if loop[addr] { // the stricter rule wins when both apply
				return loopback.DialContext(ctx, network, addr)
			}
			if allowed[addr] {
				return open.DialContext(ctx, network, addr)
			}
			return strict.DialContext(ctx, network, addr)
		},
		ForceAttemptHTTP2:      true,
		MaxIdleConns:           32,
		MaxIdleConnsPerHost:    4,
		IdleConnTimeout:        90 * time.Second,
		TLSHandshakeTimeout:    10 * time.Second,
		ExpectContinueTimeout:  time.Second,
		MaxResponseHeaderBytes: 64 << 10,
	}
}
