// Package movement holds the host functions of the shape and data-movement ops, registered in
// package ops at init: shape arithmetic (Shape, Size, Reshape, Flatten, Squeeze, Unsqueeze,
// Transpose, Expand, Tile, Range, Cast), concatenation, splits, slices and pads, the gathers and
// scatters, layout ops (Trilu, EyeLike, DepthToSpace, SpaceToDepth, OneHot, TopK), selection
// (Compress, Unique, NonZero, ReverseSequence), sequences and optionals, and the registry entries
// of the control-flow ops the session runs itself (If, Loop, Scan). They work on any element
// type by computing an index map and gathering. It imports ops and tensor of the session layer.
package movement
