// read_launch_env for every launcher, with a fake environment, and each malformed case.
#include "bootstrap/launch_env.hpp"

#include <chorus/error.hpp>

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

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

// What srun gives each task of `srun -N 2 -n 4` in job 42: the store is on the step's first
// host, at a port derived from the job and step.
const Env kSrunTask = {{"SLURM_PROCID", "3"},
                       {"SLURM_NTASKS", "4"},
                       {"SLURM_LOCALID", "1"},
                       {"SLURM_NODEID", "1"},
                       {"SLURM_NNODES", "2"},
                       {"SLURM_STEP_NODELIST", "node[07-08]"},
                       {"SLURM_NODELIST", "node[07-08]"},
                       {"SLURM_JOB_NODELIST", "node[07-09]"},
                       {"SLURM_JOB_ID", "42"},
                       {"SLURM_STEP_ID", "0"}};

TEST(LaunchEnv, SlurmStepFindsTheStoreFromItsNodeList) {
  LaunchInfo info = read(kSrunTask);
  EXPECT_EQ(info.source, "slurm");
  EXPECT_EQ(info.rank, 3);
  EXPECT_EQ(info.world_size, 4);
  EXPECT_EQ(info.local_rank, 1);
  EXPECT_EQ(info.master_addr, "node07");
  EXPECT_EQ(info.master_port, 20000 + 8 * 42);
  Env env = kSrunTask;
  env["SLURM_STEP_ID"] = "3";
  EXPECT_EQ(read(env).master_port, 20000 + 8 * 42 + 3);
  env.erase("SLURM_STEP_NODELIST");  // an older srun: SLURM_NODELIST is the step's
  env["SLURM_NODELIST"] = "b,a";
  EXPECT_EQ(read(env).master_addr, "b");
  env.erase("SLURM_NODELIST");  // the job's list, as in a batch script
  EXPECT_EQ(read(env).master_addr, "node07");
  env.erase("SLURM_JOB_ID");
  EXPECT_EQ(read(env).master_port, 29500);
  env = kSrunTask;
  env["SLURM_STEP_NODELIST"] = "node08";  // one host: loopback, whatever its name resolves to
  env.erase("SLURM_NNODES");
  EXPECT_EQ(read(env).master_addr, "127.0.0.1");
}

TEST(LaunchEnv, ExplicitVariablesWinOverSlurms) {
  Env env = kSrunTask;
  env["MASTER_ADDR"] = "head";
  env["MASTER_PORT"] = "4000";
  EXPECT_EQ(read(env).master_addr, "head");
  EXPECT_EQ(read(env).master_port, 4000);
  env["CHORUS_STORE_ADDR"] = "store";
  env["CHORUS_STORE_PORT"] = "5000";
  EXPECT_EQ(read(env).master_addr, "store");
  EXPECT_EQ(read(env).master_port, 5000);
  env = kSrunTask;
  env["MASTER_PORT"] = "4000";  // the port alone: the host still comes from the node list
  EXPECT_EQ(read(env).master_addr, "node07");
  EXPECT_EQ(read(env).master_port, 4000);
  env = kSrunTask;  // chorusrun inside an allocation: its variables, not srun's
  env["RANK"] = "0";
  env["WORLD_SIZE"] = "2";
  env["CHORUS_STORE_ADDR"] = "10.0.0.1";
  env["CHORUS_STORE_PORT"] = "6000";
  LaunchInfo info = read(env);
  EXPECT_EQ(info.source, "torchrun");
  EXPECT_EQ(info.rank, 0);
  EXPECT_EQ(info.world_size, 2);
  EXPECT_EQ(info.master_addr, "10.0.0.1");
  EXPECT_EQ(info.master_port, 6000);
}

TEST(LaunchEnv, MalformedSlurmVariablesAreNamed) {
  Env env = kSrunTask;
  env["SLURM_STEP_NODELIST"] = "node[1-";
  expect_rejected(env,
                  "SLURM_STEP_NODELIST is not a Slurm host list: host list 'node[1-': "
                  "'[' without ']'");
  env = kSrunTask;
  env["SLURM_JOB_ID"] = "12x";
  expect_rejected(env, "SLURM_JOB_ID must be an integer, got '12x'");
  env["SLURM_JOB_ID"] = "-4";
  expect_rejected(env, "SLURM_JOB_ID must not be negative, got -4");
  env = kSrunTask;
  env["SLURM_STEP_ID"] = "-1";
  expect_rejected(env, "SLURM_STEP_ID must not be negative, got -1");
  env["SLURM_STEP_ID"] = "batch";
  expect_rejected(env, "SLURM_STEP_ID must be an integer, got 'batch'");
}

