// The schedule verifier of pipeline_schedule.hpp: a simulation of every rank's action list.
//
// Each rank runs its actions in order from time 0. A computation starts when the rank is free
// and its input is there (the previous stage's forward, locally or through a receive; the next
// stage's gradient likewise); a receive completes when its send has been issued (sends never
// block and communication costs nothing); so every action's start is a maximum of times
// already known, and sweeping the ranks until none can move reaches the same times in any
// sweep order. A rank that cannot move at the end is stuck: nothing it waits for will come.
#include <chorus/error.hpp>
#include <chorus/train/pipeline_schedule.hpp>

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

namespace chorus::train {
namespace {

using Op = PipelineOp;

/// Per (virtual stage, micro-batch): when something happened, or -1.
struct Times {
  int m = 0;
  std::vector<double> at;
  Times(int stages, int micro_batches)
      : m(micro_batches), at(static_cast<std::size_t>(stages * micro_batches), -1.0) {}
  double& operator()(int s, int i) { return at[static_cast<std::size_t>(s * m + i)]; }
};

struct State {
  Times forward, backward_input, backward_weight, activation_sent, activation_received,
      gradient_sent, gradient_received;
  explicit State(int s, int m)
      : forward(s, m),
        backward_input(s, m),
        backward_weight(s, m),
        activation_sent(s, m),
        activation_received(s, m),
        gradient_sent(s, m),
        gradient_received(s, m) {}
};

/// What an action needs: a start time, a wait, or a refusal.
struct Outcome {
  enum { Run, Wait, Refuse } kind = Run;
  double start = 0;
  std::string reason;
};

class Simulation {
 public:
  Simulation(const PipelineSchedule& s, const ActionCosts& c)
      : s_(s), costs_(c), state_(s.virtual_stages(), s.micro_batches()) {}

  ScheduleReport run();

 private:
  const PipelineSchedule& s_;
  ActionCosts costs_;
  State state_;

