/*
 * loom.h: the flat C ABI of Loom's native shim.
 *
 * Conventions (modelled on ONNX Runtime's and ggml's C headers):
 *  - Opaque handles, every name prefixed loom_<object>_<verb>.
 *  - Every fallible call returns a loom_status. LOOM_OK is 0.
 *  - The message of the last failure is kept on the handle the call was made on: stream calls
 *    on the stream, everything else (buffers, events, modules, graphs) on the device. Read it
 *    with loom_stream_last_error / loom_device_last_error in the same cgo crossing as the call
 *    that failed (go/native wraps each call in a small C function that does both). Calls that
 *    have no handle yet (loom_device_count, loom_device_open) take an error buffer instead.
 *  - loom_<object>_destroy(NULL) is a no-op.
 *  - Parameter structs start with `struct_size` and only ever grow; the shim reads only the
 *    fields that fit in the size the caller passed, so an older caller keeps working.
 *  - The ABI version is checked by callers at start-up against loom_abi_version().
 */
#ifndef LOOM_LOOM_H_
#define LOOM_LOOM_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Bumped on any incompatible change: a caller built against another version must refuse to run. */
#define LOOM_ABI_VERSION 1

/* Largest message a handle keeps; longer messages are truncated. */
#define LOOM_ERROR_CAPACITY 1024

typedef enum loom_status {
  LOOM_OK = 0,
  LOOM_ERR_INVALID_ARGUMENT = 1, /* a bad handle, size, offset or parameter */
  LOOM_ERR_OUT_OF_MEMORY = 2,
  LOOM_ERR_NO_DRIVER = 3,        /* the backend's driver library could not be loaded */
  LOOM_ERR_NO_DEVICE = 4,        /* no device with that index */
  LOOM_ERR_NOT_SUPPORTED = 5,
  LOOM_ERR_TARGET_MISMATCH = 6,  /* code compiled for another target than the device's */
  LOOM_ERR_NOT_FOUND = 7,        /* a kernel name, static module or symbol */
  LOOM_ERR_DEVICE = 8,           /* the device or an enqueued operation failed; the stream is
                                    failed from then on (sticky) */
  LOOM_ERR_CAPTURE = 9,          /* an operation is not allowed in, or broke, a stream capture */
  LOOM_ERR_COMPILE = 10,         /* run-time compilation (NVRTC) failed; the log is the message */
  LOOM_ERR_INTERNAL = 11
} loom_status;

typedef enum loom_backend {
  LOOM_BACKEND_HOST = 1, /* CPU worker threads */
  LOOM_BACKEND_CUDA = 2  /* NVIDIA driver API + NVRTC, loaded with dlopen at run time */
} loom_backend;

typedef enum loom_memory_kind {
  LOOM_MEMORY_DEVICE = 0, /* device-local; no host pointer */
  LOOM_MEMORY_SHARED = 1  /* coherent, host-visible (pinned/mapped on CUDA); has a host pointer */
} loom_memory_kind;

typedef struct loom_device loom_device;
typedef struct loom_stream loom_stream;
typedef struct loom_event loom_event;
typedef struct loom_buffer loom_buffer;
typedef struct loom_module loom_module;
typedef struct loom_kernel loom_kernel;
typedef struct loom_graph loom_graph;
typedef struct loom_graph_exec loom_graph_exec;

/* ---------------------------------------------------------------- library */

uint32_t loom_abi_version(void);
/* A static, human-readable name for a status ("invalid argument", ...). Never NULL. */
const char* loom_status_string(loom_status status);

/* ---------------------------------------------------------------- devices */

