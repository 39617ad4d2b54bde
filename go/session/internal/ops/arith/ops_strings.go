package arith

import (
	"fmt"
	"regexp"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"

	"github.com/loomrt/loom/go/graph"
	"github.com/loomrt/loom/go/session/internal/ops"
	"github.com/loomrt/loom/go/session/internal/tensor"
)

// Host functions for the string operators of opset 20: StringConcat, StringSplit and
// RegexFullMatch. Strings are UTF-8 held as Go strings ([]string elements of graph.String
// tensors); the ops work on their bytes, which keeps multi-byte characters whole.

func stringsOf(x tensor.Tensor, what string) ([]string, error) {
	s, ok := x.Data().([]string)
	if !ok {
		return nil, fmt.Errorf("%s must be a string tensor, got %s", what, x.DType())
	}
	return s, nil
}

// opStringConcat concatenates its two inputs elementwise, with numpy broadcasting.
func opStringConcat(rc ops.OpRun, n *graph.Node, in []tensor.Tensor) ([]tensor.Tensor, error) {
	if len(in) < 2 {
		return nil, fmt.Errorf("StringConcat needs 2 inputs, got %d", len(in))
	}
	a, err := stringsOf(in[0], "X")
	if err != nil {
		return nil, err
	}
	b, err := stringsOf(in[1], "Y")
	if err != nil {
		return nil, err
	}
	shape, err := ops.BroadcastShapes(in[0].Dims(), in[1].Dims())
	if err != nil {
		return nil, err
	}
	if err := ops.ReserveShape(rc, "the output", graph.String, shape, 2*8); err != nil {
		return nil, err
	}
	ia, err := ops.BroadcastIndex(in[0].Dims(), shape)
	if err != nil {
		return nil, err
	}
	ib, err := ops.BroadcastIndex(in[1].Dims(), shape)
	if err != nil {
		return nil, err
	}
	// The output's characters, counted before any is copied: a long string broadcast over
	// many elements is bounded by the element limit and the memory budget.
	total := 0.0
	for i := range ia {
		total += float64(len(a[ia[i]]) + len(b[ib[i]]))
	}
	if err := ops.ReserveCount(rc, "the output's characters", graph.Uint8, total, 0); err != nil {
		return nil, err
	}
	out := make([]string, len(ia))
	for i := range out {
		out[i] = a[ia[i]] + b[ib[i]]
	}
	return []tensor.Tensor{tensor.Raw(graph.String, shape, out)}, nil
}

// isPySpace is Python's str.isspace for one rune (the whitespace StringSplit splits on when
// it has no delimiter): Unicode White_Space and the separators U+001C..U+001F.
func isPySpace(r rune) bool { return unicode.IsSpace(r) || (r >= 0x1c && r <= 0x1f) }

// splitWhitespace splits s on runs of whitespace as Python's s.split(None, maxsplit) does
// (maxsplit < 0: no limit): no empty substring, leading whitespace dropped, and after
// maxsplit splits the rest of s, trailing whitespace included, is the last substring. emit
// receives each substring; the count is returned.
func splitWhitespace(s string, maxsplit int64, emit func(string)) int {
	i, count := 0, 0
	skip := func() {
		for i < len(s) {
			r, w := utf8.DecodeRuneInString(s[i:])
			if !isPySpace(r) {
				return
			}
			i += w
		}
	}
	for maxsplit < 0 || int64(count) < maxsplit {
		skip()
		if i == len(s) {
			return count
		}
		j := i
		for i < len(s) {
			r, w := utf8.DecodeRuneInString(s[i:])
			if isPySpace(r) {
				break
			}
			i += w
		}
		if emit != nil {
			emit(s[j:i])
		}
		count++
	}
	skip()
	if i < len(s) {
		if emit != nil {
			emit(s[i:])
		}
		count++
	}
	return count
}

// splitDelimiter splits s on each occurrence of delim (not empty) as Python's
// s.split(delim, maxsplit) does: consecutive delimiters delimit empty substrings.
func splitDelimiter(s, delim string, maxsplit int64, emit func(string)) int {
	count := 0
	for maxsplit < 0 || int64(count) < maxsplit {
		k := strings.Index(s, delim)
		if k < 0 {
			break
		}
		if emit != nil {
			emit(s[:k])
		}
		count++
		s = s[k+len(delim):]
	}
	if emit != nil {
		emit(s)
	}
	return count + 1
}

