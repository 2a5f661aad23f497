// The SVG timeline (pure C++): parsed back, it holds one box per computation of every rank, in
// the rank's row, in the rank's order, each where its times put it and none overlapping the
// next; the title is escaped and the legend names every kind.
#include <chorus/train/pipeline_schedule.hpp>

#include <gtest/gtest.h>

#include <map>
#include <regex>
#include <string>
#include <vector>

namespace chorus::train {
namespace {

/// One `<rect class="action" ...>` of the SVG: its attributes by name.
using Box = std::map<std::string, std::string>;

std::vector<Box> boxes(const std::string& svg) {
  std::vector<Box> out;
  const std::regex rect(R"re(<rect class="action"([^>]*)>)re");
  const std::regex attribute(R"re(([\w-]+)="([^"]*)")re");
  for (auto it = std::sregex_iterator(svg.begin(), svg.end(), rect); it != std::sregex_iterator();
       ++it) {
    const std::string attributes = (*it)[1];
    Box box;
    for (auto a = std::sregex_iterator(attributes.begin(), attributes.end(), attribute);
         a != std::sregex_iterator(); ++a)
      box[(*a)[1]] = (*a)[2];
    out.push_back(box);
  }
  return out;
}

double number(const Box& box, const std::string& key) { return std::stod(box.at(key)); }

void expect_boxes_match(const std::string& svg, const ScheduleReport& report) {
  const std::vector<Box> found = boxes(svg);
  std::size_t expected = 0;
  for (const auto& row : report.timeline) expected += row.size();
  ASSERT_EQ(found.size(), expected);
  std::size_t k = 0;
  for (std::size_t r = 0; r < report.timeline.size(); ++r) {
    const Box* previous = nullptr;
    for (const TimedAction& t : report.timeline[r]) {
      const Box& box = found[k++];
      SCOPED_TRACE("rank " + std::to_string(r) + ": " + describe(t.action));
      EXPECT_EQ(box.at("data-rank"), std::to_string(r));
      EXPECT_EQ(box.at("data-op"), std::string(to_string(t.action.op)));
      EXPECT_EQ(box.at("data-micro-batch"), std::to_string(t.action.micro_batch));
      EXPECT_EQ(box.at("data-chunk"), std::to_string(t.action.chunk));
      EXPECT_DOUBLE_EQ(number(box, "data-start"), t.start);
      EXPECT_DOUBLE_EQ(number(box, "data-end"), t.end);
      EXPECT_GT(number(box, "width"), 0);
      if (previous != nullptr) {
        EXPECT_EQ(number(box, "y"), number(*previous, "y"));  // one row per rank
        // Coordinates are rounded to the thousandth of a pixel.
        EXPECT_LE(number(*previous, "x") + number(*previous, "width"), number(box, "x") + 2e-3);
      }
      previous = &box;
    }
  }
}

TEST(TimelineSvg, OneBoxPerComputationInRowsAndOrder) {
  for (const ScheduleOptions& o : {ScheduleOptions{ScheduleKind::GPipe, 3, 4, 1},
                                   ScheduleOptions{ScheduleKind::OneFOneB, 4, 8, 1},
                                   ScheduleOptions{ScheduleKind::Interleaved, 2, 4, 2},
                                   ScheduleOptions{ScheduleKind::ZeroBubbleH1, 4, 5, 1}}) {
    SCOPED_TRACE(std::string(to_string(o.kind)));
    const PipelineSchedule schedule = make_schedule(o);
    const ScheduleReport report = verify_schedule(schedule, {1, 1.5, 0.5});
    const std::string svg = render_timeline_svg(report.timeline, "a <title> & more");
    expect_boxes_match(svg, report);
    EXPECT_NE(svg.find("a &lt;title&gt; &amp; more"), std::string::npos);
    EXPECT_EQ(svg.rfind("<svg", 0), 0u);
    EXPECT_NE(svg.find("</svg>"), std::string::npos);
  }
}

TEST(TimelineSvg, RowsAreRanksAndTheLegendNamesEveryKind) {
  const PipelineSchedule schedule = make_schedule({ScheduleKind::ZeroBubbleH1, 3, 3, 1});
  const std::string svg = render_timeline_svg(verify_schedule(schedule).timeline, "zb-h1");
  std::map<std::string, double> row_y;
  for (const Box& box : boxes(svg)) {
    const auto [it, added] = row_y.emplace(box.at("data-rank"), number(box, "y"));
    EXPECT_EQ(it->second, number(box, "y"));
  }
  ASSERT_EQ(row_y.size(), 3u);
  EXPECT_LT(row_y["0"], row_y["1"]);
  EXPECT_LT(row_y["1"], row_y["2"]);
  for (const char* kind : {"F forward", "B backward", "I backward input", "W backward weight"})
    EXPECT_NE(svg.find(std::string(">") + kind + "</text>"), std::string::npos) << kind;
  std::size_t legends = 0;
  for (std::size_t at = svg.find("<rect class=\"legend\""); at != std::string::npos;
       at = svg.find("<rect class=\"legend\"", at + 1))
    ++legends;
  EXPECT_EQ(legends, 4u);
}

// Times that do not start at zero (a real run's record) are drawn from the earliest start.
TEST(TimelineSvg, RecordedTimesStartAtTheLeftEdge) {
  const PipelineAction f{PipelineOp::Forward, 0, 0, -1}, b{PipelineOp::Backward, 0, 0, -1};
  const std::vector<std::vector<TimedAction>> rows = {{{f, 2.0, 3.0}, {b, 3.5, 5.0}},
                                                      {{f, 3.0, 4.0}}};
  const std::vector<Box> found = boxes(render_timeline_svg(rows, "run"));
  ASSERT_EQ(found.size(), 3u);
  EXPECT_EQ(number(found[0], "x"), number(found[2], "x") - number(found[0], "width"));
  EXPECT_DOUBLE_EQ(number(found[1], "x") + number(found[1], "width"),
                   number(found[0], "x") + 3 * number(found[0], "width"));
  EXPECT_TRUE(boxes(render_timeline_svg({}, "empty")).empty());
}

}  // namespace
}  // namespace chorus::train
