package e2e

import (
	"context"
	"fmt"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/canvasapp/companion/internal/testsupport"
	"github.com/canvasapp/companion/internal/testsupport/faultproxy"
	"github.com/canvasapp/companion/internal/testsupport/gcsserver"
	"github.com/canvasapp/companion/internal/testsupport/s3server"
	"github.com/fsouza/fake-gcs-server/fakestorage"
)

// s3Env is the AWS credential chain's environment for the test server.
func s3Env() []string {
	return []string{"AWS_ACCESS_KEY_ID=" + s3server.AccessKey, "AWS_SECRET_ACCESS_KEY=" + s3server.SecretKey,
		"AWS_EC2_METADATA_DISABLED=true", "AWS_CONFIG_FILE=/dev/null", "AWS_SHARED_CREDENTIALS_FILE=/dev/null"}
}

func testExportStore(t *testing.T, st objectStore) {
	image, scope := boxImage(t), dockerScope(t)
	data := t.TempDir()
	p := start(t, options{dataDir: data, env: st.env, args: []string{"--docker-image", image, "--docker-scope", scope,
		"--export-store", st.url}})

	var created struct{ Workspace workspace }
	p.must(202, "POST", "/v1/workspaces", map[string]any{"account_id": "local-docker", "name": "to the bucket"}, &created)
	id := created.Workspace.ID
	ws := p.waitState(id, "running", 90*time.Second)
	putTree(t, ws.BoxID, "/workspace", map[string]string{"notes.txt": "kept in a bucket\n"})

	var started struct{ Export exportRec }
	p.must(202, "POST", "/v1/workspaces/"+id+"/export", nil, &started)
	rec := p.waitExport(started.Export.ID, 2*time.Minute)
	if !rec.Verified {
		t.Fatalf("export to the store: %+v\n%s", rec, p.stderr.String())
	}
	dir := exportDirIn(t, st, id, rec.ID)
	if ents, _ := os.ReadDir(filepath.Join(data, "export-spool", id)); len(ents) != 0 {
		t.Errorf("the spool kept %d entries after the upload", len(ents))
	}

	var archive exportFile
	for _, f := range rec.Files {
		if f.Name == "workspace.tar.gz" {
			archive = f
		}
	}
	stored, err := st.object(dir + "workspace.tar.gz")
	if err != nil || archive.URL == "" {
		t.Fatalf("archive in the store: %v; record %+v", err, rec.Files)
	}
	resp, body := p.get(archive.URL, nil)
	if resp.StatusCode != 200 || sum(body) != archive.SHA256 || string(body) != string(stored) {
		t.Fatalf("download: %d, %d bytes, sha %s; want the stored %d bytes %s", resp.StatusCode, len(body), sum(body), len(stored), archive.SHA256)
	}
	resp, part := p.get(archive.URL, map[string]string{"Range": "bytes=10-29"})
	if resp.StatusCode != 206 || string(part) != string(stored[10:30]) || resp.Header.Get("Content-Range") != fmt.Sprintf("bytes 10-29/%d", len(stored)) {
		t.Fatalf("range download: %d %q (Content-Range %q), want bytes 10-29 of the stored archive", resp.StatusCode, part, resp.Header.Get("Content-Range"))
	}

	// The delete's export goes to the store too, read back before the box goes.
	p.deleteConfirmed(id)
	p.waitRemoved(id, 3*time.Minute)
	var list struct{ Exports []exportRec }
	p.must(200, "GET", "/v1/workspaces/"+id+"/exports", nil, &list)
	var deleteExport exportRec
	for _, e := range list.Exports {
		if e.Verified && e.ID != rec.ID {
			deleteExport = e
		}
	}
	if deleteExport.ID == "" {
		t.Fatalf("no verified delete export: %+v", list.Exports)
	}
	exportDirIn(t, st, id, deleteExport.ID)
	restored, _ := p.restoreInto(deleteExport, "local-docker", "")
	got, err := boxFile(t, restored.BoxID, "/workspace/notes.txt")
	if err != nil || got != "kept in a bucket\n" {
		t.Errorf("the restored box's notes.txt = %q, %v", got, err)
	}
}