typedef struct loom_device_props {
  uint32_t struct_size;
  loom_backend backend;
  int32_t index;
  char name[128];
  /* Code target: "host-x86_64-v3", "host-x86_64-v4", "host-aarch64-v8", or "sm_90". */
  char target[64];
  uint64_t total_memory;
  uint32_t compute_units;        /* host: worker threads; cuda: multiprocessors */
  uint32_t max_threads_per_block;
  uint32_t max_block_dim[3];
  uint32_t max_grid_dim[3];
  /* Shared memory a block gets without asking (CUDA: 48 KiB). */
  uint32_t max_shared_memory_per_block;
  uint32_t warp_size;            /* 1 on host */
  /* Shared memory a launch may ask for (added in ABI 1's third revision; an older caller's
     struct_size leaves it out): CUDA's opt-in limit (227 KiB on sm_90, 163 KiB on sm_80). A
     launch asking for more than max_shared_memory_per_block is opted in by the shim
     (cuFuncSetAttribute, once per kernel and size); the host backend's two limits are equal. */
  uint32_t max_shared_memory_per_block_optin;
  /* CUDA: the driver's version as cuDriverGetVersion reports it (12080 for 12.8); 0 on host.
     Added with max_shared_memory_per_block_optin. Part of the on-disk key of compiled images. */
  uint32_t driver_version;
} loom_device_props;

typedef struct loom_device_open_params {
  uint32_t struct_size;
  loom_backend backend;
  int32_t index;
  /* Host backend: worker threads for kernel grids and graph nodes; 0 = hardware concurrency. */
  uint32_t worker_threads;
  /* LOOM_DEVICE_* bits (added in ABI 1's second revision; an older caller's struct_size leaves
     them 0). */
  uint32_t flags;
} loom_device_open_params;

/* loom_device_open_params.flags. */
enum {
  /* Host backend: the device's memory behaves as a discrete GPU's, so that a program tested on
     the host fails where it would on a GPU. The host cannot reach LOOM_MEMORY_DEVICE buffers
     except through copies (as always: they have no host pointer); loom_buffer_wrap_host and
     graph runs with rebound caller memory (loom_graph_run_params.bindings) fail with
     LOOM_ERR_NOT_SUPPORTED, as on CUDA; new device buffers are filled with 0xFF bytes (NaN for
     floats, -1 for integers), as a GPU's are not zeroed. CUDA devices are discrete already
     and ignore the flag. */
  LOOM_DEVICE_DISCRETE = 1u << 0
};

/* Number of devices of a backend. The CUDA backend with no driver returns LOOM_ERR_NO_DRIVER
   with the message "no CUDA driver: tried libcuda.so.1, libcuda.so". */
loom_status loom_device_count(loom_backend backend, int32_t* count, char* err, size_t err_capacity);
loom_status loom_device_open(const loom_device_open_params* params, loom_device** out, char* err,
                             size_t err_capacity);
/* Waits for nothing: destroy every stream, buffer, module and graph of the device first. */
void loom_device_destroy(loom_device* device);
loom_status loom_device_get_props(loom_device* device, loom_device_props* out);
/* Copies the device's last error message into buf (always NUL-terminated); returns its length. */
size_t loom_device_last_error(loom_device* device, char* buf, size_t capacity);

/* ---------------------------------------------------------------- memory */

loom_status loom_buffer_create(loom_device* device, loom_memory_kind kind, uint64_t bytes,
                               loom_buffer** out);
void loom_buffer_destroy(loom_buffer* buffer);
uint64_t loom_buffer_size(const loom_buffer* buffer);
loom_memory_kind loom_buffer_kind(const loom_buffer* buffer);
/* Host pointer of a LOOM_MEMORY_SHARED buffer; NULL for device-local memory. */
void* loom_buffer_host_pointer(loom_buffer* buffer);
/* Host backend only (others: LOOM_ERR_NOT_SUPPORTED): a LOOM_MEMORY_SHARED buffer over the
   caller's memory, so that kernels read data already in host memory (a model's weights)
   without a second copy. Its host pointer is data. The caller keeps the memory valid until
   the buffer is destroyed, which leaves it to the caller; kernels access it by element, so it
   needs the alignment of the elements they read. */
loom_status loom_buffer_wrap_host(loom_device* device, void* data, uint64_t bytes,
                                  loom_buffer** out);

