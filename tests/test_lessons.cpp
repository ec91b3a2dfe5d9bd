// lessons/exercises: the registry holds what `flashlab lesson` and lessons/check rely on, and each
// exercise's answer (computed by the library) equals an independent computation: the paper's formula
// worked out here, or the preset file read directly.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "check.hpp"
#include "flashlab/error.hpp"
#include "gpu_spec.hpp"
#include "lesson.hpp"
#include "model.hpp"

using namespace flashlab;

namespace {

double answer(int lesson, int exercise) {
  const lessons::Lesson* l = lessons::find(lesson);
  REQUIRE(l != nullptr);
  REQUIRE(exercise <= static_cast<int>(l->exercises.size()));
  return l->exercises[exercise - 1].answer().value;
}

double preset_value(const std::string& gpu, const std::string& field, const std::string& sub = "") {
  std::ifstream f(std::string(FLASHLAB_SOURCE_DIR) + "/presets/" + gpu + ".json");
  const nlohmann::json j = nlohmann::json::parse(f);
  const nlohmann::json& v = sub.empty() ? j.at(field) : j.at(field).at(sub);
  return v.is_object() ? v.at("value").get<double>() : v.get<double>();
}

}  // namespace

TEST_CASE("lessons: every written lesson is on the path, has its file, a title line and an exercise") {
  CHECK(lessons::path().size() == 14);
  for (size_t k = 0; k < lessons::path().size(); ++k) CHECK(lessons::path()[k].number == static_cast<int>(k + 1));
  REQUIRE(!lessons::written().empty());
  for (const lessons::Lesson& l : lessons::written()) {
    CAPTURE(l.number);
    const std::filesystem::path file = std::filesystem::path(FLASHLAB_SOURCE_DIR) / lessons::file_of(l);
    REQUIRE(std::filesystem::exists(file));
    std::ifstream in(file);
    std::string first;
    std::getline(in, first);
    CHECK(first.find(lessons::step(l.number).title) != std::string::npos);
    CHECK(!l.exercises.empty());
    for (const lessons::Exercise& e : l.exercises) {
      const lessons::Answer a = e.answer();
      CHECK(std::isfinite(a.value));
      CHECK(lessons::tolerance_of(a) > 0);
      CHECK(a.working.size() > 40);
    }
  }
}

TEST_CASE("lessons: unwritten and out-of-range lessons") {
  CHECK_THROWS_AS(lessons::step(0), Error);
  CHECK_THROWS_AS(lessons::step(15), Error);
  CHECK(lessons::find(0) == nullptr);
}

TEST_CASE("lessons: an answer is right within its tolerance and wrong outside it") {
  lessons::Answer a;
  a.value = 200;
  a.rel_tolerance = 0.02;
  CHECK(lessons::is_right(a, 203.9));
  CHECK(!lessons::is_right(a, 204.1));
  CHECK(!lessons::is_right(a, NAN));
  a.abs_tolerance = 10;  // the larger of the two rules applies
  CHECK(lessons::is_right(a, 209));
  CHECK(lessons::describe_tolerance(a).find("10") != std::string::npos);
}

TEST_CASE("lesson 01: standard attention's intensity and the A100's ridge point") {
  const double N = 1024, d = 64, e = 2;
  const double flops = 4 * N * N * d;
  const double read = 2 * N * d * e + 2 * N * N * e + N * d * e;  // Q, K; S, P; V
  const double written = 2 * N * N * e + N * d * e;               // S, P; O
  CHECK(answer(1, 1) == doctest::Approx(flops / (read + written)).epsilon(1e-12));
  CHECK(answer(1, 2) == doctest::Approx(preset_value("a100-40gb", "tensor_flops_per_s", "fp16") /
                                        preset_value("a100-40gb", "hbm_bandwidth_bytes_per_s")));
}

TEST_CASE("lesson 02: Algorithm 1's Bc on an H100 at d = 128, bf16") {
  const double M = preset_value("h100-sxm", "sram_per_sm_bytes") / 2;
  CHECK(answer(2, 1) == std::ceil(M / (4 * 128)));
}

TEST_CASE("lesson 03: FA2's forward bytes at N = 8192, d = 128, Br = 128") {
  const double N = 8192, d = 128, e = 2, Tr = N / 128;
  const double bytes = N * d * e          // Q once
                       + Tr * 2 * N * d * e  // K, V once per Q block
                       + N * d * e           // O once
                       + N * 4;              // LSE, fp32
  CHECK(answer(3, 1) == doctest::Approx(bytes / (1024.0 * 1024.0)).epsilon(1e-12));
}

