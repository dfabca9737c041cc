package exportstore

import (
	"bytes"
	"context"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// A writer killed in the middle of a large file leaves an S3 multipart
// upload that no object listing shows; the sweep aborts it too.
func TestSweepAbortsUnfinishedMultipartUpload(t *testing.T) {
	b := s3Backend(t)
	s := b.open(t)
	ctx := context.Background()
	up, err := s.Begin("owner-1", "ws", "killed")
	if err != nil {
		t.Fatal(err)
	}
	key := s.key(up.Ref(), "workspace.tar.gz")
	c := sdkClient(b.s3)
	mu, err := c.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: aws.String(testBucket), Key: aws.String(key)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.UploadPart(ctx, &s3.UploadPartInput{Bucket: aws.String(testBucket), Key: aws.String(key), UploadId: mu.UploadId,
		PartNumber: aws.Int32(1), Body: bytes.NewReader(make([]byte, 5<<20))}); err != nil {
		t.Fatal(err)
	}
	open := func() int {
		t.Helper()
		out, err := c.ListMultipartUploads(ctx, &s3.ListMultipartUploadsInput{Bucket: aws.String(testBucket)})
		if err != nil {
			t.Fatal(err)
		}
		return len(out.Uploads)
	}
	if refs, err := s.List(ctx, "owner-1", ""); err != nil || len(refs) != 0 {
		t.Fatalf("list: %v, %v", refs, err)
	}
	if swept, err := s.Sweep(ctx, func(Ref) bool { return true }); err != nil || len(swept) != 0 || open() != 1 {
		t.Fatalf("sweep with the export alive: %v, %v, %d open uploads", swept, err, open())
	}
	swept, err := s.Sweep(ctx, func(Ref) bool { return false })
	if err != nil || len(swept) != 1 || swept[0].Ref != up.Ref() || swept[0].Uploads != 1 || swept[0].Objects != 0 {
		t.Fatalf("sweep: %+v, %v; want the killed export's one upload", swept, err)
	}
	if n := open(); n != 0 {
		t.Fatalf("%d multipart uploads still open", n)
	}
}
