// bench_cpu: how fast flashlab's CPU attention runs and how much memory it
// holds, next to the machine's own GEMM speed.
//
//   ceiling/eigen_gemm         C = A B in fp32, row-major, Eigen on all cores:
//                              the most this machine does with Eigen's kernels.
//   ceiling/eigen_tile_gemm    the two products one tiled-executor step makes,
//                              S_ij = Q_i K_j^T and O_i += P_ij V_j, at tile
//                              size, one independent GEMM per core (as inside
//                              the executor's parallel loop).
//   forward/reference          naive attention (materializes S and P), fp32.
//   forward/tiled_fa2          tiled FA2 with the CPU default tiling.
//   backward/reference         naive backward (materializes S, P, dP, dS).
//   backward/tiled_fa2         tiled FA2 backward with the CPU default tiling.
//   sweep/tiled_fa2_forward    tiled FA2 forward at N = 4096 over tile sizes.
//
// Every case runs with all cores available: OpenMP's default thread count (one
// per core). Eigen's GEMM splits over those threads when called outside a
// parallel region and runs on one thread inside one. The implementations
// decide how much of that they use: the reference and the tiled backward split
// work by head, so at batch 1, heads 1 they keep one core busy.
//
// Counters per case:
//   GFLOP/s       FLOPs / wall time. forward = p.forward_flops() = 4 N^2 d (no
//                 mask); backward = 2.5 x forward (the anchors' convention).
//   peak_MiB      growth of the process's peak RSS (VmHWM) over the RSS held
//                 just before the timed loop: what the calls allocate and touch
//                 on top of their inputs. Reset per case by writing 5 to
//                 /proc/self/clear_refs.
//   others_cores  cores other processes kept busy meanwhile (shared machines).
// Time is wall time (UseRealTime); cpu_time is the whole process's CPU time
// (MeasureProcessCPUTime), so cpu_time / real_time is the cores kept busy,
// OpenMP's spin-waiting included.
//
// Run it through bench/run_cpu.sh, which writes JSON and a summary table.
//
// [SECTION] inputs: one problem size, seeded random tensors
// [SECTION] memory: peak RSS growth, and what else ran
// [SECTION] timing: the loop every case shares
// [SECTION] ceiling: Eigen GEMM
// [SECTION] attention: reference and tiled FA2, forward and backward
// [SECTION] main: registration, one line per case
#include <benchmark/benchmark.h>
#include <malloc.h>
#include <omp.h>
#include <time.h>
#include <unistd.h>

#include <Eigen/Dense>
#include <chrono>
#include <cstdint>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "attention_reference.hpp"
#include "executor.hpp"
#include "flashlab/error.hpp"
#include "flashlab/parallel.hpp"
#include "flashlab/problem.hpp"
#include "flashlab/tensor.hpp"
#include "flashlab/views.hpp"
#include "tiling.hpp"

namespace {

using flashlab::Problem;
using flashlab::RowMajor;
using flashlab::Tensor;
namespace reference = flashlab::reference;
namespace tiled = flashlab::tiled;

//-----------------------------------------------------------------------------
// [SECTION] inputs: one problem size, seeded random tensors
//-----------------------------------------------------------------------------

// Backward makes five N x N x d products (S recomputed, dV, dP, dQ, dK) to the
// forward's two (S, PV): 2.5x, FlashAttention's benchmark convention.
constexpr double kBackwardFlopsPerForward = 2.5;

// batch 1, heads 1, seqlen N x N, head_dim d, fp32, no mask.
Problem square_problem(int64_t N, int64_t d) {
  Problem p;
  p.seqlen_q = p.seqlen_k = N;
  p.head_dim = d;
  p.validate();
  return p;
}

// Bell-shaped values in [-1, 1]: the mean of three uniforms on [-1, 1]
// (Irwin-Hall), so no value is clipped and the seed fixes every element.
void fill_random(float* data, int64_t count, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  for (int64_t i = 0; i < count; ++i) data[i] = (uniform(rng) + uniform(rng) + uniform(rng)) / 3.0f;
}

Tensor random_tensor(const std::vector<int64_t>& shape, uint32_t seed) {
  Tensor t(shape);
  fill_random(t.ptr(), t.numel(), seed);
  return t;
}

struct Inputs {
  Tensor q;    // (batch, seqlen_q, heads_q, head_dim)  = (1, N, 1, d)
  Tensor k;    // (batch, seqlen_k, heads_kv, head_dim) = (1, N, 1, d)
  Tensor v;    // (batch, seqlen_k, heads_kv, head_dim) = (1, N, 1, d)
  Tensor d_o;  // like O: (1, N, 1, d), for the backward passes
  explicit Inputs(const Problem& p)
      : q(random_tensor(p.q_shape(), 1)),
        k(random_tensor(p.k_shape(), 2)),
        v(random_tensor(p.v_shape(), 3)),
        d_o(random_tensor(p.o_shape(), 4)) {}
};

//-----------------------------------------------------------------------------
// [SECTION] memory: peak RSS growth, and what else ran
//-----------------------------------------------------------------------------

// A field of /proc/self/status ("VmHWM:   123456 kB"), in KiB; -1 if absent.
int64_t status_kib(const std::string& field) {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind(field + ":", 0) != 0) continue;
    std::istringstream value(line.substr(field.size() + 1));
    int64_t kib = -1;
    value >> kib;
    return kib;
  }
  return -1;
}

