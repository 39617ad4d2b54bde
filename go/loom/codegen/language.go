// Package codegen renders Loom IR as C. One emitter walks the IR; a Language (in the manner of
// tinygrad's renderers) supplies what differs between targets: the kernel signature and how
// arguments arrive, thread and block ids, barriers, vector types, atomics and the prelude.
package codegen

import (
	"fmt"

	"github.com/loomrt/loom/go/loom/types"
)

// Language describes one C dialect.
type Language struct {
	Name string
	// Host kernels loop over the block's threads inside one C function per block and read their
	// arguments from loom_host_kernel_args; CUDA kernels are one thread each.
	Host bool
	// NativeVectors selects GCC vector extensions; otherwise vectors are structs with helpers.
	NativeVectors bool
	// VectorBytes, when > 0, is the widest vector the target's registers hold (16 for SSE and
	// NEON, 32 for AVX2, 64 for AVX-512). With native vectors, a Loom vector wider than that
	// (a multiple of it) is a struct of register-wide GCC vectors, each operation applied to
	// every part: GCC keeps a vector_size wider than the widest vector register in memory and
	// moves it through the stack lane by lane (sgemm's f32x16 accumulators ran at 4% of the
	// AVX2 peak), while a struct of register-wide vectors is split into registers.
	VectorBytes int
	Prelude     string
	// Span defines loom_span (the common prelude's LOOM_SPAN; see hostSpan).
	Span string
}

// ForVectorBytes is l with VectorBytes set to n.
func (l *Language) ForVectorBytes(n int) *Language {
	c := *l
	c.VectorBytes = n
	return &c
}

// VectorMathDecls declares glibc's libmvec variants of the math functions kernels call, when
// the compile defines LOOM_LIBMVEC (1: those of glibc 2.22, exp, log, sin and cos; 2: tanh
// too, glibc 2.35): a C compiler then vectorizes loops that call them (softmax's exps, an
// LSTM's tanhs) instead of calling the scalar function per element. libmvec keeps the scalar
// functions' special values and stays within 4 ulps. The JIT path defines it after linking a
// probe against libmvec (loom.Compiler); ahead-of-time builds do not.
const VectorMathDecls = `#if defined(LOOM_LIBMVEC) && defined(__GNUC__) && !defined(__clang__)
#define LOOM_SIMD_FN __attribute__((__simd__("notinbranch")))
float expf(float) LOOM_SIMD_FN;
float logf(float) LOOM_SIMD_FN;
float sinf(float) LOOM_SIMD_FN;
float cosf(float) LOOM_SIMD_FN;
double exp(double) LOOM_SIMD_FN;
double log(double) LOOM_SIMD_FN;
double sin(double) LOOM_SIMD_FN;
double cos(double) LOOM_SIMD_FN;
#if LOOM_LIBMVEC >= 2
float tanhf(float) LOOM_SIMD_FN;
double tanh(double) LOOM_SIMD_FN;
#endif
#endif`

// hostSpan and cudaSpan define loom_span, the end of a view (the views' fit check): acc +
// (sh-1)*st, or -1 when an argument is negative or the sum overflows. The host's divides to
// test for overflow (once per block); on CUDA every thread runs the check, so it reads the
// product's high word instead (a 64-bit division is a call of tens of instructions there).
const hostSpan = `static LOOM_INLINE loom_i64 loom_span(loom_i64 acc, loom_i64 sh, loom_i64 st) {
  /* acc + (sh-1)*st, or -1 when negative or overflowing */
  if (acc < 0 || sh < 0 || st < 0) return -1;
  if (sh == 0) return acc;
  if (st != 0 && (sh - 1) > (0x7fffffffffffffffLL - acc) / st) return -1;
  return acc + (sh - 1) * st;
}`

const cudaSpan = `static LOOM_INLINE loom_i64 loom_span(loom_i64 acc, loom_i64 sh, loom_i64 st) {
  /* acc + (sh-1)*st, or -1 when negative or overflowing (no division: the product's high
     word says whether it fits) */
  if (acc < 0 || sh < 0 || st < 0) return -1;
  if (sh == 0) return acc;
  const loom_u64 a = (loom_u64)(sh - 1), b = (loom_u64)st;
  if (__umul64hi(a, b) != 0 || a * b > (loom_u64)(0x7fffffffffffffffLL - acc)) return -1;
  return acc + (loom_i64)(a * b);
}`

// Host is the host C language (GCC/Clang, compiled to a shared object).
var Host = &Language{Name: "host", Host: true, NativeVectors: true, Prelude: hostPrelude, Span: hostSpan}

// CUDA is CUDA C++ for NVRTC/nvcc.
var CUDA = &Language{Name: "cuda", Host: false, NativeVectors: false, Prelude: cudaPrelude, Span: cudaSpan}

// cType names the C type holding a value of basic type b (f16/bf16 compute in float).
func cType(b *types.Basic) string {
	switch b.Kind() {
	case types.I1:
		return "loom_bool"
	case types.I8:
		return "loom_i8"
	case types.I16:
		return "loom_i16"
	case types.I32:
		return "loom_i32"
	case types.I64, types.Index:
		return "loom_i64"
	case types.U8:
		return "loom_u8"
	case types.U16:
		return "loom_u16"
	case types.U32:
		return "loom_u32"
	case types.U64:
		return "loom_u64"
	case types.F16, types.BF16, types.F32:
		return "float"
	case types.F64:
		return "double"
	}
	return "void"
}

// storageType names the C type of an element in memory (i1 is a byte, f16/bf16 are 16-bit
// patterns).
func storageType(b *types.Basic) string {
	switch b.Kind() {
	case types.I1:
		return "loom_u8"
	case types.F16, types.BF16:
		return "loom_u16"
	}
	return cType(b)
}

