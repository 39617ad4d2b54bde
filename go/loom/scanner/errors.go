package scanner

import (
	"fmt"
	"sort"
	"strings"

	"github.com/loomrt/loom/go/loom/token"
)

// Error is one diagnostic at a source position.
type Error struct {
	Pos token.Position
	Msg string
}

// Error formats the diagnostic as file:line:col: message.
func (e Error) Error() string {
	return e.Pos.String() + ": " + e.Msg
}

// ErrorList collects diagnostics; Sort orders them by position. It implements error.
type ErrorList []*Error

// Add appends a diagnostic.
func (l *ErrorList) Add(pos token.Position, msg string) {
	*l = append(*l, &Error{Pos: pos, Msg: msg})
}

// Addf appends a formatted diagnostic.
func (l *ErrorList) Addf(pos token.Position, format string, args ...any) {
	l.Add(pos, fmt.Sprintf(format, args...))
}

// Len returns the number of diagnostics.
func (l ErrorList) Len() int { return len(l) }

// Sort orders the diagnostics by file, line, column and message, dropping exact duplicates.
func (l *ErrorList) Sort() {
	s := *l
	sort.SliceStable(s, func(i, j int) bool {
		a, b := s[i].Pos, s[j].Pos
		if a.Filename != b.Filename {
			return a.Filename < b.Filename
		}
		if a.Line != b.Line {
			return a.Line < b.Line
		}
		if a.Col != b.Col {
			return a.Col < b.Col
		}
		return s[i].Msg < s[j].Msg
	})
	out := s[:0]
	for i, e := range s {
		if i > 0 && e.Pos == s[i-1].Pos && e.Msg == s[i-1].Msg {
			continue
		}
		out = append(out, e)
	}
	*l = out
}

// Error joins all diagnostics, one per line (at most 10, then a count).
func (l ErrorList) Error() string {
	switch len(l) {
	case 0:
		return "no errors"
	case 1:
		return l[0].Error()
	}
	var b strings.Builder
	for i, e := range l {
		if i == 10 {
			fmt.Fprintf(&b, "\n(and %d more errors)", len(l)-10)
			break
		}
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(e.Error())
	}
	return b.String()
}

// Err returns nil for an empty list, else the sorted list as an error.
func (l ErrorList) Err() error {
	if len(l) == 0 {
		return nil
	}
	l.Sort()
	return l
}
