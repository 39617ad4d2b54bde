package main

import (
	"os"
	"sync"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"
)

// progress counts finished items (runs, tests). It and working are the only users of the
// progress bar and terminal packages, so that building without them means replacing this one
// file.
type progress interface {
	Add(n int) error
	// Clear erases the bar, so that a line printed next starts clean; the next Add draws it
	// again.
	Clear() error
	Finish() error
}

// quietProgress is the progress of a run whose stderr is a file or a pipe: nothing is shown.
type quietProgress struct{}

func (quietProgress) Add(int) error { return nil }
func (quietProgress) Clear() error  { return nil }
func (quietProgress) Finish() error { return nil }

// stderrIsTerminal is whether bars and spinners may be drawn: never into a file or a pipe.
var stderrIsTerminal = func() bool { return term.IsTerminal(int(os.Stderr.Fd())) }

// newProgress shows a progress bar of total items named unit ("runs", "tests") on stderr when
// stderr is a terminal and show is set, and nothing otherwise: piped output and --json stay
// free of escape codes.
func newProgress(total int, label, unit string, show bool) progress {
	if !show || total <= 0 || !stderrIsTerminal() {
		return quietProgress{}
	}
	return progressbar.NewOptions(total,
		progressbar.OptionSetWriter(os.Stderr),
		progressbar.OptionSetDescription(label),
		progressbar.OptionShowCount(),
		progressbar.OptionShowIts(),
		progressbar.OptionSetItsString(unit),
		progressbar.OptionSetPredictTime(true),
		progressbar.OptionClearOnFinish(),
		progressbar.OptionThrottle(100*time.Millisecond),
	)
}

// working shows a spinner with the elapsed time on stderr (a terminal only, and only when show
// is set) once the work it stands for has taken longer than after: loading a large model or
// compiling kernels on a cold cache can take seconds with nothing else to show. stop erases it;
// it must be called, once, before anything else is printed.
func working(label string, show bool, after time.Duration) (stop func()) {
	if !show || !stderrIsTerminal() {
		return func() {}
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		select {
		case <-done:
			return
		case <-time.After(after):
		}
		bar := progressbar.NewOptions(-1,
			progressbar.OptionSetWriter(os.Stderr),
			progressbar.OptionSetDescription(label),
			progressbar.OptionSpinnerType(14),
			// No ticker of the bar's own: this goroutine turns the spinner (Add below). The
			// bar's ticker reads its state without the lock that Add holds (a data race).
			progressbar.OptionSetSpinnerChangeInterval(0),
			progressbar.OptionSetElapsedTime(true),
			progressbar.OptionClearOnFinish(),
		)
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-done:
				bar.Finish()
				bar.Clear()
				return
			case <-tick.C:
				bar.Add(1)
			}
		}
	}()
	var once sync.Once
	return func() {
		once.Do(func() {
			close(done)
			wg.Wait()
		})
	}
}
