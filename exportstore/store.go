// Package exportstore keeps verified exports in object storage: Amazon S3
// and S3-compatible servers (s3://), Google Cloud Storage (gs://) and a
// local directory (file://), through one code path (gocloud.dev/blob).
//
// Guarantees:
//   - An export is committed when its manifest.json exists, and
//     manifest.json is written last (Upload.Commit), after every file of
//     the export was uploaded and read back equal. Readers (List,
//     Manifest, Stat, Open, ReadRange) only see committed exports: the
//     objects of an export being written, or of an upload that died,
//     never read as verified.
//   - Uploads stream: memory per upload is bounded by Options.PartSize
//     times Options.Concurrency, whatever the file's size.
//   - Verified means read back from the store: each file is hashed
//     (SHA-256) while it uploads, then streamed back from the store and
//     hashed again; a different size or hash is ErrMismatch. An ETag is
//     not taken as proof.
//   - Abort, and Sweep for uploads whose writer died, delete an
//     uncommitted export's objects; Sweep leaves alone what its caller
//     says is alive and anything with a manifest.
//   - No call waits forever on a store that stopped answering: small
//     calls have Options.OpTimeout each, and streaming calls fail when
//     one read, write or close is blocked longer than
//     Options.StallTimeout. The caller's context bounds everything.
//   - Errors name the operation and object, match one of the Err*
//     classes when one fits, and never contain a credential.
package exportstore

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"gocloud.dev/blob"
)

// Defaults for Options.
const (
	// DefaultPartSize is the multipart part (S3) or chunk (GCS) size,
	// grown for a source whose size is known (partSize).
	DefaultPartSize = 5 << 20
	// DefaultConcurrency is how many parts of one upload are in flight.
	DefaultConcurrency = 3
	// DefaultOpTimeout bounds one small call (stat, list page, delete).
	DefaultOpTimeout = 30 * time.Second
	// DefaultStallTimeout bounds how long one streaming call may block.
	DefaultStallTimeout = 2 * time.Minute
)

// Options configure a Store. The zero value uses the platform's standard
// credential chains and the defaults above.
type Options struct {
	// AccessKeyID, SecretAccessKey and SessionToken, when AccessKeyID is
	// set, are the S3 credentials (from companion's secret store);
	// otherwise the AWS chain is used (environment, shared config and
	// ?profile=, instance or task role). They never appear in errors.
	AccessKeyID     string
	SecretAccessKey string
	SessionToken    string
	// GoogleCredentialsJSON, when set, is a service account key for GCS;
	// otherwise Google's application default credentials are used. With
	// an ?endpoint= (an emulator) and no key, requests are not
	// authenticated.
	GoogleCredentialsJSON []byte

	// PartSize is the S3 multipart part size and the GCS chunk size, in
	// bytes (default DefaultPartSize; S3 needs at least 5 MiB). A file's
	// parts grow so that it fits in S3's 10,000 parts.
	PartSize int
	// Concurrency is how many S3 parts of one upload are in flight
	// (default DefaultConcurrency). GCS uploads one chunk at a time.
	Concurrency int
	// OpTimeout and StallTimeout: see the package's guarantees.
	OpTimeout    time.Duration
	StallTimeout time.Duration

	// HTTPClient, if set, carries S3 requests and unauthenticated GCS
	// ones (an emulator). The default has dial, TLS and response-header
	// timeouts of StallTimeout.
	HTTPClient *http.Client
	// Now is the clock for export stamps (default time.Now).
	Now func() time.Time
}

// Store is an open export store. It is safe for concurrent use.
type Store struct {
	bucket  *blob.Bucket
	kind    string // "s3", "gs" or "file"
	fileDir string // a file:// store's directory
	// bucketName is an s3:// store's bucket.
	bucketName string
	display    string // the URL without credentials, for errors
	prefix     string // "" or "a/b/" (with a trailing slash)
	opts       Options
	secrets    []string
	closers    []func() error

	// beforeVerify is a test hook run between an object's upload and its
	// read-back.
	beforeVerify func(key string)
}

// Open opens the store a URL names and checks that its bucket can be
// reached with the credentials. Accepted forms:
//
//	file:///absolute/dir            (the directory must exist)
//	s3://bucket[/prefix][?region=R][&endpoint=URL][&use_path_style=B][&disable_https=B][&profile=P]
//	gs://bucket[/prefix][?endpoint=URL]
//
// For s3://, endpoint points at an S3-compatible server (versitygw, MinIO,
// Ceph RGW, Cloudflare R2): it implies path-style addressing unless
// use_path_style=false (s3ForcePathStyle is accepted as its alias), and a
// region of us-east-1 when none is configured. For gs://, endpoint points
// at an emulator. The store's objects go under the prefix.
func Open(ctx context.Context, rawURL string, opts Options) (*Store, error) {
	opts = withDefaults(opts)
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, badURL("export store URL does not parse")
	}
	if u.User != nil {
		return nil, badURL("export store URL %s must not carry credentials; pass them as options", u.Redacted())
	}
	s := &Store{opts: opts, display: u.Redacted(), secrets: []string{opts.AccessKeyID, opts.SecretAccessKey, opts.SessionToken}}
	switch u.Scheme {
	case "file":
		err = s.openFile(u)
	case "s3":
		err = s.openS3(ctx, u)
	case "gs":
		err = s.openGCS(ctx, u)
	case "":
		return nil, badURL("export store %q has no scheme", rawURL)
	default:
		return nil, badURL("export store URL %s: scheme %q is not supported", s.display, u.Scheme)
	}
	if err != nil {
		s.Close()
		return nil, redact(err, s.secrets)
	}
	if err := s.checkAccess(ctx); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// acceptedForms is appended to every URL error.
