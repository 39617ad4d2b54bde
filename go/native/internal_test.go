package native

import (
	"errors"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loomrt/loom/go/native/internal/cabi"
)

func TestABIVersionCheck(t *testing.T) {
	require.NoError(t, abiCheck(), "this build links the shim it was compiled against")
	require.Equal(t, cabi.HeaderABIVersion, cabi.ABIVersion())

	err := checkABI(1, 2)
	require.ErrorIs(t, err, ErrABIMismatch)
	assert.Contains(t, err.Error(), "built against loom.h ABI version 1 but the linked shim reports version 2")
	require.NoError(t, checkABI(3, 3))
}

func TestErrorsMatchTheirStatus(t *testing.T) {
	err := fromFailure("Stream.Synchronize", &cabi.Failure{Status: cabi.StatusDevice, Message: "kernel faulted"})
	require.ErrorIs(t, err, ErrDevice)
	require.NotErrorIs(t, err, ErrInvalidArgument)
	assert.Equal(t, "native: Stream.Synchronize: "+StatusDevice.String()+": kernel faulted", err.Error())
	var e *Error
	require.ErrorAs(t, err, &e)
	assert.Equal(t, StatusDevice, e.Status)
	assert.Equal(t, "kernel faulted", e.Message)

	lost := &Error{Op: "NativeSession.Run", Status: StatusDeviceLost, Message: "quarantined", Cause: err}
	require.ErrorIs(t, lost, ErrDeviceLost)
	require.ErrorIs(t, lost, ErrDevice, "the cause is matched too")
	require.Nil(t, fromFailure("x", nil))

	// Every status has a name of its own (the shim's for its codes).
	seen := map[string]Status{}
	for st := range statusNames {
		name := st.String()
		assert.NotContains(t, name, "status ", "status %d", st)
		if prev, dup := seen[name]; dup {
			t.Errorf("statuses %d and %d share the name %q", prev, st, name)
		}
		seen[name] = st
	}
	assert.Len(t, seen, int(StatusInternal)+5)
	assert.Equal(t, "status 4242", Status(4242).String())
	assert.False(t, errors.Is(ErrBusy, ErrClosed))
}

func TestGoroutineIDsDiffer(t *testing.T) {
	me := goroutineID()
	require.Positive(t, me)
	assert.Equal(t, me, goroutineID())
	var other int64
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		other = goroutineID()
	}()
	wg.Wait()
	assert.NotEqual(t, me, other)
}
