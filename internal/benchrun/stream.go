package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"
)

// clientResult is what wsclient prints.
type clientResult struct {
	StormMS          float64 `json:"storm_ms"`
	SnapshotBytes    int     `json:"snapshot_bytes"`
	FanoutP50MS      float64 `json:"fanout_p50_ms"`
	FanoutP99MS      float64 `json:"fanout_p99_ms"`
	CPUPerBroadcast  float64 `json:"cpu_ms_per_broadcast"`
	RSSPerClientByte float64 `json:"rss_bytes_per_client"`
}

const streamClients = 1000

// idleStore is the store size for RSS per idle client: small, so the
// figure is what a connection keeps, not the garbage left by encoding
// large snapshots (companion has no endpoint to force a GC; at 10k
// workspaces that garbage, not yet returned to the OS, swamps the figure).
const idleStore = 10

// benchStreamProcess drives the real binary and the bare gorilla hub
// with the same client process: connect storm and fan-out on a store of
// 10k workspaces. Companion's clients ask for the snapshot in table form,
// as its page and JS client do; the bare hub sends every client the
// object form of companion's GET /v1/workspaces answer, as before the
// table form existed, and companion's object form is measured against it
// too.
//
// The machine is shared, so its load drifts over the minutes this takes.
// Both servers run at once and each measurement alternates between them
// in the order companion, bare, bare, companion (ABBA): the mean of each
// side's two runs cancels a drift that is linear over the four.
func benchStreamProcess(rounds int) error {
	b, comp, list, err := startSeeded(nil, 10_000)
	if err != nil {
		return err
	}
	defer comp.stop()
	listFile := filepath.Join(b.dir, "workspaces-10k.json")
	id, err := saveList(list, listFile)
	if err != nil {
		return err
	}
	hub, err := startServer(b.barehub, listFile)
	if err != nil {
		return err
	}
	defer hub.stop()
	r := strconv.Itoa(rounds)
	// abba runs the companion client (args ca) and the bare hub's (args
	// ba) twice each, ABBA, and returns each side's mean.
	abba := func(what string, ca, ba []string) (clientResult, clientResult, error) {
		var cs, bs []clientResult
		for _, side := range []bool{true, false, false, true} {
			s, args, name := comp, ca, "companion"
			if !side {
				s, args, name = hub, ba, "bare hub"
			}
			res, err := runClient(b.wsclient, s, args...)
			if err != nil {
				return clientResult{}, clientResult{}, fmt.Errorf("%s, %s: %w", name, what, err)
			}
			if side {
				cs = append(cs, res)
			} else {
				bs = append(bs, res)
			}
		}
		return meanResult(cs), meanResult(bs), nil
	}
	c, h, err := abba("storm and fan-out", []string{"-table", "-workspace", id, "-rounds", r}, []string{"-bare", "-rounds", r})
	if err != nil {
		return err
	}
	cz, hz, err := abba("compression offered", []string{"-table", "-compress", "-rounds", "0"}, []string{"-bare", "-compress", "-rounds", "0"})
	if err != nil {
		return err
	}
	// The object form against the bare hub's storm again, ABBA too.
	co, ho, err := abba("object form", []string{"-rounds", "0"}, []string{"-bare", "-rounds", "0"})
	if err != nil {
		return err
	}
	const n = "stream.proc."
	emit(figure{Name: n + "connect_storm_1000_clients_10k_snapshot", Value: c.StormMS, Unit: "ms",
		Baseline: n + "bare_hub_connect_storm", BaselineValue: h.StormMS, Ratio: c.StormMS / h.StormMS,
		Goal: "value <= 2000 ms (50 handshakes in flight)", Met: met(c.StormMS <= 2000)})
	emit(figure{Name: n + "bare_hub_connect_storm", Value: h.StormMS, Unit: "ms"})
	emit(figure{Name: n + "connect_storm_object_form", Value: co.StormMS, Unit: "ms",
		Baseline: n + "bare_hub_connect_storm_object_form_runs", BaselineValue: ho.StormMS, Ratio: co.StormMS / ho.StormMS})
	emit(figure{Name: n + "bare_hub_connect_storm_object_form_runs", Value: ho.StormMS, Unit: "ms"})
	emit(figure{Name: n + "connect_storm_compression_offered", Value: cz.StormMS, Unit: "ms",
		Baseline: n + "bare_hub_connect_storm_compression_offered", BaselineValue: hz.StormMS, Ratio: cz.StormMS / hz.StormMS,
		Goal: "ratio <= 1 (permessage-deflate offered, as browsers do; bound by the client inflating 1,000 snapshots)", Met: met(cz.StormMS <= hz.StormMS)})
	emit(figure{Name: n + "bare_hub_connect_storm_compression_offered", Value: hz.StormMS, Unit: "ms"})
	mb := float64(c.SnapshotBytes) / 1e6
	emit(figure{Name: n + "snapshot_10k_workspaces_size", Value: mb, Unit: "MB",
		Ratio: mb / 3.5, Goal: "value <= 3.5 MB, table form (ratio is value/goal)", Met: met(mb <= 3.5)})
	emit(figure{Name: n + "snapshot_10k_workspaces_size_object_form", Value: float64(co.SnapshotBytes) / 1e6, Unit: "MB"})
	emit(figure{Name: n + "bare_hub_snapshot_size", Value: float64(h.SnapshotBytes) / 1e6, Unit: "MB"})
	emit(figure{Name: n + "fanout_1000_clients_p50", Value: c.FanoutP50MS, Unit: "ms",
		Baseline: n + "bare_hub_fanout_p50", BaselineValue: h.FanoutP50MS, Ratio: c.FanoutP50MS / h.FanoutP50MS})
	emit(figure{Name: n + "fanout_1000_clients_p99", Value: c.FanoutP99MS, Unit: "ms",
		Baseline: n + "bare_hub_fanout_p99", BaselineValue: h.FanoutP99MS, Ratio: c.FanoutP99MS / h.FanoutP99MS,
		Goal: "ratio <= 1.3", Met: met(c.FanoutP99MS <= 1.3*h.FanoutP99MS)})
	emit(figure{Name: n + "bare_hub_fanout_p50", Value: h.FanoutP50MS, Unit: "ms"})
	emit(figure{Name: n + "bare_hub_fanout_p99", Value: h.FanoutP99MS, Unit: "ms"})
	emit(figure{Name: n + "server_cpu_per_broadcast_1000_clients", Value: c.CPUPerBroadcast, Unit: "ms",
		Baseline: n + "bare_hub_cpu_per_broadcast", BaselineValue: h.CPUPerBroadcast, Ratio: c.CPUPerBroadcast / h.CPUPerBroadcast,
		Goal: "ratio <= 1.3 (includes the HTTP request that causes the upsert)", Met: met(c.CPUPerBroadcast <= 1.3*h.CPUPerBroadcast)})
	emit(figure{Name: n + "bare_hub_cpu_per_broadcast", Value: h.CPUPerBroadcast, Unit: "ms"})
	return nil
}

