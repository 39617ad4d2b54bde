package graph

// Limits bounds what a model may ask for, so that hostile or corrupt bytes are refused with an
// error before anything is allocated for them. The zero value of a field means the default.
type Limits struct {
	MaxModelBytes   int64 // serialized model size (default 2 GiB, protobuf's own ceiling)
	MaxRank         int   // dimensions of any tensor or shape (default 64)
	MaxDim          int64 // one dimension's size (default 2^40)
	MaxElements     int64 // elements of one tensor (default 2^34)
	MaxNesting      int   // subgraph and type nesting depth (default 32)
	MaxNodes        int   // nodes over all graphs (default 2^22)
	MaxFoldElements int64 // elements a constant-folded or shape-propagated tensor may have (default 2^20)
}

// DefaultLimits returns the limits used when LoadOptions.Limits is zero.
func DefaultLimits() Limits { return Limits{}.withDefaults() }

func (l Limits) withDefaults() Limits {
	if l.MaxModelBytes <= 0 {
		l.MaxModelBytes = 2 << 30
	}
	if l.MaxRank <= 0 {
		l.MaxRank = 64
	}
	if l.MaxDim <= 0 {
		l.MaxDim = 1 << 40
	}
	if l.MaxElements <= 0 {
		l.MaxElements = 1 << 34
	}
	if l.MaxNesting <= 0 {
		l.MaxNesting = 32
	}
	if l.MaxNodes <= 0 {
		l.MaxNodes = 1 << 22
	}
	if l.MaxFoldElements <= 0 {
		l.MaxFoldElements = 1 << 20
	}
	return l
}
