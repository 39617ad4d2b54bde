package graph

import "strings"

// Error is a problem with a model, naming where it is: the model, the graph (for subgraphs the
// path from the main graph), the node (name and op type) and the value concerned. Fields that do
// not apply are empty.
type Error struct {
	Model string // model name: the file name, or the graph name for LoadBytes
	Graph string
	Node  string
	Op    string
	Value string
	Msg   string
}

// Error renders the location followed by the message.
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("onnx")
	if e.Model != "" {
		b.WriteString(" model " + quote(e.Model))
	}
	if e.Graph != "" {
		b.WriteString(" graph " + quote(e.Graph))
	}
	if e.Node != "" || e.Op != "" {
		b.WriteString(" node " + quote(e.Node))
		if e.Op != "" {
			b.WriteString(" (" + e.Op + ")")
		}
	}
	if e.Value != "" {
		b.WriteString(" value " + quote(e.Value))
	}
	b.WriteString(": " + e.Msg)
	return b.String()
}

func quote(s string) string {
	const max = 120
	if len(s) > max {
		s = s[:max] + "..."
	}
	return "\"" + strings.ToValidUTF8(s, "?") + "\""
}

// ErrorList gathers located errors up to a cap so that one bad model cannot produce an
// unbounded report. The zero value is empty and ready to use.
type ErrorList struct {
	errs    []error
	dropped int
}

const maxReportedErrors = 50

// Add records e, or counts it as dropped once the cap is reached.
func (l *ErrorList) Add(e *Error) {
	if len(l.errs) >= maxReportedErrors {
		l.dropped++
		return
	}
	l.errs = append(l.errs, e)
}

// Err returns nil, the single error, or a MultiError.
func (l *ErrorList) Err() error {
	switch {
	case len(l.errs) == 0:
		return nil
	case len(l.errs) == 1 && l.dropped == 0:
		return l.errs[0]
	}
	return &MultiError{Errs: l.errs, Dropped: l.dropped}
}

// MultiError is several model problems found in one pass; Dropped counts those not kept.
type MultiError struct {
	Errs    []error
	Dropped int
}

// Error renders every kept error on its own line.
func (m *MultiError) Error() string {
	var b strings.Builder
	for i, e := range m.Errs {
		if i > 0 {
			b.WriteString("\n")
		}
		b.WriteString(e.Error())
	}
	if m.Dropped > 0 {
		b.WriteString("\n... and more errors")
	}
	return b.String()
}

// Unwrap exposes the kept errors to errors.Is and errors.As.
func (m *MultiError) Unwrap() []error { return m.Errs }
