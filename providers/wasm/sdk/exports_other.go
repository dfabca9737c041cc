//go:build !wasip1

package sdk

// hostHTTP exists only inside the host: a native build (tests of a
// module's logic) has no network path.
func hostHTTP([]byte) ([]byte, error) {
	return nil, &Error{Kind: Unavailable, Message: "HTTP goes through the companion host; it is only available in a wasip1 build", FromHost: true}
}
