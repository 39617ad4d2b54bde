/*
 * wrappers.h: the C side of go/native's single cgo boundary.
 *
 * Every fallible ABI call is made through exactly one of these static inline wrappers, so a Go
 * call costs one cgo crossing: the wrapper calls the ABI function and, when it fails, copies the
 * last error of the handle the shim filed it on into the caller's buffer (err, which always holds
 * LOOM_ERROR_CAPACITY bytes) before returning. Reading the message later, in a second crossing,
 * could pick up another goroutine's failure on the same handle.
 *
 * None of the wrappers keeps a pointer it was given after returning (they are declared
 * `#cgo noescape` on the Go side, which keeps the Go arguments on the stack): host memory that
 * the shim reads or writes asynchronously is staged through malloc'd memory here.
 */
#ifndef LOOM_GO_NATIVE_CABI_WRAPPERS_H_
#define LOOM_GO_NATIVE_CABI_WRAPPERS_H_

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "loom/loom.h"

static inline loom_status w_device_failed(loom_status st, loom_device* device, char* err) {
  if (st != LOOM_OK) loom_device_last_error(device, err, LOOM_ERROR_CAPACITY);
  return st;
}

static inline loom_status w_stream_failed(loom_status st, loom_stream* stream, char* err) {
  if (st != LOOM_OK) loom_stream_last_error(stream, err, LOOM_ERROR_CAPACITY);
  return st;
}

/* ---------------------------------------------------------------- devices */

static inline loom_status w_device_count(int32_t backend, int32_t* count, char* err) {
  return loom_device_count((loom_backend)backend, count, err, LOOM_ERROR_CAPACITY);
}

static inline loom_status w_device_open(int32_t backend, int32_t index, uint32_t workers,
                                        uint32_t flags, loom_device** out, char* err) {
  loom_device_open_params p;
  memset(&p, 0, sizeof p);
  p.struct_size = sizeof p;
  p.backend = (loom_backend)backend;
  p.index = index;
  p.worker_threads = workers;
  p.flags = flags;
  return loom_device_open(&p, out, err, LOOM_ERROR_CAPACITY);
}

static inline loom_status w_device_get_props(loom_device* device, loom_device_props* props,
                                             char* err) {
  memset(props, 0, sizeof *props);
  props->struct_size = sizeof *props;
  return w_device_failed(loom_device_get_props(device, props), device, err);
}

/* ---------------------------------------------------------------- memory */

static inline loom_status w_buffer_create(loom_device* device, int32_t kind, uint64_t bytes,
                                          loom_buffer** out, char* err) {
  return w_device_failed(loom_buffer_create(device, (loom_memory_kind)kind, bytes, out), device,
                         err);
}

static inline loom_status w_buffer_wrap_host(loom_device* device, void* data, uint64_t bytes,
                                             loom_buffer** out, char* err) {
  return w_device_failed(loom_buffer_wrap_host(device, data, bytes, out), device, err);
}

/* ---------------------------------------------------------------- streams */

static inline loom_status w_stream_create(loom_device* device, loom_stream** out, char* err) {
  return w_device_failed(loom_stream_create(device, out), device, err);
}

static inline loom_status w_stream_create_with(loom_device* device, uint32_t flags,
                                               uint32_t max_threads, loom_stream** out,
                                               char* err) {
  loom_stream_params p;
  p.struct_size = sizeof(p);
  p.flags = flags;
  p.max_threads = max_threads;
  return w_device_failed(loom_stream_create_with(device, &p, out), device, err);
}

/* Upload staging. Each upload copies its source into a malloc'd block; a host callback on the
   stream frees the block's data as soon as the copy has run. A stream skips host callbacks once
   it has failed, so the blocks are also kept on a per-stream list: entries whose callback ran are
   reclaimed by later uploads, and everything enqueued before a synchronization is freed after
   it (by then every earlier operation has run or been skipped, so nothing reads the data). */
typedef struct w_staging {
  struct w_staging* next;
  int done; /* set (atomically) by the host callback after freeing data */
  void* data;
} w_staging;

typedef struct w_staging_list {
  pthread_mutex_t mu;
  w_staging* head;
  w_staging* tail;
} w_staging_list;