// exportDirIn is the store directory of workspace id's export (under any
// owner), which must be committed (hold manifest.json).
func exportDirIn(t *testing.T, st objectStore, id, exportID string) string {
	t.Helper()
	dir := ""
	for _, k := range st.keys("companion/") {
		if d, f := path.Split(k); strings.Contains(d, "/"+id+"/") && strings.HasSuffix(d, "-"+exportID+"/") && f == "manifest.json" {
			dir = d
		}
	}
	if dir == "" {
		t.Fatalf("the store holds no committed export %s: %v", exportID, st.keys("companion/"))
	}
	return dir
}

// objectStore is a real store for the e2e: its URL, the environment
// companion needs for it, and a look at what it holds.
type objectStore struct {
	url string
	env []string
	// keys lists the keys under prefix; object reads one.
	keys   func(prefix string) []string
	object func(key string) ([]byte, error)
}

func s3Store(t *testing.T) objectStore {
	srv := s3server.Start(t, "canvas-exports")
	root := srv.ObjectPath("canvas-exports", "")
	return objectStore{url: srv.URL("canvas-exports", "companion"), env: s3Env(),
		keys: func(prefix string) []string {
			var out []string
			filepath.WalkDir(filepath.Join(root, filepath.FromSlash(prefix)), func(p string, d fs.DirEntry, err error) error {
				if err == nil && !d.IsDir() {
					rel, _ := filepath.Rel(root, p)
					out = append(out, filepath.ToSlash(rel))
				}
				return nil
			})
			return out
		},
		object: func(key string) ([]byte, error) { return os.ReadFile(srv.ObjectPath("canvas-exports", key)) },
	}
}

func gcsStore(t *testing.T) objectStore {
	srv := gcsserver.Start(t, "canvas-exports")
	return objectStore{url: srv.URL("canvas-exports", "companion"),
		keys: func(prefix string) []string {
			res, err := srv.Fake.ListObjectsWithOptionsPaginated("canvas-exports", fakestorage.ListOptions{Prefix: prefix})
			if err != nil {
				t.Fatal(err)
			}
			var out []string
			for _, o := range res.Objects {
				out = append(out, o.Name)
			}
			return out
		},
		object: func(key string) ([]byte, error) {
			o, err := srv.Fake.GetObject("canvas-exports", key)
			return o.Content, err
		},
	}
}

// TestExportStore: companion desktop with --export-store s3://… on a
// real S3 server (versitygw), and gs://… on a GCS emulator
// (fake-gcs-server): an export lands in the store under
// <prefix>/_/<workspace>/<stamp>-<export>/ with manifest.json, nothing
// stays in the spool, a download (and a Range of it) streams from the
// store, the delete's export is read back from the store before the box
// goes, and that export restores the workspace's files. A serve whose
// bucket does not exist stops before its ready line, saying so; a
// desktop starts (a laptop may be offline) and its exports fail with the
// reason.
func TestExportStore(t *testing.T) {
	t.Run("s3", func(t *testing.T) { testExportStore(t, s3Store(t)) })
	t.Run("gs", func(t *testing.T) { testExportStore(t, gcsStore(t)) })

	srv := s3server.Start(t)
	// A bucket that does not exist: serve stops before its ready line.
	cmd := exec.Command(companionBin, "serve", "--data-dir", t.TempDir(), "--listen", "127.0.0.1:0", "--docker-scope", "unused",
		"--export-store", srv.URL("no-such-bucket", "x"))
	cmd.Env = append(os.Environ(), s3Env()...)
	out, err := cmd.CombinedOutput()
	if err == nil || strings.Contains(string(out), `"event":"ready"`) || !strings.Contains(string(out), "no-such-bucket") ||
		strings.Contains(string(out), s3server.SecretKey) {
		t.Errorf("serve with an unknown bucket: %v\n%s\nwant an exit before the ready line naming the bucket, without the secret", err, out)
	}

	d := start(t, options{dataDir: t.TempDir(), env: s3Env(), args: []string{"--docker-image", boxImage(t), "--docker-scope", dockerScope(t),
		"--export-store", srv.URL("no-such-bucket", "x")}})
	var created struct{ Workspace workspace }
	d.must(202, "POST", "/v1/workspaces", map[string]any{"account_id": "local-docker", "name": "offline"}, &created)
	d.waitState(created.Workspace.ID, "running", 90*time.Second)
	var started struct{ Export exportRec }
	d.must(202, "POST", "/v1/workspaces/"+created.Workspace.ID+"/export", nil, &started)
	if rec := d.waitExport(started.Export.ID, time.Minute); rec.Verified || rec.Error == nil ||
		!strings.Contains(*rec.Error, "could not be reached") || !strings.Contains(*rec.Error, "no-such-bucket") {
		t.Errorf("export with the store unreachable: %+v; want failed, naming the store and why", rec)
	}
}

