package blob

import (
	"context"
	"errors"
	"net"
	"net/http"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// A request that gets no answer leaves a write's outcome unknown, so it is
// retryable, never permanent: a commit that took it for a refusal would
// report failure for a create that may have landed. The errors are the S3
// SDK's own, from a port nobody listens on and from a server that drops
// each connection once it has read the request.
func TestS3RequestsWithoutAnAnswerAreRetryable(t *testing.T) {
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refused := "http://" + closed.Addr().String()
	closed.Close()
	dropping, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer dropping.Close()
	go func() {
		for {
			c, err := dropping.Accept()
			if err != nil {
				return
			}
			go func() {
				buf := make([]byte, 64<<10)
				_, _ = c.Read(buf) // the request arrives; no answer goes back
				c.Close()
			}()
		}
	}()
	for name, endpoint := range map[string]string{"connection refused": refused, "connection dropped": "http://" + dropping.Addr().String()} {
		client := s3.New(s3.Options{
			Region:       "us-east-1",
			BaseEndpoint: aws.String(endpoint),
			UsePathStyle: true,
			Credentials:  credentials.NewStaticCredentialsProvider("k", "s", ""),
			HTTPClient:   &http.Client{},
		})
		p := &s3Put{client: client, bucket: "b"}
		err := p.putIfAbsent(context.Background(), "m", []byte("x"))
		if !errors.Is(err, ErrRetryable) {
			t.Errorf("%s: a conditional create: %v, want ErrRetryable", name, err)
		}
		_, err = client.GetObject(context.Background(), &s3.GetObjectInput{Bucket: aws.String("b"), Key: aws.String("k")})
		if err == nil {
			t.Fatalf("%s: a GET succeeded", name)
		}
		if got := classify("get", "k", err, errors.As); !errors.Is(got, ErrRetryable) {
			t.Errorf("%s: a GET: %v, want ErrRetryable", name, got)
		}
	}
}