static inline w_staging_list* w_staging_list_new(void) {
  w_staging_list* list = (w_staging_list*)calloc(1, sizeof(w_staging_list));
  if (list != NULL) pthread_mutex_init(&list->mu, NULL);
  return list;
}

static inline void w_staging_free_chain(w_staging* s) {
  while (s != NULL) {
    w_staging* next = s->next;
    if (!__atomic_load_n(&s->done, __ATOMIC_ACQUIRE)) free(s->data);
    free(s);
    s = next;
  }
}

/* Frees the list and every block on it: call once the stream is destroyed (drained). */
static inline void w_staging_list_free(w_staging_list* list) {
  if (list == NULL) return;
  w_staging_free_chain(list->head);
  pthread_mutex_destroy(&list->mu);
  free(list);
}

static void w_staging_done(void* user) {
  w_staging* s = (w_staging*)user;
  free(s->data);
  s->data = NULL;
  __atomic_store_n(&s->done, 1, __ATOMIC_RELEASE);
}

/* Unlinks and frees the leading blocks whose callback ran. */
static inline void w_staging_reclaim(w_staging_list* list) {
  w_staging* freed = NULL;
  pthread_mutex_lock(&list->mu);
  while (list->head != NULL && __atomic_load_n(&list->head->done, __ATOMIC_ACQUIRE)) {
    w_staging* s = list->head;
    list->head = s->next;
    s->next = freed;
    freed = s;
  }
  if (list->head == NULL) list->tail = NULL;
  pthread_mutex_unlock(&list->mu);
  w_staging_free_chain(freed);
}

/* Copies src into staging memory and enqueues the host-to-device copy from it, followed by the
   callback that frees it. The caller's memory is free to change as soon as this returns. */
static inline loom_status w_stream_upload(loom_stream* stream, w_staging_list* list,
                                          loom_buffer* dst, uint64_t dst_offset, const void* src,
                                          uint64_t bytes, char* err) {
  w_staging_reclaim(list);
  w_staging* s = (w_staging*)calloc(1, sizeof(w_staging));
  void* data = malloc(bytes ? bytes : 1);
  if (s == NULL || data == NULL) {
    free(s);
    free(data);
    snprintf(err, LOOM_ERROR_CAPACITY, "cannot allocate %llu bytes of upload staging memory",
             (unsigned long long)bytes);
    return LOOM_ERR_OUT_OF_MEMORY;
  }
  if (bytes) memcpy(data, src, bytes);
  s->data = data;
  loom_status st = loom_stream_copy_h2d(stream, dst, dst_offset, data, bytes);
  if (st != LOOM_OK) {
    free(data);
    free(s);
    return w_stream_failed(st, stream, err);
  }
  /* Listed only after the callback was enqueued (or failed to be): a synchronization frees the
     blocks listed before it began, and every operation touching those is enqueued by then. If the
     callback could not be enqueued, the block waits for the next synchronization. */
  st = loom_stream_host_callback(stream, w_staging_done, s);
  pthread_mutex_lock(&list->mu);
  if (list->tail != NULL) {
    list->tail->next = s;
  } else {
    list->head = s;
  }
  list->tail = s;
  pthread_mutex_unlock(&list->mu);
  return w_stream_failed(st, stream, err);
}

/* Synchronizes the stream and then frees the staging blocks enqueued before it began. */
static inline loom_status w_stream_synchronize_staged(loom_stream* stream, w_staging_list* list,
                                                      char* err) {
  pthread_mutex_lock(&list->mu);
  w_staging* before = list->head;
  list->head = list->tail = NULL;
  pthread_mutex_unlock(&list->mu);
  loom_status st = loom_stream_synchronize(stream);
  w_staging_free_chain(before);
  return w_stream_failed(st, stream, err);
}

/* Enqueues a device-to-host copy into malloc'd staging memory returned in *staging; the caller
   copies it out with w_staging_finish once the stream has passed the copy. */
static inline loom_status w_stream_download(loom_stream* stream, loom_buffer* src,
                                            uint64_t src_offset, uint64_t bytes, void** staging,
                                            char* err) {
  void* mem = malloc(bytes ? bytes : 1);
  if (mem == NULL) {
    snprintf(err, LOOM_ERROR_CAPACITY, "cannot allocate %llu bytes of download staging memory",
             (unsigned long long)bytes);
    return LOOM_ERR_OUT_OF_MEMORY;
  }
  loom_status st = loom_stream_copy_d2h(stream, mem, src, src_offset, bytes);
  if (st != LOOM_OK) {
    free(mem);
    return w_stream_failed(st, stream, err);
  }
  *staging = mem;
  return LOOM_OK;
}

