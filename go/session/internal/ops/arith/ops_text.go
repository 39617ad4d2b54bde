package arith

import (
	"fmt"
	"strings"

	"github.com/loomrt/loom/go/graph"
	"github.com/loomrt/loom/go/session/internal/ops"
	"github.com/loomrt/loom/go/session/internal/tensor"
)

// Host functions for the text ops StringNormalizer and TfIdfVectorizer.

func opStringNormalizer(rc ops.OpRun, n *graph.Node, in []tensor.Tensor) ([]tensor.Tensor, error) {
	x := in[0]
	s, ok := x.Data().([]string)
	if !ok {
		return nil, fmt.Errorf("input must be strings, got %s", x.DType())
	}
	if !(len(x.Dims()) == 1 || (len(x.Dims()) == 2 && x.Dims()[0] == 1)) {
		return nil, fmt.Errorf("input must be [C] or [1, C], got shape %v", x.Dims())
	}
	if loc := n.AttrString("locale", ""); loc != "" && !strings.HasPrefix(loc, "en") {
		return nil, fmt.Errorf("locale %q is not supported (only en)", loc)
	}
	sensitive := n.AttrInt("is_case_sensitive", 0) != 0
	stop := map[string]bool{}
	if a := n.Attr("stopwords"); a != nil {
		for _, w := range a.Strings {
			if sensitive {
				stop[string(w)] = true
			} else {
				stop[strings.ToLower(string(w))] = true
			}
		}
	}
	action := n.AttrString("case_change_action", "NONE")
	var out []string
	for _, w := range s {
		key := w
		if !sensitive {
			key = strings.ToLower(w)
		}
		if stop[key] {
			continue
		}
		switch action {
		case "LOWER":
			w = strings.ToLower(w)
		case "UPPER":
			w = strings.ToUpper(w)
		case "NONE":
		default:
			return nil, fmt.Errorf("case_change_action %q is not NONE, LOWER or UPPER", action)
		}
		out = append(out, w)
	}
	if len(out) == 0 {
		out = []string{""}
	}
	shape := []int64{int64(len(out))}
	if len(x.Dims()) == 2 {
		shape = []int64{1, int64(len(out))}
	}
	return []tensor.Tensor{tensor.Raw(graph.String, shape, out)}, nil
}

func opTfIdfVectorizer(rc ops.OpRun, n *graph.Node, in []tensor.Tensor) ([]tensor.Tensor, error) {
	x := in[0]
	minN, maxN, maxSkip := int(n.AttrInt("min_gram_length", 1)), int(n.AttrInt("max_gram_length", 1)), int(n.AttrInt("max_skip_count", 0))
	mode := n.AttrString("mode", "TF")
	if minN < 1 || maxN < minN || maxSkip < 0 {
		return nil, fmt.Errorf("gram lengths [%d, %d] and max_skip_count %d are invalid", minN, maxN, maxSkip)
	}
	counts, indexes := n.AttrInts("ngram_counts"), n.AttrInts("ngram_indexes")
	weights := n.AttrFloats("weights")
	// The pool as strings, so integer and string inputs share one path.
	var pool []string
	if a := n.Attr("pool_strings"); a != nil && len(a.Strings) > 0 {
		for _, s := range a.Strings {
			pool = append(pool, string(s))
		}
	} else {
		for _, v := range n.AttrInts("pool_int64s") {
			pool = append(pool, fmt.Sprint(v))
		}
	}
	var tokens []string
	if s, ok := x.Data().([]string); ok {
		tokens = s
	} else {
		for _, v := range tensor.Int64s(x) {
			tokens = append(tokens, fmt.Sprint(v))
		}
	}
	// gram key (tokens joined by NUL) -> output column
	grams := map[string]int{}
	gi := 0
	outLen := 0
	for _, ix := range indexes {
		if ix < 0 {
			return nil, fmt.Errorf("ngram_indexes holds %d: output columns are not negative", ix)
		}
		outLen = max(outLen, int(min(ix, 1<<40))+1)
	}
	for k := range counts {
		start, end := int(counts[k]), len(pool)
		if k+1 < len(counts) {
			end = int(counts[k+1])
		}
		size := k + 1
		if start > end || end > len(pool) || (end-start)%size != 0 {
			return nil, fmt.Errorf("ngram_counts %v do not partition a pool of %d", counts, len(pool))
		}
		for p := start; p < end; p += size {
			if gi >= len(indexes) {
				return nil, fmt.Errorf("ngram_indexes has %d entries, the pool more grams", len(indexes))
			}
			grams[strings.Join(pool[p:p+size], "\x00")] = int(indexes[gi])
			gi++
		}
	}
	var rows, cols int
	switch len(x.Dims()) {
	case 1:
		rows, cols = 1, int(x.Dims()[0])
	case 2:
		rows, cols = int(x.Dims()[0]), int(x.Dims()[1])
	default:
		return nil, fmt.Errorf("input must be [C] or [N, C], got shape %v", x.Dims())
	}
	// The output (one column per ngram index) reserved from the run's memory budget before it
	// is allocated: a hostile index is refused, not allocated.
	if err := ops.ReserveShape(rc, "the output", graph.Float, []int64{int64(rows), int64(outLen)}, 8); err != nil {
		return nil, err
	}
	out := make([]float64, rows*outLen)
	// No gram is longer than the pool's longest (len(counts)) or than a row, and no skip
	// wider than a row: the loops stop there whatever the attributes say (max_gram_length
	// 2^31 - 1 once looped for minutes over lengths that match nothing).
	maxN = min(maxN, len(counts), cols)
	maxSkip = min(maxSkip, cols)
	for r := 0; r < rows; r++ {
		row := tokens[r*cols : (r+1)*cols]
		for g := minN; g <= maxN; g++ {
			skips := maxSkip
			if g == 1 {
				skips = 0
			}
			for s := 0; s <= skips; s++ {
				for i := 0; i+(g-1)*(s+1) < cols; i++ {
					parts := make([]string, g)
					for k := range parts {
						parts[k] = row[i+k*(s+1)]
					}
					if col, ok := grams[strings.Join(parts, "\x00")]; ok {
						out[r*outLen+col]++
					}
				}
			}
		}
	}
	for i, c := range out {
		w := 1.0
		if col := i % max(outLen, 1); col < len(weights) {
			w = float64(weights[col])
		}
		switch mode {
		case "TF":
		case "IDF":
			if c > 0 {
				out[i] = w
			}
		case "TFIDF":
			out[i] = c * w
		default:
			return nil, fmt.Errorf("mode %q is not TF, IDF or TFIDF", mode)
		}
	}
	shape := []int64{int64(outLen)}
	if len(x.Dims()) == 2 {
		shape = []int64{int64(rows), int64(outLen)}
	}
	return ops.FloatResult(graph.Float, shape, out)
}

func init() {
	ops.HostOps["StringNormalizer"] = opStringNormalizer
	ops.HostOps["TfIdfVectorizer"] = opTfIdfVectorizer
}
