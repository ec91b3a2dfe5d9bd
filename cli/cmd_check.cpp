// flashlab check: every registered implementation on one problem, against the fp64 oracle.
#include <cstdio>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

#include "check.hpp"
#include "flashlab/error.hpp"
#include "commands.hpp"
#include "decode_check.hpp"
#include "decode_flags.hpp"
#include "problem_flags.hpp"

namespace flashlab::cli {

bool run_check(const Problem& p, harness::Pass pass, uint64_t seed, double logit_scale, bool json) {
  const bool table = !json;
  if (table) std::printf("problem: %s, pass %s\n", p.describe().c_str(), harness::to_string(pass).c_str());
  const harness::Inputs in = harness::random_inputs(p, seed, logit_scale);
  const harness::Baseline base = harness::compute_baseline(p, in, pass);
  if (table) {
    std::printf("rule: max|out - fp64| <= %s x max|naive %s - fp64| + 1e-5\n\n", p.varlen() ? "2 (3 for grads)" : "2",
                std::string(to_string(p.dtype)).c_str());
    std::printf("%-11s %-7s %-11s %-11s %10s %10s  %s\n", "impl", "field", "error", "tolerance", "fwd ms", "bwd ms",
                "result");
  }
  nlohmann::json rows = nlohmann::json::array();
  bool all_pass = true;
  for (const auto& impl : harness::implementations()) {
    const harness::CheckResult r = harness::check(impl, p, in, base, pass);
    all_pass = all_pass && r.pass();
    nlohmann::json row = {{"impl", r.impl}, {"pass", r.pass()}, {"skipped", r.skipped},
                          {"fwd_seconds", r.fwd_seconds}, {"bwd_seconds", r.bwd_seconds}};
    if (table && !r.skipped.empty()) std::printf("%-11s %s\n", r.impl.c_str(), r.skipped.c_str());
    for (size_t i = 0; i < r.fields.size(); ++i) {
      const auto& f = r.fields[i];
      row["fields"].push_back({{"field", f.field}, {"error", f.error}, {"tolerance", f.tolerance}, {"pass", f.pass}});
      if (table)
        std::printf("%-11s %-7s %-11.3e %-11.3e %10s %10s  %s\n", i == 0 ? r.impl.c_str() : "", f.field.c_str(),
                    f.error, f.tolerance, i == 0 ? std::to_string(r.fwd_seconds * 1e3).substr(0, 8).c_str() : "",
                    i == 0 && r.bwd_seconds > 0 ? std::to_string(r.bwd_seconds * 1e3).substr(0, 8).c_str() : "",
                    f.pass ? "pass" : "FAIL");
    }
    rows.push_back(row);
  }
  if (table) std::printf("\n%s\n", all_pass ? "all implementations pass" : "SOME IMPLEMENTATIONS FAIL");
  else std::cout << nlohmann::json{{"problem", p.describe()}, {"pass", harness::to_string(pass)}, {"results", rows}}.dump(2) << "\n";
  return all_pass;
}

bool run_check_decode(const DecodeProblem& d, uint64_t seed, double logit_scale, bool json) {
  const bool table = !json;
  if (table) std::printf("problem: %s\n", d.describe().c_str());
  const DecodeTensors in = harness::random_decode_inputs(d, seed, logit_scale);
  const harness::DecodeBaseline base = harness::decode_baseline(d, in);
  if (table) {
    std::printf("rule: max|out - fp64| <= 2 x max|naive %s - fp64| + 1e-5%s\n\n", std::string(to_string(d.dtype)).c_str(),
                d.new_len ? " (Kcache, Vcache: the caches after the append)" : "");
    std::printf("%-15s %-7s %-11s %-11s %10s  %s\n", "impl", "field", "error", "tolerance", "ms", "result");
  }
  nlohmann::json rows = nlohmann::json::array();
  bool all_pass = true;
  for (const auto& impl : harness::decode_implementations()) {
    const harness::CheckResult r = harness::check_decode(impl, d, in, base);
    all_pass = all_pass && r.pass();
    nlohmann::json row = {{"impl", r.impl}, {"pass", r.pass()}, {"seconds", r.fwd_seconds}};
    if (!r.skipped.empty()) {
      row["skipped"] = r.skipped;
      if (table) std::printf("%-15s %s\n", r.impl.c_str(), r.skipped.c_str());
      rows.push_back(row);
      continue;
    }
    for (size_t i = 0; i < r.fields.size(); ++i) {
      const auto& f = r.fields[i];
      row["fields"].push_back({{"field", f.field}, {"error", f.error}, {"tolerance", f.tolerance}, {"pass", f.pass}});
      if (table)
        std::printf("%-15s %-7s %-11.3e %-11.3e %10s  %s\n", i == 0 ? r.impl.c_str() : "", f.field.c_str(), f.error,
                    f.tolerance, i == 0 ? std::to_string(r.fwd_seconds * 1e3).substr(0, 8).c_str() : "",
                    f.pass ? "pass" : "FAIL");
    }
    rows.push_back(row);
  }
  if (table) std::printf("\n%s\n", all_pass ? "all implementations pass" : "SOME IMPLEMENTATIONS FAIL");
  else std::cout << nlohmann::json{{"problem", d.describe()}, {"results", rows}}.dump(2) << "\n";
  return all_pass;
}

void add_check(CLI::App& app) {
  struct Opts {
    ProblemFlags flags;
    DecodeFlags decode;
    std::string format = "table";
    double logit_scale = 1.0;
  };
  auto opts = std::make_shared<Opts>();
  auto* cmd = app.add_subcommand("check", "run every implementation on one problem; print its error against the "
                                          "fp64 reference, pass/fail by the official rule, and time");
  cmd->footer("Example: flashlab check --seqlen-q 333 --seqlen-k 1000 --hdim 80 --heads 8 --kv-heads 2 --causal "
              "--window 128,0 --softcap 30 --dtype bf16 --pass fwd+bwd\n"
              "Decoding: flashlab check --decode --cache-seqlens 5,900,17 --heads 8 --kv-heads 1 --q-len 4 --causal "
              "--append 4 --rotary half --page-size 16 --num-splits 3 --dtype bf16");
  opts->flags.add_to(*cmd);
  opts->decode.add_to(*cmd);
  cmd->add_option("--format", opts->format, "table | json")->capture_default_str()->check(CLI::IsMember({"table", "json"}));
  cmd->add_option("--logit-scale", opts->logit_scale, "multiply Q by this (e.g. 1000 to test large logits)");
  cmd->callback([opts] {
    if (opts->decode.decode) {
      if (opts->flags.parsed_pass() != harness::Pass::fwd)
        throw Error("--decode checks the forward pass only (decoding has no backward); drop --pass " + opts->flags.pass);
      if (!run_check_decode(opts->decode.problem(opts->flags), opts->flags.seed, opts->logit_scale,
                            opts->format == "json"))
        throw CLI::RuntimeError(2);
      return;
    }
    if (!run_check(opts->flags.problem(), opts->flags.parsed_pass(), opts->flags.seed, opts->logit_scale,
                   opts->format == "json"))
      throw CLI::RuntimeError(2);
  });
}

}  // namespace flashlab::cli