/* Copies a completed download's staging memory into dst (may be NULL: discard) and frees it. */
static inline void w_staging_finish(void* staging, void* dst, uint64_t bytes) {
  if (dst != NULL && bytes) memcpy(dst, staging, bytes);
  free(staging);
}

static inline loom_status w_stream_copy_d2d(loom_stream* stream, loom_buffer* dst,
                                            uint64_t dst_offset, loom_buffer* src,
                                            uint64_t src_offset, uint64_t bytes, char* err) {
  return w_stream_failed(loom_stream_copy_d2d(stream, dst, dst_offset, src, src_offset, bytes),
                         stream, err);
}

static inline loom_status w_stream_fill(loom_stream* stream, loom_buffer* dst, uint64_t offset,
                                        uint64_t bytes, uint8_t value, char* err) {
  return w_stream_failed(loom_stream_fill(stream, dst, offset, bytes, value), stream, err);
}

static inline loom_status w_stream_begin_capture(loom_stream* stream, char* err) {
  return w_stream_failed(loom_stream_begin_capture(stream), stream, err);
}

static inline loom_status w_stream_end_capture(loom_stream* stream, loom_graph** out, char* err) {
  return w_stream_failed(loom_stream_end_capture(stream, out), stream, err);
}

static inline loom_status w_stream_inject_fault(loom_stream* stream, int32_t fault, char* err) {
  return w_stream_failed(loom_stream_inject_fault(stream, (loom_fault)fault), stream, err);
}

/* ---------------------------------------------------------------- events */

static inline loom_status w_event_create(loom_device* device, loom_event** out, char* err) {
  return w_device_failed(loom_event_create(device, out), device, err);
}

static inline loom_status w_event_record(loom_event* event, loom_stream* stream, char* err) {
  return w_stream_failed(loom_event_record(event, stream), stream, err);
}

static inline loom_status w_stream_wait_event(loom_stream* stream, loom_event* event, char* err) {
  return w_stream_failed(loom_stream_wait_event(stream, event), stream, err);
}

static inline loom_status w_event_synchronize(loom_event* event, loom_device* device, char* err) {
  return w_device_failed(loom_event_synchronize(event), device, err);
}

static inline loom_status w_event_query(loom_event* event, loom_device* device, int32_t* done,
                                        char* err) {
  return w_device_failed(loom_event_query(event, done), device, err);
}

static inline loom_status w_event_elapsed_ms(loom_event* start, loom_event* end,
                                             loom_device* device, float* ms, char* err) {
  return w_device_failed(loom_event_elapsed_ms(start, end, ms), device, err);
}

/* ---------------------------------------------------------------- modules */

/* ---------------------------------------------------------------- code compiled without a device */

static inline loom_status w_code_compile(int32_t backend, int32_t format, const char* target,
                                         const char* name, const void* source, uint64_t size,
                                         loom_code** out, char* err) {
  loom_code_compile_params p;
  memset(&p, 0, sizeof p);
  p.struct_size = sizeof p;
  p.backend = (loom_backend)backend;
  p.format = (loom_module_format)format;
  p.target = target;
  p.name = name;
  p.source = (const char*)source;
  p.source_size = size;
  return loom_code_compile(&p, out, err, LOOM_ERROR_CAPACITY);
}

static inline loom_status w_code_compiler(int32_t backend, char* out, size_t capacity, char* err) {
  return loom_code_compiler((loom_backend)backend, out, capacity, err, LOOM_ERROR_CAPACITY);
}

static inline loom_status w_module_load(loom_device* device, int32_t format, const char* target,
                                        const char* path, const char* name, const void* data,
                                        uint64_t size, loom_module** out, char* err) {
  loom_module_load_params p;
  memset(&p, 0, sizeof p);
  p.struct_size = sizeof p;
  p.format = (loom_module_format)format;
  p.target = target;
  p.path = path;
  p.name = name;
  p.data = data;
  p.size = size;
  return w_device_failed(loom_module_load(device, &p, out), device, err);
}

