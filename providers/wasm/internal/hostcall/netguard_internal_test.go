package hostcall

import (
	"context"
	"errors"
	"net"
	"strconv"
	"testing"
	"time"
)

// TestLoopbackOnlyDialer: a host reached over plain http (an account's
// loopback override) is dialed only at a loopback address, whatever its
// name resolved to.
func TestLoopbackOnlyDialer(t *testing.T) {
	for addr, ok := range map[string]bool{
		"127.0.0.1:80": true, "127.8.9.1:8080": true, "[::1]:443": true, "[::ffff:127.0.0.1]:80": true,
		"10.0.0.1:80": false, "93.184.216.34:80": false, "[fe80::1]:80": false, "[::]:80": false,
	} {
		err := controlLoopback("tcp", addr, nil)
		var nl *NotLoopbackError
		if ok != (err == nil) || !ok && !errors.As(err, &nl) {
			t.Errorf("%s: %v", addr, err)
		}
	}

	// Through the transport: a loopback-only entry is dialed with that
	// check (an address literal shows it without any DNS), and a
	// loopback name still connects.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	local := "localhost:" + strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	tr := newTransport([]string{loopbackOnly + local, loopbackOnly + "10.255.255.1:80"})
	defer tr.CloseIdleConnections()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var nl *NotLoopbackError
	if _, err := tr.DialContext(ctx, "tcp", "10.255.255.1:80"); !errors.As(err, &nl) {
		t.Fatalf("plain-http entry at a non-loopback address: %v", err)
	}
	c, err := tr.DialContext(ctx, "tcp", local)
	if err != nil {
		t.Fatalf("loopback name: %v", err)
	}
	c.Close()
}
