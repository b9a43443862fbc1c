package store

import (
	"context"
	"errors"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Transport failures of a member going away are ErrUnavailable, whatever
// code gRPC gives them; an Internal error of any other kind is not.
func TestClassifyTransportFailures(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		err         error
		unavailable bool
	}{
		{status.Error(codes.Unavailable, "connection refused"), true},
		{status.Error(codes.Internal, "server closed the stream without sending trailers"), true},
		{status.Error(codes.Unknown, "unexpected HTTP status code received from server: 200 (OK); malformed header: missing HTTP content-type"), true},
		{status.Error(codes.Internal, "grpc: error unmarshalling request"), false},
		{status.Error(codes.Unknown, "adapter said no"), false},
		{status.Error(codes.InvalidArgument, "bad key"), false},
	} {
		err := classify(ctx, "get", c.err)
		if got := errors.Is(err, ErrUnavailable); got != c.unavailable {
			t.Errorf("%v: unavailable = %v, want %v (%v)", c.err, got, c.unavailable, err)
		}
	}
}
