// The text timeline of pipeline_schedule.hpp: ranks as rows, one column per the shortest
// computation's duration.
#include <chorus/train/pipeline_schedule.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>

namespace chorus::train {
namespace {

char letter(PipelineOp op) {
  switch (op) {
    case PipelineOp::Forward:
      return 'F';
    case PipelineOp::Backward:
      return 'B';
    case PipelineOp::BackwardInput:
      return 'I';
    default:
      return 'W';
  }
}

std::string label(const PipelineAction& a, bool chunks) {
  std::string out = letter(a.op) + std::to_string(a.micro_batch);
  if (chunks) out += static_cast<char>('a' + a.chunk);
  return out;
}

std::string padded(std::string text, std::size_t width) {
  text.resize(width, ' ');
  return text;
}

}  // namespace

std::string render_timeline(const PipelineSchedule& schedule, const ScheduleReport& report) {
  const bool chunks = schedule.chunks() > 1;
  double unit = 0;
  for (const auto& row : report.timeline)
    for (const TimedAction& t : row)
      if (unit == 0 || t.end - t.start < unit) unit = t.end - t.start;
  const std::size_t width =
      1 + std::to_string(std::max(schedule.micro_batches() - 1, 0)).size() + (chunks ? 1 : 0);
  const auto column = [unit](double t) { return static_cast<std::size_t>(std::lround(t / unit)); };
  const std::size_t columns = unit > 0 ? column(report.makespan) : 0;
  char bubble[32];
  std::snprintf(bubble, sizeof bubble, "%.4f", report.bubble);
  std::string out = std::string(to_string(schedule.options.kind)) + ": p " +
                    std::to_string(schedule.stages()) + ", m " +
                    std::to_string(schedule.micro_batches()) + ", v " +
                    std::to_string(schedule.chunks()) + "; bubble " + bubble + "\n";
  for (std::size_t r = 0; r < report.timeline.size(); ++r) {
    std::vector<std::string> cells(columns, padded(".", width));
    for (const TimedAction& t : report.timeline[r]) {
      const std::size_t first = column(t.start), end = std::min(column(t.end), columns);
      for (std::size_t c = first; c < end; ++c)
        cells[c] = c == first ? padded(label(t.action, chunks), width) : std::string(width, '-');
    }
    std::string row = "rank " + std::to_string(r) + " |";
    for (const std::string& cell : cells) row += cell + "|";
    out += row + "\n";
  }
  return out;
}

}  // namespace chorus::train