TEST_CASE("lesson 04: FA1 over FA2 bytes, and the backward's five GEMMs") {
  const double N = 1024, d = 64, e = 2, T = N / 64, stat = N * 4;  // l, m, LSE: fp32
  const double fa1 = (N * d * e + 2 * stat)                 // O, l, m initialized
                     + 2 * N * d * e                        // K, V once
                     + T * (3 * N * d * e + 4 * stat);      // per K/V block: Q; O read + written; l, m read + written
  const double fa2 = N * d * e + T * 2 * N * d * e + N * d * e + stat;
  CHECK(answer(4, 1) == doctest::Approx(fa1 / fa2).epsilon(1e-12));
  const double n = 2048, dh = 128;
  CHECK(answer(4, 2) == doctest::Approx(5 * 2 * n * n * dh / 1e9).epsilon(1e-9));
}

TEST_CASE("lesson 05: a ragged grid of tiles, and what doubling Br saves in FA2's order") {
  const auto ceil_div = [](int64_t a, int64_t b) { return (a + b - 1) / b; };
  CHECK(answer(5, 1) == static_cast<double>(ceil_div(1000, 128) * ceil_div(1000, 64)));
  const double N = 4096, d = 128, e = 2;
  const auto fa2 = [&](double br) { return N * d * e + (N / br) * 2 * N * d * e + N * d * e + N * 4; };
  CHECK(answer(5, 2) == doctest::Approx((fa2(64) - fa2(128)) / (1024.0 * 1024.0)).epsilon(1e-12));
}

TEST_CASE("lesson 06: alpha and l of a row at its second tile, from S computed directly") {
  // The same seeded inputs as the exercise (flashlab step --seed 7), row 1, S by a dot product here.
  Problem p;
  p.seqlen_q = p.seqlen_k = 8;
  p.head_dim = 4;
  p.seed = 7;
  p.validate();
  const harness::Inputs in = harness::random_inputs(p, p.seed);
  const double scale = 1.0 / std::sqrt(4.0);
  std::vector<double> s(8);
  for (int c = 0; c < 8; ++c) {
    double dot = 0;
    for (int k = 0; k < 4; ++k) dot += double(in.q.data[1 * 4 + k]) * double(in.k.data[c * 4 + k]);
    s[c] = scale * dot;
  }
  const double m0 = *std::max_element(s.begin(), s.begin() + 4);
  double l0 = 0;
  for (int c = 0; c < 4; ++c) l0 += std::exp(s[c] - m0);
  const double m1 = std::max(m0, *std::max_element(s.begin() + 4, s.end()));
  double l1 = std::exp(m0 - m1) * l0;
  for (int c = 4; c < 8; ++c) l1 += std::exp(s[c] - m1);
  CHECK(answer(6, 1) == doctest::Approx(std::exp(m0 - m1)).epsilon(1e-5));
  CHECK(answer(6, 2) == doctest::Approx(l1).epsilon(1e-5));
}

TEST_CASE("lesson 07: a row's LSE and its alphas' product, from S computed directly and merged in one step") {
  Problem p;
  p.seqlen_q = p.seqlen_k = 16;
  p.head_dim = 4;
  p.seed = 3;
  p.validate();
  const harness::Inputs in = harness::random_inputs(p, p.seed);
  std::vector<double> s(16);
  for (int c = 0; c < 16; ++c) {
    double dot = 0;
    for (int k = 0; k < 4; ++k) dot += double(in.q.data[5 * 4 + k]) * double(in.k.data[c * 4 + k]);
    s[c] = dot / std::sqrt(4.0);
  }
  const double M = *std::max_element(s.begin(), s.end());
  double l = 0;
  for (double x : s) l += std::exp(x - M);
  CHECK(answer(7, 1) == doctest::Approx(M + std::log(l)).epsilon(1e-5));
  const double m0 = *std::max_element(s.begin(), s.begin() + 4);  // the max after tile 0
  CHECK(answer(7, 2) == doctest::Approx(std::exp(m0 - M)).epsilon(1e-5));
}

TEST_CASE("lesson 08: FA2's backward bytes, and the GEMM that recomputing S adds") {
  const double N = 4096, d = 128, e = 2, Tc = N / 128, f32 = 4;
  const double bytes = 2 * N * d * e + N * f32 + N * d * f32       // before: read O, dO; write D; zero dQ's fp32 buffer
                       + 2 * N * d * e + 2 * N * d * e             // K_j, V_j read once; dK_j, dV_j written once
                       + Tc * N * (2 * d * e + 2 * f32 + 2 * d * f32)  // each K/V block: Q, dO, L, D read; dQ read + written
                       + N * d * f32 + N * d * e;                  // after: dQ's buffer read, dQ written in bf16
  CHECK(answer(8, 1) == doctest::Approx(bytes / 1e6).epsilon(1e-12));
  const double heads = 32;
  CHECK(answer(8, 2) == doctest::Approx(heads * 2 * N * N * d / 1e9).epsilon(1e-9));  // one more N x N x d GEMM
}

