package native

import (
	"time"

	"github.com/loomrt/loom/go/native/internal/cabi"
)

// Event marks a point in a stream (Stream.Record) that other streams can wait for
// (Stream.Wait) and the host can synchronize with or time. Close waits for the streams that
// recorded or waited on it.
type Event struct {
	c   *core
	dev *Device
	h   cabi.Event
}

// NewEvent creates an event on the device.
func (d *Device) NewEvent() (*Event, error) {
	const op = "Device.NewEvent"
	if err := d.c.pin(op); err != nil {
		return nil, err
	}
	defer d.c.unpin()
	h, f := cabi.EventCreate(d.h)
	if f != nil {
		return nil, fromFailure(op, f)
	}
	c, err := d.newChild(op, "event", func() { cabi.EventDestroy(h) })
	if err != nil {
		return nil, err
	}
	ev := &Event{c: c, dev: d, h: h}
	guard(ev, c)
	return ev, nil
}

// Synchronize blocks until the event's last recorded point is reached.
func (ev *Event) Synchronize() error {
	const op = "Event.Synchronize"
	if err := ev.c.pin(op); err != nil {
		return err
	}
	defer ev.c.unpin()
	return fromFailure(op, cabi.EventSynchronize(ev.h, ev.dev.h))
}

// Done reports whether the event's last recorded point was reached.
func (ev *Event) Done() (bool, error) {
	const op = "Event.Done"
	if err := ev.c.pin(op); err != nil {
		return false, err
	}
	defer ev.c.unpin()
	done, f := cabi.EventQuery(ev.h, ev.dev.h)
	return done, fromFailure(op, f)
}

// Elapsed is the device time between two reached events.
func Elapsed(start, end *Event) (time.Duration, error) {
	const op = "Elapsed"
	if start == nil || end == nil {
		return 0, newError(op, StatusInvalidArgument, "nil event")
	}
	if err := start.dev.checkOwner(op, end.c, end.dev); err != nil {
		return 0, err
	}
	if err := start.c.pin(op); err != nil {
		return 0, err
	}
	defer start.c.unpin()
	if err := end.c.pin(op); err != nil {
		return 0, err
	}
	defer end.c.unpin()
	ms, f := cabi.EventElapsedMS(start.h, end.h, start.dev.h)
	if f != nil {
		return 0, fromFailure(op, f)
	}
	return time.Duration(float64(ms) * float64(time.Millisecond)), nil
}

// String names the event ("event #4").
func (ev *Event) String() string { return ev.c.String() }

// Close destroys the event once the streams that recorded or waited on it are done.
// Idempotent.
func (ev *Event) Close() error { return ev.c.close("Event.Close") }