// unsignedOf names the unsigned type of the same width (for wrapping arithmetic).
func unsignedOf(b *types.Basic) string {
	switch b.Kind() {
	case types.I8, types.U8:
		return "loom_u8"
	case types.I16, types.U16:
		return "loom_u16"
	case types.I32, types.U32:
		return "loom_u32"
	}
	return "loom_u64"
}

func shortName(b *types.Basic) string {
	if b.Kind() == types.Index {
		return "i64"
	}
	return b.String()
}

func vecName(v *types.Vector) string {
	return fmt.Sprintf("loom_%sx%d", shortName(v.Elem), v.Len)
}

const commonPrelude = `#define LOOM_CHECK(c) __builtin_expect(!!(c), 1)
/* A failed launch, assumption or view check stops the block: rare, so that the compiler does
   not take the code after a score of checks for cold and compile it for size. */
#define LOOM_FAIL(c) __builtin_expect(!!(c), 0)

LOOM_SPAN

static LOOM_INLINE float loom_f16_to_f32(loom_u16 h) {
  loom_u32 sign = (loom_u32)(h & 0x8000u) << 16, exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu, bits;
  if (exp == 0x1f) bits = sign | 0x7f800000u | (mant << 13);
  else if (exp == 0) {
    if (mant == 0) bits = sign;
    else {
      loom_u32 e = 127 - 15 + 1;
      while ((mant & 0x400u) == 0) { mant <<= 1; e--; }
      bits = sign | (e << 23) | ((mant & 0x3ffu) << 13);
    }
  } else bits = sign | ((exp + 127 - 15) << 23) | (mant << 13);
  return loom_u2f(bits);
}

static LOOM_INLINE loom_u16 loom_f32_to_f16(float f) {
  loom_u32 b = loom_f2u(f);
  loom_u16 sign = (loom_u16)((b >> 16) & 0x8000u);
  int exp = (int)((b >> 23) & 0xffu);
  loom_u32 mant = b & 0x7fffffu;
  if (exp == 0xff) return (loom_u16)(sign | (mant ? 0x7e00u : 0x7c00u));
  int e = exp - 127 + 15;
  if (e >= 0x1f) return (loom_u16)(sign | 0x7c00u);
  if (e <= 0) {
    if (e < -10) return sign;
    mant |= 0x800000u;
    unsigned shift = (unsigned)(14 - e);
    loom_u32 half = 1u << (shift - 1), r = mant >> shift, rem = mant & ((1u << shift) - 1);
    if (rem > half || (rem == half && (r & 1u))) r++;
    return (loom_u16)(sign | r);
  }
  loom_u32 r = ((loom_u32)e << 10) | (mant >> 13), rem = mant & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (r & 1u))) r++;
  return (loom_u16)(sign | r);
}

static LOOM_INLINE float loom_bf16_to_f32(loom_u16 h) {
  return loom_u2f((loom_u32)h << 16);
}

static LOOM_INLINE loom_u16 loom_f32_to_bf16(float f) {
  loom_u32 b = loom_f2u(f);
  if ((b & 0x7fffffffu) > 0x7f800000u) return (loom_u16)((b >> 16) | 0x40u);
  b += 0x7fffu + ((b >> 16) & 1u);
  return (loom_u16)(b >> 16);
}

static LOOM_INLINE float loom_rnd_f16(float f) { return loom_f16_to_f32(loom_f32_to_f16(f)); }
static LOOM_INLINE float loom_rnd_bf16(float f) { return loom_bf16_to_f32(loom_f32_to_bf16(f)); }
`

const hostPrelude = `#include <stdint.h>
#include <string.h>
#include <math.h>
` + VectorMathDecls + `

#define LOOM_INLINE inline __attribute__((always_inline))
typedef _Bool loom_bool;
typedef int8_t loom_i8;
typedef int16_t loom_i16;
typedef int32_t loom_i32;
typedef int64_t loom_i64;
typedef uint8_t loom_u8;
typedef uint16_t loom_u16;
typedef uint32_t loom_u32;
typedef uint64_t loom_u64;
static LOOM_INLINE loom_u32 loom_f2u(float f) { loom_u32 u; __builtin_memcpy(&u, &f, 4); return u; }
static LOOM_INLINE float loom_u2f(loom_u32 u) { float f; __builtin_memcpy(&f, &u, 4); return f; }

/* The host kernel ABI of loom.h (declared here when the header is not included first). */
#ifndef LOOM_LOOM_H_
typedef struct loom_host_kernel_args {
  uint32_t grid[3];
  uint32_t block[3];
  uint32_t block_id[3];
  void* const* buffers;
  const uint64_t* buffer_bytes;
  uint32_t buffer_count;
  const void* scalars;
  uint32_t scalar_bytes;
  void* shared;
  uint32_t* violation;
} loom_host_kernel_args;
typedef void (*loom_host_kernel_fn)(const loom_host_kernel_args* args);
typedef struct loom_host_kernel_entry {
  const char* name;
  loom_host_kernel_fn fn;
} loom_host_kernel_entry;
#endif
`

const cudaPrelude = `#define LOOM_INLINE __device__ __forceinline__
typedef bool loom_bool;
typedef signed char loom_i8;
typedef short loom_i16;
typedef int loom_i32;
typedef long long loom_i64;
typedef unsigned char loom_u8;
typedef unsigned short loom_u16;
typedef unsigned int loom_u32;
typedef unsigned long long loom_u64;
#define loom_f2u(f) __float_as_uint(f)
#define loom_u2f(u) __uint_as_float(u)
`
