package exportstore

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"cloud.google.com/go/storage"
	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go/middleware"
	"gocloud.dev/blob"
	"gocloud.dev/blob/fileblob"
	"gocloud.dev/blob/gcsblob"
	"gocloud.dev/blob/s3blob"
	"google.golang.org/api/option"
)

// openFileBucket opens dir with temp files next to their objects (a
// rename into place never crosses a mount) and no metadata sidecars.
func openFileBucket(dir string) (*blob.Bucket, error) {
	return fileblob.OpenBucket(dir, &fileblob.Options{NoTempDir: true, Metadata: fileblob.MetadataDontWrite})
}

// httpClient is the client for unauthenticated GCS requests (an
// emulator).
func (s *Store) httpClient() *http.Client {
	if s.opts.HTTPClient != nil {
		return s.opts.HTTPClient
	}
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.DialContext = (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext
	t.TLSHandshakeTimeout = 30 * time.Second
	t.ResponseHeaderTimeout = s.opts.StallTimeout
	t.MaxIdleConnsPerHost = 16
	return &http.Client{Transport: t}
}

func boolParam(u *url.URL, display, key string) (value, set bool, err error) {
	v := u.Query().Get(key)
	if v == "" {
		return false, false, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, false, badURL("export store URL %s: %s=%q is not true or false", display, key, v)
	}
	return b, true, nil
}

func (s *Store) openS3(ctx context.Context, u *url.URL) error {
	if err := onlyParams(u, s.display, "region", "endpoint", "use_path_style", "s3ForcePathStyle", "disable_https", "profile"); err != nil {
		return err
	}
	bucket, prefix, err := bucketAndPrefix(u, s.display)
	if err != nil {
		return err
	}
	q := u.Query()
	endpoint := q.Get("endpoint")
	noHTTPS, _, err := boolParam(u, s.display, "disable_https")
	if err != nil {
		return err
	}
	pathStyle, pathSet, err := boolParam(u, s.display, "use_path_style")
	if err != nil {
		return err
	}
	if !pathSet {
		if pathStyle, pathSet, err = boolParam(u, s.display, "s3ForcePathStyle"); err != nil {
			return err
		}
	}
	if endpoint != "" {
		if !strings.Contains(endpoint, "://") {
			scheme := "https://"
			if noHTTPS {
				scheme = "http://"
			}
			endpoint = scheme + endpoint
		}
		e, err := url.Parse(endpoint)
		if err != nil || e.Host == "" || (e.Scheme != "http" && e.Scheme != "https") || e.User != nil {
			return badURL("export store URL %s: endpoint must be host[:port] or an http(s) URL", s.display)
		}
		if !pathSet {
			pathStyle = true
		}
	}

	var hc config.HTTPClient = s.opts.HTTPClient
	if s.opts.HTTPClient == nil {
		// The SDK's own client, so AWS_CA_BUNDLE and the like still apply.
		hc = awshttp.NewBuildableClient().WithDialerOptions(func(d *net.Dialer) {
			d.Timeout = 30 * time.Second
		}).WithTransportOptions(func(t *http.Transport) {
			t.TLSHandshakeTimeout = 30 * time.Second
			t.ResponseHeaderTimeout = s.opts.StallTimeout
			t.MaxIdleConnsPerHost = 16
		})
	}
	lo := []func(*config.LoadOptions) error{config.WithHTTPClient(hc)}
	if r := q.Get("region"); r != "" {
		lo = append(lo, config.WithRegion(r))
	}
	if p := q.Get("profile"); p != "" {
		lo = append(lo, config.WithSharedConfigProfile(p))
	}
	if s.opts.AccessKeyID != "" {
		lo = append(lo, config.WithCredentialsProvider(credentials.NewStaticCredentialsProvider(
			s.opts.AccessKeyID, s.opts.SecretAccessKey, s.opts.SessionToken)))
	}
	if endpoint != "" {
		// S3-compatible servers: checksums only where S3 requires them
		// (no aws-chunked trailers, which several do not accept).
		lo = append(lo, config.WithRequestChecksumCalculation(aws.RequestChecksumCalculationWhenRequired),
			config.WithResponseChecksumValidation(aws.ResponseChecksumValidationWhenRequired))
	}
	cfg, err := config.LoadDefaultConfig(ctx, lo...)
	if err != nil {
		return fmt.Errorf("exportstore: open %s: AWS configuration: %w", s.display, err)
	}
	if cfg.Region == "" {
		if endpoint == "" {
			return badURL("export store URL %s: no region (add ?region=… or set AWS_REGION)", s.display)
		}
		cfg.Region = "us-east-1"
	}
	client := s3.NewFromConfig(cfg, func(o *s3.Options) {
		if endpoint != "" {
			o.BaseEndpoint = aws.String(endpoint)
		}
		o.UsePathStyle = pathStyle
		o.APIOptions = append(o.APIOptions, unsignedPayload)
	})
	b, err := s3blob.OpenBucket(ctx, client, bucket, &s3blob.Options{RequestChecksumCalculation: cfg.RequestChecksumCalculation})
	if err != nil {
		return fmt.Errorf("exportstore: open %s: %w", s.display, err)
	}
	s.bucket, s.kind, s.prefix, s.bucketName = b, "s3", prefix, bucket
	return nil
}

// unsignedPayload sends every S3 request with an UNSIGNED-PAYLOAD
// signature, as the SDK already does for uploads over HTTPS: over plain
// HTTP it would hash each part a second time just to sign it, while the
// bytes are proven by the SHA-256 Add takes as it streams and by the
// read-back (docs/decisions.md). Operations without a payload hash step
// are left alone.
func unsignedPayload(stack *middleware.Stack) error {
	if _, ok := stack.Finalize.Get("ComputePayloadHash"); !ok {
		return nil
	}
	return v4.SwapComputePayloadSHA256ForUnsignedPayloadMiddleware(stack)
}

func (s *Store) openGCS(ctx context.Context, u *url.URL) error {
	if err := onlyParams(u, s.display, "endpoint"); err != nil {
		return err
	}
	bucket, prefix, err := bucketAndPrefix(u, s.display)
	if err != nil {
		return err
	}
	var co []option.ClientOption
	if ep := u.Query().Get("endpoint"); ep != "" {
		e, err := url.Parse(ep)
		if err != nil || e.Host == "" || (e.Scheme != "http" && e.Scheme != "https") || e.User != nil {
			return badURL("export store URL %s: endpoint must be an http(s) URL", s.display)
		}
		co = append(co, option.WithEndpoint(strings.TrimRight(ep, "/")+"/storage/v1/"), storage.WithJSONReads())
		if len(s.opts.GoogleCredentialsJSON) == 0 {
			co = append(co, option.WithoutAuthentication(), option.WithHTTPClient(s.httpClient()))
		}
	}
	if len(s.opts.GoogleCredentialsJSON) > 0 {
		co = append(co, option.WithAuthCredentialsJSON(option.ServiceAccount, s.opts.GoogleCredentialsJSON))
	}
	client, err := storage.NewClient(ctx, co...)
	if err != nil {
		// The credentials' text is never in this error: only that they
		// could not be used.
		return withKind(fmt.Errorf("exportstore: open %s: Google credentials: %v", s.display, redact(err, []string{string(s.opts.GoogleCredentialsJSON)})), ErrDenied)
	}
	s.closers = append(s.closers, client.Close)
	b, err := gcsblob.OpenBucket(ctx, nil, bucket, &gcsblob.Options{Client: client})
	if err != nil {
		return fmt.Errorf("exportstore: open %s: %w", s.display, err)
	}
	s.bucket, s.kind, s.prefix = b, "gs", prefix
	return nil
}
