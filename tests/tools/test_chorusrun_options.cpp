// chorusrun's command-line parser as a pure function.
#include <gtest/gtest.h>

#include <chorus/error.hpp>

#include "options.hpp"

namespace chorus::run {
namespace {

Options parse(std::vector<const char*> args) {
  args.insert(args.begin(), "chorusrun");
  return parse_options(static_cast<int>(args.size()), args.data());
}

TEST(ChorusrunOptions, Spellings) {
  EXPECT_EQ(parse({"-n", "4", "p"}).nproc_per_node, 4);
  EXPECT_EQ(parse({"-n4", "p"}).nproc_per_node, 4);
  EXPECT_EQ(parse({"-np", "5", "p"}).nproc_per_node, 5);
  EXPECT_EQ(parse({"--nproc-per-node=6", "p"}).nproc_per_node, 6);
  EXPECT_EQ(parse({"--nproc-per-node", "7", "p"}).nproc_per_node, 7);
  Options o = parse({"--nnodes", "2", "--node-rank=1", "--master-addr", "h", "--master-port", "9",
                     "--tag-output", "--timeout", "1.5", "p", "-n", "3"});
  EXPECT_EQ(o.nnodes, 2);
  EXPECT_EQ(o.node_rank, 1);
  EXPECT_EQ(o.master_addr, "h");
  EXPECT_EQ(o.master_port, 9);
  EXPECT_TRUE(o.tag_output);
  EXPECT_DOUBLE_EQ(o.timeout_seconds, 1.5);
  EXPECT_FALSE(o.bind_to_core);
  EXPECT_TRUE(parse({"--bind-to", "core", "p"}).bind_to_core);
  EXPECT_FALSE(parse({"--bind-to=none", "p"}).bind_to_core);
  EXPECT_EQ(o.max_restarts, 0);
  EXPECT_EQ(parse({"--max-restarts", "3", "p"}).max_restarts, 3);
  EXPECT_EQ(parse({"--max_restarts=2", "p"}).max_restarts, 2);
  EXPECT_EQ(o.command, (std::vector<std::string>{"p", "-n", "3"}));  // options end at the program
}

// torchrun 1.13's spellings, '_' and '-' alike, are aliases of chorusrun's own options.
TEST(ChorusrunOptions, TorchrunSpellings) {
  EXPECT_EQ(parse({"--nproc_per_node", "3", "p"}).nproc_per_node, 3);
  EXPECT_EQ(parse({"--nproc_per_node=4", "p"}).nproc_per_node, 4);
  EXPECT_EQ(parse({"--nproc-per-node", "5", "p"}).nproc_per_node, 5);
  Options o = parse({"--nnodes=2", "--node_rank", "1", "--master_addr=my_host", "--master_port",
                     "9", "--store_port=11", "p", "--keep_me"});
  EXPECT_EQ(o.nnodes, 2);
  EXPECT_EQ(o.node_rank, 1);
  EXPECT_EQ(o.master_addr, "my_host");  // values keep their '_'
  EXPECT_EQ(o.master_port, 9);
  EXPECT_EQ(o.store_port, 11);
  EXPECT_EQ(o.command, (std::vector<std::string>{"p", "--keep_me"}));
  EXPECT_EQ(parse({"--node-rank=1", "--nnodes", "3", "--master-addr", "h", "--master-port=8", "p"})
                .node_rank,
            1);
  EXPECT_TRUE(parse({"--tag_output", "p"}).tag_output);
  EXPECT_TRUE(parse({"--bind_to=core", "p"}).bind_to_core);
}

TEST(ChorusrunOptions, StorePortIsApartFromMasterPort) {
  EXPECT_EQ(store_port_of(parse({"p"})), 0);  // one node: node 0 picks a free one
  EXPECT_EQ(store_port_of(parse({"--master-port", "7", "p"})), 0);
  EXPECT_EQ(store_port_of(parse({"--store-port", "12", "p"})), 12);
  EXPECT_EQ(
      store_port_of(parse({"--nnodes", "2", "--master-addr", "h", "--master-port", "7", "p"})), 8);
  EXPECT_EQ(store_port_of(parse({"--nnodes", "2", "--master-addr", "h", "--master-port", "7",
                                 "--store-port", "5", "p"})),
            5);
}

TEST(ChorusrunOptions, VersionNeedsNoProgram) {
  EXPECT_TRUE(parse({"--version"}).version);
  EXPECT_FALSE(parse({"p"}).version);
}

TEST(ChorusrunOptions, MessagesNameTheOptionAsWritten) {
  try {
    parse({"--master_port=x", "p"});
    FAIL() << "accepted --master_port=x";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("--master_port needs an integer"), std::string::npos)
        << error.what();
  }
}

TEST(ChorusrunOptions, DoubleDashEndsOptions) {
  EXPECT_EQ(parse({"--", "-weird"}).command, (std::vector<std::string>{"-weird"}));
}

TEST(ChorusrunOptions, HelpNeedsNoProgram) { EXPECT_TRUE(parse({"-h"}).help); }

TEST(ChorusrunOptions, Rejections) {
  const std::vector<std::vector<const char*>> bad = {
      {},
      {"-n", "0", "p"},
      {"-n", "-1", "p"},
      {"-n", "3x", "p"},
      {"-n", "99999999999", "p"},
      {"--timeout", "0", "p"},
      {"--timeout", "nan", "p"},
      {"--master-port", "70000", "p"},
      {"--nnodes", "2", "--node-rank", "2", "--master-addr", "h", "--master-port", "1", "p"},
      {"--nnodes", "2", "p"},
      {"--bogus", "p"},
      {"--bind-to", "socket", "p"},
      {"--bind-to", "", "p"},
      {"--timeout"},
      {"--nproc_per_node", "0", "p"},
      {"--master_port", "x", "p"},
      {"--store-port", "9", "--master-port", "9", "p"},
      {"--nnodes", "2", "--master-addr", "h", "--master-port", "65535", "p"},
      {"--nnodes", "2", "--master-addr", "h", "--master-port", "9", "--store-port", "9", "p"},
      {"--store-port", "65536", "p"},
      {"--nproc_per_nodes", "2", "p"},
      {"--max-restarts", "-1", "p"},
      {"--max-restarts", "1001", "p"},
      {"--max-restarts", "x", "p"},
  };
  for (const auto& args : bad) {
    EXPECT_THROW(parse(args), Error) << testing::PrintToString(args);
  }
}

}  // namespace
}  // namespace chorus::run
