// Command wsclient is the client side of companion's stream benchmarks,
// run as its own process so the server under test (companion or the bare
// hub) has the machine's cores to itself apart from what clients need.
//
// It opens -n WebSocket clients with at most -inflight handshakes at once,
// each reading its snapshot to the end (the connect storm), then, in
// -rounds rounds, triggers one upsert over HTTP and times until every
// client has read it (fan-out), reading the server's CPU time from
// /proc/PID/stat around the rounds. With -idle it instead samples the
// server's RSS before and after the clients connect. It prints one JSON
// object on stdout.
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"net/http"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/gorilla/websocket"
)

type config struct {
	url, token, wsID string
	bare             bool
	n, inflight      int
	rounds           int
	pid              int
	idle             bool
	compress         bool
	table            bool
}

// result is what the parent benchrun reads.
type result struct {
	StormMS          float64 `json:"storm_ms"`
	SnapshotBytes    int     `json:"snapshot_bytes"`
	FanoutP50MS      float64 `json:"fanout_p50_ms,omitempty"`
	FanoutP99MS      float64 `json:"fanout_p99_ms,omitempty"`
	CPUPerBroadcast  float64 `json:"cpu_ms_per_broadcast,omitempty"`
	RSSPerClientByte float64 `json:"rss_bytes_per_client,omitempty"`
}

// conn is one client and the upserts it read: rev and arrival time.
type conn struct {
	ws     *websocket.Conn
	mu     sync.Mutex
	seen   map[int64]time.Time
	closed error // why reading stopped, once it has
}

func main() {
	var c config
	flag.StringVar(&c.url, "url", "", "server base URL (http://127.0.0.1:PORT)")
	flag.StringVar(&c.token, "token", "", "bearer token")
	flag.StringVar(&c.wsID, "workspace", "", "workspace whose keep flag is toggled to make an upsert (companion)")
	flag.BoolVar(&c.bare, "bare", false, "the server is the bare hub: trigger with POST /broadcast")
	flag.IntVar(&c.n, "n", 1000, "clients")
	flag.IntVar(&c.inflight, "inflight", 50, "handshakes in flight at most")
	flag.IntVar(&c.rounds, "rounds", 40, "broadcasts timed")
	flag.IntVar(&c.pid, "pid", 0, "server process id, for its CPU time and RSS")
	flag.BoolVar(&c.idle, "idle", false, "measure RSS per idle client instead of fan-out")
	flag.BoolVar(&c.compress, "compress", false, "offer permessage-deflate, as browsers do")
	flag.BoolVar(&c.table, "table", false, "ask for the snapshot in table form (?snapshot=table), as companion's page and JS client do")
	flag.Parse()
	raiseNoFile()
	res, err := run(c)
	if err != nil {
		log.Fatalf("wsclient: %v", err)
	}
	json.NewEncoder(os.Stdout).Encode(res)
}

func run(c config) (result, error) {
	if c.idle {
		return idle(c)
	}
	var res result
	conns, took, size, err := storm(c, c.n)
	if err != nil {
		return res, err
	}
	defer closeAll(conns)
	res.StormMS = ms(took)
	res.SnapshotBytes = size
	if c.rounds == 0 {
		return res, nil
	}
	return fanout(c, conns, res)
}

func closeAll(conns []*conn) {
	for _, k := range conns {
		k.ws.Close()
	}
}

// idleSteps is how many batches of clients the RSS slope is fitted over.
const idleSteps = 4

// idle connects the clients in idleSteps batches, samples the server's
// settled RSS before and after each, and reports the least-squares slope
// of RSS over clients: what one more idle client costs, less sensitive to
// the runtime reusing memory it already held than a single difference.
func idle(c config) (result, error) {
	var res result
	var xs, ys []float64
	var all []*conn
	defer func() { closeAll(all) }()
	// A first batch, closed again, makes the server allocate, so its
	// runtime collects what start-up left (an idle Go process runs no GC
	// for up to two minutes) before the first sample.
	warm, _, _, err := storm(c, c.n/idleSteps)
	if err != nil {
		return res, err
	}
	closeAll(warm)
	for step := 0; step <= idleSteps; step++ {
		if step > 0 {
			conns, _, size, err := storm(c, c.n/idleSteps)
			if err != nil {
				return res, err
			}
			all = append(all, conns...)
			res.SnapshotBytes = size
		}
		v, err := rssSettled(c.pid)
		if err != nil {
			return res, err
		}
		xs, ys = append(xs, float64(len(all))), append(ys, float64(v))
	}
	res.RSSPerClientByte = slope(xs, ys)
	return res, nil
}