// Peak RSS growth from construction on. Freed memory glibc still holds is
// handed back first (malloc_trim), so a case that reuses it shows up as
// growth instead of hiding in the previous case's pages. main() limits glibc
// to one arena: malloc_trim cannot release the top of a thread's own arena,
// which would hide up to 64 MiB of a call's matrices.
class PeakRss {
 public:
  PeakRss() {
    malloc_trim(0);
    std::ofstream clear("/proc/self/clear_refs");
    clear << "5";  // resets VmHWM to the current RSS (Linux >= 4.0)
    clear.flush();
    ok_ = static_cast<bool>(clear);
    base_kib_ = status_kib("VmRSS");
  }
  bool ok() const { return ok_ && base_kib_ >= 0; }
  double growth_mib() const { return static_cast<double>(status_kib("VmHWM") - base_kib_) / 1024.0; }

 private:
  bool ok_ = false;
  int64_t base_kib_ = -1;
};

// Cores that other processes kept busy from construction on: the machine's
// busy time (/proc/stat: user, nice, system, irq, softirq, steal) minus this
// process's CPU time, over wall time. On a shared machine this says which
// numbers were measured on a contended CPU. Resolution: one clock tick (10 ms).
class OtherLoad {
 public:
  OtherLoad() : machine_(machine_busy_s()), own_(own_cpu_s()), wall_(std::chrono::steady_clock::now()) {}
  double cores() const {
    const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_).count();
    return ((machine_busy_s() - machine_) - (own_cpu_s() - own_)) / wall;
  }

 private:
  static double machine_busy_s() {
    std::ifstream stat("/proc/stat");
    std::string cpu;
    int64_t user = 0, nice = 0, system = 0, idle = 0, iowait = 0, irq = 0, softirq = 0, steal = 0;
    stat >> cpu >> user >> nice >> system >> idle >> iowait >> irq >> softirq >> steal;
    return static_cast<double>(user + nice + system + irq + softirq + steal) / static_cast<double>(sysconf(_SC_CLK_TCK));
  }
  static double own_cpu_s() {
    timespec t{};
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
  }
  double machine_, own_;
  std::chrono::steady_clock::time_point wall_;
};

//-----------------------------------------------------------------------------
// [SECTION] timing: the loop every case shares
//-----------------------------------------------------------------------------

