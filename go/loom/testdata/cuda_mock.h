/* Just enough of CUDA's device environment for g++ -fsyntax-only to check generated CUDA C.
   It checks syntax and types, not CUDA semantics. */
#include <cmath>
#include <cstring>
#define __global__
#define __device__
#define __forceinline__ inline
#define __shared__
#define __align__(n) __attribute__((aligned(n)))
struct loom_mock_dim3 { unsigned int x, y, z; };
extern loom_mock_dim3 threadIdx, blockIdx, blockDim, gridDim;
unsigned int atomicOr(unsigned int* address, unsigned int val);
void __syncthreads();
unsigned long long __umul64hi(unsigned long long x, unsigned long long y);
float __uint_as_float(unsigned int);
unsigned int __float_as_uint(float);
float __int_as_float(int);
double __longlong_as_double(long long);
using std::exp; using std::log; using std::sqrt; using std::tanh; using std::sin; using std::cos;
using std::floor; using std::ceil; using std::fabs; using std::fma;
