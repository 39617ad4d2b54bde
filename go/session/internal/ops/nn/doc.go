// Package nn holds the host functions of the neural-network ops, registered in package ops at
// init: Conv and ConvTranspose, the pools and MaxUnpool, Softmax, LogSoftmax and Hardmax, the
// normalizations (Batch, Instance, Layer, MeanVariance, LRN), the recurrent ops RNN, GRU and
// LSTM, the losses, Resize and Upsample, GridSample, RoiAlign and NonMaxSuppression, and the
// host fallbacks of Loom's fused operators (FusedConvHost, LoomAttention). They are the reference
// paths of the Loom-backed ops, for the types and shapes their kernels do not cover, and the ops
// without a kernel yet. It imports ops and tensor of the session layer.
package nn
