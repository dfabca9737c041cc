package exportstore

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/canvasapp/companion/internal/testsupport"
	"github.com/canvasapp/companion/internal/testsupport/s3server"
)

// helperEnv makes the test binary act as an uploading process that never
// finishes (uploader), for a test to kill.
const helperEnv = "COMPANION_EXPORTSTORE_UPLOADER_URL"

func TestMain(m *testing.M) {
	if u := os.Getenv(helperEnv); u != "" {
		uploader(u)
	}
	os.Exit(m.Run())
}

// uploader uploads one small file, then a file without end, to the store
// u names; it never returns.
func uploader(u string) {
	ctx := context.Background()
	s, err := Open(ctx, u, Options{AccessKeyID: s3server.AccessKey, SecretAccessKey: s3server.SecretKey, PartSize: 5 << 20})
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(2)
	}
	up, err := s.Begin("", "ws", "killed")
	if err == nil {
		_, err = up.Add(ctx, "trajectory.zip", gen(1, 1000))
	}
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(2)
	}
	fmt.Println("first file uploaded")
	up.Add(ctx, "workspace.tar.gz", rand.NewChaCha8([32]byte{})) // never ends
	os.Exit(3)
}

// An uploading process killed with SIGKILL in the middle of a file leaves
// nothing that reads as verified, and the sweep removes what it left: its
// finished file and its open multipart upload.
func TestKilledProcessLeavesNothingVerified(t *testing.T) {
	b := s3Backend(t)
	s := b.open(t)
	ctx := context.Background()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), helperEnv+"="+b.url)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	line := make([]byte, 64)
	n, _ := io.ReadAtLeast(out, line, len("first file uploaded"))
	if string(line[:n]) != "first file uploaded\n" {
		t.Fatalf("uploader said %q", line[:n])
	}
	c := sdkClient(b.s3)
	// Kill it once the large file's multipart upload has parts.
	testsupport.Until(t, 30*time.Second, "a part of the large file uploaded", func() bool {
		mu, err := c.ListMultipartUploads(ctx, &s3.ListMultipartUploadsInput{Bucket: aws.String(testBucket)})
		if err != nil || len(mu.Uploads) != 1 {
			return false
		}
		parts, err := c.ListParts(ctx, &s3.ListPartsInput{Bucket: aws.String(testBucket), Key: mu.Uploads[0].Key, UploadId: mu.Uploads[0].UploadId})
		return err == nil && len(parts.Parts) > 0
	})
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()

	if refs, err := s.List(ctx, "", ""); err != nil || len(refs) != 0 {
		t.Fatalf("after the kill: list %v, %v; want nothing", refs, err)
	}
	swept, err := s.Sweep(ctx, func(r Ref) bool { return false })
	if err != nil || len(swept) != 1 || swept[0].Ref.ID != "killed" || swept[0].Objects != 1 || swept[0].Uploads != 1 {
		t.Fatalf("sweep: %+v, %v; want the killed export's file and open upload", swept, err)
	}
	mu, err := c.ListMultipartUploads(ctx, &s3.ListMultipartUploadsInput{Bucket: aws.String(testBucket)})
	if err != nil || len(mu.Uploads) != 0 {
		t.Fatalf("open uploads after the sweep: %v, %v", mu, err)
	}
}
