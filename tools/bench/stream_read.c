// stream_read: the machine's streaming read rate, the bound of a step that reads its weights
// once (a decode step): T threads each sum their share of a buffer far larger than the caches,
// best of PASSES passes, in GB/s (1e9 bytes a second). Each thread reads its share as STREAMS
// contiguous parts side by side: one sequential stream a core reads less than the memory
// delivers (Zen 3 under load, one thread: 17.7-18.0 GB/s with one stream, 19.3-21.3 with four), and Loom's
// decode products read their weights that way (gemm_nn's PS), so one stream understated the
// bound they are held to.
//   cc -O3 -march=native -pthread -o stream_read stream_read.c && ./stream_read [THREADS] [MIB]
// tools/bench/vs_ort.sh builds and runs it beside the decode benchmarks.
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { PASSES = 10 };

typedef struct {
  const uint64_t* data;
  size_t words;
  pthread_barrier_t* start;
  pthread_barrier_t* end;
  uint64_t sink;
} share;

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

enum { STREAMS = 4, WORDS = 16 };

// WORDS independent sums of 64-bit words in each of STREAMS parts of p read side by side:
// integer adds vectorize without reassociation rules (GCC vectorizes 16 words a part, not 8),
// and the chains keep the loads, not the adds, the limit.
static uint64_t sum(const uint64_t* p, size_t n) {
  uint64_t s[STREAMS][WORDS] = {{0}};
  size_t part = n / STREAMS / WORDS * WORDS, i = 0;
  for (; i < part; i += WORDS) {
    for (int q = 0; q < STREAMS; q++) {
      for (int j = 0; j < WORDS; j++) s[q][j] += p[q * part + i + j];
    }
  }
  uint64_t total = 0;
  for (i = STREAMS * part; i < n; i++) total += p[i];
  for (int q = 0; q < STREAMS; q++) {
    for (int j = 0; j < WORDS; j++) total += s[q][j];
  }
  return total;
}

static void* worker(void* arg) {
  share* s = arg;
  for (int pass = 0; pass < PASSES; pass++) {
    pthread_barrier_wait(s->start);
    s->sink += sum(s->data, s->words);
    pthread_barrier_wait(s->end);
  }
  return NULL;
}

int main(int argc, char** argv) {
  int threads = argc > 1 ? atoi(argv[1]) : 1;
  size_t mib = argc > 2 ? (size_t)atol(argv[2]) : 1024;
  if (threads < 1 || threads > 1024 || mib < 64) {
    fprintf(stderr, "usage: stream_read [THREADS >= 1] [MIB >= 64]\n");
    return 2;
  }
  size_t bytes = mib << 20, words = bytes / 8;
  uint64_t* data = aligned_alloc(4096, bytes);
  if (data == NULL) {
    fprintf(stderr, "stream_read: cannot allocate %zu MiB\n", mib);
    return 1;
  }
  for (size_t i = 0; i < words; i++) data[i] = i * 0x9e3779b97f4a7c15ull;
  pthread_barrier_t start, end;
  pthread_barrier_init(&start, NULL, (unsigned)threads + 1);
  pthread_barrier_init(&end, NULL, (unsigned)threads + 1);
  share* shares = calloc((size_t)threads, sizeof(share));
  pthread_t* ids = calloc((size_t)threads, sizeof(pthread_t));
  size_t per = words / (size_t)threads / 8 * 8;
  for (int t = 0; t < threads; t++) {
    shares[t].data = data + (size_t)t * per;
    shares[t].words = t == threads - 1 ? words - (size_t)t * per : per;
    shares[t].start = &start;
    shares[t].end = &end;
    pthread_create(&ids[t], NULL, worker, &shares[t]);
  }
  double best = 0;
  for (int pass = 0; pass < PASSES; pass++) {
    pthread_barrier_wait(&start);
    double t0 = now();
    pthread_barrier_wait(&end);
    double rate = (double)bytes / (now() - t0) / 1e9;
    if (rate > best) best = rate;
  }
  uint64_t sink = 0;
  for (int t = 0; t < threads; t++) {
    pthread_join(ids[t], NULL);
    sink += shares[t].sink;
  }
  printf("{\"threads\": %d, \"mib\": %zu, \"read_gb_s\": %.2f, \"sink\": %llu}\n", threads, mib, best,
         (unsigned long long)(sink & 1));
  free(shares);
  free(ids);
  free(data);
  return 0;
}