// TestReplicaKilledMidUploadToS3: two serve replicas on PostgreSQL share
// an S3 store and no filesystem. The replica running a delete is killed
// (SIGKILL) once the delete's export has put its first file in the
// store; the other takes the delete over, exports again and finishes it;
// a download of the verified export's files through that replica matches
// the store's. The dead export's objects never read as an export, and
// the killed replica's next start sweeps them.
func TestReplicaKilledMidUploadToS3(t *testing.T) {
	st := s3Store(t)
	rs := startReplicas(t, 2, replicaOpts{Args: []string{"--lease-ttl", replicaLease}, Env: s3Env(), ExportStore: st.url})
	other := rs.client(rs.Replicas[1].ready.URL)
	id, _ := rs.createOn(other, "upload-crash")

	victim := rs.start(0, "COMPANION_TEST_CRASH_AT=export:uploaded")
	rs.deleteCrashing(victim, id)
	select {
	case <-victim.done:
	case <-time.After(2 * time.Minute):
		t.Fatalf("replica 0 did not crash mid-upload\n%s", victim.stderr.String())
	}
	rs.kill(0)
	uncommitted := func() []string {
		dirs := map[string]bool{}
		committed := map[string]bool{}
		for _, k := range st.keys("companion/") {
			if !strings.Contains(k, "/"+id+"/") {
				continue
			}
			d, f := path.Split(k)
			dirs[d] = true
			if f == "manifest.json" {
				committed[d] = true
			}
		}
		var out []string
		for d := range dirs {
			if !committed[d] {
				out = append(out, d)
			}
		}
		return out
	}
	if u := uncommitted(); len(u) != 1 {
		t.Fatalf("after the kill the store holds uncommitted exports %v, want the dead upload's", u)
	}

	if w := rs.waitSettled(id, 3*time.Minute); !w.Removed {
		t.Fatalf("after the takeover the workspace is %+v, want removed", w)
	}
	exps := rs.verifiedExportsVia(other, id)
	if len(exps) != 1 {
		t.Fatalf("verified exports after the takeover: %+v, want the one the other replica made", exps)
	}
	dir := exportDirIn(t, st, id, exps[0].ID)
	for _, f := range exps[0].Files {
		code, body, _ := other.do("GET", f.URL, nil, nil)
		stored, err := st.object(dir + f.Name)
		if code != 200 || err != nil || sum(body) != f.SHA256 || string(body) != string(stored) {
			t.Errorf("%s through replica 1: %d, sha %s; want the store's bytes, sha %s (%v)", f.Name, code, sum(body), f.SHA256, err)
		}
	}

	// The killed replica comes back: its start sweeps the dead upload.
	rs.start(0)
	// The sweep runs in the background after the start: wait for it and
	// its log line.
	testsupport.Until(t, time.Minute, "the dead upload swept and logged", func() bool {
		return len(uncommitted()) == 0 && strings.Contains(rs.Replicas[0].stderr.String(), "removed an unfinished export from the export store")
	})
}

