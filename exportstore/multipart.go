package exportstore

import (
	"context"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// openMultipart is an S3 multipart upload that was begun and neither
// completed nor aborted: the upload of a process killed mid-file. Its
// parts take space but no listing of objects shows them, so the sweep
// looks for them too (other stores keep nothing of an unfinished write
// that a listing would not show: GCS's resumable sessions expire after a
// week, fileblob's temp files sit next to the object and are listed).
type openMultipart struct {
	key, uploadID string
}

// s3Client is the client of an s3:// store, nil for the others.
func (s *Store) s3Client() *s3.Client {
	var c *s3.Client
	if s.kind == "s3" && s.bucket.As(&c) {
		return c
	}
	return nil
}

// multipartUploads lists the open multipart uploads under rel.
func (s *Store) multipartUploads(ctx context.Context, rel string) ([]openMultipart, error) {
	c := s.s3Client()
	if c == nil {
		return nil, nil
	}
	in := &s3.ListMultipartUploadsInput{Bucket: aws.String(s.bucketName), Prefix: aws.String(s.prefix + rel)}
	var out []openMultipart
	for {
		pctx, cancel := s.opCtx(ctx)
		page, err := c.ListMultipartUploads(pctx, in)
		if err != nil {
			err = s.fail(pctx, err, "list unfinished uploads under %s%s", s.prefix, rel)
			cancel()
			return nil, err
		}
		cancel()
		for _, u := range page.Uploads {
			out = append(out, openMultipart{key: aws.ToString(u.Key), uploadID: aws.ToString(u.UploadId)})
		}
		if !aws.ToBool(page.IsTruncated) || (aws.ToString(page.NextKeyMarker) == "" && aws.ToString(page.NextUploadIdMarker) == "") {
			return out, nil
		}
		in.KeyMarker, in.UploadIdMarker = page.NextKeyMarker, page.NextUploadIdMarker
	}
}

// abortMultipart aborts one open multipart upload; one already gone is
// no error.
func (s *Store) abortMultipart(ctx context.Context, m openMultipart) error {
	c := s.s3Client()
	if c == nil {
		return nil
	}
	ctx, cancel := s.opCtx(ctx)
	defer cancel()
	_, err := c.AbortMultipartUpload(ctx, &s3.AbortMultipartUploadInput{
		Bucket: aws.String(s.bucketName), Key: aws.String(m.key), UploadId: aws.String(m.uploadID)})
	if err != nil && !strings.Contains(err.Error(), "NoSuchUpload") {
		return s.fail(ctx, err, "abort unfinished upload of %s", m.key)
	}
	return nil
}
