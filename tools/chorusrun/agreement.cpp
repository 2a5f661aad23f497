// The launchers' agreement on restarts (see agreement.hpp).
//
// Keys in the job's store (beside the communicators' "chorus/..."):
//   chorusrun/alive/<node>       a launcher's heartbeat, incremented every kBeat
//   chorusrun/max-restarts/<node> each launcher's --max-restarts (all must be equal)
//   chorusrun/stop               why the job stops on every node, no restart (set once stopping)
//   chorusrun/exited             launchers that have left
//   chorusrun/r<K>/joined        launchers that joined round K
//   chorusrun/r<K>/failures      failed ranks reported in round K; the first reporter sets
//   chorusrun/r<K>/failure       "on node N, rank R (pid P) exited with status S"
//   chorusrun/r<K>/succeeded     nodes whose ranks all succeeded in round K
// A node reports either a failure or its success in a round, never both, so "succeeded"
// reaching nnodes means no rank failed: the outcome of a round never changes once seen.
#include "agreement.hpp"

#include <poll.h>

#include <algorithm>
#include <chorus/error.hpp>

#include "core/env.hpp"
#include "output.hpp"

namespace chorus::run {
namespace {

using std::chrono::milliseconds;

constexpr milliseconds kBeat{1000};
constexpr milliseconds kConnectSlice{1000};  // signals are looked at between attempts
constexpr milliseconds kFetch{5000};         // getting a key known to exist
constexpr milliseconds kLeastSilence{3000};
const std::string kPrefix = "chorusrun/";

std::string node_text(int node) { return std::string("node ").append(std::to_string(node)); }

RoundEnd exit_with(int exit_code) { return RoundEnd{false, exit_code, {}}; }

}  // namespace

std::chrono::milliseconds silence_limit_from_env() {
  return std::max(read_config().timeout, kLeastSilence);
}

NodeAgreement::NodeAgreement(AgreementSetup setup, SignalPipe& signals)
    : setup_(std::move(setup)),
      signals_(signals),
      beats_(static_cast<std::size_t>(setup_.nnodes), -1),
      heard_(static_cast<std::size_t>(setup_.nnodes)) {}

std::optional<int> NodeAgreement::connect() {
  const Deadline give_up = deadline_after(setup_.silence_limit);
  const std::string where = setup_.store_host + ":" + std::to_string(setup_.store_port);
  for (;;) {
    Deadline slice = std::min(give_up, deadline_after(kConnectSlice));
    if (setup_.deadline) slice = std::min(slice, *setup_.deadline);
    try {
      store_ = connect_store(setup_.store_host, static_cast<std::uint16_t>(setup_.store_port),
                             setup_.secret, slice);
      return std::nullopt;
    } catch (const Error& error) {
      if (error.status() != Status::Timeout || expired(give_up)) {
        say(std::string("cannot reach the job's store at ") + where +
            " (node 0's chorusrun): " + error.what());
        return 1;
      }
    }
    if (rest(milliseconds(0))) {
      say(std::string("got ") + signal_name(signal_) + "; stopping");
      return 128 + signal_;
    }
    if (setup_.deadline && expired(*setup_.deadline)) {
      say("timeout: the job ran longer than --timeout; stopping");
      return 124;
    }
  }
}

std::optional<int> NodeAgreement::join_round(int restart) {
  round_ = restart;
  if (restart == 0) put(restarts_key(setup_.node_rank), std::to_string(setup_.max_restarts));
  count(round_key("joined"), 1);
  const Waited waited = wait_until([&] { return count(round_key("joined"), 0) >= setup_.nnodes; },
                                   true, setup_.deadline);
  if (waited != Waited::Done) return exit_status_after(waited);
  if (restart > 0) return std::nullopt;
  const std::optional<std::string> mismatch = restarts_mismatch();
  if (!lost_.empty()) return exit_status_after(Waited::StoreLost);
  if (!mismatch) return std::nullopt;
  say(*mismatch);
  return leave(1);
}

std::optional<std::string> NodeAgreement::restarts_mismatch() {
  const std::string node0 = fetch(restarts_key(0));
  for (int node = 1; node < setup_.nnodes && lost_.empty(); ++node) {
    const std::string given = fetch(restarts_key(node));
    if (given == node0) continue;
    return node_text(node) + "'s --max-restarts " + given + " differs from node 0's " + node0 +
           " (every node must give the same)";
  }
  return std::nullopt;
}

RoundEnd NodeAgreement::end_round(const JobResult& result) {
  if (result.end == RunEnd::PeerStop) stop_said_ = result.what;
  if (result.end == RunEnd::Stopped) {
    stop_job(node_text(setup_.node_rank) + "'s chorusrun " + result.what);
    return exit_with(leave(result.exit_code));
  }
  if (result.end == RunEnd::Succeeded) count(round_key("succeeded"), 1);
  bool failed = false;
  const Waited waited = wait_until(
      [&] {
        failed = has(round_key("failure"));
        return failed || count(round_key("succeeded"), 0) >= setup_.nnodes;
      },
      true, setup_.deadline);
  if (waited != Waited::Done) return exit_with(exit_status_after(waited));
  if (!failed) return exit_with(leave(0));
  const std::string failure = fetch(round_key("failure"));
  if (!lost_.empty()) return exit_with(exit_status_after(Waited::StoreLost));
  if (round_ < setup_.max_restarts) return RoundEnd{true, 0, failure};
  say(failure + "; no restart left (--max-restarts " + std::to_string(setup_.max_restarts) + ")");
  return exit_with(leave(result.end == RunEnd::RankFailed ? result.exit_code : 1));
}

void NodeAgreement::report_failure(const std::string& failure) {
  if (count(round_key("failures"), 1) == 1) {
    put(round_key("failure"), std::string("on ") + node_text(setup_.node_rank) + ", " + failure);
  }
}

std::optional<std::string> NodeAgreement::poll() {
  if (!lost_.empty()) return lost_;
  const Deadline now = Clock::now();
  if (now < next_poll_) return std::nullopt;
  next_poll_ = now + kPeerPoll / 2;
  beat();
  std::optional<std::string> reason;
  if (has(kPrefix + "stop")) {
    reason = std::string("the job is stopping: ") + fetch(kPrefix + "stop");
  } else if (has(round_key("failure"))) {
    reason = fetch(round_key("failure"));
  }
  if (!lost_.empty()) return lost_;
  return reason;
}

NodeAgreement::Waited NodeAgreement::wait_until(const std::function<bool()>& done, bool watch_stop,
                                                std::optional<Deadline> until) {
  for (;;) {
    beat();
    const bool stopping = watch_stop && has(kPrefix + "stop");
    if (!lost_.empty()) return Waited::StoreLost;
    if (stopping) return Waited::Stopping;
    const bool finished = done();
    if (!lost_.empty()) return Waited::StoreLost;
    if (finished) return Waited::Done;
    const std::optional<int> silent = silent_node();
    if (!lost_.empty()) return Waited::StoreLost;
    if (silent) {
      silent_ = *silent;
      return Waited::Silent;
    }
    milliseconds pause = kPeerPoll;
    if (until) pause = std::min(pause, milliseconds(remaining_ms(*until)));
    if (rest(pause)) return Waited::Signal;
    if (until && expired(*until)) return Waited::Timeout;
  }
}

int NodeAgreement::exit_status_after(Waited waited) {
  const std::string self = node_text(setup_.node_rank) + "'s chorusrun";
  switch (waited) {
    case Waited::Signal:
      say(std::string("got ") + signal_name(signal_) + "; stopping the job on every node");
      stop_job(self + " got " + signal_name(signal_));
      return leave(128 + signal_);
    case Waited::Timeout:
      say("timeout: the job ran longer than --timeout; stopping it on every node");
      stop_job(self + " ran longer than --timeout");
      return leave(124);
    case Waited::Stopping: {
      const std::string sentence = std::string("the job is stopping: ") + fetch(kPrefix + "stop");
      if (sentence != stop_said_) say(sentence);
      return leave(1);
    }
    case Waited::Silent: {
      const std::string what = silence_text(silent_);
      say(what + "; stopping the job");
      stop_job(what);
      return leave(1);
    }
    case Waited::StoreLost:
      if (lost_ != stop_said_) say(lost_);
      return 1;
    case Waited::Done:
      break;
  }
  return 0;
}

int NodeAgreement::leave(int exit_code) {
  count(kPrefix + "exited", 1);
  if (setup_.node_rank != 0 || !lost_.empty()) return exit_code;
  // This process serves the store: the others must learn the outcome before it goes (past
  // --timeout too: they learn it within kPeerPoll, or fall silent).
  const Waited waited = wait_until([&] { return count(kPrefix + "exited", 0) >= setup_.nnodes; },
                                   false, deadline_after(setup_.silence_limit));
  if (waited == Waited::Silent) say(silence_text(silent_) + "; not waiting for it to exit");
  return exit_code;
}

void NodeAgreement::stop_job(const std::string& reason) {
  put(kPrefix + "stop", reason);
  stop_said_ = std::string("the job is stopping: ") + reason;
}

void NodeAgreement::beat() {
  const Deadline now = Clock::now();
  if (now < next_beat_) return;
  next_beat_ = now + kBeat;
  count(kPrefix + "alive/" + std::to_string(setup_.node_rank), 1);
}

std::optional<int> NodeAgreement::silent_node() {
  const Deadline now = Clock::now();
  if (now < next_silence_check_) return std::nullopt;
  next_silence_check_ = now + kBeat;
  for (int node = 0; node < setup_.nnodes; ++node) {
    if (node == setup_.node_rank) continue;
    const std::int64_t beats = count(kPrefix + "alive/" + std::to_string(node), 0);
    if (!lost_.empty()) return std::nullopt;
    const auto index = static_cast<std::size_t>(node);
    if (beats != beats_[index]) {
      beats_[index] = beats;
      heard_[index] = now;
    } else if (now - heard_[index] > setup_.silence_limit) {
      return node;
    }
  }
  return std::nullopt;
}

std::string NodeAgreement::silence_text(int node) const {
  return node_text(node) + "'s chorusrun has not been heard from for " +
         seconds_text(static_cast<double>(setup_.silence_limit.count()) / 1000) +
         " s (it is not running, cannot reach the store, or was given --max-restarts 0)";
}

bool NodeAgreement::rest(milliseconds pause) {
  pollfd fd{signals_.fd(), POLLIN, 0};
  ::poll(&fd, 1, static_cast<int>(pause.count()));
  for (int number : signals_.drain()) {
    if (!is_forwarded_signal(number)) continue;  // SIGCHLD: no rank is running now
    signal_ = number;
    return true;
  }
  return false;
}

std::string NodeAgreement::restarts_key(int node) const {
  return kPrefix + "max-restarts/" + std::to_string(node);
}

std::string NodeAgreement::round_key(const std::string& name) const {
  return kPrefix + "r" + std::to_string(round_) + "/" + name;
}

void NodeAgreement::lose(const Error& error) {
  if (!lost_.empty()) return;
  lost_ = std::string("lost the job's store at ") + setup_.store_host + ":" +
          std::to_string(setup_.store_port) +
          " (node 0's chorusrun exited or died): " + error.what();
}

bool NodeAgreement::has(const std::string& key) {
  try {
    return lost_.empty() && store_->check({key});
  } catch (const Error& error) {
    lose(error);
    return false;
  }
}

std::int64_t NodeAgreement::count(const std::string& key, std::int64_t delta) {
  try {
    return lost_.empty() ? store_->add(key, delta) : 0;
  } catch (const Error& error) {
    lose(error);
    return 0;
  }
}

void NodeAgreement::put(const std::string& key, const std::string& value) {
  try {
    if (lost_.empty()) store_->set(key, value);
  } catch (const Error& error) {
    lose(error);
  }
}

std::string NodeAgreement::fetch(const std::string& key) {
  try {
    return lost_.empty() ? store_->get(key, deadline_after(kFetch)) : std::string();
  } catch (const Error& error) {
    lose(error);
    return {};
  }
}

}  // namespace chorus::run