const acceptedForms = "accepted: file:///absolute/dir, s3://bucket[/prefix]?region=…[&endpoint=…&use_path_style=…&disable_https=…&profile=…], gs://bucket[/prefix][?endpoint=…]"

func badURL(format string, args ...any) error {
	return withKind(fmt.Errorf("exportstore: "+format+"; "+acceptedForms, args...), ErrBadURL)
}

func withDefaults(o Options) Options {
	if o.PartSize <= 0 {
		o.PartSize = DefaultPartSize
	}
	if o.Concurrency <= 0 {
		o.Concurrency = DefaultConcurrency
	}
	if o.OpTimeout <= 0 {
		o.OpTimeout = DefaultOpTimeout
	}
	if o.StallTimeout <= 0 {
		o.StallTimeout = DefaultStallTimeout
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return o
}

// bucketAndPrefix reads the bucket (the URL's host) and the prefix (its
// path, every segment safe).
func bucketAndPrefix(u *url.URL, display string) (string, string, error) {
	if u.Host == "" {
		return "", "", badURL("export store URL %s names no bucket", display)
	}
	p := strings.Trim(u.Path, "/")
	if p == "" {
		return u.Host, "", nil
	}
	for _, seg := range strings.Split(p, "/") {
		if checkSegment("prefix segment", seg) != nil {
			return "", "", badURL("export store URL %s: prefix segment %q is not a safe name (letters, digits, '.', '_', '-'; not starting with '.', '_' or '-')", display, seg)
		}
	}
	return u.Host, p + "/", nil
}

// onlyParams refuses query parameters outside allowed.
func onlyParams(u *url.URL, display string, allowed ...string) error {
	for k := range u.Query() {
		ok := false
		for _, a := range allowed {
			ok = ok || k == a
		}
		if !ok {
			return badURL("export store URL %s: query parameter %q is not supported (%s takes %s)", display, k, u.Scheme,
				strings.Join(allowed, ", "))
		}
	}
	return nil
}

func (s *Store) openFile(u *url.URL) error {
	if u.Host != "" && u.Host != "localhost" {
		return badURL("export store URL %s: a file URL has no host (three slashes: file:///dir)", s.display)
	}
	if err := onlyParams(u, s.display); err != nil {
		return err
	}
	dir := filepath.FromSlash(u.Path)
	if !filepath.IsAbs(dir) {
		return badURL("export store URL %s: the directory must be absolute", s.display)
	}
	fi, err := os.Stat(dir)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return withKind(fmt.Errorf("exportstore: directory %s does not exist (it is never created here)", dir), ErrNoBucket)
	case err != nil:
		return classify(context.Background(), fmt.Errorf("exportstore: directory %s: %w", dir, err))
	case !fi.IsDir():
		return withKind(fmt.Errorf("exportstore: %s is not a directory", dir), ErrNoBucket)
	}
	b, err := openFileBucket(dir)
	if err != nil {
		return classify(context.Background(), fmt.Errorf("exportstore: open directory %s: %w", dir, err))
	}
	s.bucket, s.kind, s.fileDir = b, "file", dir
	return nil
}

// checkAccess asks the store whether the bucket exists and the
// credentials may use it.
func (s *Store) checkAccess(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, s.opts.OpTimeout)
	defer cancel()
	ok, err := s.bucket.IsAccessible(ctx)
	if err != nil {
		return s.fail(ctx, err, "open %s: check the bucket", s.display)
	}
	if !ok {
		return withKind(fmt.Errorf("exportstore: open %s: the bucket does not exist", s.display), ErrNoBucket)
	}
	// A bucket that exists but refuses these credentials answers a
	// HEAD with 403 on S3 (an error above); GCS's emulator and some
	// S3-compatible servers only refuse listing, so list once too.
	if _, _, err := s.bucket.ListPage(ctx, blob.FirstPageToken, 1, &blob.ListOptions{Prefix: s.prefix}); err != nil {
		return s.fail(ctx, err, "open %s: list the prefix", s.display)
	}
	return nil
}

// fail wraps err with the operation, classifies it and removes secrets.
func (s *Store) fail(ctx context.Context, err error, format string, args ...any) error {
	return redact(classify(ctx, fmt.Errorf("exportstore: "+format+": %w", append(args, err)...)), s.secrets)
}

// String is the store's URL, without credentials.
func (s *Store) String() string { return s.display }

// Close releases the store's clients.
func (s *Store) Close() error {
	var errs []error
	if s.bucket != nil {
		errs = append(errs, s.bucket.Close())
	}
	for _, c := range s.closers {
		errs = append(errs, c())
	}
	return errors.Join(errs...)
}

// key is the full object key of name in ref's directory.
func (s *Store) key(ref Ref, name string) string { return s.prefix + ref.Dir() + name }

// opCtx bounds one small call.
func (s *Store) opCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, s.opts.OpTimeout)
}
