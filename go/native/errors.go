package native

import (
	"fmt"
	"strconv"
	"sync"

	"github.com/loomrt/loom/go/native/internal/cabi"
)

// Status classifies a failure. Statuses below 1000 are the shim's loom_status codes; the others
// come from this package. Every Status is itself an error, so the Err* sentinels below are
// Statuses and errors.Is(err, ErrDevice) matches any *Error with that status.
type Status int32

// The shim's statuses (loom_status) and this package's own.
const (
	StatusInvalidArgument Status = Status(cabi.StatusInvalidArgument)
	StatusOutOfMemory     Status = Status(cabi.StatusOutOfMemory)
	StatusNoDriver        Status = Status(cabi.StatusNoDriver)
	StatusNoDevice        Status = Status(cabi.StatusNoDevice)
	StatusNotSupported    Status = Status(cabi.StatusNotSupported)
	StatusTargetMismatch  Status = Status(cabi.StatusTargetMismatch)
	StatusNotFound        Status = Status(cabi.StatusNotFound)
	StatusDevice          Status = Status(cabi.StatusDevice)
	StatusCapture         Status = Status(cabi.StatusCapture)
	StatusCompile         Status = Status(cabi.StatusCompile)
	StatusInternal        Status = Status(cabi.StatusInternal)

	// StatusClosed: the handle (or a handle the call needs) was closed.
	StatusClosed Status = 1000 + iota
	// StatusInUse: Close refused because live handles still depend on this one.
	StatusInUse
	// StatusBusy: a Runtime's admission is full, a stage tried to enter a nested Run, or a
	// session's State was asked for while one of its stages runs.
	StatusBusy
	// StatusDeviceLost: a session was quarantined after its fence failed; it is unusable.
	StatusDeviceLost
	// StatusABIMismatch: the linked shim speaks another ABI version than this package.
	StatusABIMismatch
)

// Sentinels for errors.Is. ErrDevice is a failure the device reported (sticky on its stream);
// ErrDeviceLost is what a quarantined session returns from then on.
var (
	ErrInvalidArgument error = StatusInvalidArgument
	ErrOutOfMemory     error = StatusOutOfMemory
	ErrNoDriver        error = StatusNoDriver
	ErrNoDevice        error = StatusNoDevice
	ErrNotSupported    error = StatusNotSupported
	ErrTargetMismatch  error = StatusTargetMismatch
	ErrNotFound        error = StatusNotFound
	ErrDevice          error = StatusDevice
	ErrCapture         error = StatusCapture
	ErrCompile         error = StatusCompile
	ErrInternal        error = StatusInternal
	ErrClosed          error = StatusClosed
	ErrInUse           error = StatusInUse
	ErrBusy            error = StatusBusy
	ErrDeviceLost      error = StatusDeviceLost
	ErrABIMismatch     error = StatusABIMismatch
)

// statusNames holds the shim's names for its statuses (loom_status_string) and ours.
var statusNames = func() map[Status]string {
	names := map[Status]string{
		StatusClosed:      "closed",
		StatusInUse:       "in use",
		StatusBusy:        "busy",
		StatusDeviceLost:  "device lost",
		StatusABIMismatch: "ABI mismatch",
	}
	for st := StatusInvalidArgument; st <= StatusInternal; st++ {
		names[st] = cabi.StatusString(int32(st))
	}
	return names
}()

// String names the status ("device error", "busy", ...).
func (s Status) String() string {
	if n, ok := statusNames[s]; ok {
		return n
	}
	return "status " + strconv.Itoa(int(s))
}

// Error makes a Status usable as a sentinel error.
func (s Status) Error() string { return "native: " + s.String() }

// Error is a failed operation: which call (Op, "Stream.Synchronize"), its Status, and the
// message the shim or this package gave. Cause, when set, is an underlying error (a quarantined
// session keeps the fence's failure there), matched by errors.Is and errors.As as well.
type Error struct {
	Op      string
	Status  Status
	Message string
	Cause   error
}

// Error formats as "native: Op: status: message".
func (e *Error) Error() string {
	msg := "native: " + e.Op + ": " + e.Status.String()
	if e.Message != "" {
		msg += ": " + e.Message
	}
	if e.Cause != nil {
		msg += ": " + e.Cause.Error()
	}
	return msg
}

// Unwrap exposes the Status (for the sentinels) and the Cause.
func (e *Error) Unwrap() []error {
	if e.Cause != nil {
		return []error{e.Status, e.Cause}
	}
	return []error{e.Status}
}

func newError(op string, st Status, format string, args ...any) *Error {
	return &Error{Op: op, Status: st, Message: fmt.Sprintf(format, args...)}
}

// fromFailure converts a failed ABI call; nil stays nil.
func fromFailure(op string, f *cabi.Failure) error {
	if f == nil {
		return nil
	}
	return &Error{Op: op, Status: Status(f.Status), Message: f.Message}
}

// abiCheck refuses to run against a shim built for another ABI version. It runs once, on the
// first call that reaches the shim without a handle (Devices, Open, RegisterHostModule).
var abiCheck = sync.OnceValue(func() error {
	return checkABI(cabi.HeaderABIVersion, cabi.ABIVersion())
})

func checkABI(built, linked uint32) error {
	if built == linked {
		return nil
	}
	return newError("abi check", StatusABIMismatch,
		"go/native was built against loom.h ABI version %d but the linked shim reports version %d; rebuild go/native and the shim from the same tree",
		built, linked)
}