// opStringSplit splits every element of X on the delimiter attribute (on whitespace when it is
// absent or empty), at most maxsplit times. Y has X's shape plus one axis as long as the most
// substrings of an element, shorter rows padded with empty strings; Z holds the counts.
func opStringSplit(rc ops.OpRun, n *graph.Node, in []tensor.Tensor) ([]tensor.Tensor, error) {
	x := in[0]
	s, err := stringsOf(x, "X")
	if err != nil {
		return nil, err
	}
	delim := n.AttrString("delimiter", "")
	maxsplit := int64(-1) // no limit
	if a := n.Attr("maxsplit"); a != nil {
		if a.Type != graph.AttrInt {
			return nil, fmt.Errorf("attribute maxsplit must be an int")
		}
		maxsplit = max(a.Int, -1) // negative: no limit, as Python's str.split reads it
	}
	split := func(v string, emit func(string)) int {
		if delim == "" {
			return splitWhitespace(v, maxsplit, emit)
		}
		return splitDelimiter(v, delim, maxsplit, emit)
	}
	// Count first, so that the padded output's size is checked before it is allocated.
	if err := ops.ReserveShape(rc, "the substring counts", graph.Int64, x.Dims(), 0); err != nil {
		return nil, err
	}
	counts := make([]int64, len(s))
	width := int64(0)
	for i, v := range s {
		counts[i] = int64(split(v, nil))
		width = max(width, counts[i])
	}
	shape := append(append([]int64{}, x.Dims()...), width)
	if err := ops.ReserveShape(rc, "the substrings", graph.String, shape, 0); err != nil {
		return nil, err
	}
	out := make([]string, len(s)*int(width))
	for i, v := range s {
		row, k := out[i*int(width):(i+1)*int(width)], 0
		split(v, func(p string) { row[k] = p; k++ })
	}
	return []tensor.Tensor{
		tensor.Raw(graph.String, shape, out),
		ops.I64Tensor(append([]int64{}, x.Dims()...), counts),
	}, nil
}

// regexCache holds compiled RegexFullMatch patterns by pattern, so that a node's pattern is
// compiled once rather than at every run; it is bounded (and emptied when full) and keyed by
// the pattern, not the node, so that it keeps no model alive.
var regexCache struct {
	mu sync.Mutex
	m  map[string]*regexp.Regexp
}

const regexCacheMax = 256

// fullMatchRegexp compiles pattern (RE2 syntax) anchored at both ends.
func fullMatchRegexp(pattern string) (*regexp.Regexp, error) {
	regexCache.mu.Lock()
	re, ok := regexCache.m[pattern]
	regexCache.mu.Unlock()
	if ok {
		return re, nil
	}
	// The pattern alone first: one that compiles is balanced, so the wrapping group below
	// cannot be closed early by it (a pattern "a)|(b" would otherwise change meaning).
	if _, err := regexp.Compile(pattern); err != nil {
		return nil, fmt.Errorf("attribute pattern %q is not a valid RE2 regular expression: %v", pattern, err)
	}
	re, err := regexp.Compile(`\A(?:` + pattern + `)\z`)
	if err != nil {
		return nil, fmt.Errorf("attribute pattern %q is not a valid RE2 regular expression: %v", pattern, err)
	}
	regexCache.mu.Lock()
	if len(regexCache.m) >= regexCacheMax || regexCache.m == nil {
		regexCache.m = map[string]*regexp.Regexp{}
	}
	regexCache.m[pattern] = re
	regexCache.mu.Unlock()
	return re, nil
}

// opRegexFullMatch tells, for every element of X, whether the pattern attribute matches all of
// it (not a substring).
func opRegexFullMatch(rc ops.OpRun, n *graph.Node, in []tensor.Tensor) ([]tensor.Tensor, error) {
	x := in[0]
	s, err := stringsOf(x, "X")
	if err != nil {
		return nil, err
	}
	a := n.Attr("pattern")
	if a == nil || a.Type != graph.AttrString {
		return nil, fmt.Errorf("attribute pattern (a string, the RE2 regular expression) is required")
	}
	re, err := fullMatchRegexp(string(a.String))
	if err != nil {
		return nil, err
	}
	if err := ops.ReserveShape(rc, "the output", graph.Bool, x.Dims(), 0); err != nil {
		return nil, err
	}
	out := make([]bool, len(s))
	for i, v := range s {
		out[i] = re.MatchString(v)
	}
	return []tensor.Tensor{tensor.Raw(graph.Bool, append([]int64{}, x.Dims()...), out)}, nil
}

func init() {
	ops.HostOps["StringConcat"] = opStringConcat
	ops.HostOps["StringSplit"] = opStringSplit
	ops.HostOps["RegexFullMatch"] = opRegexFullMatch
}