using Hosts = std::vector<std::string>;

TEST(HostList, ExpandsSlurmsCompressedForm) {
  EXPECT_EQ(expand_host_list("node1"), Hosts({"node1"}));
  EXPECT_EQ(expand_host_list("node[1-3,5]"), Hosts({"node1", "node2", "node3", "node5"}));
  EXPECT_EQ(expand_host_list("n[08-11]"), Hosts({"n08", "n09", "n10", "n11"}));
  EXPECT_EQ(expand_host_list("n[9-10]"), Hosts({"n9", "n10"}));
  EXPECT_EQ(expand_host_list("n[007]"), Hosts({"n007"}));
  EXPECT_EQ(expand_host_list("a,b[1-2],c.example.org"), Hosts({"a", "b1", "b2", "c.example.org"}));
  EXPECT_EQ(expand_host_list("gpu[3-4]-ib,cpu[1]"), Hosts({"gpu3-ib", "gpu4-ib", "cpu1"}));
  EXPECT_EQ(expand_host_list("r[1-2]-n[1,3]"), Hosts({"r1-n1", "r1-n3", "r2-n1", "r2-n3"}));
  EXPECT_EQ(expand_host_list("x[2-3],x1"), Hosts({"x2", "x3", "x1"}));  // order kept
  EXPECT_EQ(expand_host_list("n[1-4]", 4).size(), 4u);
}

/// Expects expand_host_list(list) to throw InvalidArgument with `needle` in its sentence.
void expect_bad_list(const std::string& list, const std::string& needle,
                     std::size_t max_hosts = 1'000'000) {
  try {
    Hosts hosts = expand_host_list(list, max_hosts);
    ADD_FAILURE() << "'" << list << "' accepted as " << hosts.size() << " hosts";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), Status::InvalidArgument);
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos)
        << "'" << e.what() << "' does not mention " << needle;
  }
}

TEST(HostList, RejectsMalformedListsSayingWhy) {
  expect_bad_list("", "host list '': empty host name");
  expect_bad_list("a,,b", "empty host name");
  expect_bad_list("a,", "empty host name");
  expect_bad_list("node[1-3", "host list 'node[1-3': '[' without ']'");
  expect_bad_list("node1-3]", "']' without '['");
  expect_bad_list("n[[1]]", "'[' inside brackets");
  expect_bad_list("n[a-b]", "'a' in brackets is not a number of 1-18 digits");
  expect_bad_list("n[1-]", "'' in brackets is not a number");
  expect_bad_list("n[]", "'' in brackets is not a number");
  expect_bad_list("n[1,,2]", "is not a number");
  expect_bad_list("n[-1]", "is not a number");
  expect_bad_list("n[1234567890123456789]", "is not a number of 1-18 digits");
  expect_bad_list("n[5-3]", "range '5-3' ends below its start");
  expect_bad_list("a b", "white space");
  expect_bad_list("n[1-5]", "more than 4 hosts", 4);
  expect_bad_list("n[1-2],m[1-3]", "more than 4 hosts", 4);
  expect_bad_list("a[1-1000]b[1-1000]c[1-1000]", "more than 1000000 hosts");
  expect_bad_list("n[0-999999999999999999]", "more than 1000000 hosts");
}

TEST(SlurmStorePort, DependsOnJobAndStepAndStaysBelowEphemeralPorts) {
  EXPECT_EQ(slurm_store_port(0, 0), 20000);
  EXPECT_EQ(slurm_store_port(1, 0), 20008);
  EXPECT_EQ(slurm_store_port(1, 7), 20015);
  EXPECT_EQ(slurm_store_port(1, 8), 20008);
  EXPECT_EQ(slurm_store_port(12768, 0), 20000);
  for (std::uint64_t job : {0ull, 1595ull, 1596ull, 99999ull, ~0ull}) {
    for (std::uint64_t step : {0ull, 7ull, ~0ull}) {
      const int port = slurm_store_port(job, step);
      EXPECT_GE(port, 20000);
      EXPECT_LE(port, 32767);
    }
  }
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