/* ---------------------------------------------------------------- streams */

loom_status loom_stream_create(loom_device* device, loom_stream** out);

/* Stream flags (loom_stream_params.flags). */
enum {
  /* Host backend: each operation runs on the thread that enqueues it, before the enqueue call
     returns, instead of on the stream's own thread (which an inline stream does not have):
     no hand-off per operation, for callers that wait for every operation anyway. Stream
     order, sticky failure, events and capture behave as on any stream. Ignored by backends
     whose work runs on a device. */
  LOOM_STREAM_INLINE = 1
};

/* Parameters of loom_stream_create_with (struct_size first; later versions only append). */
typedef struct loom_stream_params {
  uint32_t struct_size;
  uint32_t flags; /* LOOM_STREAM_* bits */
  /* Host backend: the most threads, the caller included, that run the blocks of one kernel
     launched on the stream (0: the calling thread and the device's whole worker pool). */
  uint32_t max_threads;
} loom_stream_params;

/* loom_stream_create with parameters; params NULL is loom_stream_create. Unknown flag bits are
   LOOM_ERR_INVALID_ARGUMENT. */
loom_status loom_stream_create_with(loom_device* device, const loom_stream_params* params,
                                    loom_stream** out);
/* Drains the stream's queued work, then frees it. */
void loom_stream_destroy(loom_stream* stream);
/* Waits until every operation enqueued so far has finished. Returns LOOM_ERR_DEVICE (and keeps
   returning it) once any of them failed. */
loom_status loom_stream_synchronize(loom_stream* stream);
size_t loom_stream_last_error(loom_stream* stream, char* buf, size_t capacity);

/* Asynchronous copies and fills, ordered on the stream. Host memory passed to them must stay
   valid and unchanged until the stream has passed the operation (as with cuMemcpyHtoDAsync). */
loom_status loom_stream_copy_h2d(loom_stream* stream, loom_buffer* dst, uint64_t dst_offset,
                                 const void* src, uint64_t bytes);
loom_status loom_stream_copy_d2h(loom_stream* stream, void* dst, loom_buffer* src,
                                 uint64_t src_offset, uint64_t bytes);
loom_status loom_stream_copy_d2d(loom_stream* stream, loom_buffer* dst, uint64_t dst_offset,
                                 loom_buffer* src, uint64_t src_offset, uint64_t bytes);
loom_status loom_stream_fill(loom_stream* stream, loom_buffer* dst, uint64_t offset,
                             uint64_t bytes, uint8_t value);

/* Calls fn(user) on the stream's timeline once everything before it finished (host-side
   completion callbacks; fn must not call back into the stream). */
typedef void (*loom_host_fn)(void* user);
loom_status loom_stream_host_callback(loom_stream* stream, loom_host_fn fn, void* user);

/* ---------------------------------------------------------------- events */

loom_status loom_event_create(loom_device* device, loom_event** out);
void loom_event_destroy(loom_event* event);
/* Marks the point in the stream reached by everything enqueued so far. */
loom_status loom_event_record(loom_event* event, loom_stream* stream);
/* Makes later work on `stream` wait for the event's last recorded point (cross-stream order). */
loom_status loom_stream_wait_event(loom_stream* stream, loom_event* event);
loom_status loom_event_synchronize(loom_event* event);
/* *done = 1 once the recorded point was reached. */
loom_status loom_event_query(loom_event* event, int32_t* done);
/* Milliseconds between two reached events. */
loom_status loom_event_elapsed_ms(loom_event* start, loom_event* end, float* ms);

/* ---------------------------------------------------------------- modules and kernels */

