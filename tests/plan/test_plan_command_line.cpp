// The command line chorus-plan prints is accepted by chorus-train's own parser where that
// parser knows the options; the others are named in docs/planner.md (MoE, ZeRO with the GPT,
// ZeRO-3, more than 64 layers).
#include "options.hpp"
#include "plan/planner.hpp"

#include <chorus/error.hpp>

#include <gtest/gtest.h>

#include <sstream>
#include <vector>

namespace chorus::plan {
namespace {

/// The words after "chorus-train".
std::vector<std::string> train_arguments(const std::string& line) {
  std::istringstream words(line);
  std::vector<std::string> out = {"chorus-train"};
  std::string word;
  bool after = false;
  while (words >> word) {
    if (after) out.push_back(word);
    after = after || word == "chorus-train";
  }
  return out;
}

train_tool::Options parse(const std::vector<std::string>& words) {
  std::vector<const char*> argv;
  for (const std::string& w : words) argv.push_back(w.c_str());
  return train_tool::parse_options(static_cast<int>(argv.size()), argv.data());
}

TEST(PlanCommandLine, AcceptedByChorusTrain) {
  PlanRequest r;
  r.model.layers = 4, r.model.hidden = 32, r.model.heads = 4, r.model.seq = 16;
  r.global_batch = 16, r.ranks_per_host = 8;
  r.machine.peak_flops = 1e9;
  const std::vector<Layout> layouts = candidate_layouts(r, nullptr);
  int accepted = 0;
  for (const Layout& l : layouts) {
    const std::string line = command_line(r, l);
    ASSERT_EQ(line.rfind("chorusrun -n 8 chorus-train --model gpt", 0), 0) << line;
    if (l.zero > 0) continue;  // --zero with --model gpt: not accepted yet (docs/planner.md)
    const train_tool::Options o = parse(train_arguments(line));
    EXPECT_EQ(o.tp, l.tp) << line;
    EXPECT_EQ(o.pp, l.pp) << line;
    EXPECT_EQ(o.cp, l.cp) << line;
    EXPECT_EQ(o.sequence_parallel, l.sequence_parallel) << line;
    EXPECT_EQ(o.micro_batches, l.micro_batches) << line;
    EXPECT_EQ(o.batch, l.micro_batch * l.micro_batches) << line;
    EXPECT_EQ(o.layers, 4) << line;
    EXPECT_EQ(o.heads, 4) << line;
    EXPECT_EQ(o.seq_len, 16) << line;
    EXPECT_EQ(static_cast<int>(o.recompute), static_cast<int>(l.recompute)) << line;
    if (l.pp > 1) {
      EXPECT_EQ(o.schedule, to_string(l.schedule)) << line;
      EXPECT_EQ(o.virtual_stages, l.virtual_stages) << line;
    }
    ++accepted;
  }
  EXPECT_GT(accepted, 100);
}

TEST(PlanCommandLine, OptionsChorusTrainDoesNotKnowYetAreTheListedOnes) {
  PlanRequest r;
  r.model.layers = 4, r.model.hidden = 32, r.model.heads = 4, r.model.seq = 16;
  r.model.experts = 4;
  r.global_batch = 16, r.ranks_per_host = 4;
  for (const Layout& l : candidate_layouts(r, nullptr)) {
    const std::string line = command_line(r, l);
    try {
      parse(train_arguments(line));
    } catch (const Error& error) {
      const std::string what = error.what();
      // --moe-group-tokens: an MoE layout with --cp, whose routing groups (a sample's whole
      // sequence when the line does not say) would span the cp ranks.
      EXPECT_TRUE(what.find("--moe-experts") != std::string::npos ||
                  what.find("--moe-top-k") != std::string::npos ||
                  what.find("--moe-group-tokens") != std::string::npos ||
                  what.find("--ep") != std::string::npos ||
                  what.find("--zero") != std::string::npos)
          << what;
    }
  }
}

}  // namespace
}  // namespace chorus::plan