// TestExportStoreFaultsBlockTheDelete: with the S3 server behind a
// fault-injecting proxy, a delete whose export meets 503s on every
// upload, and then a server that says it is full, is blocked with the
// store's reason and keeps the box, and nothing in the store reads as an
// export; with the faults gone the delete goes through.
func TestExportStoreFaultsBlockTheDelete(t *testing.T) {
	st := s3Store(t)
	u, _ := url.Parse(st.url)
	q := u.Query()
	proxy := faultproxy.Start(t, q.Get("endpoint"))
	q.Set("endpoint", proxy.URL)
	u.RawQuery = q.Encode()
	image, scope := boxImage(t), dockerScope(t)
	p := start(t, options{dataDir: t.TempDir(), env: s3Env(), args: []string{"--docker-image", image, "--docker-scope", scope,
		"--export-store", u.String(), "--export-budget", "20s"}})
	var created struct{ Workspace workspace }
	p.must(202, "POST", "/v1/workspaces", map[string]any{"account_id": "local-docker", "name": "kept through faults"}, &created)
	id := created.Workspace.ID
	ws := p.waitState(id, "running", 90*time.Second)
	putTree(t, ws.BoxID, "/workspace", map[string]string{"notes.txt": "not lost\n"})

	uploads := func(r *http.Request) bool { return r.Method == "PUT" || r.Method == "POST" }
	for _, c := range []struct {
		name  string
		fault faultproxy.Fault
		want  string
	}{
		{"503", faultproxy.Fault{Status: 503, ContentType: "application/xml",
			Body: `<?xml version="1.0" encoding="UTF-8"?><Error><Code>ServiceUnavailable</Code><Message>down for a test</Message></Error>`}, "unavailable"},
		{"full", faultproxy.Fault{Status: 507, ContentType: "application/xml",
			Body: `<?xml version="1.0" encoding="UTF-8"?><Error><Code>InsufficientStorage</Code><Message>disk full</Message></Error>`}, "full"},
	} {
		proxy.Set(uploads, c.fault)
		p.deleteConfirmed(id)
		blocked := p.waitBlocked(id, 3*time.Minute)
		t.Logf("%s: %s", c.name, blocked.Error)
		if !strings.Contains(strings.ToLower(blocked.Error), c.want) {
			t.Errorf("%s: the delete was blocked with %q, want the store's reason (%s)", c.name, blocked.Error, c.want)
		}
		if proxy.Hits() == 0 {
			t.Errorf("%s: no upload met the fault", c.name)
		}
		if got, err := boxFile(t, ws.BoxID, "/workspace/notes.txt"); err != nil || got != "not lost\n" {
			t.Fatalf("%s: the box lost its file: %q, %v", c.name, got, err)
		}
		for _, k := range st.keys("companion/") {
			if strings.HasSuffix(k, "/manifest.json") {
				t.Errorf("%s: %s reads as an export after a failed upload", c.name, k)
			}
		}
	}

	proxy.Set(nil, faultproxy.Fault{})
	p.deleteConfirmed(id)
	p.waitRemoved(id, 3*time.Minute)
	if exps := p.verifiedExports(id); len(exps) != 1 {
		t.Errorf("after the faults: %d verified exports, want 1", len(exps))
	}
}