static inline loom_status w_module_get_kernel(loom_module* module, loom_device* device,
                                              const char* name, loom_kernel** out, char* err) {
  return w_device_failed(loom_module_get_kernel(module, name, out), device, err);
}

static inline loom_status w_host_module_register(const char* name, const char* target,
                                                 const void* entries, uint32_t count) {
  return loom_host_module_register(name, target, (const loom_host_kernel_entry*)entries, count);
}

/* ---------------------------------------------------------------- launches */

/* dims: grid x, y, z, block x, y, z, shared bytes. */
static inline void w_launch_params(loom_launch_params* p, const uint32_t* dims,
                                   loom_buffer* const* buffers, const uint64_t* offsets,
                                   uint32_t buffer_count, const void* scalars,
                                   uint32_t scalar_bytes, loom_buffer* violation,
                                   uint64_t violation_offset) {
  memset(p, 0, sizeof *p);
  p->struct_size = sizeof *p;
  p->grid[0] = dims[0];
  p->grid[1] = dims[1];
  p->grid[2] = dims[2];
  p->block[0] = dims[3];
  p->block[1] = dims[4];
  p->block[2] = dims[5];
  p->shared_bytes = dims[6];
  p->buffers = buffers;
  p->buffer_offsets = offsets;
  p->buffer_count = buffer_count;
  p->scalars = scalars;
  p->scalar_bytes = scalar_bytes;
  p->violation = violation;
  p->violation_offset = violation_offset;
}

static inline loom_status w_kernel_launch(loom_stream* stream, loom_kernel* kernel,
                                          const uint32_t* dims, loom_buffer* const* buffers,
                                          const uint64_t* offsets, uint32_t buffer_count,
                                          const void* scalars, uint32_t scalar_bytes,
                                          loom_buffer* violation, uint64_t violation_offset,
                                          char* err) {
  loom_launch_params p;
  w_launch_params(&p, dims, buffers, offsets, buffer_count, scalars, scalar_bytes, violation,
                  violation_offset);
  return w_stream_failed(loom_kernel_launch(stream, kernel, &p), stream, err);
}

/* ---------------------------------------------------------------- graphs */

static inline loom_status w_graph_create(loom_device* device, loom_graph** out, char* err) {
  return w_device_failed(loom_graph_create(device, out), device, err);
}

static inline loom_status w_graph_add_kernel_node(
    loom_graph* graph, loom_device* device, loom_kernel* kernel, const uint32_t* dims,
    loom_buffer* const* buffers, const uint64_t* offsets, uint32_t buffer_count,
    const void* scalars, uint32_t scalar_bytes, loom_buffer* violation,
    uint64_t violation_offset, const uint32_t* deps, uint32_t dep_count, uint32_t* node,
    char* err) {
  loom_launch_params p;
  w_launch_params(&p, dims, buffers, offsets, buffer_count, scalars, scalar_bytes, violation,
                  violation_offset);
  return w_device_failed(loom_graph_add_kernel_node(graph, kernel, &p, deps, dep_count, node),
                         device, err);
}

static inline loom_status w_graph_add_copy_node(loom_graph* graph, loom_device* device,
                                                loom_buffer* dst, uint64_t dst_offset,
                                                loom_buffer* src, uint64_t src_offset,
                                                uint64_t bytes, const uint32_t* deps,
                                                uint32_t dep_count, uint32_t* node, char* err) {
  return w_device_failed(loom_graph_add_copy_node(graph, dst, dst_offset, src, src_offset, bytes,
                                                  deps, dep_count, node),
                         device, err);
}

static inline loom_status w_graph_add_fill_node(loom_graph* graph, loom_device* device,
                                                loom_buffer* dst, uint64_t offset, uint64_t bytes,
                                                uint8_t value, const uint32_t* deps,
                                                uint32_t dep_count, uint32_t* node, char* err) {
  return w_device_failed(
      loom_graph_add_fill_node(graph, dst, offset, bytes, value, deps, dep_count, node), device,
      err);
}