func slope(xs, ys []float64) float64 {
	var mx, my float64
	for i := range xs {
		mx, my = mx+xs[i], my+ys[i]
	}
	mx, my = mx/float64(len(xs)), my/float64(len(ys))
	var num, den float64
	for i := range xs {
		num += (xs[i] - mx) * (ys[i] - my)
		den += (xs[i] - mx) * (xs[i] - mx)
	}
	return num / den
}

// storm opens n clients and waits until each has read its snapshot.
func storm(c config, n int) ([]*conn, time.Duration, int, error) {
	d := websocket.Dialer{Subprotocols: []string{"companion.v1"}, ReadBufferSize: 32 << 10, WriteBufferSize: 1024, HandshakeTimeout: 30 * time.Second, EnableCompression: c.compress}
	hdr := http.Header{"Authorization": {"Bearer " + c.token}}
	wsURL := "ws" + strings.TrimPrefix(c.url, "http") + "/v1/ws"
	if c.table {
		wsURL += "?snapshot=table"
	}
	conns := make([]*conn, n)
	sem := make(chan struct{}, c.inflight)
	var snapBytes atomic.Int64
	errs := make(chan error, n)
	var wg sync.WaitGroup
	began := time.Now()
	for i := range conns {
		wg.Add(1)
		go func() {
			sem <- struct{}{}
			ws, resp, err := d.Dial(wsURL, hdr)
			<-sem
			if err != nil {
				if resp != nil {
					err = fmt.Errorf("%w (HTTP %s)", err, resp.Status)
				}
				errs <- fmt.Errorf("client %d: dial %s: %w", i, wsURL, err)
				wg.Done()
				return
			}
			k := &conn{ws: ws, seen: map[int64]time.Time{}}
			conns[i] = k
			k.read(&wg, &snapBytes, errs, c.table)
		}()
	}
	wg.Wait()
	took := time.Since(began)
	select {
	case err := <-errs:
		for _, k := range conns {
			if k != nil {
				k.ws.Close()
			}
		}
		return nil, 0, 0, err
	default:
	}
	return conns, took, int(snapBytes.Load()), nil
}

// read consumes the snapshot (signalling wg) and then records upserts.
// Only a message's head is parsed: its type and rev.
func (k *conn) read(wg *sync.WaitGroup, snapBytes *atomic.Int64, errs chan<- error, table bool) {
	head := make([]byte, 128)
	first := true
	for {
		_, r, err := k.ws.NextReader()
		if err != nil {
			k.mu.Lock()
			k.closed = err
			k.mu.Unlock()
			if first {
				errs <- fmt.Errorf("reading snapshot: %w", err)
				wg.Done()
			}
			return
		}
		n, _ := io.ReadFull(r, head)
		rest, _ := io.Copy(io.Discard, r)
		at := time.Now()
		typ, rev := parseHead(head[:n])
		if first {
			first = false
			if typ != "snapshot" {
				errs <- fmt.Errorf("first message is %q, not a snapshot", typ)
			} else if form := snapshotForm(head[:n]); (form == "table") != table {
				errs <- fmt.Errorf("the snapshot is in %s form (table asked for: %v)", form, table)
			}
			snapBytes.Store(int64(n) + rest)
			wg.Done()
			continue
		}
		if typ == "upsert" {
			k.mu.Lock()
			k.seen[rev] = at
			k.mu.Unlock()
		}
	}
}

// snapshotForm tells the table form ("fields" before the rows) from the
// object form by the first key after the head.
func snapshotForm(head []byte) string {
	switch {
	case bytes.Contains(head, []byte(`,"fields":[`)):
		return "table"
	case bytes.Contains(head, []byte(`,"workspaces":[`)):
		return "object"
	}
	return "unknown"
}

func parseHead(b []byte) (typ string, rev int64) {
	if i := bytes.Index(b, []byte(`"type":"`)); i >= 0 {
		s := b[i+8:]
		if j := bytes.IndexByte(s, '"'); j >= 0 {
			typ = string(s[:j])
		}
	}
	if i := bytes.Index(b, []byte(`"rev":`)); i >= 0 {
		s := b[i+6:]
		j := 0
		for j < len(s) && s[j] >= '0' && s[j] <= '9' {
			j++
		}
		rev, _ = strconv.ParseInt(string(s[:j]), 10, 64)
	}
	return typ, rev
}

