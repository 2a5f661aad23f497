// read_launch_env for every launcher, with a fake environment, and each malformed case.
#include "bootstrap/launch_env.hpp"

#include <chorus/error.hpp>

#include <gtest/gtest.h>

#include <map>
#include <string>

namespace chorus {
namespace {

using Env = std::map<std::string, std::string>;

LaunchInfo read(const Env& env) {
  return read_launch_env([&env](const char* name) -> const char* {
    auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  });
}

/// Expects InvalidArgument whose sentence contains `needle`.
void expect_rejected(const Env& env, const std::string& needle) {
  try {
    LaunchInfo info = read(env);
    ADD_FAILURE() << "accepted, rank " << info.rank << " of " << info.world_size;
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), Status::InvalidArgument);
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos)
        << "'" << e.what() << "' does not mention " << needle;
  }
}

TEST(LaunchEnv, Torchrun) {
  LaunchInfo info = read({{"RANK", "3"},
                          {"WORLD_SIZE", "8"},
                          {"LOCAL_RANK", "1"},
                          {"MASTER_ADDR", "node0"},
                          {"MASTER_PORT", "1234"}});
  EXPECT_EQ(info.rank, 3);
  EXPECT_EQ(info.world_size, 8);
  EXPECT_EQ(info.local_rank, 1);
  EXPECT_EQ(info.master_addr, "node0");
  EXPECT_EQ(info.master_port, 1234);
  EXPECT_EQ(info.source, "torchrun");
}

TEST(LaunchEnv, RestartCount) {
  EXPECT_EQ(read({{"RANK", "0"}, {"WORLD_SIZE", "1"}}).restart, 0);
  EXPECT_EQ(read({{"RANK", "0"}, {"WORLD_SIZE", "1"}, {"CHORUS_RESTART_COUNT", "3"}}).restart, 3);
  expect_rejected({{"RANK", "0"}, {"WORLD_SIZE", "1"}, {"CHORUS_RESTART_COUNT", "-1"}},
                  "CHORUS_RESTART_COUNT must be between 0 and 1000000, got -1");
  expect_rejected({{"RANK", "0"}, {"WORLD_SIZE", "1"}, {"CHORUS_RESTART_COUNT", "x"}},
                  "CHORUS_RESTART_COUNT must be an integer");
}

TEST(LaunchEnv, TorchrunDefaults) {
  LaunchInfo info = read({{"RANK", "0"}, {"WORLD_SIZE", "1"}});
  EXPECT_EQ(info.local_rank, 0);
  EXPECT_EQ(info.master_addr, "127.0.0.1");
  EXPECT_EQ(info.master_port, 29500);
  info = read({{"RANK", "1"}, {"WORLD_SIZE", "4"}, {"LOCAL_WORLD_SIZE", "4"}});
  EXPECT_EQ(info.master_addr, "127.0.0.1");
  expect_rejected({{"RANK", "1"}, {"WORLD_SIZE", "4"}}, "MASTER_ADDR");
  expect_rejected({{"RANK", "1"}, {"WORLD_SIZE", "4"}, {"LOCAL_WORLD_SIZE", "2"}}, "MASTER_ADDR");
}

// Without MASTER_ADDR, the sentence says which hint is missing and what Chorus assumed,
// rather than claiming that the ranks span several hosts.
TEST(LaunchEnv, MissingMasterAddrSaysWhatIsMissing) {
  expect_rejected({{"RANK", "1"}, {"WORLD_SIZE", "4"}},
                  "MASTER_ADDR is not set and LOCAL_WORLD_SIZE is not set, so Chorus assumed "
                  "that the WORLD_SIZE=4 ranks may span several hosts (LOCAL_WORLD_SIZE=4 says "
                  "they all run on this one) (torchrun variables): set MASTER_ADDR to the host "
                  "of rank 0");
  expect_rejected({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "6"}},
                  "SLURM_NNODES is not set, so Chorus assumed that the SLURM_NTASKS=6 ranks may "
                  "span several hosts (SLURM_NNODES=1 says they all run on this one)");
  expect_rejected({{"RANK", "1"}, {"WORLD_SIZE", "4"}, {"LOCAL_WORLD_SIZE", "2"}},
                  "MASTER_ADDR is not set and LOCAL_WORLD_SIZE=2 of the WORLD_SIZE=4 ranks run "
                  "on this host");
  expect_rejected({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "6"}, {"SLURM_NNODES", "3"}},
                  "MASTER_ADDR is not set and SLURM_NNODES=3 hosts run the SLURM_NTASKS=6 ranks");
}

