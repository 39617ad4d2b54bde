package serve

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"google.golang.org/grpc/codes"

	"github.com/loomrt/loom/go/session"
)

// errKind classifies a failed request; it decides the HTTP status and the gRPC code.
type errKind int

const (
	kindInvalid     errKind = iota // 400, INVALID_ARGUMENT
	kindNotFound                   // 404, NOT_FOUND
	kindTooLarge                   // 413, RESOURCE_EXHAUSTED
	kindExhausted                  // 503, RESOURCE_EXHAUSTED: a full queue
	kindUnavailable                // 503, UNAVAILABLE: shutting down, model unloaded
	kindDeadline                   // 504, DEADLINE_EXCEEDED
	kindCanceled                   // 499, CANCELLED
	kindInternal                   // 500, INTERNAL
)

// Error is a failed protocol request: what kind of failure (its HTTP status and gRPC code) and a
// message naming the model, the tensor and what was wrong.
type Error struct {
	kind errKind
	msg  string
}

// Error returns the message.
func (e *Error) Error() string { return e.msg }

// HTTPStatus is the HTTP status the REST API answers the error with.
func (e *Error) HTTPStatus() int {
	switch e.kind {
	case kindInvalid:
		return http.StatusBadRequest
	case kindNotFound:
		return http.StatusNotFound
	case kindTooLarge:
		return http.StatusRequestEntityTooLarge
	case kindExhausted, kindUnavailable:
		return http.StatusServiceUnavailable
	case kindDeadline:
		return http.StatusGatewayTimeout
	case kindCanceled:
		return 499 // client closed request (nginx's convention; nobody reads it)
	}
	return http.StatusInternalServerError
}

// GRPCCode is the gRPC status code the gRPC service answers the error with.
func (e *Error) GRPCCode() codes.Code {
	switch e.kind {
	case kindInvalid:
		return codes.InvalidArgument
	case kindNotFound:
		return codes.NotFound
	case kindTooLarge, kindExhausted:
		return codes.ResourceExhausted
	case kindUnavailable:
		return codes.Unavailable
	case kindDeadline:
		return codes.DeadlineExceeded
	case kindCanceled:
		return codes.Canceled
	}
	return codes.Internal
}

func errorf(kind errKind, format string, args ...any) *Error {
	return &Error{kind: kind, msg: fmt.Sprintf(format, args...)}
}

// asError classifies any error of a request: an *Error as it is, a context's end as a deadline
// or a cancellation, a session's invalid-argument error as the client's fault, else internal.
func asError(err error) *Error {
	var e *Error
	switch {
	case errors.As(err, &e):
		return e
	case errors.Is(err, context.DeadlineExceeded):
		return &Error{kind: kindDeadline, msg: err.Error()}
	case errors.Is(err, context.Canceled):
		return &Error{kind: kindCanceled, msg: err.Error()}
	case errors.Is(err, session.ErrInvalidArgument):
		return &Error{kind: kindInvalid, msg: err.Error()}
	case errors.Is(err, session.ErrOverBudget):
		return &Error{kind: kindExhausted, msg: err.Error()}
	}
	return &Error{kind: kindInternal, msg: err.Error()}
}
