// The cost model and the model-driven selection: tiny messages go to the
// latency-optimal algorithms, large ones to the bandwidth-optimal ones,
// shm_direct wins whenever it is accepted, hierarchical across hosts; the
// tuning file round-trips with its measured/assumed marks and logs what it set; the INFO
// explanation of a choice names every candidate's modelled time; CHORUS_ALGO beats the model.
#include "algorithms/cost_model.hpp"
#include "algorithms/selection.hpp"
#include "core/log.hpp"

#include <chorus/error.hpp>

#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace chorus::algorithms {
namespace {

constexpr Collective kWithArena[] = {
    Collective::AllReduce, Collective::Broadcast,     Collective::Reduce,
    Collective::AllGather, Collective::ReduceScatter, Collective::Gather,
    Collective::Scatter,   Collective::AllToAll,      Collective::Barrier};

Call call(Collective collective, std::size_t bytes) {
  Call args;
  args.collective = collective;
  args.count = collective == Collective::Barrier ? 0 : bytes;
  args.dtype = DataType::Uint8;
  return args;
}

std::string chosen(const Call& args, const SelectionContext& context,
                   Needs provided = kNeedsNothing) {
  return std::string(default_selection(args, provided, context).algorithm->name);
}

/// Whether `name` is a two-level form: the leaders' (hierarchical) or the stripes' (striped).
bool two_level(const std::string& name) { return name == "hierarchical" || name == "striped"; }

/// The row's modelled seconds for `bytes` of uint8 on the context's machine.
double cost_of(const Algorithm& algorithm, std::size_t bytes, const SelectionContext& context) {
  return algorithm.cost(CostInput{algorithm.collective, bytes, DataType::Uint8, ReduceOp::Sum,
                                  context.machine, context.parameters});
}

SelectionContext hosts_of(int hosts, int per_host) {
  SelectionContext context;
  context.machine.nranks = hosts * per_host;
  for (int r = 0; r < hosts * per_host; ++r)
    context.machine.topology.host_of_rank.push_back(r / per_host);
  context.machine.topology.num_hosts = hosts;
  // A cluster: links between hosts (tcp) much slower than shm rings within one. (The
  // defaults come from one loaded host, where loopback tcp is nearly as fast as shm.)
  context.parameters.shm = {5e-6, 0.1e-9};
  context.parameters.tcp = {50e-6, 1e-9};
  return context;
}

TEST(CostModel, TinyMessagesTakeTheFewestRounds) {
  for (int n : {5, 6, 7, 8}) {  // (below 5 the ring's n - 1 rounds tie with log2 n)
    auto context = single_host_context(n);
    EXPECT_EQ(chosen(call(Collective::AllReduce, 8), context), "recursive_doubling") << n;
    std::string gather = chosen(call(Collective::AllGather, 8), context);
    EXPECT_TRUE(gather == "bruck" || gather == "recursive_doubling") << n << " " << gather;
    EXPECT_EQ(chosen(call(Collective::AllToAll, 8), context), "bruck") << n;
  }
}

TEST(CostModel, LargeMessagesTakeTheBandwidthOptimalAlgorithms) {
  for (int n : {3, 4, 5, 7, 8}) {
    auto context = single_host_context(n);
    std::string allreduce = chosen(call(Collective::AllReduce, 64 << 20), context);
    EXPECT_TRUE(allreduce == "ring" || allreduce == "rabenseifner") << n << " " << allreduce;
    std::string gather = chosen(call(Collective::AllGather, 16 << 20), context);
    EXPECT_TRUE(gather == "ring" || gather == "recursive_doubling") << n << " " << gather;
    EXPECT_EQ(chosen(call(Collective::AllToAll, 16 << 20), context), "pairwise") << n;
  }
  EXPECT_EQ(chosen(call(Collective::AllReduce, 64 << 20), single_host_context(8)), "rabenseifner");
}

TEST(CostModel, ShmDirectWinsWheneverAccepted) {
  for (int n = 2; n <= 8; ++n) {
    for (Collective collective : kWithArena) {
      for (std::size_t bytes = 1; bytes <= (std::size_t{64} << 20); bytes *= 16) {
        Call args = call(collective, bytes);
        EXPECT_EQ(chosen(args, single_host_context(n), kNeedsArena), "shm_direct")
            << to_string(collective) << " " << bytes << " bytes on " << n;
        EXPECT_NE(chosen(args, single_host_context(n)), "shm_direct");
      }
    }
  }
}

TEST(CostModel, SeveralHostsTakeHierarchicalAllReduce) {
  for (auto [hosts, per_host] : {std::pair{2, 2}, {2, 4}, {3, 2}, {4, 2}}) {
    for (std::size_t bytes = 4; bytes <= 256 * 1024; bytes *= 4) {
      EXPECT_EQ(chosen(call(Collective::AllReduce, bytes), hosts_of(hosts, per_host)),
                "hierarchical")
          << hosts << "x" << per_host << " " << bytes;
    }
  }
  // One host, or one rank per host: nothing to gain from it.
  EXPECT_NE(chosen(call(Collective::AllReduce, 4096), single_host_context(8)), "hierarchical");
  EXPECT_NE(chosen(call(Collective::AllReduce, 4096), hosts_of(8, 1)), "hierarchical");
}

// Across hosts with several ranks each, small and medium calls of every collective take
// the two-level form (each host's traffic crosses the network once); with one rank per host
// or one host it would be a flat algorithm with extra steps, and is never chosen.
TEST(CostModel, SeveralHostsTakeTwoLevelForms) {
  for (Collective c :
       {Collective::Broadcast, Collective::Reduce, Collective::AllGather, Collective::ReduceScatter,
        Collective::Gather, Collective::Scatter, Collective::AllToAll, Collective::Barrier}) {
    const std::string name(to_string(c));
    for (std::size_t bytes : {64u, 1024u}) {
      EXPECT_TRUE(two_level(chosen(call(c, bytes), hosts_of(2, 4)))) << name << " " << bytes;
      EXPECT_FALSE(two_level(chosen(call(c, bytes), hosts_of(8, 1)))) << name << " " << bytes;
      EXPECT_FALSE(two_level(chosen(call(c, bytes), single_host_context(8))))
          << name << " " << bytes;
    }
  }
}

// Recursive doubling spreads every rank's bytes over partners on every host: across hosts the
// P ranks of a host push their share (n - P)/(n - 1) through the host's one link at once.
// At 2 x 4 the all-gather's last step sends 4 blocks per rank, 4 ranks per host: 16 blocks
// per host link, where the model without the sharing saw 7 per rank.
TEST(CostModel, SpreadAlgorithmsShareTheHostLink) {
  auto cluster = hosts_of(2, 4);
  cluster.parameters = {};
  cluster.parameters.tcp = {0, 1e-9};
  const double m = 1 << 20;
  const auto bytes = static_cast<std::size_t>(m);
  EXPECT_DOUBLE_EQ(cost_of(rows::allgather_recursive_doubling, bytes, cluster), 16 * m * 1e-9);
  // The ring (blocks of a host's ranks in rank order) crosses with one rank per host.
  EXPECT_DOUBLE_EQ(cost_of(rows::allgather_ring, bytes, cluster), 7 * m * 1e-9);
  // One rank per host, or one host: every byte on its own link, as before.
  auto spread_out = hosts_of(8, 1);
  spread_out.parameters = cluster.parameters;
  EXPECT_DOUBLE_EQ(cost_of(rows::allgather_recursive_doubling, bytes, spread_out), 7 * m * 1e-9);
  auto one_host = single_host_context(8);
  one_host.machine.local_shm = false;
  one_host.parameters = cluster.parameters;
  EXPECT_DOUBLE_EQ(cost_of(rows::allgather_recursive_doubling, bytes, one_host), 7 * m * 1e-9);
  // A port per rank (tcp.links_per_host 4): nothing shared; 2 ports: 2 ranks on each.
  cluster.parameters.tcp_links = 4;
  EXPECT_DOUBLE_EQ(cost_of(rows::allgather_recursive_doubling, bytes, cluster), 4 * m * 1e-9);
  cluster.parameters.tcp_links = 2;
  EXPECT_DOUBLE_EQ(cost_of(rows::allgather_recursive_doubling, bytes, cluster), 8 * m * 1e-9);
}

// With no tuning file, a job across hosts keeps large calls off the algorithms whose every
// rank crosses hosts at once (measured across two hosts at 2 ranks each: recursive doubling's
// all-gather at 67-76% of the link): the two-level forms or the ring. One rank per host has
// nothing to share.
TEST(CostModel, DefaultsAcrossHostsKeepLargeCallsOffSpreadAlgorithms) {
  for (auto [hosts, per_host] : {std::pair{2, 2}, {2, 3}, {2, 4}, {4, 2}, {3, 2}}) {
    auto context = hosts_of(hosts, per_host);
    context.parameters = CostParameters::defaults();
    // The largest all-reduce of the multihost layout tests, which expect the two-level form.
    EXPECT_EQ(chosen(call(Collective::AllReduce, 199924), context), "hierarchical")
        << hosts << "x" << per_host;
    for (Collective c : {Collective::AllReduce, Collective::AllGather, Collective::ReduceScatter}) {
      for (std::size_t bytes = 64 * 1024; bytes <= (std::size_t{64} << 20); bytes *= 4) {
        const std::string name = chosen(call(c, bytes), context);
        EXPECT_TRUE(two_level(name) || name == "ring")
            << to_string(c) << " " << bytes << " on " << hosts << "x" << per_host << ": " << name;
      }
    }
  }
  auto spread_out = hosts_of(2, 1);
  spread_out.parameters = CostParameters::defaults();
  EXPECT_EQ(chosen(call(Collective::AllReduce, 4 << 20), spread_out), "recursive_doubling");
}

// What `chorus-perf --tune` writes across hosts (shm inside a host, tcp between hosts, here
// about 2 Gbit/s) makes every collective with a two-level form take it from small to large
// calls at 2 and 4 ranks per host, broadcast but its largest (the pipelined ring there).
TEST(CostModel, MeasuredHostLinksTakeTwoLevelForms) {
  for (int per_host : {2, 4}) {
    auto context = hosts_of(2, per_host);
    context.parameters.shm = {5e-6, 0.3e-9};
    context.parameters.tcp = {20e-6, 4e-9};
    for (Collective c : {Collective::AllReduce, Collective::AllGather, Collective::ReduceScatter,
                         Collective::Reduce, Collective::Gather, Collective::Scatter}) {
      for (std::size_t bytes = 2048; bytes <= (std::size_t{64} << 20); bytes *= 16) {
        EXPECT_TRUE(two_level(chosen(call(c, bytes), context)))
            << to_string(c) << " " << bytes << " at " << per_host << " per host";
      }
    }
    EXPECT_EQ(chosen(call(Collective::Broadcast, 1 << 20), context), "hierarchical");
  }
}

// On hosts of equal size the striped all-gather and reduce-scatter beat the leaders' forms
// from 1 MiB per rank: the same bytes cross hosts, but no leader carries its host's share
// inside the host alone. Hosts of different sizes have no stripes.
TEST(CostModel, LargeAllGathersAndReduceScattersRunInStripes) {
  for (auto [hosts, per_host] : {std::pair{2, 2}, {2, 4}, {3, 2}, {2, 3}}) {
    auto context = hosts_of(hosts, per_host);
    context.parameters.shm = {5e-6, 0.3e-9};
    context.parameters.tcp = {20e-6, 4e-9};
    for (Collective c : {Collective::AllGather, Collective::ReduceScatter}) {
      for (std::size_t bytes = 1 << 20; bytes <= (std::size_t{64} << 20); bytes *= 4) {
        EXPECT_EQ(chosen(call(c, bytes), context), "striped")
            << to_string(c) << " " << bytes << " on " << hosts << "x" << per_host;
      }
    }
  }
  SelectionContext uneven;
  uneven.machine.nranks = 5;
  uneven.machine.topology.host_of_rank = {0, 0, 0, 1, 1};
  uneven.machine.topology.num_hosts = 2;
  EXPECT_TRUE(std::isinf(cost_of(rows::allgather_striped, 1 << 20, uneven)));
  EXPECT_TRUE(std::isinf(cost_of(rows::reduce_scatter_striped, 1 << 20, uneven)));
  EXPECT_TRUE(std::isinf(cost_of(rows::reduce_scatter_striped, 1 << 20, hosts_of(4, 1))));
}

// A column's bytes share the host's tcp links with the other P - 1 columns: at 2 x 4 on one
// link each block a column sends across costs 4 tcp betas; with a port per rank, one.
TEST(CostModel, StripesShareTheHostLinkAmongColumns) {
  auto cluster = hosts_of(2, 4);
  cluster.parameters = {};
  cluster.parameters.tcp = {0, 1e-9};
  const double m = 1 << 20;
  const auto bytes = static_cast<std::size_t>(m);
  EXPECT_DOUBLE_EQ(cost_of(rows::allgather_striped, bytes, cluster), 4 * m * 1e-9);
  EXPECT_DOUBLE_EQ(cost_of(rows::reduce_scatter_striped, bytes, cluster), 4 * m * 1e-9);
  cluster.parameters.tcp_links = 4;
  EXPECT_DOUBLE_EQ(cost_of(rows::allgather_striped, bytes, cluster), m * 1e-9);
  EXPECT_DOUBLE_EQ(cost_of(rows::reduce_scatter_striped, bytes, cluster), m * 1e-9);
}

// The two-level all-to-all gains only rounds: its bundles carry what the pairwise exchange
// sends across hosts, plus two copies through each leader, so large blocks stay flat. (Why
// all-to-all-v has no two-level form: its selection sees no size, docs/architecture.md.)
TEST(CostModel, TwoLevelAllToAllWinsOnlyOnLatency) {
  for (int per_host : {2, 4}) {
    auto context = hosts_of(2, per_host);
    EXPECT_EQ(chosen(call(Collective::AllToAll, 64), context), "hierarchical") << per_host;
    EXPECT_EQ(chosen(call(Collective::AllToAll, 1 << 20), context), "pairwise") << per_host;
  }
}

// Under CHORUS_TRANSPORT=tcp on one host every forwarded byte costs the shared cores, so
// large blocks go straight to (from) the root; between hosts they do not: the tree keeps
// its rounds, or the two-level form sends each host's blocks across once.
TEST(CostModel, LoopbackTcpGatherAndScatterSkipTheTree) {
  for (int n : {4, 8}) {
    auto tcp = single_host_context(n);
    tcp.machine.local_shm = false;
    for (Collective collective : {Collective::Gather, Collective::Scatter}) {
      const std::string name(to_string(collective));
      EXPECT_EQ(chosen(call(collective, 1u << 18), tcp), "linear") << name << " " << n;
      EXPECT_EQ(chosen(call(collective, 1u << 22), tcp), "linear") << name << " " << n;
      EXPECT_EQ(chosen(call(collective, 64), tcp), "binomial") << name << " " << n;
      auto two_hosts = hosts_of(2, n / 2);
      two_hosts.parameters = tcp.parameters;
      EXPECT_NE(chosen(call(collective, 1u << 18), two_hosts), "linear") << name << " " << n;
    }
  }
}

// Half-type reductions carry their partial results in fp32: the algorithms that pass
// partials along (ring, recursive halving, trees) pay twice their bytes, so large fp16/bf16
// calls go to the ones that send only unreduced blocks; fp32 keeps its choices.
TEST(CostModel, HalfTypesAvoidSendingPartialResults) {
  for (int n : {3, 4, 8}) {
    auto tcp = single_host_context(n);
    tcp.machine.local_shm = false;
    for (std::size_t bytes : {std::size_t{4} << 20, std::size_t{64} << 20}) {
      Call halves = call(Collective::AllReduce, bytes / 2);
      halves.dtype = DataType::Float16;
      Call floats = call(Collective::AllReduce, bytes / 4);
      floats.dtype = DataType::Float32;
      EXPECT_EQ(chosen(halves, tcp), "pairwise") << n << " ranks, " << bytes;
      EXPECT_NE(chosen(floats, tcp), "pairwise") << n << " ranks, " << bytes;
      halves.collective = floats.collective = Collective::ReduceScatter;
      halves.count /= static_cast<std::size_t>(n);
      floats.count /= static_cast<std::size_t>(n);
      EXPECT_EQ(chosen(halves, tcp), "pairwise") << n << " ranks, " << bytes;
      EXPECT_NE(chosen(floats, tcp), "pairwise") << n << " ranks, " << bytes;
      // Max keeps its partial results in the half type: the choice of fp32 at equal bytes.
      halves.op = ReduceOp::Max;
      EXPECT_EQ(chosen(halves, tcp), chosen(floats, tcp)) << n << " ranks, " << bytes;
    }
  }
  // The ring's partials cost twice in fp16 and the same in fp32; pairwise the same in both.
  auto tcp = single_host_context(4);
  tcp.machine.local_shm = false;
  auto modelled = [&](const Algorithm& algorithm, DataType dtype) {
    return algorithm.cost(CostInput{Collective::AllReduce, 1 << 24, dtype, ReduceOp::Sum,
                                    tcp.machine, tcp.parameters});
  };
  EXPECT_GT(modelled(rows::allreduce_ring, DataType::Bfloat16),
            modelled(rows::allreduce_ring, DataType::Float32));
  EXPECT_EQ(modelled(rows::allreduce_pairwise, DataType::Bfloat16),
            modelled(rows::allreduce_pairwise, DataType::Float32));
  EXPECT_EQ(modelled(rows::allreduce_ring, DataType::Float32),
            modelled(rows::allreduce_pairwise, DataType::Float32));
}

// Large reduces between hosts scatter, reduce and gather the blocks instead of sending the
// whole buffer up a tree; TCP on one host, where every rank's bytes cost the shared cores,
// keeps the tree.
TEST(CostModel, LargeReducesBetweenHostsScatterAndGather) {
  EXPECT_EQ(chosen(call(Collective::Reduce, 16 << 20), hosts_of(4, 1)), "scatter_gather");
  EXPECT_EQ(chosen(call(Collective::Reduce, 16 << 20), hosts_of(8, 1)), "scatter_gather");
  EXPECT_NE(chosen(call(Collective::Reduce, 64), hosts_of(4, 1)), "scatter_gather");
  auto tcp = single_host_context(4);
  tcp.machine.local_shm = false;
  EXPECT_NE(chosen(call(Collective::Reduce, 16 << 20), tcp), "scatter_gather");
}

TEST(CostModel, TcpEverywhereCostsMoreThanShmRings) {
  auto shm = single_host_context(4);
  auto tcp = shm;
  tcp.machine.local_shm = false;
  for (std::size_t bytes : {8u, 65536u, 1u << 24}) {
    EXPECT_LT(cost_of(rows::allreduce_ring, bytes, shm), cost_of(rows::allreduce_ring, bytes, tcp));
  }
}

TEST(CostModel, PipelineChunkGrowsWithTheMessage) {
  auto context = single_host_context(4);
  auto chunk = [&](std::size_t bytes) {
    return rows::broadcast_ring.chunk(CostInput{Collective::Broadcast, bytes, DataType::Uint8,
                                                ReduceOp::Sum, context.machine,
                                                context.parameters});
  };
  const std::size_t small = chunk(1 << 16);
  const std::size_t large = chunk(1 << 26);
  EXPECT_GE(small, 4096u);
  EXPECT_GT(large, small);
  EXPECT_EQ(rows::broadcast_binomial.chunk, nullptr);
  Call args = call(Collective::Broadcast, 1 << 26);
  auto choice = select(args, kNeedsNothing, context, parse_algorithm_override("broadcast=ring"));
  EXPECT_EQ(choice.chunk_bytes, large);
}

TEST(TuningFile, RoundTripsAndRejectsGarbage) {
  Tuning tuned;
  tuned.parameters.shm = {1.5e-6, 0.125e-9};
  tuned.parameters.tcp = {25e-6, 0.75e-9};
  tuned.parameters.arena = {0.5e-6, 0.0625e-9};
  tuned.parameters.gamma = 0.3e-9;
  tuned.parameters.tcp_links = 8;
  std::stringstream file;
  write_tuning(file, tuned);
  CostParameters back = read_tuning(file, "test").parameters;
  EXPECT_EQ(back.tcp_links, 8);
  EXPECT_NEAR(back.shm.alpha, tuned.parameters.shm.alpha, 1e-18);
  EXPECT_NEAR(back.tcp.beta, tuned.parameters.tcp.beta, 1e-21);
  EXPECT_NEAR(back.arena.beta, tuned.parameters.arena.beta, 1e-21);
  EXPECT_NEAR(back.gamma, tuned.parameters.gamma, 1e-21);

  std::stringstream partial("# only one\n  tcp.alpha_us 99  # comment\n\n");
  Tuning some = read_tuning(partial, "partial");
  EXPECT_DOUBLE_EQ(some.parameters.tcp.alpha, 99e-6);
  EXPECT_EQ(some.parameters.shm, CostParameters::defaults().shm);
  EXPECT_EQ(some.mark(TuningKey::TcpAlpha), TuningMark::Unmarked);
  EXPECT_EQ(some.mark(TuningKey::ShmAlpha), TuningMark::Default);

  for (const char* bad :
       {"shm.alpha 3\n", "tcp.alpha_us\n", "tcp.alpha_us x\n", "tcp.alpha_us 3 4\n",
        "gamma_ns_per_byte -1\n", "tcp.links_per_host 0.5\n"}) {
    std::stringstream in(bad);
    EXPECT_THROW(read_tuning(in, "bad"), Error) << bad;
  }
  EXPECT_THROW(load_tuning_file("/nonexistent/chorus-tuning"), Error);
  EXPECT_EQ(load_tuning_file(""), CostParameters::defaults());
}

// Every written value says whether it was measured; reading the file back gives the marks.
TEST(TuningFile, MarksWhatWasMeasuredAndWhatWasAssumed) {
  Tuning tuned;
  tuned.parameters.shm = {2.5e-6, 0.5e-9};
  tuned.mark(TuningKey::ShmAlpha) = tuned.mark(TuningKey::ShmBeta) = TuningMark::Measured;
  tuned.mark(TuningKey::Gamma) = TuningMark::Measured;
  tuned.mark(TuningKey::ArenaAlpha) = TuningMark::Unmarked;  // kept from an older file
  std::stringstream file;
  write_tuning(file, tuned);
  const std::string text = file.str();
  EXPECT_NE(text.find("shm.alpha_us 2.5  # measured\n"), std::string::npos) << text;
  EXPECT_NE(text.find("tcp.alpha_us 160  # assumed (the built-in default, not measured here)\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("arena.alpha_us 38  # assumed (kept from a file that did not say"),
            std::string::npos)
      << text;
  Tuning back = read_tuning(file, "marked");
  for (int k = 0; k < kNumTuningKeys; ++k) {
    const auto key = static_cast<TuningKey>(k);
    const TuningMark expected =
        tuned.mark(key) == TuningMark::Measured ? TuningMark::Measured : TuningMark::Assumed;
    EXPECT_EQ(back.mark(key), expected) << to_string(key);
  }
  EXPECT_NEAR(back.parameters.shm.alpha, 2.5e-6, 1e-18);
  EXPECT_NEAR(back.parameters.tcp.alpha, 160e-6, 1e-18);

  // A file written before the marks reads as before, every line unmarked.
  std::stringstream old(
      "# chorus cost-model tuning (chorus-perf --tune); read via CHORUS_TUNING_FILE\n"
      "shm.alpha_us 3\ntcp.alpha_us 160\ngamma_ns_per_byte 0.5\n");
  Tuning read_old = read_tuning(old, "old");
  EXPECT_DOUBLE_EQ(read_old.parameters.shm.alpha, 3e-6);
  EXPECT_DOUBLE_EQ(read_old.parameters.gamma, 0.5e-9);
  EXPECT_EQ(read_old.mark(TuningKey::TcpAlpha), TuningMark::Unmarked);
  EXPECT_EQ(read_old.mark(TuningKey::ArenaBeta), TuningMark::Default);
}

// The first read of a file logs, at INFO, what it set and each value's mark; later reads do not.
TEST(TuningFile, LoadingLogsWhatTheFileSetOnce) {
  char path[] = "/tmp/chorus-tuning-test-XXXXXX";
  const int fd = ::mkstemp(path);
  ASSERT_GE(fd, 0);
  ::close(fd);
  {
    std::ofstream out(path);
    out << "shm.alpha_us 7  # measured\ntcp.alpha_us 90  # assumed\ngamma_ns_per_byte 0.25\n";
  }
  set_log_level(LogLevel::Info);
  ::testing::internal::CaptureStderr();
  CostParameters first = load_tuning_file(path);
  CostParameters second = load_tuning_file(path);
  const std::string log = ::testing::internal::GetCapturedStderr();
  set_log_level(LogLevel::Warn);
  std::remove(path);
  EXPECT_EQ(first, second);
  EXPECT_DOUBLE_EQ(first.shm.alpha, 7e-6);
  const std::string line = std::string("CHORUS_TUNING_FILE ") + path +
                           " read: shm.alpha_us 7 (measured), tcp.alpha_us 90 (assumed), "
                           "gamma_ns_per_byte 0.25 (unmarked); built-in defaults for "
                           "shm.beta_ns_per_byte, tcp.beta_ns_per_byte, arena.alpha_us, "
                           "arena.beta_ns_per_byte, tcp.links_per_host\n";
  EXPECT_NE(log.find("INFO " + line), std::string::npos) << log;
  EXPECT_EQ(log.find(line), log.rfind(line)) << "logged twice: " << log;
}

// The INFO explanation of a choice: the override, every candidate's modelled time (fastest
// first, so the model's choice leads) and the algorithms that declined.
TEST(Explanation, NamesTheCandidatesWithTheirModelledTimes) {
  SelectionContext context = single_host_context(6);
  Call tiny = call(Collective::AllReduce, 8);
  const std::string text = explain_selection(tiny, kNeedsNothing, context, {});
  std::vector<Selection> accepted;
  for (const Algorithm* algorithm : all_algorithms()) {
    if (algorithm->collective != Collective::AllReduce) continue;
    if (algorithm_accepts(*algorithm, tiny, 6, kNeedsNothing)) {
      accepted.push_back(evaluate(*algorithm, tiny, context));
      continue;
    }
    const std::size_t declined = text.find("; declined by ");
    ASSERT_NE(declined, std::string::npos) << text;
    EXPECT_NE(text.find(std::string(algorithm->name), declined), std::string::npos) << text;
  }
  std::stable_sort(accepted.begin(), accepted.end(), [](const Selection& a, const Selection& b) {
    return a.modelled_seconds < b.modelled_seconds;
  });
  ASSERT_GE(accepted.size(), 2u);
  EXPECT_EQ(accepted[0].algorithm->name, chosen(tiny, context));
  std::size_t at = 0;
  for (const Selection& s : accepted) {  // in that order, each with its time
    char expected[64];
    if (!std::isfinite(s.modelled_seconds)) {
      std::snprintf(expected, sizeof expected, "%s infinite", s.algorithm->name.data());
    } else if (s.modelled_seconds < 1e-3) {
      std::snprintf(expected, sizeof expected, "%s %.3g us", s.algorithm->name.data(),
                    s.modelled_seconds * 1e6);
    } else {
      std::snprintf(expected, sizeof expected, "%s %.3g ms", s.algorithm->name.data(),
                    s.modelled_seconds * 1e3);
    }
    const std::size_t found = text.find(expected, at);
    EXPECT_NE(found, std::string::npos) << expected << " after " << at << " in " << text;
    at = found == std::string::npos ? at : found;
  }
  EXPECT_EQ(text.rfind("modelled: " + chosen(tiny, context) + " ", 0), 0u) << text;
  const std::string forced =
      explain_selection(tiny, kNeedsNothing, context, parse_algorithm_override("ring"));
  EXPECT_EQ(forced, "CHORUS_ALGO asks for ring; " + text);
}

TEST(TuningFile, ChangesTheChoice) {
  // With a free network and costly reductions, the ring beats recursive doubling even when tiny.
  SelectionContext context = single_host_context(8);
  context.parameters.shm = {0, 1e-9};
  context.parameters.gamma = 1e-6;
  EXPECT_EQ(chosen(call(Collective::AllReduce, 8), context), "ring");
}

TEST(OverridePrecedence, NamedAlgorithmBeatsTheModelUnlessItDeclines) {
  SelectionContext context = single_host_context(6);
  Call tiny = call(Collective::AllReduce, 8);
  auto selected = [&](const Call& args, Needs provided, std::string_view spec) {
    return std::string(
        select(args, provided, context, parse_algorithm_override(spec)).algorithm->name);
  };
  EXPECT_EQ(selected(tiny, kNeedsNothing, "ring"), "ring");
  EXPECT_EQ(selected(tiny, kNeedsNothing, "allreduce=hierarchical,ring"), "hierarchical");
  Call gather = call(Collective::AllGather, 8);
  // recursive_doubling declines 6 ranks: the model's choice stands.
  EXPECT_EQ(selected(gather, kNeedsNothing, "allgather=recursive_doubling"),
            chosen(gather, context));
  // shm_direct needs an arena: asked for without one, the model's choice stands.
  EXPECT_EQ(selected(tiny, kNeedsNothing, "allreduce=shm_direct"), chosen(tiny, context));
  EXPECT_EQ(selected(call(Collective::AllReduce, 1 << 20), kNeedsArena, "allreduce=ring"), "ring");
}

}  // namespace
}  // namespace chorus::algorithms
