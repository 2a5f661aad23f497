// chorusrun's command line parser (see options.hpp).
#include "options.hpp"

#include <algorithm>
#include <charconv>
#include <chorus/error.hpp>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <optional>
#include <string_view>

namespace chorus::run {
namespace {

[[noreturn]] void bad_usage(const std::string& sentence) {
  throw Error(Status::InvalidArgument, sentence);
}

int parse_int(std::string_view option, std::string_view text, int min_value, int max_value) {
  int value = 0;
  auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size() || value < min_value ||
      value > max_value) {
    bad_usage(std::string(option) + " needs an integer in [" + std::to_string(min_value) + ", " +
              std::to_string(max_value) + "], got '" + std::string(text) + "'");
  }
  return value;
}

double parse_seconds(std::string_view option, const std::string& text) {
  char* end = nullptr;
  double value = std::strtod(text.c_str(), &end);
  if (text.empty() || *end != '\0' || !std::isfinite(value) || value <= 0 || value > 1e7) {
    bad_usage(std::string(option) + " needs a positive number of seconds, got '" + text + "'");
  }
  return value;
}

using Setter = std::function<void(Options&, std::string_view name, const std::string& value)>;

struct ValueOption {
  std::string_view long_name;   // without "--"
  std::string_view short_name;  // without "-", "" when none
  Setter set;
};

const std::vector<ValueOption>& value_options() {
  static const std::vector<ValueOption> options = {
      {"nproc-per-node", "n",
       [](Options& o, auto name, const auto& v) {
         o.nproc_per_node = parse_int(name, v, 1, 4096);
       }},
      {"np", "np",
       [](Options& o, auto name, const auto& v) {
         o.nproc_per_node = parse_int(name, v, 1, 4096);
       }},
      {"nnodes", "",
       [](Options& o, auto name, const auto& v) { o.nnodes = parse_int(name, v, 1, 65536); }},
      {"node-rank", "",
       [](Options& o, auto name, const auto& v) { o.node_rank = parse_int(name, v, 0, 65535); }},
      {"master-addr", "",
       [](Options& o, auto name, const auto& v) {
         if (v.empty()) bad_usage(std::string(name) + " needs a host name or address");
         o.master_addr = v;
       }},
      {"master-port", "",
       [](Options& o, auto name, const auto& v) { o.master_port = parse_int(name, v, 0, 65535); }},
      {"store-port", "",
       [](Options& o, auto name, const auto& v) { o.store_port = parse_int(name, v, 0, 65535); }},
      {"timeout", "",
       [](Options& o, auto name, const auto& v) { o.timeout_seconds = parse_seconds(name, v); }},
      {"max-restarts", "",
       [](Options& o, auto name, const auto& v) { o.max_restarts = parse_int(name, v, 0, 1000); }},
      {"bind-to", "",
       [](Options& o, auto name, const auto& v) {
         if (v != "core" && v != "none") {
           bad_usage(std::string(name) + " takes 'core' or 'none', got '" + v + "'");
         }
         o.bind_to_core = v == "core";
       }},
  };
  return options;
}

// Finds the value option spelled `word` ("--name", "--name=v", "-n", "-n4", "-np").
// Returns null when `word` is not one; sets *inline_value when the value is attached.
const ValueOption* match_value_option(std::string_view word,
                                      std::optional<std::string>* inline_value) {
  for (const ValueOption& option : value_options()) {
    if (word.starts_with("--")) {
      std::string_view body = word.substr(2);
      if (body == option.long_name) return &option;
      if (body.starts_with(option.long_name) && body.size() > option.long_name.size() &&
          body[option.long_name.size()] == '=') {
        *inline_value = std::string(body.substr(option.long_name.size() + 1));
        return &option;
      }
    } else if (!option.short_name.empty() && word.substr(1) == option.short_name) {
      return &option;
    }
  }
  // "-n4": the short option -n with its value attached.
  if (word.size() > 2 && word.starts_with("-n") && word[2] >= '0' && word[2] <= '9') {
    *inline_value = std::string(word.substr(2));
    return &value_options().front();
  }
  return nullptr;
}

void check_consistency(const Options& options) {
  if (options.help || options.version) return;
  if (options.command.empty()) bad_usage("no program to run was given");
  if (options.node_rank >= options.nnodes) {
    bad_usage("--node-rank " + std::to_string(options.node_rank) + " must be below --nnodes " +
              std::to_string(options.nnodes));
  }
  if (options.nnodes > 1 && (options.master_addr.empty() || options.master_port == 0)) {
    bad_usage("--nnodes > 1 needs --master-addr and a non-zero --master-port (node 0's)");
  }
  int store_port = store_port_of(options);
  if (store_port > 65535) {
    bad_usage(
        "--master-port 65535 leaves no port for the store (--master-port + 1): give "
        "--store-port");
  }
  if (store_port != 0 && store_port == options.master_port) {
    bad_usage("--store-port " + std::to_string(store_port) +
              " must differ from --master-port (the program's port)");
  }
  long long world = static_cast<long long>(options.nnodes) * options.nproc_per_node;
  if (world > (1 << 20)) bad_usage("--nnodes x --nproc-per-node is too large");
}

// torchrun's spellings: "--nproc_per_node=4" reads as "--nproc-per-node=4" (the value as given).
std::string with_dashes(std::string_view word) {
  std::string text(word);
  if (!word.starts_with("--")) return text;
  std::size_t end = std::min(text.find('='), text.size());
  std::replace(text.begin() + 2, text.begin() + static_cast<std::ptrdiff_t>(end), '_', '-');
  return text;
}

// Sets the option without a value that `word` names; false when it names none.
bool set_flag(Options& options, std::string_view word) {
  if (word == "-h" || word == "--help") {
    options.help = true;
  } else if (word == "--version") {
    options.version = true;
  } else if (word == "--tag-output") {
    options.tag_output = true;
  } else {
    return false;
  }
  return true;
}

}  // namespace