TEST_CASE("lesson 09: the tiles a causal pass computes, counted element by element") {
  // A tile is computed when some (row, key) in it has key <= row.
  const auto computed = [](int64_t n, int64_t br, int64_t bc) {
    int64_t tiles = 0;
    for (int64_t r0 = 0; r0 < n; r0 += br)
      for (int64_t c0 = 0; c0 < n; c0 += bc)
        if (c0 <= std::min(n, r0 + br) - 1) ++tiles;  // the tile's first key against its last row
    return static_cast<double>(tiles);
  };
  CHECK(answer(9, 1) == computed(4096, 128, 128));
  CHECK(answer(9, 1) == 32 * 33 / 2);
  CHECK(answer(9, 2) == computed(1024, 128, 64));
}

TEST_CASE("lesson 10: FA2's grid of batch x heads x Tr blocks, in waves on an A100") {
  const double blocks = 2 * 16 * (4096 / 128);  // one thread block per Q block of every (batch, head)
  const double slots = preset_value("a100-80gb", "sm_count") * 2;  // 2 blocks an SM, as the prompt says
  CHECK(answer(10, 1) == doctest::Approx(blocks / slots).epsilon(1e-9));
}

TEST_CASE("lesson 11: exponentials against matmuls per element of S, H100, d = 64") {
  const double peak = preset_value("h100-sxm", "tensor_flops_per_s", "bf16");
  const double exp_rate = preset_value("h100-sxm", "exp_per_s");
  CHECK(answer(11, 1) == doctest::Approx((1 / exp_rate) / (4 * 64 / peak)).epsilon(1e-12));
}

TEST_CASE("lesson 12: standard attention's HBM bytes, the signature of S and P") {
  const double B = 2, H = 32, N = 8192, d = 64, e = 2;
  const double per_head = 3 * N * d * e + 2 * N * N * e  // read Q, K, V; S, P
                          + 2 * N * N * e + N * d * e;   // write S, P; O
  CHECK(answer(12, 1) == doctest::Approx(B * H * per_head / 1e9).epsilon(1e-12));
}

TEST_CASE("lesson 13: the MATH backend's bytes, kernel by kernel, and its time over cuDNN's") {
  const double H = 16, N = 8192, d = 128, f = 4, e = 2;  // fp32 inside, bf16 outside
  const double S = H * N * N, q = H * N * d;             // elements of S; of each of Q, K, V, O
  const double per_score = f + (f + f) + (f + 1) + 1 + (f + 1 + f) + (f + e) + f;  // S, softmax, test, any, where, cast, PV
  const double per_row = 2 * ((e + f) + (f + f) + f)  // Q and K: cast, scale, read by QK^T
                         + ((e + f) + f)              // V: cast, read by PV
                         + (f + (f + e));             // O: written by PV, cast
  CHECK(per_score == 37);
  CHECK(per_row == 56);
  CHECK(answer(13, 1) == doctest::Approx((per_score * S + per_row * q) / 1e9).epsilon(1e-9));
  // Exercise 2 is what `flashlab estimate --algo math` and `--algo fa3 --impl cudnn` print, not upstream FA3's or FA2's
  Problem p;
  p.heads_q = p.heads_kv = 16;
  p.seqlen_q = p.seqlen_k = 8192;
  p.head_dim = 128;
  p.dtype = DType::bf16;
  const sim::GpuSpec gpu = sim::load_gpu("h100-sxm");
  sim::Options cudnn;
  cudnn.impl = sim::Impl::cudnn;
  const double math_s = sim::estimate(p, gpu, sim::Algo::math, Pass::fwd).time_s;
  const double cudnn_s = sim::estimate(p, gpu, sim::Algo::fa3, Pass::fwd, cudnn).time_s;
  CHECK(math_s >= (per_score * S + per_row * q) / preset_value("h100-sxm", "hbm_bandwidth_bytes_per_s"));  // HBM-bound
  CHECK(answer(13, 2) == doctest::Approx(math_s / cudnn_s).epsilon(1e-12));
  CHECK(answer(13, 2) != doctest::Approx(math_s / sim::estimate(p, gpu, sim::Algo::fa3, Pass::fwd).time_s).epsilon(1e-3));
  CHECK(answer(13, 2) != doctest::Approx(math_s / sim::estimate(p, gpu, sim::Algo::fa2, Pass::fwd).time_s).epsilon(1e-3));
}

TEST_CASE("lesson 14: the roofline's speedup of FlashAttention over standard attention, H100, N = 8192") {
  const double N = 8192, d = 128, e = 2;
  const double peak = preset_value("h100-sxm", "tensor_flops_per_s", "bf16");
  const double bw = preset_value("h100-sxm", "hbm_bandwidth_bytes_per_s");
  const double flops = 4 * N * N * d;
  const double standard = std::max(flops / peak, (4 * N * d * e + 4 * N * N * e) / bw);  // HBM-bound
  const double fa = std::max(flops / peak, 4 * N * d * e / bw);                           // compute-bound
  CHECK(standard / fa == doctest::Approx((4 * N * d * e + 4 * N * N * e) / bw / (flops / peak)).epsilon(1e-12));
  CHECK(answer(14, 1) == doctest::Approx(standard / fa).epsilon(1e-12));
}
