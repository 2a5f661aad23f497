// The timelines of pipeline_schedule.hpp: text (ranks as rows, one column per the shortest
// computation's duration) and SVG (ranks as rows, time to the right, a box per computation).
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

/// The SVG boxes' fill: one hue per kind, a darker shade for odd chunks.
const char* colour(PipelineOp op, int chunk) {
  const bool odd = chunk % 2 == 1;
  switch (op) {
    case PipelineOp::Forward:
      return odd ? "#2c5d8a" : "#4e79a7";
    case PipelineOp::Backward:
      return odd ? "#a83234" : "#e15759";
    case PipelineOp::BackwardInput:
      return odd ? "#b8650f" : "#f28e2b";
    default:
      return odd ? "#3b7a34" : "#59a14f";
  }
}

/// `text` with the characters XML gives a meaning escaped.
std::string xml(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (c == '<')
      out += "&lt;";
    else if (c == '>')
      out += "&gt;";
    else if (c == '&')
      out += "&amp;";
    else if (c == '"')
      out += "&quot;";
    else
      out += c;
  }
  return out;
}

/// A time as text that reads back to the same double.
std::string number(double v) {
  char text[32];
  std::snprintf(text, sizeof text, "%.17g", v);
  return text;
}

/// A coordinate in pixels, to the thousandth.
std::string pixels(double v) {
  char text[32];
  std::snprintf(text, sizeof text, "%.3f", v);
  return text;
}

// The SVG's geometry, in pixels.
constexpr double kLeft = 70, kTop = 36, kWidth = 960, kRow = 30, kBox = 24;

}  // namespace

std::string render_timeline_svg(const std::vector<std::vector<TimedAction>>& rows,
                                const std::string& title) {
  double begin = 0, end = 0;
  bool chunks = false, any = false;
  for (const auto& row : rows)
    for (const TimedAction& t : row) {
      begin = any ? std::min(begin, t.start) : t.start;
      end = any ? std::max(end, t.end) : t.end;
      chunks = chunks || t.action.chunk > 0;
      any = true;
    }
  const double scale = end > begin ? kWidth / (end - begin) : 0;
  const double legend = kTop + kRow * static_cast<double>(rows.size()) + 16;
  std::string out = "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" +
                    pixels(kLeft + kWidth + 20) + "\" height=\"" + pixels(legend + 40) +
                    "\" font-family=\"sans-serif\" font-size=\"11\">\n";
  out += "<text x=\"" + pixels(kLeft) + "\" y=\"20\" font-size=\"14\">" + xml(title) + "</text>\n";
  for (std::size_t r = 0; r < rows.size(); ++r) {
    const double y = kTop + kRow * static_cast<double>(r);
    out += "<text x=\"4\" y=\"" + pixels(y + kBox * 0.7) + "\">rank " + std::to_string(r) +
           "</text>\n";
    for (const TimedAction& t : rows[r]) {
      const double x = kLeft + (t.start - begin) * scale, w = (t.end - t.start) * scale;
      const PipelineAction& a = t.action;
      out += "<rect class=\"action\" data-rank=\"" + std::to_string(r) + "\" data-op=\"" +
             std::string(to_string(a.op)) + "\" data-micro-batch=\"" +
             std::to_string(a.micro_batch) + "\" data-chunk=\"" + std::to_string(a.chunk) +
             "\" data-start=\"" + number(t.start) + "\" data-end=\"" + number(t.end) + "\" x=\"" +
             pixels(x) + "\" y=\"" + pixels(y) + "\" width=\"" + pixels(w) + "\" height=\"" +
             pixels(kBox) + "\" fill=\"" + colour(a.op, a.chunk) + "\" stroke=\"white\"><title>" +
             xml(describe(a)) + "</title></rect>\n";
      out += "<text x=\"" + pixels(x + 2) + "\" y=\"" + pixels(y + kBox * 0.7) +
             "\" fill=\"white\">" + label(a, chunks) + "</text>\n";
    }
  }
  double x = kLeft;
  for (PipelineOp op : {PipelineOp::Forward, PipelineOp::Backward, PipelineOp::BackwardInput,
                        PipelineOp::BackwardWeight}) {
    out += "<rect class=\"legend\" x=\"" + pixels(x) + "\" y=\"" + pixels(legend) +
           "\" width=\"14\" height=\"14\" fill=\"" + colour(op, 0) + "\"/>\n";
    const std::string name = std::string(1, letter(op)) + " " + std::string(to_string(op));
    out += "<text x=\"" + pixels(x + 18) + "\" y=\"" + pixels(legend + 11) + "\">" + name +
           "</text>\n";
    x += 150;
  }
  char span[160];
  std::snprintf(span, sizeof span, "time %.6g to %.6g%s", begin, end,
                chunks ? "; odd chunks darker, chunk letters a, b, ..." : "");
  out += "<text x=\"" + pixels(kLeft) + "\" y=\"" + pixels(legend + 32) + "\">" + span +
         "</text>\n</svg>\n";
  return out;
}

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
