// FLASHLAB_HOST_DEVICE: a function that the kernels call and the host's tests and simulator call too.
#pragma once

#if defined(__CUDACC__)
#define FLASHLAB_HOST_DEVICE __host__ __device__
#else
#define FLASHLAB_HOST_DEVICE
#endif
