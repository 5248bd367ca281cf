package blob

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"testing"

	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"
	"google.golang.org/api/googleapi"
)

func s3Err(status int, code string) error {
	return &smithy.OperationError{ServiceID: "S3", OperationName: "PutObject", Err: &awshttp.ResponseError{
		ResponseError: &smithyhttp.ResponseError{Response: &smithyhttp.Response{Response: &http.Response{StatusCode: status}},
			Err: &smithy.GenericAPIError{Code: code, Message: code}},
	}}
}

func TestClassify(t *testing.T) {
	cases := []struct {
		name string
		err  error
		want error
	}{
		{"S3 409 ConditionalRequestConflict is retryable", s3Err(409, "ConditionalRequestConflict"), ErrRetryable},
		{"S3 503 SlowDown is retryable", s3Err(503, "SlowDown"), ErrRetryable},
		{"S3 500 is retryable", s3Err(500, "InternalError"), ErrRetryable},
		{"S3 400 is permanent", s3Err(400, "InvalidRequest"), ErrPermanent},
		{"GCS 503 is retryable", &googleapi.Error{Code: 503}, ErrRetryable},
		{"GCS 400 is permanent", &googleapi.Error{Code: 400}, ErrPermanent},
		{"a bare network failure is retryable", fmt.Errorf("dial tcp: connection refused"), ErrRetryable},
		{"a canceled context stays a context error", context.Canceled, context.Canceled},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := classify("put-if-absent", "k", c.err, errors.As)
			if !errors.Is(got, c.want) {
				t.Fatalf("classify(%v) = %v, want kind %v", c.err, got, c.want)
			}
			var be *Error
			if !errors.As(got, &be) || be.Key != "k" || be.Op != "put-if-absent" {
				t.Fatalf("classify(%v) = %v: does not carry op and key", c.err, got)
			}
		})
	}
}

func TestCheckKey(t *testing.T) {
	for _, k := range []string{"a", "a/b", "_versions/00000000000000000001.manifest", "data/x.parquet"} {
		if err := CheckKey(k); err != nil {
			t.Errorf("CheckKey(%q) = %v", k, err)
		}
	}
	for _, k := range []string{"", "/a", "a/", "a//b", "..", "a/../b", "./a", "a\\b", "a\x00b"} {
		if err := CheckKey(k); err == nil {
			t.Errorf("CheckKey(%q) accepted a bad key", k)
		}
	}
}