// TestExportStoreKeysInSecretStore: with no AWS credential chain, serve
// cannot reach the bucket and stops before its ready line. Keys the bucket
// refuses are not kept; keys it accepts are kept in the secret store
// (`show` names the access key, never the secret), and serve then starts
// and exports into the bucket without the secret in its logs. Forgotten,
// serve stops before its ready line again.
func TestExportStoreKeysInSecretStore(t *testing.T) {
	st := s3Store(t)
	data := t.TempDir()
	noChain := []string{"AWS_ACCESS_KEY_ID=", "AWS_SECRET_ACCESS_KEY=", "AWS_SESSION_TOKEN=", "AWS_PROFILE=",
		"AWS_EC2_METADATA_DISABLED=true", "AWS_CONFIG_FILE=/dev/null", "AWS_SHARED_CREDENTIALS_FILE=/dev/null"}
	image, scope := boxImage(t), dockerScope(t)
	serveRefused := func(when string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, companionBin, "serve", "--data-dir", data, "--listen", "127.0.0.1:0", "--docker-image", image,
			"--docker-scope", scope, "--export-store", st.url)
		cmd.Env = append(os.Environ(), noChain...)
		out, err := cmd.CombinedOutput()
		if err == nil || strings.Contains(string(out), `"event":"ready"`) || !strings.Contains(string(out), "--export-store") {
			t.Fatalf("%s: serve with no keys: %v\n%s\nwant an exit before the ready line naming --export-store", when, err, out)
		}
	}
	serveRefused("before any keys")

	wrong := "AWS_ACCESS_KEY_ID=" + s3server.AccessKey + "\nAWS_SECRET_ACCESS_KEY=not-the-secret-42\n"
	out, errOut, code := runCLI(t, noChain, wrong, "export-store", "set-keys", st.url, "--data-dir", data)
	if code == 0 || !strings.Contains(errOut, "not kept") || strings.Contains(out+errOut, "not-the-secret-42") {
		t.Fatalf("set-keys with refused keys: exit %d\n%s%s\nwant a failure saying they were not kept, without the secret", code, out, errOut)
	}
	if out, errOut, code := runCLI(t, noChain, "", "export-store", "show", st.url, "--data-dir", data); code != 0 || !strings.Contains(out, "no keys are kept") {
		t.Fatalf("show after refused keys: exit %d\n%s%s", code, out, errOut)
	}
	right := "AWS_ACCESS_KEY_ID=" + s3server.AccessKey + "\nAWS_SECRET_ACCESS_KEY=" + s3server.SecretKey + "\n"
	if out, errOut, code := runCLI(t, noChain, right, "export-store", "set-keys", st.url, "--data-dir", data); code != 0 || !strings.Contains(out, "kept S3 access key "+s3server.AccessKey) {
		t.Fatalf("set-keys: exit %d\n%s%s", code, out, errOut)
	}
	out, errOut, code = runCLI(t, noChain, "", "export-store", "show", st.url, "--data-dir", data)
	if code != 0 || !strings.Contains(out, s3server.AccessKey) || strings.Contains(out+errOut, s3server.SecretKey) {
		t.Fatalf("show: exit %d\n%s%s\nwant the access key, never the secret", code, out, errOut)
	}
	if raw, err := os.ReadFile(filepath.Join(data, "companion.db")); err == nil && strings.Contains(string(raw), s3server.SecretKey) {
		t.Fatal("the secret is in the database in plain text")
	}

	p := start(t, options{mode: "serve", dataDir: data, env: noChain, args: []string{"--listen", "127.0.0.1:0", "--docker-image", image,
		"--docker-scope", scope, "--export-store", st.url}})
	ws := p.createRunning("keyed")["keyed"]
	var started struct{ Export exportRec }
	p.must(202, "POST", "/v1/workspaces/"+ws.ID+"/export", nil, &started)
	if rec := p.waitExport(started.Export.ID, 2*time.Minute); !rec.Verified {
		t.Fatalf("export with kept keys: %+v\n%s", rec, p.stderr.String())
	}
	exportDirIn(t, st, ws.ID, started.Export.ID)
	p.term()
	if strings.Contains(p.stderr.String(), s3server.SecretKey) {
		t.Error("serve logged the secret")
	}

	if out, errOut, code := runCLI(t, noChain, "", "export-store", "forget", st.url, "--data-dir", data); code != 0 || !strings.Contains(out, "forgot") {
		t.Fatalf("forget: exit %d\n%s%s", code, out, errOut)
	}
	serveRefused("after forget")
}
