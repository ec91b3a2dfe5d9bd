// The C ABI's work in C++: each extern "C" entry point (entry_points.cpp) checks its arguments, calls one
// of these and turns a thrown flashlab::Error into its return code and message.
#pragma once
#include <string>

#include "flashlab.h"
#include "flashlab/problem.hpp"

namespace flashlab::capi {

// problem_in.cpp: the caller's struct (of any ABI version the library reads) as a validated Problem,
// mask included; throws Error naming the bad field.
Problem to_problem(const flashlab_problem* c);
// The caller's tensors or decode call as this ABI's struct (an older version's missing fields 0); throws
// unless it is a struct of a version this library reads.
flashlab_tensors checked_tensors(const flashlab_tensors* t);
flashlab_decode checked_decode(const flashlab_decode* call);

// host_attention.cpp: a harness implementation (harness/implementations.hpp) on host fp32 tensors.
void host_forward(const std::string& impl, const Problem& p, const flashlab_tensors& t);
void host_backward(const std::string& impl, const Problem& p, const flashlab_tensors& t);
bool is_host_implementation(const std::string& impl);

// device_attention.cpp (device_none.cpp without CUDA): a GPU kernel on device tensors, on t.stream.
bool is_device_kernel(const std::string& impl);  // fa2 | fa3 | standard
void device_forward(const std::string& kernel, const Problem& p, const flashlab_tensors& t);
void device_backward(const std::string& kernel, const Problem& p, const flashlab_tensors& t);
bool built_with_cuda();
// The problem's mask on the device for many calls of `kernel` (flashlab_mask_prepare_v2), made on `stream`;
// device_forward / device_backward use it when t.mask is set, after checking it was made for their problem.
flashlab_device_mask* prepare_mask(const std::string& kernel, const Problem& p, void* stream);
void free_mask(flashlab_device_mask* mask);
// KV-cache decoding on device tensors; returns the split count it ran.
int device_decode(const flashlab_decode& call);

// reports.cpp: the text the toolkit's other entry points return.
std::string implementations_json();
std::string estimate_json(const Problem& p, const std::string& gpu, const std::string& algo,
                          const std::string& pass, const std::string& impl);
std::string walk_jsonl(const Problem& p, const std::string& order, int64_t br, int64_t bc,
                       const flashlab_tensors* inputs);
std::string check_json(const std::string& impl, const Problem& p, const std::string& pass);

}  // namespace flashlab::capi
