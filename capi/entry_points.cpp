// The extern "C" functions of flashlab.h: each checks its plain arguments, calls the C++ behind it
// (api.hpp) and turns any exception into a non-zero return and a message. Nothing throws across the ABI.
#include <cstdlib>
#include <cstring>
#include <new>

#include "api.hpp"
#include "flashlab/error.hpp"

namespace {

using namespace flashlab;

int fail(char* error, size_t error_len, const std::string& what) {
  if (error && error_len > 0) {
    const size_t n = std::min(what.size(), error_len - 1);
    std::memcpy(error, what.data(), n);
    error[n] = '\0';
  }
  return 1;
}

// Runs `work`; 0 when it returns, 1 and its message when it throws.
template <class Work>
int guarded(char* error, size_t error_len, Work&& work) {
  try {
    work();
    if (error && error_len > 0) error[0] = '\0';
    return 0;
  } catch (const std::bad_alloc&) {
    return fail(error, error_len, "out of host memory: try a smaller problem");
  } catch (const std::exception& e) {
    return fail(error, error_len, e.what());
  } catch (...) {
    return fail(error, error_len, "unknown error");
  }
}

std::string text(const char* s, const char* name) {
  if (!s) throw Error(std::string(name) + " is NULL");
  return s;
}

// Text handed to the caller, freed with flashlab_free.
void hand_out(const std::string& s, char** out) {
  if (!out) throw Error("the output pointer is NULL");
  char* copy = static_cast<char*>(std::malloc(s.size() + 1));
  if (!copy) throw std::bad_alloc();
  std::memcpy(copy, s.c_str(), s.size() + 1);
  *out = copy;
}

void attention(const char* impl_name, const flashlab_problem* problem, const flashlab_tensors* tensors, bool backward) {
  const std::string impl = text(impl_name, "impl");
  const Problem p = capi::to_problem(problem);
  const flashlab_tensors t = capi::checked_tensors(tensors);
  if (capi::is_device_kernel(impl)) {
    backward ? capi::device_backward(impl, p, t) : capi::device_forward(impl, p, t);
  } else if (capi::is_host_implementation(impl)) {
    backward ? capi::host_backward(impl, p, t) : capi::host_forward(impl, p, t);
  } else {
    throw Error("unknown implementation '" + impl + "': on host memory one of reference, tiled-fa1, tiled-fa2, "
                "gpu-*; on device memory fa2, fa3 or standard (flashlab_implementations lists them)");
  }
}

}  // namespace

extern "C" {

int flashlab_abi_version(void) { return FLASHLAB_ABI_VERSION; }

int flashlab_has_cuda(void) { return capi::built_with_cuda() ? 1 : 0; }

void flashlab_free(char* text) { std::free(text); }

int flashlab_implementations(char** json_out, char* error, size_t error_len) {
  return guarded(error, error_len, [&] { hand_out(capi::implementations_json(), json_out); });
}

int flashlab_forward_v1(const char* impl, const flashlab_problem* problem, const flashlab_tensors* tensors,
                        char* error, size_t error_len) {
  return guarded(error, error_len, [&] { attention(impl, problem, tensors, false); });
}

int flashlab_backward_v1(const char* impl, const flashlab_problem* problem, const flashlab_tensors* tensors,
                         char* error, size_t error_len) {
  return guarded(error, error_len, [&] { attention(impl, problem, tensors, true); });
}

int flashlab_mask_prepare_v2(const char* kernel, const flashlab_problem* problem, void* stream,
                             flashlab_device_mask** out, char* error, size_t error_len) {
  return guarded(error, error_len, [&] {
    if (!out) throw Error("out is NULL: pass the address of a flashlab_device_mask*");
    *out = nullptr;
    const std::string name = text(kernel, "kernel");
    if (!capi::is_device_kernel(name))
      throw Error("unknown kernel '" + name + "': a device mask is made for a GPU kernel (fa2, fa3 or standard)");
    *out = capi::prepare_mask(name, capi::to_problem(problem), stream);
  });
}

void flashlab_mask_free(flashlab_device_mask* mask) { capi::free_mask(mask); }

int flashlab_estimate(const flashlab_problem* problem, const char* gpu, const char* algo, const char* pass,
                      const char* impl, char** json_out, char* error, size_t error_len) {
  return guarded(error, error_len, [&] {
    const Problem p = capi::to_problem(problem);
    hand_out(capi::estimate_json(p, text(gpu, "gpu"), text(algo, "algo"), text(pass, "pass"), text(impl, "impl")),
             json_out);
  });
}

int flashlab_walk(const flashlab_problem* problem, const char* order, int64_t br, int64_t bc,
                  const flashlab_tensors* tensors, char** jsonl_out, char* error, size_t error_len) {
  return guarded(error, error_len, [&] {
    const Problem p = capi::to_problem(problem);
    hand_out(capi::walk_jsonl(p, text(order, "order"), br, bc, tensors), jsonl_out);
  });
}

int flashlab_check(const char* impl, const flashlab_problem* problem, const char* pass, char** json_out, char* error,
                   size_t error_len) {
  return guarded(error, error_len, [&] {
    const Problem p = capi::to_problem(problem);
    hand_out(capi::check_json(text(impl, "impl"), p, text(pass, "pass")), json_out);
  });
}

int flashlab_decode_v1(const flashlab_decode* call, int32_t* num_splits_out, char* error, size_t error_len) {
  return guarded(error, error_len, [&] {
    const int splits = capi::device_decode(capi::checked_decode(call));
    if (num_splits_out) *num_splits_out = splits;
  });
}

}  // extern "C"