typedef enum loom_module_format {
  LOOM_MODULE_HOST_SHARED_OBJECT = 1, /* path: a .so with host kernels (dlopen) */
  LOOM_MODULE_HOST_STATIC = 2,        /* name: a module registered with loom_host_module_register */
  LOOM_MODULE_CUDA_SOURCE = 3,        /* data/size: CUDA C, compiled by NVRTC for the device */
  LOOM_MODULE_CUDA_PTX = 4,           /* data/size: PTX text */
  LOOM_MODULE_CUDA_CUBIN = 5          /* data/size: a cubin/fatbin image */
} loom_module_format;

typedef struct loom_module_load_params {
  uint32_t struct_size;
  loom_module_format format;
  /* The target the code was compiled for; must equal the device's target
     (LOOM_ERR_TARGET_MISMATCH otherwise), except that host code for a lower x86-64 level runs
     on a device of a higher one (host-x86_64-v3 code on a host-x86_64-v4 device). */
  const char* target;
  const char* path;  /* LOOM_MODULE_HOST_SHARED_OBJECT */
  const char* name;  /* LOOM_MODULE_HOST_STATIC; also used in error messages */
  const void* data;  /* CUDA formats */
  uint64_t size;
} loom_module_load_params;

loom_status loom_module_load(loom_device* device, const loom_module_load_params* params,
                             loom_module** out);
/* Kernels obtained from a module are owned by it and die with it. */
void loom_module_destroy(loom_module* module);
loom_status loom_module_get_kernel(loom_module* module, const char* name, loom_kernel** out);

/* ---------------------------------------------------------------- code compiled without a device */

/*
 * Compiles code for a target with the backend's own compiler, without a driver or a device: the
 * CUDA backend compiles CUDA C with NVRTC to a cubin (LOOM_MODULE_CUDA_CUBIN, target "sm_90") or
 * to PTX (LOOM_MODULE_CUDA_PTX, for the virtual architecture of the target: compute_90), which
 * loom_module_load then takes as it is. Build tools use it to ship kernels ahead of time and CI
 * to check every kernel against the real compiler on machines with no GPU. The host backend
 * compiles nothing (LOOM_ERR_NOT_SUPPORTED: host code is built with a C compiler).
 */
typedef struct loom_code loom_code;

typedef struct loom_code_compile_params {
  uint32_t struct_size;
  loom_backend backend;      /* LOOM_BACKEND_CUDA */
  loom_module_format format; /* the output: LOOM_MODULE_CUDA_CUBIN or LOOM_MODULE_CUDA_PTX */
  const char* target;        /* "sm_80", "sm_90", ... */
  const char* name;          /* the program's name, in messages and the compiler's log */
  const char* source;        /* CUDA C, source_size bytes (no NUL needed) */
  uint64_t source_size;
} loom_code_compile_params;

/* On success *out owns the image (and the compiler's warnings, loom_code_log). When the compiler
   rejects the source the status is LOOM_ERR_COMPILE, err holds the start of the log and *out
   still gets a code, of size 0, whose loom_code_log is the whole log. Any other failure (no
   NVRTC: LOOM_ERR_NO_DRIVER; bad parameters) leaves *out NULL. */
loom_status loom_code_compile(const loom_code_compile_params* params, loom_code** out, char* err,
                              size_t err_capacity);
const void* loom_code_data(const loom_code* code);
uint64_t loom_code_size(const loom_code* code);
/* The compiler's log, NUL-terminated; "" when it printed nothing. Never NULL for a code. */
const char* loom_code_log(const loom_code* code);
void loom_code_destroy(loom_code* code);
/* The backend's compiler and its version ("NVRTC 12.9 (libnvrtc.so.12)") into out (NUL-
   terminated, truncated to capacity); LOOM_ERR_NO_DRIVER when it cannot be loaded. */
loom_status loom_code_compiler(loom_backend backend, char* out, size_t capacity, char* err,
                               size_t err_capacity);

/*
 * Host kernel calling convention. A host kernel is a C function run once per block (workgroup)
 * of the grid; the Loom compiler emits the loop over the block's threads inside it. Blocks of one
 * launch run concurrently on the device's worker pool.
 */