TEST(LaunchEnv, TorchrunWinsOverOtherLaunchers) {
  LaunchInfo info = read({{"RANK", "2"},
                          {"WORLD_SIZE", "4"},
                          {"MASTER_ADDR", "a"},
                          {"SLURM_PROCID", "0"},
                          {"SLURM_NTASKS", "1"}});
  EXPECT_EQ(info.source, "torchrun");
  EXPECT_EQ(info.rank, 2);
}

// chorusrun's store is on a port of its own; MASTER_* stay the program's (torch's env://).
TEST(LaunchEnv, ChorusStoreVariablesComeFirst) {
  const Env chorusrun = {{"RANK", "1"},
                         {"WORLD_SIZE", "2"},
                         {"MASTER_ADDR", "node0"},
                         {"MASTER_PORT", "1234"},
                         {"CHORUS_STORE_ADDR", "store-host"},
                         {"CHORUS_STORE_PORT", "4321"}};
  LaunchInfo info = read(chorusrun);
  EXPECT_EQ(info.master_addr, "store-host");
  EXPECT_EQ(info.master_port, 4321);
  info = read({{"SLURM_PROCID", "0"},
               {"SLURM_NTASKS", "2"},
               {"SLURM_NNODES", "1"},
               {"CHORUS_STORE_PORT", "99"}});
  EXPECT_EQ(info.master_addr, "127.0.0.1");  // one node: the port alone is enough
  EXPECT_EQ(info.master_port, 99);
  info = read({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"CHORUS_STORE_ADDR", "s"}});
  EXPECT_EQ(info.master_addr, "s");  // needs no MASTER_ADDR
  EXPECT_EQ(info.master_port, 29500);
  Env bad = chorusrun;
  bad["CHORUS_STORE_PORT"] = "0";
  expect_rejected(bad, "CHORUS_STORE_PORT must be between 1 and 65535, got 0");
  bad["CHORUS_STORE_PORT"] = "p";
  expect_rejected(bad, "CHORUS_STORE_PORT must be an integer, got 'p'");
}

TEST(LaunchEnv, Slurm) {
  LaunchInfo info = read({{"SLURM_PROCID", "5"},
                          {"SLURM_NTASKS", "6"},
                          {"SLURM_LOCALID", "2"},
                          {"SLURM_NNODES", "1"}});
  EXPECT_EQ(info.source, "slurm");
  EXPECT_EQ(info.rank, 5);
  EXPECT_EQ(info.world_size, 6);
  EXPECT_EQ(info.local_rank, 2);
  EXPECT_EQ(info.master_addr, "127.0.0.1");
  EXPECT_EQ(info.master_port, 29500);
  info = read({{"SLURM_PROCID", "0"},
               {"SLURM_NTASKS", "6"},
               {"SLURM_NNODES", "3"},
               {"MASTER_ADDR", "head"},
               {"MASTER_PORT", "4000"}});
  EXPECT_EQ(info.master_addr, "head");
  EXPECT_EQ(info.master_port, 4000);
  expect_rejected({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "6"}, {"SLURM_NNODES", "3"}},
                  "set MASTER_ADDR");
  expect_rejected({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "6"}}, "set MASTER_ADDR");
}