// meanResult is the mean of each figure over rs (all from one side).
func meanResult(rs []clientResult) clientResult {
	var m clientResult
	for _, r := range rs {
		m.StormMS += r.StormMS / float64(len(rs))
		m.FanoutP50MS += r.FanoutP50MS / float64(len(rs))
		m.FanoutP99MS += r.FanoutP99MS / float64(len(rs))
		m.CPUPerBroadcast += r.CPUPerBroadcast / float64(len(rs))
		m.RSSPerClientByte += r.RSSPerClientByte / float64(len(rs))
		m.SnapshotBytes = r.SnapshotBytes
	}
	return m
}

// benchIdleMemory: RSS growth of the server per idle client, 1,000
// clients connected in batches on a store of idleStore workspaces,
// companion against the bare hub, RSS sampled until settled after each
// batch (see wsclient's idle).
func benchIdleMemory() error {
	b, comp, list, err := startSeeded(idleEnv, idleStore)
	if err != nil {
		return err
	}
	listFile := filepath.Join(b.dir, "workspaces-10.json")
	if _, err := saveList(list, listFile); err != nil {
		comp.stop()
		return err
	}
	c, err := runClient(b.wsclient, comp, "-idle")
	comp.stop()
	if err != nil {
		return fmt.Errorf("companion: %w", err)
	}
	hub, err := startServerEnv(idleEnv, b.barehub, listFile)
	if err != nil {
		return err
	}
	h, err := runClient(b.wsclient, hub, "-bare", "-idle")
	hub.stop()
	if err != nil {
		return fmt.Errorf("bare hub: %w", err)
	}
	kib, bkib := c.RSSPerClientByte/1024, h.RSSPerClientByte/1024
	emit(figure{Name: "stream.proc.rss_per_idle_client", Value: kib, Unit: "KiB",
		Baseline: "stream.proc.bare_hub_rss_per_idle_client", BaselineValue: bkib, Ratio: kib / bkib,
		Goal: "value <= 32 KiB", Met: met(kib <= 32)})
	emit(figure{Name: "stream.proc.bare_hub_rss_per_idle_client", Value: bkib, Unit: "KiB"})
	return nil
}

// idleEnv runs both servers of the RSS measurement with a small GC
// target, so their RSS follows live memory closely: the stand-in for the
// forced GC neither process offers an endpoint for.
var idleEnv = []string{"GOGC=10"}

// startWarmEnv starts companion on dir with env added, waits until its
// background work is done and returns it with its GET /v1/workspaces
// answer.
func startWarmEnv(env []string, bin, dir string) (*server, []byte, error) {
	s, err := startServerEnv(env, bin, desktopArgs(dir)...)
	if err != nil {
		return nil, nil, err
	}
	list, err := s.get("/v1/workspaces")
	if err == nil {
		err = waitQuiet(s.pid(), 3*time.Minute)
	}
	if err != nil {
		s.stop()
		return nil, nil, err
	}
	return s, list, nil
}

func (s *server) get(path string) ([]byte, error) {
	req, err := http.NewRequest("GET", s.URL+path, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+s.Token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err == nil && resp.StatusCode != 200 {
		err = fmt.Errorf("GET %s: %s: %s", path, resp.Status, body)
	}
	return body, err
}

// saveList writes the list answer for the bare hub and returns the id of
// its first workspace (the one whose keep flag the client toggles).
func saveList(list []byte, file string) (string, error) {
	var l struct {
		Workspaces []struct {
			ID string `json:"id"`
		} `json:"workspaces"`
	}
	if err := json.Unmarshal(list, &l); err != nil || len(l.Workspaces) == 0 {
		return "", fmt.Errorf("GET /v1/workspaces: no workspaces (%v)", err)
	}
	return l.Workspaces[0].ID, os.WriteFile(file, list, 0o600)
}

// runClient runs the client process against s and decodes its result.
func runClient(bin string, s *server, args ...string) (clientResult, error) {
	args = append([]string{"-url", s.URL, "-token", s.Token, "-pid", strconv.Itoa(s.pid()), "-n", strconv.Itoa(streamClients)}, args...)
	cmd := exec.Command(bin, args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	var r clientResult
	if err := cmd.Run(); err != nil {
		return r, fmt.Errorf("wsclient: %v: %s", err, errb.String())
	}
	if err := json.Unmarshal(out.Bytes(), &r); err != nil {
		return r, fmt.Errorf("wsclient printed %q: %w", out.String(), err)
	}
	return r, nil
}
