// Command bare is the baseline for companion's start-up benchmark: a plain
// Go HTTP server started the same way as companion desktop (listen on a
// free loopback port, then print one ready line on stdout).
package main

import (
	"encoding/json"
	"net"
	"net/http"
	"os"
)

func main() {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		os.Exit(1)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) { w.Write([]byte(`{"status":"ok"}`)) })
	go http.Serve(ln, mux)
	json.NewEncoder(os.Stdout).Encode(map[string]string{"event": "ready", "url": "http://" + ln.Addr().String()})
	select {}
}