TEST(LaunchEnv, OpenMpi) {
  LaunchInfo info = read({{"OMPI_COMM_WORLD_RANK", "1"},
                          {"OMPI_COMM_WORLD_SIZE", "2"},
                          {"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
                          {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"}});
  EXPECT_EQ(info.source, "openmpi");
  EXPECT_EQ(info.rank, 1);
  EXPECT_EQ(info.world_size, 2);
  EXPECT_EQ(info.local_rank, 1);
  EXPECT_EQ(info.master_addr, "127.0.0.1");
  expect_rejected({{"OMPI_COMM_WORLD_RANK", "1"},
                   {"OMPI_COMM_WORLD_SIZE", "4"},
                   {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"}},
                  "MASTER_ADDR");
}

TEST(LaunchEnv, Pmi) {
  LaunchInfo info = read({{"PMI_RANK", "3"}, {"PMI_SIZE", "4"}, {"MPI_LOCALRANKID", "3"}});
  EXPECT_EQ(info.source, "pmi");
  EXPECT_EQ(info.rank, 3);
  EXPECT_EQ(info.world_size, 4);
  EXPECT_EQ(info.local_rank, 3);
  EXPECT_EQ(info.master_addr, "127.0.0.1");  // no hint: assumed local
  info = read({{"PMI_RANK", "0"}, {"PMI_SIZE", "4"}});
  EXPECT_EQ(info.local_rank, 0);
  expect_rejected({{"PMI_RANK", "0"}, {"PMI_SIZE", "4"}, {"MPI_LOCALNRANKS", "2"}}, "MASTER_ADDR");
}

TEST(LaunchEnv, MalformedValuesNameTheVariable) {
  const Env base = {{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "h"}};
  auto with = [&base](const std::string& name, const std::string& value) {
    Env env = base;
    env[name] = value;
    return env;
  };
  expect_rejected(with("RANK", "x"), "RANK must be an integer, got 'x'");
  expect_rejected(with("RANK", "1x"), "RANK");
  expect_rejected(with("RANK", " 1"), "RANK");
  expect_rejected(with("RANK", "2"), "RANK=2");
  expect_rejected(with("RANK", "-1"), "RANK=-1");
  expect_rejected(with("WORLD_SIZE", "0"), "WORLD_SIZE");
  expect_rejected(with("WORLD_SIZE", "99999999999999999999"), "WORLD_SIZE");
  expect_rejected(with("LOCAL_RANK", "-3"), "LOCAL_RANK");
  expect_rejected(with("LOCAL_RANK", "one"), "LOCAL_RANK");
  expect_rejected(with("MASTER_PORT", "0"), "MASTER_PORT");
  expect_rejected(with("MASTER_PORT", "65536"), "MASTER_PORT");
  expect_rejected(with("MASTER_PORT", "80a"), "MASTER_PORT");
  expect_rejected({{"RANK", "0"}}, "WORLD_SIZE is not set");
  expect_rejected({{"WORLD_SIZE", "2"}}, "RANK is not set");
  expect_rejected({{"SLURM_PROCID", "0"}}, "SLURM_NTASKS");
  expect_rejected({{"OMPI_COMM_WORLD_RANK", "7"}, {"OMPI_COMM_WORLD_SIZE", "2"}},
                  "OMPI_COMM_WORLD_RANK=7");
  expect_rejected({{"PMI_RANK", "0"}, {"PMI_SIZE", "z"}}, "PMI_SIZE");
}

TEST(LaunchEnv, NothingSetAsksForTheVariables) {
  expect_rejected({}, "RANK, WORLD_SIZE");
  expect_rejected({{"RANK", ""}, {"WORLD_SIZE", ""}}, "no launcher variables");
}

TEST(HostIdentity, IsStableAndStartsWithTheHostName) {
  std::string identity = host_identity();
  EXPECT_FALSE(identity.empty());
  EXPECT_EQ(identity, host_identity());
  EXPECT_EQ(identity.find('\n'), std::string::npos);
}

}  // namespace
}  // namespace chorus
