package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"time"
)

// The first-party modules, the emulator flag serving each one's API, and
// the API's path under the emulator (the account's api_url override).
var firstParty = []struct{ name, flag, base string }{
	{"daytona", "-daytona", "/api"},
	{"e2b", "-e2b", ""},
	{"digitalocean", "-digitalocean", ""},
}

const emulatorToken = "bench-emulator-token-7d1e"

// benchFirstCalls times, for each first-party module, the first call a
// client can make (POST /v1/accounts, which calls the module to check the
// credentials) right after the ready line: on a fresh data dir (nothing
// compiled yet) and after a restart on the same data dir (the compile
// cache written by the first run). The baseline is the same call once
// everything is warm, in the first run.
func benchFirstCalls() error {
	b, err := buildBins()
	if err != nil {
		return err
	}
	emu := filepath.Join(b.dir, "emulators")
	if out, err := exec.Command("go", "build", "-o", emu, "github.com/canvasapp/companion/e2e/emulators/cmd/emulators").CombinedOutput(); err != nil {
		return fmt.Errorf("build emulators: %v\n%s", err, out)
	}
	addrs := map[string]string{}
	args := []string{"-instant"}
	for _, m := range firstParty {
		a, err := freeAddr()
		if err != nil {
			return err
		}
		addrs[m.name] = a
		args = append(args, m.flag, a)
	}
	cmd := exec.Command(emu, args...)
	cmd.Env = append(os.Environ(), "EMULATOR_TOKEN="+emulatorToken)
	if err := cmd.Start(); err != nil {
		return err
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	for _, a := range addrs {
		if err := waitListening(a, 30*time.Second); err != nil {
			return fmt.Errorf("emulators: %w", err)
		}
	}
	root, err := os.MkdirTemp("", "companion-bench-wasm-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(root)
	for _, m := range firstParty {
		api := "http://" + addrs[m.name] + m.base
		dir := filepath.Join(root, m.name)
		cold, warmCall, err := firstCall(b.companion, dir, m.name, api, true)
		if err != nil {
			return fmt.Errorf("%s on a fresh data dir: %w", m.name, err)
		}
		hit, _, err := firstCall(b.companion, dir, m.name, api, false)
		if err != nil {
			return fmt.Errorf("%s after a restart: %w", m.name, err)
		}
		base := "wasm.warm_add_account_call." + m.name
		emit(figure{Name: "wasm.first_call_fresh_data_dir." + m.name, Value: ms(cold), Unit: "ms",
			Baseline: base, BaselineValue: ms(warmCall), Ratio: ms(cold) / ms(warmCall)})
		emit(figure{Name: "wasm.first_call_after_restart." + m.name, Value: ms(hit), Unit: "ms",
			Baseline: base, BaselineValue: ms(warmCall), Ratio: ms(hit) / ms(warmCall)})
		emit(figure{Name: base, Value: ms(warmCall), Unit: "ms"})
	}
	return nil
}

// firstCall starts companion on dir, adds an account of provider right
// after the ready line and times the answer. With warm set it then waits
// for the background work to finish and times one more add (the warm
// baseline). It stops companion cleanly, so the compile cache is kept.
func firstCall(bin, dir, provider, api string, warm bool) (first, warmCall time.Duration, err error) {
	s, err := startServer(bin, desktopArgs(dir)...)
	if err != nil {
		return 0, 0, err
	}
	defer s.stop()
	if first, err = s.addAccount(provider, api); err != nil {
		return 0, 0, err
	}
	if !warm {
		return first, 0, nil
	}
	if err := waitQuiet(s.pid(), 3*time.Minute); err != nil {
		return 0, 0, err
	}
	warmCall, err = s.addAccount(provider, api)
	return first, warmCall, err
}

func (s *server) addAccount(provider, api string) (time.Duration, error) {
	body, _ := json.Marshal(map[string]any{"provider": provider, "label": "bench " + provider,
		"config": map[string]string{"api_url": api}, "credentials": map[string]string{"token": emulatorToken}})
	req, err := http.NewRequest("POST", s.URL+"/v1/accounts", bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Authorization", "Bearer "+s.Token)
	req.Header.Set("Content-Type", "application/json")
	began := time.Now()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	took := time.Since(began)
	if resp.StatusCode != http.StatusCreated {
		return 0, fmt.Errorf("POST /v1/accounts (%s): %s: %s", provider, resp.Status, out)
	}
	return took, nil
}

// freeAddr returns a loopback address nothing listens on right now.
func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

func waitListening(addr string, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			return c.Close()
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not listening after %s: %w", addr, limit, err)
		}
		time.Sleep(50 * time.Millisecond) // polling for the listener
	}
}
