// The rank arithmetic of the model-parallel mesh: pure functions, no communication.
//
// A world of pp·dp·cp·tp ranks is a 4-d grid with pipeline (pp) slowest and tensor (tp) fastest:
//
//     rank = ((pp_index · dp + dp_index) · cp + cp_index) · tp + tp_index
//
// so a tensor-parallel group is tp consecutive ranks (the chattiest group stays inside a
// host's shared memory). Expert parallelism splits the dp·cp ranks that share (pp, tp): with
// j = dp_index · cp + cp_index their index in that "data-and-context" group, the expert group
// (size ep) holds the ranks with equal j / ep and the expert-data-parallel group (size
// dp·cp/ep, replicas of the same experts) those with equal j % ep — Megatron's tp-cp-ep-dp-pp
// order. The embedding group holds the first and the last pipeline stage of one (dp, cp, tp)
// position ({first} alone when pp = 1).
//
// Every group lists its members as world ranks in group-rank order: the index of the varying
// coordinate (tp_index for tp, j for dp_cp, j % ep for ep, j / ep for edp, first/last stage).
#pragma once

#include <chorus/export.hpp>

#include <array>
#include <string_view>
#include <vector>

namespace chorus::train {

/// The degrees a mesh is built from. dp = 0 means "what the world leaves": world/(pp·cp·tp).
struct MeshDegrees {
  int pp = 1;
  int dp = 0;
  int cp = 1;
  int tp = 1;
  int ep = 1;  ///< expert parallelism; divides dp·cp
};

/// The groups of a mesh, in the order MeshGroups are created.
enum class MeshGroup { Tp, Cp, Dp, Pp, DataContext, Expert, ExpertData, Embedding };
inline constexpr std::array kMeshGroups = {
    MeshGroup::Tp,          MeshGroup::Cp,     MeshGroup::Dp,         MeshGroup::Pp,
    MeshGroup::DataContext, MeshGroup::Expert, MeshGroup::ExpertData, MeshGroup::Embedding};

/// "tp", "cp", "dp", "pp", "dp_cp", "ep", "edp", "embedding": the group's communicator name.
CHORUS_EXPORT std::string_view to_string(MeshGroup group) noexcept;

/// A rank's position on each axis.
struct MeshCoordinates {
  int pp = 0, dp = 0, cp = 0, tp = 0;
  bool operator==(const MeshCoordinates&) const = default;
};

/// A checked layout of `world` ranks. Construct it with make_layout.
struct MeshLayout {
  int pp = 1, dp = 1, cp = 1, tp = 1, ep = 1;

  int world() const { return pp * dp * cp * tp; }
  /// Size of a group: tp, cp, dp, pp, dp·cp, ep, dp·cp/ep, 2 (1 when pp = 1).
  int size(MeshGroup group) const;
  bool operator==(const MeshLayout&) const = default;
};

/// Checks `degrees` against `world` (every degree ≥ 1, world = pp·dp·cp·tp, ep divides dp·cp)
/// and resolves dp = 0; otherwise throws Error(InvalidArgument) with a sentence naming the
/// numbers.
CHORUS_EXPORT MeshLayout make_layout(int world, const MeshDegrees& degrees);

/// Coordinates of world rank `rank` (InvalidArgument outside [0, world)).
CHORUS_EXPORT MeshCoordinates coordinates_of(const MeshLayout& layout, int rank);
/// The world rank at `at` (InvalidArgument when a coordinate is outside its axis).
CHORUS_EXPORT int rank_of(const MeshLayout& layout, const MeshCoordinates& at);

/// The world ranks of `rank`'s group of kind `group`, in group-rank order. For Embedding, a
/// rank on a middle stage is in no group: the list is empty.
CHORUS_EXPORT std::vector<int> group_members(const MeshLayout& layout, MeshGroup group, int rank);

}  // namespace chorus::train
