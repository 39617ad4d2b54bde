// Package serve is `loom serve`: a model server speaking the Open Inference Protocol (the
// KServe v2 protocol, which NVIDIA Triton implements) over HTTP/REST and gRPC, running ONNX
// models on go/session's InferenceSession. It is a KServe serving runtime: Triton's clients
// (tritonclient.http and tritonclient.grpc) and KServe's routing speak to it unchanged.
//
// # Endpoints
//
// REST (Server.Handler): GET /v2/health/live, /v2/health/ready, /v2 (server metadata),
// /v2/models/NAME[/versions/V] (model metadata), .../ready, .../config (a Triton-style model
// configuration), POST .../infer (JSON tensors, and the binary tensor data extension: the
// Inference-Header-Content-Length header, the binary_data_size input parameter and the
// binary_data / binary_data_output output parameters, as Triton's clients send them),
// POST /v2/repository/index, /v2/repository/models/NAME/load and .../unload, and GET /metrics
// (Prometheus). gRPC (Server.NewGRPCServer): inference.GRPCInferenceService's ServerLive,
// ServerReady, ModelReady, ServerMetadata, ModelMetadata, ModelInfer (raw_input_contents or the
// typed contents; outputs in raw_output_contents), RepositoryIndex, RepositoryModelLoad and
// RepositoryModelUnload; the service's other methods answer UNIMPLEMENTED. Datatypes: BOOL,
// UINT8-UINT64, INT8-INT64, FP16, BF16, FP32, FP64 and BYTES (a model's string tensors).
//
// Errors are {"error": "..."} (REST) or a gRPC status, naming the model, the tensor and what is
// wrong: 400 / INVALID_ARGUMENT for malformed JSON, an unknown datatype, a datatype or shape the
// model does not take, data that does not fill the shape, a missing or unknown input or output;
// 404 / NOT_FOUND for an unknown model or version; 413 / RESOURCE_EXHAUSTED for a body over the
// limit (WithMaxBodyBytes); 503 / RESOURCE_EXHAUSTED for a full queue; 503 / UNAVAILABLE while
// shutting down or unloading; 504 / DEADLINE_EXCEEDED for a request past its deadline (the gRPC
// deadline, or the request's "timeout" parameter in microseconds); 500 / INTERNAL for a run that
// failed. The HTTP server bounds a slow client's request (WithTimeouts).
//
// # The model repository
//
// WithModelRepository(DIR) serves DIR/MODEL/VERSION/model.onnx for every MODEL subdirectory and
// every VERSION that is a positive integer (a request without a version gets the highest).
// WithModelDir(DIR, NAME) serves DIR/model.onnx as NAME version 1 (KServe mounts a model's
// storage at /mnt/models). Either may have a config.json beside the versions (DIR/MODEL/ or
// DIR/), a JSON object whose fields are all optional (ModelConfig):
//
//	provider            "host" (default), "cuda" or "auto": the session's execution provider
//	intra_op_threads    the session's host worker threads (0, the default: one per core)
//	max_batch_size      > 0 turns on dynamic batching, up to this many rows per run; every
//	                    input and output must have a variable first dimension (0: off)
//	max_queue_delay_us  how long a batch's first request waits for more (default 500)
//	max_queue_size      requests that may wait per model version (default 256); more are
//	                    refused at once with 503 / RESOURCE_EXHAUSTED, so memory stays bounded
//	instances           runs (batches) of the model in flight at once (default 2)
//	session_options     go/session's string options, e.g. {"loom.run_plan": "0"}
//
// Unknown fields are an error. Models load when New runs (a model that fails fails New); the
// repository API loads, reloads and unloads them while the server runs.
//
// # Scheduling and dynamic batching
//
// Every model version has a bounded queue and runs at most `instances` requests at a time.
// With dynamic batching, queued requests whose inputs agree in element type and in every
// dimension but the first are concatenated along dimension 0 (up to max_batch_size rows, or
// until the first has waited max_queue_delay_us), run once, and the outputs split back by rows.
// When a batch fails, its requests are rerun one by one, so an error reaches only the request
// it belongs to. A request whose context ends (client cancellation or disconnect, deadline)
// while queued leaves the queue and never runs; a single request's run stops at the session's
// next seam; a batch stops once every request in it has gone.
//
// # Metrics and tracing
//
// GET /metrics serves a registry of the Server's own (not Prometheus' global one) with Triton's
// counters, labelled model and version: nv_inference_request_success,
// nv_inference_request_failure, nv_inference_count (rows), nv_inference_exec_count (runs),
// nv_inference_request_duration_us, nv_inference_queue_duration_us and
// nv_inference_compute_infer_duration_us; and Loom's loom_batch_size (histogram of rows per
// run), loom_queue_depth (gauge) and loom_request_duration_seconds (histogram), plus the Go
// and process collectors. Each inference request gets a server span (WithTracerProvider; default
// otel's global provider) that continues the W3C traceparent of its HTTP headers or gRPC
// metadata; the session's loom.Run and op spans are its children (docs/tracing.md).
//
// # Shutdown
//
// Shutdown turns readiness false, waits WithShutdownDelay, stops accepting connections,
// answers every request in flight or queued, then closes the sessions.
package serve
