// The ring of recorded operations and its JSON form; see flight_recorder.hpp.
#include "comm/flight_recorder.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstdio>

namespace chorus::detail {
namespace {

/// Seconds since the Unix epoch of steady point `t`, through the snapshot's anchor.
double wall_seconds(const TraceSnapshot& s, Clock::time_point t) {
  auto wall = s.anchor_wall +
              std::chrono::duration_cast<std::chrono::system_clock::duration>(t - s.anchor_steady);
  return std::chrono::duration<double>(wall.time_since_epoch()).count();
}

void append_quoted(std::string& out, std::string_view text) {
  out += '"';
  for (char c : text) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char escaped[8];
      std::snprintf(escaped, sizeof(escaped), "\\u%04x", static_cast<unsigned>(c));
      out += escaped;
    } else {
      out += c;
    }
  }
  out += '"';
}

void append_field(std::string& out, std::string_view key, std::string_view value) {
  append_quoted(out, key);
  out += ": ";
  append_quoted(out, value);
}

template <typename Number>
void append_number(std::string& out, std::string_view key, Number value) {
  append_quoted(out, key);
  out += ": " + std::to_string(value);
}

void append_time(std::string& out, std::string_view key, const TraceSnapshot& s,
                 Clock::time_point t) {
  append_quoted(out, key);
  if (t == Clock::time_point{}) {
    out += ": null";
    return;
  }
  char text[40];
  std::snprintf(text, sizeof(text), ": %.6f", wall_seconds(s, t));
  out += text;
}

/// One operation: what it was, where it got to, when, and why it failed.
void append_entry(std::string& out, const TraceSnapshot& s, const TraceEntry& e) {
  const Fingerprint& fp = e.op.fingerprint;
  out += "    {";
  append_number(out, "id", e.id);
  out += ", ";
  append_field(out, "op", to_string(fp.collective));
  out += ", ";
  append_number(out, "seq", fp.seq);
  out += ", ";
  append_number(out, "count", fp.count);
  out += ", ";
  append_field(out, "dtype",
               fp.collective == Collective::Barrier ? std::string_view{}
                                                    : to_string(static_cast<DataType>(fp.dtype)));
  out += ", ";
  append_field(
      out, "reduce_op",
      has_reduce_op(fp.collective) ? to_string(static_cast<ReduceOp>(fp.op)) : std::string_view{});
  out += ", ";
  append_number(out, "root", fp.root);
  out += ", ";
  append_number(out, "peer", e.op.peer);
  out += ", ";
  append_field(out, "algorithm", e.algorithm ? *e.algorithm : std::string_view{});
  out += ", ";
  append_field(out, "state", to_string(e.state));
  out += ", ";
  append_field(out, "status", e.state == OpState::Failed ? to_string(e.status) : "");
  out += ",\n     ";
  append_time(out, "issued", s, e.issued);
  out += ", ";
  append_time(out, "started", s, e.started);
  out += ", ";
  append_time(out, "ended", s, e.ended);
  out += ", ";
  append_field(out, "error", std::string_view(e.error.data()));
  out += "}";
}

std::string host_name() {
  char name[256] = {};
  if (::gethostname(name, sizeof(name) - 1) != 0) return "";
  return name;
}

}  // namespace

std::string_view to_string(OpState state) noexcept {
  switch (state) {
    case OpState::Issued:
      return "issued";
    case OpState::Started:
      return "started";
    case OpState::Completed:
      return "completed";
    case OpState::Failed:
      return "failed";
  }
  return "unknown";
}

FlightRecorder::FlightRecorder(std::size_t capacity, TraceIdentity identity)
    : identity_(std::move(identity)),
      ring_(capacity),
      mask_(capacity > 1 && (capacity & (capacity - 1)) == 0 ? capacity - 1 : 0),
      anchor_steady_(Clock::now()),
      anchor_wall_(std::chrono::system_clock::now()) {}

void FlightRecorder::started(RecordId id, Clock::time_point now) {
  std::lock_guard lock(lock_);
  if (TraceEntry* e = find(id)) {
    e->state = OpState::Started;
    e->started = now;
  }
}

void FlightRecorder::copy_error(TraceEntry& e, std::string_view error) {
  const std::size_t n = std::min(error.size(), e.error.size() - 1);
  std::copy_n(error.data(), n, e.error.data());
  e.error[n] = '\0';
}

TraceSnapshot FlightRecorder::snapshot(Clock::time_point now) const {
  TraceSnapshot s;
  s.identity = identity_;
  s.capacity = ring_.size();
  s.taken = now;
  s.anchor_steady = anchor_steady_;
  s.anchor_wall = anchor_wall_;
  std::lock_guard lock(lock_);
  s.total = total_;
  const std::uint64_t kept = std::min<std::uint64_t>(total_, ring_.size());
  s.entries.reserve(kept);
  for (std::uint64_t id = total_ - kept + 1; id <= total_; ++id) {
    s.entries.push_back(ring_[(id - 1) % ring_.size()]);
  }
  return s;
}

std::string trace_json(const TraceSnapshot& s, std::string_view reason) {
  std::string out = "{\n  ";
  append_number(out, "chorus_trace", 1);
  out += ",\n  ";
  append_field(out, "job", s.identity.job);
  out += ",\n  ";
  append_number(out, "world_rank", s.identity.world_rank);
  out += ",\n  ";
  append_field(out, "comm", s.identity.comm);
  out += ",\n  ";
  append_number(out, "comm_rank", s.identity.rank);
  out += ",\n  ";
  append_number(out, "comm_size", s.identity.size);
  out += ",\n  ";
  append_number(out, "pid", static_cast<long>(::getpid()));
  out += ",\n  ";
  append_field(out, "host", host_name());
  out += ",\n  ";
  append_field(out, "reason", reason);
  out += ",\n  ";
  append_time(out, "dumped_at", s, s.taken);
  out += ",\n  ";
  append_number(out, "capacity", s.capacity);
  out += ",\n  ";
  append_number(out, "total_ops", s.total);
  out += ",\n  \"ops\": [\n";
  for (std::size_t i = 0; i < s.entries.size(); ++i) {
    append_entry(out, s, s.entries[i]);
    out += i + 1 < s.entries.size() ? ",\n" : "\n";
  }
  out += "  ]\n}\n";
  return out;
}

}  // namespace chorus::detail