// fanout triggers rounds upserts one after another and collects every
// client's delay from the trigger to having read the upsert.
func fanout(c config, conns []*conn, res result) (result, error) {
	var lat []time.Duration
	cpu0, err := cpuTicks(c.pid)
	if err != nil {
		return res, err
	}
	for r := 0; r < c.rounds; r++ {
		t0 := time.Now()
		rev, err := trigger(c, r%2 == 0)
		if err != nil {
			return res, fmt.Errorf("round %d: %w", r, err)
		}
		deadline := time.Now().Add(30 * time.Second)
		for _, k := range conns {
			for {
				k.mu.Lock()
				at, ok := k.seen[rev]
				closed := k.closed
				k.mu.Unlock()
				if ok {
					lat = append(lat, at.Sub(t0))
					break
				}
				if closed != nil {
					return res, fmt.Errorf("round %d: a client stopped reading before upsert rev %d: %w", r, rev, closed)
				}
				if time.Now().After(deadline) {
					return res, fmt.Errorf("round %d: upsert rev %d not read by every client within 30 s", r, rev)
				}
				time.Sleep(200 * time.Microsecond) // polling for arrival, not timing
			}
		}
	}
	cpu1, err := cpuTicks(c.pid)
	if err != nil {
		return res, err
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	res.FanoutP50MS = ms(lat[len(lat)/2])
	res.FanoutP99MS = ms(lat[len(lat)*99/100])
	res.CPUPerBroadcast = float64(cpu1-cpu0) * 10 / float64(c.rounds) // USER_HZ is 100
	return res, nil
}

// trigger makes the server publish one upsert and returns its rev.
func trigger(c config, keep bool) (int64, error) {
	var req *http.Request
	var err error
	if c.bare {
		req, err = http.NewRequest("POST", c.url+"/broadcast", nil)
	} else {
		req, err = http.NewRequest("PUT", c.url+"/v1/workspaces/"+c.wsID+"/keep", strings.NewReader(fmt.Sprintf(`{"keep":%v}`, keep)))
		req.Header.Set("Content-Type", "application/json")
	}
	if err != nil {
		return 0, err
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		return 0, fmt.Errorf("%s %s: %s: %s", req.Method, req.URL.Path, resp.Status, body)
	}
	var out struct {
		Workspace struct {
			Rev int64 `json:"rev"`
		} `json:"workspace"`
	}
	if err := json.Unmarshal(body, &out); err != nil || out.Workspace.Rev == 0 {
		return 0, fmt.Errorf("%s %s: no workspace rev in %q", req.Method, req.URL.Path, body)
	}
	return out.Workspace.Rev, nil
}

// cpuTicks is the process's user+system CPU time in clock ticks.
func cpuTicks(pid int) (int64, error) {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// Fields after the command name (which may hold spaces) start at ')'.
	f := strings.Fields(string(raw[bytes.LastIndexByte(raw, ')')+1:]))
	u, _ := strconv.ParseInt(f[11], 10, 64)
	s, _ := strconv.ParseInt(f[12], 10, 64)
	return u + s, nil
}

// rssSettled samples the process's RSS every 250 ms until it has not
// changed by more than 1% over 2 s (the Go runtime has finished collecting
// and returning what the clients' set-up left), at most 20 s, and returns
// the median of the last samples.
func rssSettled(pid int) (int64, error) {
	var samples []int64
	deadline := time.Now().Add(20 * time.Second)
	for {
		v, err := rss(pid)
		if err != nil {
			return 0, err
		}
		samples = append(samples, v)
		if len(samples) >= 9 {
			last := append([]int64(nil), samples[len(samples)-9:]...)
			sort.Slice(last, func(i, j int) bool { return last[i] < last[j] })
			if float64(last[8]-last[0]) <= 0.01*float64(last[4]) || time.Now().After(deadline) {
				return last[4], nil
			}
		}
		time.Sleep(250 * time.Millisecond) // sampling interval
	}
}

func rss(pid int) (int64, error) {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if strings.HasPrefix(line, "VmRSS:") {
			kb, err := strconv.ParseInt(strings.Fields(line)[1], 10, 64)
			return kb << 10, err
		}
	}
	return 0, fmt.Errorf("no VmRSS for pid %d", pid)
}

func raiseNoFile() {
	var l syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l) == nil && l.Cur < l.Max {
		l.Cur = l.Max
		syscall.Setrlimit(syscall.RLIMIT_NOFILE, &l)
	}
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
