// parallel_for: runs body(i) for i in [0, n) on all cores (OpenMP), with
// dynamic scheduling because causal rows differ in cost. Exceptions thrown by
// a body are caught and the first one is rethrown on the calling thread.
#pragma once
#include <cstdint>
#include <exception>
#include <mutex>

#if defined(_OPENMP)
#include <omp.h>
#endif

namespace flashlab {

inline int parallel_threads() {
#if defined(_OPENMP)
  return omp_get_max_threads();
#else
  return 1;
#endif
}

template <class Body>
void parallel_for(int64_t n, Body&& body) {
  std::exception_ptr error;
  std::mutex error_mutex;
#pragma omp parallel for schedule(dynamic, 1)
  for (int64_t i = 0; i < n; ++i) {
    try {
      body(i);
    } catch (...) {
      std::lock_guard<std::mutex> lock(error_mutex);
      if (!error) error = std::current_exception();
    }
  }
  if (error) std::rethrow_exception(error);
}

}  // namespace flashlab
