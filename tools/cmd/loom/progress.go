package main

import (
	"os"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"
)

// progress counts finished runs. It is the only place that uses the progress bar and terminal
// packages, so that building without them means replacing this one file.
type progress interface {
	Add(n int) error
	Finish() error
}

// quietProgress is the progress of a run whose stderr is a file or a pipe: nothing is shown.
type quietProgress struct{}

func (quietProgress) Add(int) error { return nil }
func (quietProgress) Finish() error { return nil }

// newProgress shows a progress bar on stderr when stderr is a terminal and show is set, and
// nothing otherwise: piped output and --json stay free of escape codes.
func newProgress(total int, label string, show bool) progress {
	if !show || total <= 0 || !term.IsTerminal(int(os.Stderr.Fd())) {
		return quietProgress{}
	}
	return progressbar.NewOptions(total,
		progressbar.OptionSetWriter(os.Stderr),
		progressbar.OptionSetDescription(label),
		progressbar.OptionShowCount(),
		progressbar.OptionShowIts(),
		progressbar.OptionSetItsString("runs"),
		progressbar.OptionSetPredictTime(true),
		progressbar.OptionClearOnFinish(),
		progressbar.OptionThrottle(100*time.Millisecond),
	)
}