typedef struct loom_host_kernel_args {
  uint32_t grid[3];
  uint32_t block[3];
  uint32_t block_id[3];
  /* buffers[i] is the base address of binding i plus its offset. */
  void* const* buffers;
  const uint64_t* buffer_bytes; /* bytes available from buffers[i] to the end of its buffer */
  uint32_t buffer_count;
  const void* scalars;          /* the launch's scalar blob */
  uint32_t scalar_bytes;
  void* shared;                 /* shared_bytes of block-private scratch */
  uint32_t* violation;          /* OR bits in with __atomic_fetch_or; never NULL */
} loom_host_kernel_args;

typedef void (*loom_host_kernel_fn)(const loom_host_kernel_args* args);

typedef struct loom_host_kernel_entry {
  const char* name;
  loom_host_kernel_fn fn;
} loom_host_kernel_entry;

/* Registers ahead-of-time host kernels linked into the binary under a module name (process-wide;
   registering the same name again replaces it). A shared object loaded with
   LOOM_MODULE_HOST_SHARED_OBJECT exports instead:
     const loom_host_kernel_entry* loom_host_module_entries(uint32_t* count, const char** target); */
loom_status loom_host_module_register(const char* module_name, const char* target,
                                      const loom_host_kernel_entry* entries, uint32_t count);

/*
 * CUDA kernel calling convention: extern "C" __global__ void name(<buffer pointers, one per
 * binding, each base + offset>, unsigned int* violation, <scalars in blob order>). The scalar blob
 * is laid out with each scalar at its natural alignment, which is how the parameters follow each
 * other; the shim passes pointers + violation + blob as one packed argument buffer.
 */

typedef struct loom_launch_params {
  uint32_t struct_size;
  uint32_t grid[3];
  uint32_t block[3];
  uint32_t shared_bytes;
  loom_buffer* const* buffers;   /* buffer_count bindings */
  const uint64_t* buffer_offsets;
  uint32_t buffer_count;
  const void* scalars;           /* copied at enqueue time */
  uint32_t scalar_bytes;
  /* Optional violation word (4 bytes at violation_offset): kernels OR in a bit for every guarded
     access they skipped. NULL: the shim uses a private word that is discarded. */
  loom_buffer* violation;
  uint64_t violation_offset;
} loom_launch_params;

/* Enqueues a launch; params and the arrays it points to are copied before returning. */
loom_status loom_kernel_launch(loom_stream* stream, loom_kernel* kernel,
                               const loom_launch_params* params);

/* ---------------------------------------------------------------- graphs */

/* An explicitly built (or captured) graph of nodes with dependency edges. Node ids are dense,
   in order of creation. Errors go to the device's error. */
loom_status loom_graph_create(loom_device* device, loom_graph** out);
void loom_graph_destroy(loom_graph* graph);
uint32_t loom_graph_node_count(const loom_graph* graph);
loom_status loom_graph_add_kernel_node(loom_graph* graph, loom_kernel* kernel,
                                       const loom_launch_params* params, const uint32_t* deps,
                                       uint32_t dep_count, uint32_t* node_out);
loom_status loom_graph_add_copy_node(loom_graph* graph, loom_buffer* dst, uint64_t dst_offset,
                                     loom_buffer* src, uint64_t src_offset, uint64_t bytes,
                                     const uint32_t* deps, uint32_t dep_count, uint32_t* node_out);
loom_status loom_graph_add_fill_node(loom_graph* graph, loom_buffer* dst, uint64_t offset,
                                     uint64_t bytes, uint8_t value, const uint32_t* deps,
                                     uint32_t dep_count, uint32_t* node_out);
/* A node that does nothing: a join point. */
loom_status loom_graph_add_empty_node(loom_graph* graph, const uint32_t* deps, uint32_t dep_count,
                                      uint32_t* node_out);

