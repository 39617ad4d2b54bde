// Package inferencepb is the Go code generated from grpc_service.proto: the Open Inference
// Protocol's gRPC service (inference.GRPCInferenceService, the KServe v2 / Triton protocol)
// and its messages. go/serve implements the server; clients use NewGRPCInferenceServiceClient.
package inferencepb

//go:generate bash gen.sh