int store_port_of(const Options& options) {
  if (options.store_port != 0) return options.store_port;
  return options.nnodes > 1 ? options.master_port + 1 : 0;
}

Options parse_options(int argc, const char* const argv[]) {
  Options options;
  int i = 1;
  for (; i < argc; ++i) {
    const std::string spelled = with_dashes(argv[i]);
    std::string_view word = spelled;
    if (word == "--") {
      ++i;
      break;
    }
    if (set_flag(options, word)) continue;
    if (!word.starts_with("-") || word == "-") break;  // the program
    std::optional<std::string> value;
    const ValueOption* option = match_value_option(word, &value);
    const std::string_view typed = argv[i];  // messages name the option as it was written
    if (option == nullptr) bad_usage("unknown option '" + std::string(typed) + "'");
    if (!value) {
      if (i + 1 >= argc) bad_usage("option '" + std::string(typed) + "' needs a value");
      value = argv[++i];
    }
    option->set(options, typed.substr(0, typed.find('=')), *value);
  }
  for (; i < argc; ++i) options.command.emplace_back(argv[i]);
  check_consistency(options);
  return options;
}

std::string usage_text() {
  return R"(usage: chorusrun [options] program [args...]
       chorusrun [options] script.py [args...]

Starts the ranks of one node of a Chorus job, hosts the job's store on node 0,
and stops every rank as soon as one of them fails.

options:
  -n, -np, --nproc-per-node N  ranks to start on this node (default 1)
  --nnodes N                   nodes in the job (default 1)
  --node-rank R                index of this node, 0 <= R < N (default 0)
  --master-addr HOST           address of node 0 (default 127.0.0.1; required
                               with --nnodes > 1)
  --master-port PORT           MASTER_PORT, left free for the program (torch's
                               env:// rendezvous binds it on rank 0); default:
                               a free port; required with --nnodes > 1
  --store-port PORT            port of chorusrun's store on node 0 (default: a
                               free port; with --nnodes > 1, --master-port + 1)
  --tag-output                 prefix every output line with "[rank] "
  --timeout S                  stop the job after S seconds, restarts included
                               (exit status 124)
  --max-restarts N             when a rank fails, stop every rank (of every
                               node) and start the job again, up to N times
                               (default 0; torchrun's meaning); every node of
                               the job must give the same N
  --bind-to core|none          core: local rank i runs only on the i-th CPU this
                               launcher may use (wrapping around when ranks
                               outnumber CPUs), like mpirun --bind-to core;
                               none (default): the kernel places every thread
  -h, --help                   print this text
  --version                    print chorusrun's version

torchrun's spellings work too: a long option may use '_' for '-'
(--nproc_per_node, --master_addr, --master_port, --node_rank, --nnodes).

A program whose name ends in .py runs as `$CHORUS_PYTHON script.py args...`,
CHORUS_PYTHON defaulting to the interpreter this build's torch backend is for,
)" CHORUS_DEFAULT_PYTHON R"(. Other programs run as they are, found in PATH
unless the name contains '/'.

Every rank gets RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, GROUP_RANK (the
node rank), GROUP_WORLD_SIZE, MASTER_ADDR, MASTER_PORT, CHORUS_STORE_ADDR and
CHORUS_STORE_PORT (chorusrun's store, which Chorus communicators join),
CHORUS_AUTH_TOKEN, CHORUS_STORE_EXTERNAL=1, and CHORUS_RESTART_COUNT (0, then
1, 2, ... after each restart; TORCHELASTIC_RESTART_COUNT too) with
TORCHELASTIC_MAX_RESTARTS. Ranks are numbered node_rank * nproc_per_node + local_rank.

Authentication: every connection of the job proves knowledge of a secret.
chorusrun makes a fresh one per job unless CHORUS_AUTH_TOKEN is set. With
--nnodes > 1 you must set CHORUS_AUTH_TOKEN to the same value on every node
(e.g. CHORUS_AUTH_TOKEN=$(openssl rand -hex 32)).

Failures: when a rank exits non-zero or is killed by a signal, chorusrun says
which, sends SIGTERM to the other ranks, SIGKILL 3 s later, and exits with 1
(or 128 + the signal number). SIGINT/SIGTERM/SIGHUP are forwarded to the
ranks; if chorusrun itself dies, the kernel kills its ranks (PR_SET_PDEATHSIG).
Each rank runs in its own process group; local rank 0 inherits stdin unless
it is a terminal, the other ranks read /dev/null.

Restarts (--max-restarts N): after a rank failed and every rank of this node
stopped, chorusrun says so ("restarting the job", restart K of N) and starts
all of them again with CHORUS_RESTART_COUNT=K. Communicators of restart K meet only
those of restart K in the store, so ranks of the failed run can never join the
new one. A program that saves checkpoints resumes from its last complete one
(chorus-train: --checkpoint F --checkpoint-every S --resume). A job stopped by a
signal to chorusrun or by --timeout is not restarted.

With --nnodes > 1 the launchers agree on restarts through the job's store:
a rank that fails on any node stops the ranks of every node (1 s later, so that
ranks which see the failure report it first), and every node starts restart K
once all launchers have joined it; a node whose ranks
finished waits for the job's outcome; when no restart is left, every launcher
exits non-zero naming the failed rank and its node. A signal to any launcher,
its --timeout or a rank it cannot start stops every node without a restart.
Node 0's chorusrun serves the store for the whole job and exits last. A
launcher not heard from for CHORUS_TIMEOUT seconds (at least 3) is given up on
and the job stops; losing the store (node 0's chorusrun died) stops it at once.

exit status: 0 when every rank succeeded (in the last restart), 1 or 128+signal
when one failed (and no restart was left; 1 on the other nodes), 124 on
--timeout, 2 on bad usage, 127 when the program cannot be found.
)";
}

}  // namespace chorus::run
