// A 32-ary search for the first row at which a monotone test turns true: each round tests 32 rows spread
// evenly over what is left (on the GPU one a lane of a warp, sequence.cuh first_row_seeing), so that a
// search over 16k rows waits on 3 rounds of loads where a binary search waits on 14 dependent ones.
// Host and device: the narrowing below is the kernels' own, and the tests run it against a scan.
#pragma once

#include "host_device.hpp"

namespace flashlab::gpu {

// The first row of [a, z) at which seen(row) (false, then true from some row on) holds, z if none.
// `hits(a, step, z)` returns the round's 32 answers as bits: bit l set where row a + l step is past the
// range (>= z) or seen. The last round's rows can run past z (a + 31 step > z); z never moves past its
// first value, so the answer stays in [a, z] whatever the test says of rows past the range.
template <class Hits>
FLASHLAB_HOST_DEVICE inline int first_row_32ary(int a, int z, Hits hits) {
  while (a < z) {  // the row sought lies in [a, z]
    const int step = (z - a + 31) / 32;
    const unsigned hit = hits(a, step, z);
#if defined(__CUDA_ARCH__)
    const int f = hit ? __ffs(int(hit)) - 1 : 32;  // the first lane whose row is past the edge
#else
    const int f = hit ? __builtin_ctz(hit) : 32;
#endif
    if (f < 32 && a + f * step < z) z = a + f * step;
    if (f > 0) a += (f - 1) * step + 1;
  }
  return a;
}

}  // namespace flashlab::gpu
