// The mesh's rank arithmetic; see include/chorus/train/mesh_layout.hpp.
#include <chorus/error.hpp>
#include <chorus/train/mesh_layout.hpp>

#include <string>

namespace chorus::train {

namespace {

std::string degrees_text(const MeshDegrees& d) {
  return "pp " + std::to_string(d.pp) + ", dp " + std::to_string(d.dp) + ", cp " +
         std::to_string(d.cp) + ", tp " + std::to_string(d.tp) + ", ep " + std::to_string(d.ep);
}

/// Which of the dp·cp ranks of (pp, tp) a rank is: its index in the data-and-context group.
int data_context_index(const MeshLayout& l, const MeshCoordinates& c) { return c.dp * l.cp + c.cp; }

/// The world rank at data-and-context index `j` of `c`'s (pp, tp) position.
int at_data_context_index(const MeshLayout& l, MeshCoordinates c, int j) {
  c.dp = j / l.cp;
  c.cp = j % l.cp;
  return rank_of(l, c);
}

/// The ranks met by moving one coordinate of `c` over [0, n).
template <typename Move>
std::vector<int> along(int n, const Move& move) {
  std::vector<int> ranks;
  ranks.reserve(n);
  for (int i = 0; i < n; ++i) ranks.push_back(move(i));
  return ranks;
}

}  // namespace

std::string_view to_string(MeshGroup group) noexcept {
  switch (group) {
    case MeshGroup::Tp:
      return "tp";
    case MeshGroup::Cp:
      return "cp";
    case MeshGroup::Dp:
      return "dp";
    case MeshGroup::Pp:
      return "pp";
    case MeshGroup::DataContext:
      return "dp_cp";
    case MeshGroup::Expert:
      return "ep";
    case MeshGroup::ExpertData:
      return "edp";
    case MeshGroup::Embedding:
      return "embedding";
  }
  return "?";
}

int MeshLayout::size(MeshGroup group) const {
  switch (group) {
    case MeshGroup::Tp:
      return tp;
    case MeshGroup::Cp:
      return cp;
    case MeshGroup::Dp:
      return dp;
    case MeshGroup::Pp:
      return pp;
    case MeshGroup::DataContext:
      return dp * cp;
    case MeshGroup::Expert:
      return ep;
    case MeshGroup::ExpertData:
      return dp * cp / ep;
    case MeshGroup::Embedding:
      return pp > 1 ? 2 : 1;
  }
  return 0;
}

MeshLayout make_layout(int world, const MeshDegrees& d) {
  require_argument(world >= 1, "mesh: the world has " + std::to_string(world) + " ranks");
  require_argument(d.pp >= 1 && d.cp >= 1 && d.tp >= 1 && d.ep >= 1 && d.dp >= 0,
                   "mesh: every degree must be at least 1 (dp 0: derived from the world), got " +
                       degrees_text(d));
  const int model = d.pp * d.cp * d.tp;
  MeshLayout l{d.pp, d.dp, d.cp, d.tp, d.ep};
  if (d.dp == 0) {
    require_argument(world % model == 0, "mesh: world " + std::to_string(world) +
                                             " is not a multiple of pp·cp·tp = " +
                                             std::to_string(model) + " (" + degrees_text(d) + ")");
    l.dp = world / model;
  }
  require_argument(l.world() == world, "mesh: world " + std::to_string(world) +
                                           " != pp·dp·cp·tp = " + std::to_string(l.world()) + " (" +
                                           degrees_text(d) + ")");
  require_argument((l.dp * l.cp) % l.ep == 0,
                   "mesh: ep " + std::to_string(l.ep) +
                       " does not divide dp·cp = " + std::to_string(l.dp * l.cp) + " (dp " +
                       std::to_string(l.dp) + ", cp " + std::to_string(l.cp) + ")");
  return l;
}

MeshCoordinates coordinates_of(const MeshLayout& l, int rank) {
  require_argument(
      rank >= 0 && rank < l.world(),
      "mesh: rank " + std::to_string(rank) + " is outside [0, " + std::to_string(l.world()) + ")");
  MeshCoordinates c;
  c.tp = rank % l.tp;
  rank /= l.tp;
  c.cp = rank % l.cp;
  rank /= l.cp;
  c.dp = rank % l.dp;
  c.pp = rank / l.dp;
  return c;
}

int rank_of(const MeshLayout& l, const MeshCoordinates& c) {
  require_argument(c.pp >= 0 && c.pp < l.pp && c.dp >= 0 && c.dp < l.dp && c.cp >= 0 &&
                       c.cp < l.cp && c.tp >= 0 && c.tp < l.tp,
                   "mesh: coordinates (pp " + std::to_string(c.pp) + ", dp " +
                       std::to_string(c.dp) + ", cp " + std::to_string(c.cp) + ", tp " +
                       std::to_string(c.tp) + ") are outside the mesh");
  return ((c.pp * l.dp + c.dp) * l.cp + c.cp) * l.tp + c.tp;
}

std::vector<int> group_members(const MeshLayout& l, MeshGroup group, int rank) {
  MeshCoordinates c = coordinates_of(l, rank);
  const int j = data_context_index(l, c);
  auto with = [&](int MeshCoordinates::*axis) {
    return [&l, c, axis](int i) {
      MeshCoordinates at = c;
      at.*axis = i;
      return rank_of(l, at);
    };
  };
  switch (group) {
    case MeshGroup::Tp:
      return along(l.tp, with(&MeshCoordinates::tp));
    case MeshGroup::Cp:
      return along(l.cp, with(&MeshCoordinates::cp));
    case MeshGroup::Dp:
      return along(l.dp, with(&MeshCoordinates::dp));
    case MeshGroup::Pp:
      return along(l.pp, with(&MeshCoordinates::pp));
    case MeshGroup::DataContext:
      return along(l.dp * l.cp, [&](int i) { return at_data_context_index(l, c, i); });
    case MeshGroup::Expert:
      return along(l.ep, [&](int i) { return at_data_context_index(l, c, j / l.ep * l.ep + i); });
    case MeshGroup::ExpertData:
      return along(l.dp * l.cp / l.ep,
                   [&](int i) { return at_data_context_index(l, c, i * l.ep + j % l.ep); });
    case MeshGroup::Embedding:
      if (c.pp != 0 && c.pp != l.pp - 1) return {};
      return along(l.size(MeshGroup::Embedding), [&](int i) {
        MeshCoordinates at = c;
        at.pp = i == 0 ? 0 : l.pp - 1;
        return rank_of(l, at);
      });
  }
  return {};
}

}  // namespace chorus::train