// Times `call` (one whole forward or backward) and sets the counters.
template <class Call>
void time_calls(benchmark::State& state, double flops_per_call, Call&& call) {
  const PeakRss peak;
  if (!peak.ok()) {
    state.SkipWithError("cannot reset the peak RSS: writing 5 to /proc/self/clear_refs failed (needs Linux >= 4.0)");
    return;
  }
  const OtherLoad others;
  for (auto _ : state) benchmark::DoNotOptimize(call());
  state.counters["GFLOP/s"] = benchmark::Counter(flops_per_call * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["peak_MiB"] = peak.growth_mib();
  state.counters["others_cores"] = others.cores();
}

//-----------------------------------------------------------------------------
// [SECTION] ceiling: Eigen GEMM
//-----------------------------------------------------------------------------

// C = A B, all cores: Eigen splits one GEMM over the OpenMP threads.
void BM_eigen_gemm(benchmark::State& state) {
  const int64_t M = state.range(0), K = state.range(1), N = state.range(2);
  RowMajor<float> A(M, K), B(K, N), C(M, N);  // A (M, K), B (K, N), C (M, N)
  fill_random(A.data(), A.size(), 5);
  fill_random(B.data(), B.size(), 6);
  time_calls(state, 2.0 * M * N * K, [&] {
    C.noalias() = A * B;
    return C(0, 0);
  });
}

// One executor step's two products at tile size (Br, Bc, d), every core doing
// its own, with Eigen single-threaded inside the parallel region: what the
// executor's GEMM calls can reach at best.
void BM_eigen_tile_gemm(benchmark::State& state) {
  const int64_t Br = state.range(0), Bc = state.range(1), d = state.range(2);
  const int threads = flashlab::parallel_threads();
  constexpr int kStepsPerCall = 256;  // tile steps per core per timed call: long enough to time
  struct Tiles {
    RowMajor<float> Q, K, V, S, O;    // Q_i (Br, d), K_j (Bc, d), V_j (Bc, d), S_ij (Br, Bc), O_i (Br, d)
  };
  std::vector<Tiles> per_core(threads);
  for (Tiles& t : per_core) {
    t.Q.resize(Br, d);
    t.K.resize(Bc, d);
    t.V.resize(Bc, d);
    t.S.resize(Br, Bc);
    t.O = RowMajor<float>::Zero(Br, d);
    fill_random(t.Q.data(), t.Q.size(), 7);
    fill_random(t.K.data(), t.K.size(), 8);
    fill_random(t.V.data(), t.V.size(), 9);
  }
  time_calls(state, 2.0 * 2.0 * Br * Bc * d * kStepsPerCall * threads, [&] {
#pragma omp parallel num_threads(threads)
    {
      Tiles& t = per_core[omp_get_thread_num()];
      for (int s = 0; s < kStepsPerCall; ++s) {
        t.S.noalias() = t.Q * t.K.transpose();  // S_ij = Q_i K_j^T
        t.O.noalias() += t.S * t.V;             // O_i += P_ij V_j (S stands in for P)
      }
    }
    return per_core[0].O(0, 0);
  });
}

//-----------------------------------------------------------------------------
// [SECTION] attention: reference and tiled FA2, forward and backward
//-----------------------------------------------------------------------------

// The reference refuses problems whose S and P exceed its memory budget;
// such a case is reported as skipped with the reference's own message.
bool reference_fits(benchmark::State& state, const Problem& p, bool backward) {
  try {
    reference::check_memory(p, reference::Precision::input, backward, reference::Options{});
    return true;
  } catch (const flashlab::Error& e) {
    state.SkipWithError(e.what());
    return false;
  }
}

void BM_forward_reference(benchmark::State& state) {
  const Problem p = square_problem(state.range(0), state.range(1));
  if (!reference_fits(state, p, false)) return;
  const Inputs in(p);
  time_calls(state, p.forward_flops(), [&] { return reference::forward_lowp(p, in.q, in.k, in.v).o[0]; });
}

void BM_forward_tiled(benchmark::State& state, tiled::Tiling tiling) {
  const Problem p = square_problem(state.range(0), state.range(1));
  const Inputs in(p);
  time_calls(state, p.forward_flops(),
             [&] { return tiled::forward(p, in.q, in.k, in.v, tiling, tiled::Order::fa2).o[0]; });
}

void BM_backward_reference(benchmark::State& state) {
  const Problem p = square_problem(state.range(0), state.range(1));
  if (!reference_fits(state, p, true)) return;
  const Inputs in(p);
  time_calls(state, kBackwardFlopsPerForward * p.forward_flops(),
             [&] { return reference::backward_lowp(p, in.q, in.k, in.v, in.d_o).dq[0]; });
}

void BM_backward_tiled(benchmark::State& state, tiled::Tiling tiling) {
  const Problem p = square_problem(state.range(0), state.range(1));
  const Inputs in(p);
  const tiled::ForwardResult fwd = tiled::forward(p, in.q, in.k, in.v, tiling, tiled::Order::fa2);  // O, LSE
  time_calls(state, kBackwardFlopsPerForward * p.forward_flops(), [&] {
    return tiled::backward(p, in.q, in.k, in.v, fwd.o, fwd.lse, in.d_o, tiling).dq[0];
  });
}

//-----------------------------------------------------------------------------
// [SECTION] main: registration, one line per case
//-----------------------------------------------------------------------------

const std::vector<int64_t> kSeqlens = {1024, 2048, 4096, 8192, 16384};
const std::vector<int64_t> kHeadDims = {64, 128};

// The tilings the sweep tries, (Br, Bc); kCpuDefault is among them.
const std::vector<tiled::Tiling> kSweepTilings = {{32, 64}, {64, 64}, {64, 128}, {128, 64},
                                                  {128, 128}, {128, 256}, {256, 128}, {256, 256}};
constexpr int64_t kSweepSeqlen = 4096;

// Shared settings: wall time, whole-process CPU time, milliseconds.
benchmark::internal::Benchmark* common(benchmark::internal::Benchmark* b) {
  return b->UseRealTime()->MeasureProcessCPUTime()->Unit(benchmark::kMillisecond);
}

// The quick cases the acceptance criteria and the sweep compare: the median of
// three runs, so one burst of another process's work does not decide them.
constexpr int kRepetitions = 3;
benchmark::internal::Benchmark* repeated(benchmark::internal::Benchmark* b) {
  return b->Repetitions(kRepetitions)->ReportAggregatesOnly(true);
}

benchmark::internal::Benchmark* attention_sizes(benchmark::internal::Benchmark* b) {
  return common(b->ArgsProduct({kSeqlens, kHeadDims})->ArgNames({"N", "d"}));
}

void register_all() {
  const tiled::Tiling def = tiled::kCpuDefault;
  const std::string def_name = "Br:" + std::to_string(def.Br) + "/Bc:" + std::to_string(def.Bc);

  repeated(common(benchmark::RegisterBenchmark("ceiling/eigen_gemm", BM_eigen_gemm)
             ->ArgNames({"M", "K", "N"})
             ->Args({1024, 1024, 1024})     // square
             ->Args({2048, 2048, 2048})     // square, larger
             ->Args({4096, 64, 4096})       // S = Q K^T at N = 4096, d = 64
             ->Args({4096, 128, 4096})      // S = Q K^T at N = 4096, d = 128
             ->Args({4096, 4096, 64})       // O = P V   at N = 4096, d = 64
             ->Args({4096, 4096, 128})));   // O = P V   at N = 4096, d = 128
  repeated(common(benchmark::RegisterBenchmark("ceiling/eigen_tile_gemm", BM_eigen_tile_gemm)
                      ->ArgNames({"Br", "Bc", "d"})
                      ->ArgsProduct({{def.Br}, {def.Bc}, kHeadDims})));

  attention_sizes(benchmark::RegisterBenchmark("forward/reference", BM_forward_reference));
  repeated(attention_sizes(benchmark::RegisterBenchmark(("forward/tiled_fa2/" + def_name).c_str(), BM_forward_tiled, def)));
  attention_sizes(benchmark::RegisterBenchmark("backward/reference", BM_backward_reference));
  attention_sizes(benchmark::RegisterBenchmark(("backward/tiled_fa2/" + def_name).c_str(), BM_backward_tiled, def));

  for (const tiled::Tiling& t : kSweepTilings) {
    const std::string name = "sweep/tiled_fa2_forward/Br:" + std::to_string(t.Br) + "/Bc:" + std::to_string(t.Bc);
    repeated(common(benchmark::RegisterBenchmark(name.c_str(), BM_forward_tiled, t)
                        ->ArgsProduct({{kSweepSeqlen}, kHeadDims})
                        ->ArgNames({"N", "d"})));
  }
}

// "model name" of /proc/cpuinfo, so the JSON says which CPU it measured.
std::string cpu_model() {
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line;
  while (std::getline(cpuinfo, line))
    if (line.rfind("model name", 0) == 0 && line.find(':') != std::string::npos)
      return line.substr(line.find(':') + 2);
  return "unknown";
}

}  // namespace

int main(int argc, char** argv) {
  mallopt(M_ARENA_MAX, 1);  // one malloc arena, so PeakRss's malloc_trim releases every freed page
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::AddCustomContext("cpu_model", cpu_model());
  benchmark::AddCustomContext("omp_threads", std::to_string(flashlab::parallel_threads()));
  benchmark::AddCustomContext("eigen_threads", std::to_string(Eigen::nbThreads()));
  benchmark::AddCustomContext("eigen_simd", Eigen::SimdInstructionSetsInUse());
  benchmark::AddCustomContext("tiling_default", tiled::kCpuDefault.describe());
  benchmark::AddCustomContext("flops_convention", "forward 4*N^2*d, backward 2.5x forward");
  register_all();
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