static inline loom_status w_graph_add_empty_node(loom_graph* graph, loom_device* device,
                                                 const uint32_t* deps, uint32_t dep_count,
                                                 uint32_t* node, char* err) {
  return w_device_failed(loom_graph_add_empty_node(graph, deps, dep_count, node), device, err);
}

static inline loom_status w_graph_instantiate(loom_graph* graph, loom_device* device,
                                              loom_graph_exec** out, char* err) {
  return w_device_failed(loom_graph_instantiate(graph, out), device, err);
}

static inline loom_status w_graph_exec_launch(loom_graph_exec* exec, loom_stream* stream,
                                              char* err) {
  return w_stream_failed(loom_graph_exec_launch(exec, stream), stream, err);
}

static inline loom_status w_graph_exec_run(loom_graph_exec* exec, loom_stream* stream,
                                           uint32_t max_threads, char* err) {
  loom_graph_run_params p = {0};
  p.struct_size = sizeof(p);
  p.max_threads = max_threads;
  return w_stream_failed(loom_graph_exec_run(exec, stream, &p), stream, err);
}

/* One rebinding of w_graph_exec_run_bound: kernel node `node`'s buffer `index` uses memory
   argument `arg` from byte `offset`, `bytes` long: m0..m7 for arguments 0-7, extra[arg - 8]
   beyond. Go builds these (no pointers in them); the first eight memories come as direct
   arguments, which cgo allows for Go memory without pointers in it and keeps valid for the
   call; the rest come as addresses of memory Go has pinned for the call (runtime.Pinner). */
typedef struct w_bind_site {
  uint32_t node;
  uint32_t index;
  uint32_t arg;
  uint32_t reserved;
  uint64_t offset;
  uint64_t bytes;
} w_bind_site;

/* w_graph_exec_run with the sites whose memory is not NULL (0) rebound for this run. */
static inline loom_status w_graph_exec_run_bound(loom_graph_exec* exec, loom_stream* stream,
                                                 uint32_t max_threads, const w_bind_site* sites,
                                                 uint32_t count, void* m0, void* m1, void* m2,
                                                 void* m3, void* m4, void* m5, void* m6, void* m7,
                                                 const uint64_t* extra, uint32_t extra_count,
                                                 char* err) {
  void* mem[8] = {m0, m1, m2, m3, m4, m5, m6, m7};
  loom_graph_binding local[32];
  loom_graph_binding* bindings = local;
  if (count > 32) {
    bindings = (loom_graph_binding*)malloc(count * sizeof(loom_graph_binding));
    if (bindings == NULL) {
      snprintf(err, LOOM_ERROR_CAPACITY, "graph run: out of memory for %u bindings", count);
      return LOOM_ERR_OUT_OF_MEMORY;
    }
  }
  uint32_t n = 0;
  for (uint32_t i = 0; i < count; i++) {
    const w_bind_site* s = &sites[i];
    char* base = NULL;
    if (s->arg < 8) {
      base = (char*)mem[s->arg];
    } else if (s->arg - 8 < extra_count) {
      base = (char*)(uintptr_t)extra[s->arg - 8];
    }
    if (base == NULL) continue;
    bindings[n].node = s->node;
    bindings[n].index = s->index;
    bindings[n].address = base + s->offset;
    bindings[n].bytes = s->bytes;
    n++;
  }
  loom_graph_run_params p = {0};
  p.struct_size = sizeof(p);
  p.max_threads = max_threads;
  p.bindings = bindings;
  p.binding_count = n;
  loom_status st = w_stream_failed(loom_graph_exec_run(exec, stream, &p), stream, err);
  if (bindings != local) free(bindings);
  return st;
}

static inline loom_status w_graph_exec_update_kernel_node(
    loom_graph_exec* exec, loom_device* device, uint32_t node, const uint32_t* dims,
    loom_buffer* const* buffers, const uint64_t* offsets, uint32_t buffer_count,
    const void* scalars, uint32_t scalar_bytes, loom_buffer* violation,
    uint64_t violation_offset, char* err) {
  loom_launch_params p;
  w_launch_params(&p, dims, buffers, offsets, buffer_count, scalars, scalar_bytes, violation,
                  violation_offset);
  return w_device_failed(loom_graph_exec_update_kernel_node(exec, node, &p), device, err);
}

#endif /* LOOM_GO_NATIVE_CABI_WRAPPERS_H_ */
