// chorus-plan's command line, the profile readers, the JSON and the explanation.
#include "options.hpp"
#include "plan/compute_profile.hpp"
#include "plan/planner.hpp"

#include <chorus/error.hpp>

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <vector>

namespace chorus::plan {
namespace {

plan_tool::Options parse(std::vector<std::string> words) {
  words.insert(words.begin(), "chorus-plan");
  std::vector<const char*> argv;
  for (const std::string& w : words) argv.push_back(w.c_str());
  return plan_tool::parse_options(static_cast<int>(argv.size()), argv.data());
}

std::string refusal(std::vector<std::string> words) {
  try {
    parse(std::move(words));
  } catch (const Error& error) {
    return error.what();
  }
  return "";
}

std::string write(const std::string& name, const std::string& text) {
  const std::string path = testing::TempDir() + name;
  std::ofstream(path) << text;
  return path;
}

/// A compute profile of the tiny block of test_plan_model, six lines.
const std::string kTinyProfile =
    "hidden 8\nheads 2\nseq 4\nmicro_batch 1\nlayer_forward_ms 1\nlayer_backward_ms 4\n";

/// parse_compute_profile's sentence for kTinyProfile followed by `more` (source "p"), or
/// "accepted".
std::string profile_refusal(const std::string& more) {
  std::istringstream in(kTinyProfile + more);
  try {
    parse_compute_profile(in, "p");
  } catch (const Error& e) {
    return e.what();
  }
  return "accepted";
}

TEST(PlanTool, OptionsReachTheRequest) {
  const plan_tool::Options o = parse({"--layers",  "8",
                                      "--hidden",  "96",
                                      "--heads",   "6",
                                      "--vocab",   "100",
                                      "--seq-len", "32",
                                      "--ffn",     "200",
                                      "--experts", "4",
                                      "--top-k",   "2",
                                      "--dropout", "--global-batch",
                                      "64",        "--micro-batch",
                                      "2",         "--ranks-per-host",
                                      "4",         "--hosts",
                                      "3",         "--memory-gib",
                                      "2",         "--tflops",
                                      "5",         "--efficiency",
                                      "0.5",       "--precision",
                                      "bf16",      "--top",
                                      "3",         "--json",
                                      "--explain"});
  const PlanRequest& r = o.request;
  EXPECT_EQ(r.model.layers, 8);
  EXPECT_EQ(r.model.ffn_size(), 200);
  EXPECT_EQ(r.model.experts, 4);
  EXPECT_EQ(r.model.top_k, 2);
  EXPECT_TRUE(r.model.dropout);
  EXPECT_EQ(r.world(), 12);
  EXPECT_EQ(r.micro_batch, 2);
  EXPECT_DOUBLE_EQ(r.budget(), 2.0 * 1024 * 1024 * 1024);
  EXPECT_DOUBLE_EQ(r.machine.forward_flops_per_second(), 2.5e12);
  EXPECT_EQ(r.machine.precision.name, "bf16");
  EXPECT_EQ(o.top, 3u);
  EXPECT_TRUE(o.json && o.explain);
}

TEST(PlanTool, BadOptionsNameTheValue) {
  EXPECT_EQ(refusal({"--layers", "0"}),
            "--layers '0' is not valid: must be an integer from 1 to 100000");
  EXPECT_EQ(refusal({"--tflops", "-1"}), "--tflops '-1' is not valid: must be a number > 0");
  EXPECT_EQ(refusal({"--efficiency", "1.5"}), "--efficiency '1.5' is not valid: must be at most 1");
  EXPECT_EQ(refusal({"--precision", "fp8"}), "--precision 'fp8' is not valid: expected fp32|bf16");
  EXPECT_EQ(refusal({"--top-k", "2"}), "--top-k '2' is not valid: needs --experts");
  EXPECT_EQ(refusal({"--frobnicate"}), "option '--frobnicate' is not valid: unknown (see --help)");
  EXPECT_EQ(refusal({"--hosts"}), "--hosts '' is not valid: the option needs a value");
  EXPECT_EQ(refusal({"--machine", "/nonexistent/m"}),
            "machine profile '/nonexistent/m' cannot be read");
}

TEST(PlanTool, MachineProfile) {
  const std::string good =
      write("good.profile",
            "# a machine\nname lab\nprecision bf16\npeak_tflops 2\n"
            "efficiency 0.25\nmemory_gib 1\nmemory_gb_per_s 4\nshm.alpha_us 3\n"
            "tcp.beta_ns_per_byte 0.5  # measured\n");
  const Machine m = load_machine_profile(good);
  EXPECT_EQ(m.name, "lab");
  EXPECT_EQ(m.precision.optimizer, 12);
  EXPECT_DOUBLE_EQ(m.forward_flops_per_second(), 0.5e12);
  EXPECT_DOUBLE_EQ(m.memory_bytes, 1024.0 * 1024 * 1024);
  EXPECT_DOUBLE_EQ(m.memory_bandwidth, 4e9);
  EXPECT_DOUBLE_EQ(m.memory_seconds(8e9), 2);
  EXPECT_DOUBLE_EQ(m.links.shm.alpha, 3e-6);
  EXPECT_DOUBLE_EQ(m.links.tcp.beta, 0.5e-9);
  EXPECT_EQ(m.links.arena, algorithms::CostParameters::defaults().arena);
  const std::string bad = write("bad.profile", "name lab\n\nwarp_factor 9\n");
  EXPECT_EQ(refusal({"--machine", bad}), bad + ":3: unknown machine profile key 'warp_factor'");
  const std::string tuning = write("bad.tuning", "shm.alpha_us 1\nshm.gamma 2\n");
  EXPECT_EQ(refusal({"--machine", tuning}), tuning + ":2: unknown tuning key 'shm.gamma'");
}

TEST(PlanTool, ComputeProfileSetsTheMeasuredRates) {
  // The tiny block of test_plan_model: 6656 FLOPs forward at b 1, tp 1.
  const std::string path = write("compute.profile",
                                 "hidden 8\nheads 2\nseq 4\nmicro_batch 1\n"
                                 "layer_forward_ms 1\nlayer_backward_ms 4\n");
  Machine m;
  load_compute_profile(m, path);
  EXPECT_DOUBLE_EQ(m.forward_flops_per_second(), 6656e3);
  EXPECT_DOUBLE_EQ(m.backward_flops_per_second(), 2 * 6656e3 / 4);
  const std::string missing = write("missing.profile", "hidden 8\n");
  EXPECT_EQ(refusal({"--compute-profile", missing}),
            missing + ": the compute profile has no 'heads' line");
}

// The format chorus-train --write-compute-profile writes: read back equal, its per-block,
// embedding and head lines kept, and the rates taken from the mean block's lines.
TEST(PlanTool, ComputeProfileRoundTripsWithItsBlockLines) {
  ComputeProfile p;
  p.hidden = 8, p.heads = 2, p.seq = 4, p.micro_batch = 1, p.tp = 1;
  p.layer_forward_ms = 1, p.layer_backward_ms = 4;
  p.block_forward_ms = {0.5, 1.5};
  p.block_backward_ms = {3.25, 4.75};
  p.embedding_ms = 0.125, p.head_ms = 2;
  std::istringstream text(format_compute_profile(p));
  const ComputeProfile back = parse_compute_profile(text, "written");
  EXPECT_EQ(back.hidden, 8);
  EXPECT_EQ(back.micro_batch, 1);
  EXPECT_EQ(back.block_forward_ms, p.block_forward_ms);
  EXPECT_EQ(back.block_backward_ms, p.block_backward_ms);
  EXPECT_EQ(back.embedding_ms, 0.125);
  EXPECT_EQ(back.head_ms, 2);
  EXPECT_TRUE(back.more_sizes.empty());
  Machine m;
  std::istringstream again(format_compute_profile(p));
  read_compute_profile(m, again, "written");
  EXPECT_DOUBLE_EQ(m.forward_flops_per_second(), 6656e3);
  // Further sizes, the vocabulary and the optimizer's time read back too.
  p.vocab = 16, p.optimizer_ns_per_parameter = 7.5;
  p.more_sizes = {{2, 1.5, 5, 0.25, 3}, {4, 2.5, 7, 0.5, 5}};
  p.recompute = {{4, 8, 9.5}};
  std::istringstream sizes(format_compute_profile(p));
  const ComputeProfile all = parse_compute_profile(sizes, "sizes");
  EXPECT_EQ(all.vocab, 16);
  EXPECT_EQ(all.optimizer_ns_per_parameter, 7.5);
  ASSERT_EQ(all.sizes().size(), 3u);
  EXPECT_EQ(all.sizes()[0].micro_batch, 1);
  EXPECT_EQ(all.sizes()[2].micro_batch, 4);
  EXPECT_EQ(all.sizes()[2].layer_backward_ms, 7);
  EXPECT_EQ(all.sizes()[2].head_ms, 5);
  ASSERT_EQ(all.recompute.size(), 1u);
  EXPECT_EQ(all.recompute[0].micro_batch, 4);
  EXPECT_EQ(all.recompute[0].full_backward_ms, 9.5);
  EXPECT_EQ(profile_refusal("layer 1 1 2\n"),
            "p:7: layer 1 where layer 0 comes next (one line per block, in order)");
  EXPECT_EQ(profile_refusal("layer 0 1\n"),
            "p:7: expected 'layer <index> <forward ms> <backward ms>'");
  EXPECT_EQ(profile_refusal("layer 0 1 -2\n"),
            "p:7: expected 'layer 0 <positive number>', got '-2'");
  EXPECT_EQ(profile_refusal("at 2 1 2\n"),
            "p:7: expected 'at <micro-batch> <layer forward ms> "
            "<layer backward ms> <embedding ms> <head ms>'");
  EXPECT_EQ(profile_refusal("at 1.5 1 2 1 1\n"), "p:7: at '1.5' is not a whole number of samples");
  EXPECT_EQ(profile_refusal("at 2 1 2 1 1\n"),
            "p: 'at' lines need the embedding_ms and head_ms lines (the times at micro_batch 1)");
  EXPECT_EQ(profile_refusal("embedding_ms 1\nhead_ms 1\nat 2 1 2 1 1\nat 2 1 2 1 1\n"),
            "p:10: micro-batch 2 has a second 'at' line");
  EXPECT_EQ(profile_refusal("embedding_ms 1\nhead_ms 1\nat 1 1 2 1 1\n"),
            "p: micro-batch 1 has an 'at' line and is the micro_batch line's too");
  EXPECT_EQ(profile_refusal("recompute 1 2\n"),
            "p:7: expected 'recompute <micro-batch> <selective backward ms> <full backward ms>'");
  EXPECT_EQ(profile_refusal("recompute 1 5 6\nrecompute 1 5 6\n"),
            "p:8: micro-batch 1 has a second 'recompute' line");
  EXPECT_EQ(profile_refusal("recompute 2 5 6\n"),
            "p: 'recompute 2' is not a profiled micro-batch (micro_batch or an 'at' line)");
}

// The concurrency line: written, read back, 1 for a file without it, refused unless a whole
// number of processes; the fitted model keeps it.
TEST(PlanTool, ComputeProfileConcurrency) {
  ComputeProfile p;
  p.hidden = 8, p.heads = 2, p.seq = 4, p.micro_batch = 1;
  p.layer_forward_ms = 1, p.layer_backward_ms = 4;
  EXPECT_EQ(p.concurrency, 1);
  p.concurrency = 2;
  const std::string text = format_compute_profile(p);
  EXPECT_NE(text.find("\nconcurrency 2\n"), std::string::npos) << text;
  std::istringstream in(text);
  EXPECT_EQ(parse_compute_profile(in, "written").concurrency, 2);
  Machine m;
  std::istringstream again(text);
  read_compute_profile(m, again, "written");
  EXPECT_EQ(m.measured->concurrency, 2);
  std::istringstream old_text(kTinyProfile);  // a file without the line
  EXPECT_EQ(parse_compute_profile(old_text, "old").concurrency, 1);
  EXPECT_EQ(profile_refusal("concurrency 0\n"),
            "p:7: expected 'concurrency <positive number>', got '0'");
  EXPECT_EQ(profile_refusal("concurrency 1.5\n"),
            "p:7: concurrency '1.5' is not a whole number of processes");
  EXPECT_EQ(profile_refusal("concurrency 2000000\n"),
            "p: concurrency 2000000 is above 1048576 processes");
}

// Every measured time once, in the shape's order (what ranks combine element by element).
TEST(PlanTool, ComputeProfileMeasuredTimes) {
  ComputeProfile p;
  p.layer_forward_ms = 1, p.layer_backward_ms = 2, p.embedding_ms = 3, p.head_ms = 4;
  p.optimizer_ns_per_parameter = 5;
  p.block_forward_ms = {6, 8};
  p.block_backward_ms = {7, 9};
  p.more_sizes = {{2, 10, 11, 12, 13}};
  p.recompute = {{1, 14, 15}, {2, 16, 17}};
  std::vector<double> values;
  for (double* t : measured_times(p)) values.push_back(*t);
  std::vector<double> expected;
  for (int i = 1; i <= 17; ++i) expected.push_back(i);
  EXPECT_EQ(values, expected);
  for (double* t : measured_times(p)) *t *= 2;
  EXPECT_EQ(p.recompute[1].full_backward_ms, 34);
  EXPECT_EQ(p.block_backward_ms[0], 14);
}

// chorus-plan's warning: none without a compute profile or at the profile's concurrency;
// else a sentence naming both numbers and which way the times are off, in the plan's result
// and its JSON.
TEST(PlanTool, ComputeProfileConcurrencyWarning) {
  const std::string one = write("one.profile", kTinyProfile);
  const std::string two = write("two.profile", kTinyProfile + "concurrency 2\n");
  const auto warning = [](const std::string& profile, const std::string& ranks) {
    std::vector<std::string> words = {"--ranks-per-host", ranks, "--tflops", "1"};
    if (!profile.empty()) words.insert(words.end(), {"--compute-profile", profile});
    return compute_concurrency_warning(parse(words).request);
  };
  EXPECT_EQ(warning("", "2"), "");
  EXPECT_EQ(warning(one, "1"), "");
  EXPECT_EQ(warning(two, "2"), "");
  EXPECT_EQ(warning(one, "2"),
            "the compute profile was taken with 1 process computing at once, the plan has 2 "
            "ranks per host: ranks that share a host's cores compute slower together than "
            "alone, so its compute times are likely too low (take it with `chorusrun -n 2 "
            "chorus-train ... --write-compute-profile FILE`)");
  EXPECT_NE(warning(two, "1").find("taken with 2 processes computing at once, the plan has 1 "
                                   "rank per host"),
            std::string::npos);
  EXPECT_NE(warning(two, "1").find("likely too high"), std::string::npos);
  const PlanRequest r = parse({"--ranks-per-host", "4", "--compute-profile", two}).request;
  const PlanResult result = plan(r);
  EXPECT_EQ(result.warning, compute_concurrency_warning(r));
  EXPECT_NE(to_json(r, result, 1).find("\"warning\": \"the compute profile was taken with 2"),
            std::string::npos);
  EXPECT_NE(to_json(r, plan(parse({"--ranks-per-host", "2", "--compute-profile", two}).request), 1)
                .find("\"warning\": \"\", "),
            std::string::npos);
}

TEST(PlanTool, JsonAndExplanation) {
  PlanRequest r;
  r.ranks_per_host = 2;
  r.machine.peak_flops = 1e9;
  r.machine.name = "a \"quoted\" name";
  const PlanResult result = plan(r);
  ASSERT_GE(result.feasible.size(), 2u);
  const std::string json = to_json(r, result, 2);
  EXPECT_EQ(json.rfind("{\"world\": 2, \"hosts\": 1, ", 0), 0) << json;
  EXPECT_NE(json.find("a \\\"quoted\\\" name"), std::string::npos);
  EXPECT_NE(json.find("\"step_s\": "), std::string::npos);
  EXPECT_NE(json.find("\"optimizer_s\": 0, "), std::string::npos);
  EXPECT_NE(json.find("\"boundaries\": "), std::string::npos);
  EXPECT_NE(json.find("\"command\": \"chorusrun -n 2 chorus-train --model gpt"), std::string::npos);
  const std::string why = explain(result.feasible[0], result.feasible[1]);
  EXPECT_EQ(why.rfind("best:      " + result.feasible[0].layout.describe(), 0), 0) << why;
  EXPECT_NE(why.find("memory per rank: "), std::string::npos) << why;
  Prediction twin = result.feasible[0];
  twin.memory.activations += 1;
  EXPECT_NE(explain(result.feasible[0], twin).find("equal step times"), std::string::npos);
  const std::string text = to_text(r, result, 1);
  EXPECT_NE(text.find("more feasible layouts; --top 0 prints every one"), std::string::npos);
}

}  // namespace
}  // namespace chorus::plan
