package wasm

import (
	"net/netip"
	"syscall"

	"github.com/canvasapp/companion/providers/wasm/internal/hostcall"
)

// BlockedAddr reports whether ip is one provider calls may not reach:
// loopback, private, link-local or otherwise not public. Other outbound
// callers (webhooks) use it so that one guard decides for all.
func BlockedAddr(ip netip.Addr) bool { return hostcall.Blocked(ip) }

// PublicOnly is a net.Dialer Control that refuses to connect to an address
// BlockedAddr refuses, after name resolution, so a name that resolves to
// a private address is stopped too.
func PublicOnly(network, address string, c syscall.RawConn) error {
	return publicOnly(network, address, c)
}
