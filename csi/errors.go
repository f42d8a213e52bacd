package csi

import (
	"context"
	"errors"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/nephele-dev/nephele/cloud"
)

// cloudStatus turns a provider's error into the gRPC status the CSI spec asks for,
// keeping its message: NotFound, an invalid request, a name taken with other parameters,
// a conflict with the cloud's state and a reached limit are the caller's to act on; a
// throttled call is ResourceExhausted, a timed-out one DeadlineExceeded, any other
// failure Unavailable, all of which the sidecars retry.
func cloudStatus(err error, what string) error {
	if err == nil {
		return nil
	}
	msg := what + ": " + err.Error()
	switch {
	case cloud.IsNotFound(err):
		return status.Error(codes.NotFound, msg)
	case cloud.IsInvalid(err):
		return status.Error(codes.InvalidArgument, msg)
	case cloud.IsAlreadyExists(err):
		return status.Error(codes.AlreadyExists, msg)
	case cloud.IsConflict(err):
		return status.Error(codes.FailedPrecondition, msg)
	case cloud.IsLimitExceeded(err):
		return status.Error(codes.ResourceExhausted, msg)
	case cloud.IsThrottled(err):
		return status.Error(codes.ResourceExhausted, msg)
	case cloud.IsNotImplemented(err):
		return status.Error(codes.Unimplemented, msg)
	case errors.Is(err, context.DeadlineExceeded):
		return status.Error(codes.DeadlineExceeded, msg)
	case errors.Is(err, context.Canceled):
		return status.Error(codes.Canceled, msg)
	}
	return status.Error(codes.Unavailable, msg)
}

// invalid is an InvalidArgument status naming the field.
func invalid(field, format string, args ...any) error {
	return status.Errorf(codes.InvalidArgument, field+": "+format, args...)
}