/* Stream capture: between begin and end, kernel launches, d2d copies and fills on the stream are
   recorded into a graph instead of run (in stream order: each node depends on the previous).
   Host copies, host callbacks, synchronize and cross-stream waits fail with LOOM_ERR_CAPTURE and
   invalidate the capture; end_capture then returns LOOM_ERR_CAPTURE, and the stream is usable
   again in either case. */
loom_status loom_stream_begin_capture(loom_stream* stream);
loom_status loom_stream_end_capture(loom_stream* stream, loom_graph** out);
int32_t loom_stream_is_capturing(loom_stream* stream);

loom_status loom_graph_instantiate(loom_graph* graph, loom_graph_exec** out);
void loom_graph_exec_destroy(loom_graph_exec* exec);
/* Runs the whole graph as one operation on the stream, respecting its edges; independent nodes
   may run concurrently. */
loom_status loom_graph_exec_launch(loom_graph_exec* exec, loom_stream* stream);
/* One buffer binding of a kernel node, bound to other host memory for one run
   (loom_graph_run_params.bindings). */
typedef struct loom_graph_binding {
  uint32_t node;     /* a kernel node of the exec */
  uint32_t index;    /* which of its buffer bindings */
  void* address;     /* the memory the binding uses for this run: what buffers[index] points to */
  uint64_t bytes;    /* bytes available from address (the kernel's buffer_bytes[index]) */
} loom_graph_binding;

/* Parameters of loom_graph_exec_run (struct_size first; later versions only append fields). */
typedef struct loom_graph_run_params {
  uint32_t struct_size;
  /* Host backend: the most threads, the caller included, that run the blocks of one kernel node
     (1: the caller alone; 0: the caller and every worker of the device's pool). Ignored by
     backends whose kernels run on a device. */
  uint32_t max_threads;
  /* Host backend only (others fail with LOOM_ERR_NOT_SUPPORTED when binding_count > 0): for this
     run, the listed kernel-node bindings use other host memory instead of the recorded buffer
     and offset, which lets a caller run a recorded graph on its own input and output memory
     without copying it in and out. The memory must stay valid, and not be touched by anything
     else, until the call returns; the exec keeps no reference to it, and later runs use the
     recorded addresses again. A node and index may appear once. */
  const loom_graph_binding* bindings;
  uint32_t binding_count;
} loom_graph_run_params;

/* Runs the whole graph to completion before returning, ordered after everything enqueued on the
   stream before it (which it waits for) and subject to the stream's sticky failure and capture
   rules like any stream operation. The host backend runs the nodes on the calling thread, in id
   order, instead of handing them to the stream's thread and the pool: for small graphs the
   hand-offs cost more than the work. With max_threads other than 1 it forks once: up to
   max_threads - 1 pool workers join the caller, and all step through the nodes together,
   sharing each kernel's blocks and moving on once all of them have finished. Other backends launch the graph on the stream and
   synchronize it. params may be NULL (defaults: max_threads 0). */
loom_status loom_graph_exec_run(loom_graph_exec* exec, loom_stream* stream,
                                const loom_graph_run_params* params);
/* Replaces a kernel node's launch parameters (same kernel) for later launches. */
loom_status loom_graph_exec_update_kernel_node(loom_graph_exec* exec, uint32_t node,
                                               const loom_launch_params* params);

/* ---------------------------------------------------------------- testing */

typedef enum loom_fault {
  LOOM_FAULT_NONE = 0,
  LOOM_FAULT_NEXT_OPERATION = 1, /* the next operation enqueued on the stream fails on the device,
                                    as a kernel fault would: the stream becomes failed */
  LOOM_FAULT_NEXT_SYNCHRONIZE = 2 /* the next synchronize (fence) reports a device failure */
} loom_fault;

/* Test-only fault injection (also reachable with the environment variable LOOM_INJECT_FAULT=
   "next-operation" or "next-synchronize", applied to the first stream created). */
loom_status loom_stream_inject_fault(loom_stream* stream, loom_fault fault);

#ifdef __cplusplus
}
#endif

#endif /* LOOM_LOOM_H_ */