  std::string prefix() const {
    const ScheduleOptions& o = s_.options;
    return "pipeline schedule " + std::string(to_string(o.kind)) + " (p " +
           std::to_string(o.stages) + ", m " + std::to_string(o.micro_batches) + ", v " +
           std::to_string(o.chunks) + "): ";
  }
  [[noreturn]] void refuse(const std::string& what) const {
    throw Error(Status::InvalidArgument, prefix() + what);
  }
  double cost(Op op) const;
  Outcome evaluate(int rank, const PipelineAction& a, double clock);
  Outcome compute(const PipelineAction& a, int stage, double clock);
  Outcome communicate(const PipelineAction& a, int stage, double clock);
  void record(const PipelineAction& a, int stage, double end);
  void check_complete();
};

Outcome wait() { return {Outcome::Wait, 0, {}}; }
Outcome refusal(std::string reason) { return {Outcome::Refuse, 0, std::move(reason)}; }
Outcome start_at(double clock, double ready) { return {Outcome::Run, std::max(clock, ready), {}}; }

double Simulation::cost(Op op) const {
  switch (op) {
    case Op::Forward:
      return costs_.forward;
    case Op::Backward:
      return costs_.backward_input + costs_.backward_weight;
    case Op::BackwardInput:
      return costs_.backward_input;
    case Op::BackwardWeight:
      return costs_.backward_weight;
    default:
      return 0;
  }
}

Outcome Simulation::evaluate(int rank, const PipelineAction& a, double clock) {
  if (a.micro_batch < 0 || a.micro_batch >= s_.micro_batches() || a.chunk < 0 ||
      a.chunk >= s_.chunks())
    return refusal("names a micro-batch or chunk outside the schedule");
  const int stage = s_.virtual_stage(rank, a.chunk);
  const bool computes = a.op == Op::Forward || a.op == Op::Backward || a.op == Op::BackwardInput ||
                        a.op == Op::BackwardWeight;
  return computes ? compute(a, stage, clock) : communicate(a, stage, clock);
}

Outcome Simulation::compute(const PipelineAction& a, int stage, double clock) {
  State& st = state_;
  const int i = a.micro_batch, p = s_.stages(), last = s_.virtual_stages() - 1;
  const bool local = p == 1;  // neighbour stages on this rank hand tensors over locally
  if (a.op == Op::Forward) {
    if (st.forward(stage, i) >= 0) return refusal("computes it twice");
    if (stage == 0) return start_at(clock, 0);
    const double input = local ? st.forward(stage - 1, i) : st.activation_received(stage, i);
    return input < 0 ? wait() : start_at(clock, input);
  }
  if (a.op == Op::BackwardWeight) {
    if (st.backward_weight(stage, i) >= 0) return refusal("computes it twice");
    if (st.backward_weight(stage, i) == -2)
      return refusal("follows a full backward, which computed the weight gradient already");
    const double b = st.backward_input(stage, i);
    return b < 0 ? refusal("runs before its input gradient") : start_at(clock, b);
  }
  if (st.backward_input(stage, i) >= 0) return refusal("computes it twice");
  if (st.forward(stage, i) < 0) return refusal("runs before its forward");
  if (stage == last) return start_at(clock, st.forward(stage, i));
  const double grad = local ? st.backward_input(stage + 1, i) : st.gradient_received(stage, i);
  return grad < 0 ? wait() : start_at(clock, grad);
}

Outcome Simulation::communicate(const PipelineAction& a, int stage, double clock) {
  State& st = state_;
  const int i = a.micro_batch, p = s_.stages(), last = s_.virtual_stages() - 1;
  const bool sends = a.op == Op::SendActivation || a.op == Op::SendGradient;
  const bool forward = a.op == Op::SendActivation || a.op == Op::RecvActivation;
  // Activations go to the next stage and come from the previous one; gradients the other way.
  const bool towards_next = forward == sends;
  const int neighbour = towards_next ? stage + 1 : stage - 1;
  if (p == 1 || neighbour < 0 || neighbour > last)
    return refusal("has no neighbour stage on another rank");
  const int peer = neighbour % p;
  if (a.peer != peer)
    return refusal("names rank " + std::to_string(a.peer) + "; the neighbour stage is on rank " +
                   std::to_string(peer));
  if (a.op == Op::SendActivation) {
    if (st.forward(stage, i) < 0) return refusal("runs before the forward that produces it");
    return st.activation_sent(neighbour, i) >= 0 ? refusal("sends it twice") : start_at(clock, 0);
  }
  if (a.op == Op::SendGradient) {
    if (st.backward_input(stage, i) < 0) return refusal("runs before the backward producing it");
    return st.gradient_sent(neighbour, i) >= 0 ? refusal("sends it twice") : start_at(clock, 0);
  }
  Times& received = forward ? st.activation_received : st.gradient_received;
  if (received(stage, i) >= 0) return refusal("receives it twice");
  const double sent = (forward ? st.activation_sent : st.gradient_sent)(stage, i);
  return sent < 0 ? wait() : start_at(clock, sent);
}

void Simulation::record(const PipelineAction& a, int stage, double end) {
  State& st = state_;
  const int i = a.micro_batch;
  switch (a.op) {
    case Op::Forward:
      st.forward(stage, i) = end;
      break;
    case Op::Backward:
      st.backward_input(stage, i) = end;
      st.backward_weight(stage, i) = -2;  // done with the input gradient: no W of its own
      break;
    case Op::BackwardInput:
      st.backward_input(stage, i) = end;
      break;
    case Op::BackwardWeight:
      st.backward_weight(stage, i) = end;
      break;
    case Op::SendActivation:
      st.activation_sent(stage + 1, i) = end;
      break;
    case Op::SendGradient:
      st.gradient_sent(stage - 1, i) = end;
      break;
    case Op::RecvActivation:
      st.activation_received(stage, i) = end;
      break;
    case Op::RecvGradient:
      st.gradient_received(stage, i) = end;
      break;
  }
}

void Simulation::check_complete() {
  State& st = state_;
  for (int stage = 0; stage < s_.virtual_stages(); ++stage) {
    const int rank = stage % s_.stages(), chunk = stage / s_.stages();
    for (int i = 0; i < s_.micro_batches(); ++i) {
      const auto missing = [&](const char* what) {
        refuse("rank " + std::to_string(rank) + " never runs the " + what + " of micro-batch " +
               std::to_string(i) + " on chunk " + std::to_string(chunk));
      };
      if (st.forward(stage, i) < 0) missing("forward");
      if (st.backward_input(stage, i) < 0) missing("backward");
      if (st.backward_weight(stage, i) == -1) missing("weight gradient");
      const auto unreceived = [&](const char* what, int to) {
        refuse("the " + std::string(what) + " of micro-batch " + std::to_string(i) +
               " sent by rank " + std::to_string(rank) + " to rank " +
               std::to_string(to % s_.stages()) + " is never received");
      };
      if (st.activation_sent(stage, i) >= 0 && st.activation_received(stage, i) < 0)
        unreceived("activation", stage - 1 + s_.stages());
      if (st.gradient_sent(stage, i) >= 0 && st.gradient_received(stage, i) < 0)
        unreceived("gradient", stage + 1);
    }
  }
}

ScheduleReport Simulation::run() {
  const int p = s_.stages();
  require_argument(static_cast<int>(s_.ranks.size()) == p,
                   prefix() + std::to_string(s_.ranks.size()) + " action lists for " +
                       std::to_string(p) + " ranks");
  ScheduleReport report;
  report.busy.assign(static_cast<std::size_t>(p), 0.0);
  report.timeline.resize(static_cast<std::size_t>(p));
  std::vector<std::size_t> next(static_cast<std::size_t>(p), 0);
  std::vector<double> clock(static_cast<std::size_t>(p), 0.0);
  for (bool moved = true; moved;) {
    moved = false;
    for (int r = 0; r < p; ++r) {
      const auto& actions = s_.ranks[static_cast<std::size_t>(r)];
      for (std::size_t& k = next[static_cast<std::size_t>(r)]; k < actions.size(); ++k) {
        const PipelineAction& a = actions[k];
        double& now = clock[static_cast<std::size_t>(r)];
        const Outcome o = evaluate(r, a, now);
        if (o.kind == Outcome::Wait) break;
        if (o.kind == Outcome::Refuse)
          refuse("rank " + std::to_string(r) + " action " + std::to_string(k) + " (" + describe(a) +
                 ") " + o.reason);
        const double c = cost(a.op);
        now = o.start + c;
        record(a, s_.virtual_stage(r, a.chunk), now);
        if (c > 0) {
          report.busy[static_cast<std::size_t>(r)] += c;
          report.timeline[static_cast<std::size_t>(r)].push_back({a, o.start, now});
        }
        moved = true;
      }
    }
  }
  std::string stuck;
  for (int r = 0; r < p; ++r) {
    const auto& actions = s_.ranks[static_cast<std::size_t>(r)];
    const std::size_t k = next[static_cast<std::size_t>(r)];
    if (k == actions.size()) continue;
    stuck += (stuck.empty() ? "" : "; ") + std::string("rank ") + std::to_string(r) +
             " waits forever at action " + std::to_string(k) + " (" + describe(actions[k]) + ")";
  }
  if (!stuck.empty()) refuse("deadlock: " + stuck);
  check_complete();
  report.makespan = *std::max_element(clock.begin(), clock.end());
  double idle = 0;
  for (double b : report.busy) idle += report.makespan - b;
  report.bubble = report.makespan > 0 ? idle / (p * report.makespan) : 0.0;
  return report;
}

}  // namespace

ScheduleReport verify_schedule(const PipelineSchedule& schedule, const ActionCosts& costs) {
  return Simulation(schedule, costs).run();
}

double textbook_bubble(const ScheduleOptions& o, const ActionCosts& c) {
  const double p = o.stages, m = o.micro_batches, v = o.chunks;
  if (o.kind == ScheduleKind::ZeroBubbleH1) {
    const double idle = (p - 1) * (c.forward + c.backward_input - c.backward_weight);
    return idle / (idle + m * (c.forward + c.backward_input + c.backward_weight));
  }
  return (p - 1) / (v * m + p - 1);
}

}  // namespace chorus::train
