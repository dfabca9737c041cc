package exportstore

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCredentialsKeyFollowsTheBucket: one key per scheme and bucket,
// whatever the prefix and parameters; file:// stores take none.
func TestCredentialsKeyFollowsTheBucket(t *testing.T) {
	a, err := CredentialsKey("s3://team-exports/a/b?region=eu-west-1&endpoint=http://127.0.0.1:9000")
	b, err2 := CredentialsKey("s3://team-exports")
	if err != nil || err2 != nil || a != b || a != "export-store:s3://team-exports" {
		t.Fatalf("keys %q (%v), %q (%v); want the same key for one bucket", a, err, b, err2)
	}
	if g, _ := CredentialsKey("gs://team-exports/x"); g == a {
		t.Fatal("s3 and gs buckets of one name share a key")
	}
	for _, bad := range []string{"file:///srv/exports", "s3:///nobucket", "http://x"} {
		if _, err := CredentialsKey(bad); err == nil {
			t.Errorf("CredentialsKey(%q) succeeded", bad)
		}
	}
}

// TestParseCredentialsNeverQuotesASecret: the forms a person gives are
// read, and every refusal says what is expected without the value given.
func TestParseCredentialsNeverQuotesASecret(t *testing.T) {
	c, err := ParseCredentials("s3://b", []byte("# keys\nexport AWS_ACCESS_KEY_ID=AKIA1\nAWS_SECRET_ACCESS_KEY = s3cr3t-value\nAWS_SESSION_TOKEN=tok\n"))
	if err != nil || c.AccessKeyID != "AKIA1" || c.SecretAccessKey != "s3cr3t-value" || c.SessionToken != "tok" {
		t.Fatalf("parse: %+v, %v", c, err)
	}
	if d := c.Describe(); d != "S3 access key AKIA1" {
		t.Errorf("Describe = %q", d)
	}
	if o := c.Options(Options{PartSize: 9}); o.AccessKeyID != "AKIA1" || o.SecretAccessKey != "s3cr3t-value" || o.PartSize != 9 {
		t.Errorf("Options = %+v", o)
	}
	for _, in := range []string{"s3cr3t-value", "AWS_SECRET_ACCESS_KEY=s3cr3t-value", "AWS_ACCESS_KEY_ID=AKIA1\nSECRET=s3cr3t-value", ""} {
		_, err := ParseCredentials("s3://b", []byte(in))
		if err == nil || strings.Contains(err.Error(), "s3cr3t-value") {
			t.Errorf("parse %q: %v; want a refusal without the secret", in, err)
		}
	}
	key := `{"type": "service_account", "client_email": "exports@proj.iam.gserviceaccount.com", "private_key": "-----BEGIN PRIVATE KEY-----\nxyz\n-----END PRIVATE KEY-----\n"}`
	g, err := ParseCredentials("gs://b", []byte(key))
	if err != nil || g.Describe() != "Google service account exports@proj.iam.gserviceaccount.com" || len(g.Options(Options{}).GoogleCredentialsJSON) == 0 {
		t.Fatalf("gs key: %+v, %v", g, err)
	}
	if _, err := ParseCredentials("gs://b", []byte("not json with xyz-secret")); err == nil || strings.Contains(err.Error(), "xyz-secret") {
		t.Errorf("gs garbage: %v", err)
	}
}

// TestPartSizeFitsTheFile: a file too large for 9,000 parts of the base
// size gets parts that fit it, whole MiB; other sources keep the base.
func TestPartSizeFitsTheFile(t *testing.T) {
	f, err := os.Create(filepath.Join(t.TempDir(), "big"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if got := partSize(5<<20, f); got != 5<<20 {
		t.Errorf("empty file: %d", got)
	}
	if err := f.Truncate(100 << 30); err != nil { // sparse
		t.Fatal(err)
	}
	got := partSize(5<<20, f)
	if got%(1<<20) != 0 || int64(got)*maxParts < 100<<30 || got > 12<<20 {
		t.Errorf("a 100 GiB file gets %d-byte parts; want whole MiB, enough for 9,000 parts", got)
	}
	if got := partSize(5<<20, strings.NewReader("x")); got != 5<<20 {
		t.Errorf("a reader without Stat: %d", got)
	}
}
