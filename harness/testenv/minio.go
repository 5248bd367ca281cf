package testenv

import (
	"context"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/minio/minio-go/v7"
	miniocreds "github.com/minio/minio-go/v7/pkg/credentials"
)

// The harness looks at MinIO with minio-go, a client of its own: what a
// test says landed in the bucket is not read back through the
// aws-sdk-go-v2 code it tests.

// minioClient is a minio-go client of the test MinIO.
func (s *Server) minioClient() (*minio.Client, error) {
	u, err := url.Parse(s.Endpoint)
	if err != nil {
		return nil, err
	}
	return minio.New(u.Host, &minio.Options{
		Creds:  miniocreds.NewStaticV4(MinIOUser, MinIOPassword, ""),
		Secure: u.Scheme == "https",
		Region: "us-east-1",
	})
}

// Keys lists, with minio-go, the keys of the objects under the folder
// under of the table (or bucket prefix) at tableURL, a URL of s.URL's
// form with or without a table's name after the prefix, relative to that
// URL's path and sorted.
func (s *Server) Keys(t testing.TB, tableURL, under string) []string {
	t.Helper()
	u, err := url.Parse(tableURL)
	if err != nil || u.Scheme != "s3" || u.Host != s.Bucket {
		t.Fatalf("testenv: %q is not a URL of the test MinIO's bucket %s", tableURL, s.Bucket)
	}
	c, err := s.minioClient()
	if err != nil {
		t.Fatal(err)
	}
	root := strings.Trim(u.Path, "/") + "/"
	var keys []string
	for o := range c.ListObjects(context.Background(), s.Bucket, minio.ListObjectsOptions{Prefix: root + under, Recursive: true}) {
		if o.Err != nil {
			t.Fatalf("testenv: listing %s%s with minio-go: %v", root, under, o.Err)
		}
		keys = append(keys, strings.TrimPrefix(o.Key, root))
	}
	slices.Sort(keys)
	return keys
}
