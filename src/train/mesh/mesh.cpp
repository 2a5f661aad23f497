// Creating the mesh's groups; see include/chorus/train/mesh.hpp.
#include <chorus/train/mesh.hpp>

#include <algorithm>

namespace chorus::train {

namespace {

/// Splits `world` into the groups of kind `kind`: a group's color is its smallest member
/// (unique among the groups of one kind) and a member's key its place in the member list, so
/// the new communicator's ranks follow group_members. A rank in no group passes color -1.
Group split_group(Communicator& world, const MeshLayout& layout, MeshGroup kind,
                  const std::shared_ptr<CollectiveLedger>& ledger) {
  const int rank = world.rank();
  const std::vector<int> members = group_members(layout, kind, rank);
  const int color = members.empty() ? -1 : *std::min_element(members.begin(), members.end());
  const int key =
      static_cast<int>(std::find(members.begin(), members.end(), rank) - members.begin());
  const std::string name(to_string(kind));
  return Group{world.split(color, key, name), name, ledger};
}

}  // namespace

Mesh::Mesh(Communicator world, const MeshOptions& options)
    : world_(std::move(world)),
      layout_(make_layout(world_.size(), options.degrees)),
      coordinates_(coordinates_of(layout_, world_.rank())),
      ledger_(std::make_shared<CollectiveLedger>()) {
  for (MeshGroup kind : kMeshGroups) {
    if (kind == MeshGroup::Embedding && !options.embedding_group) continue;
    groups_[static_cast<std::size_t>(kind)] = split_group(world_, layout_, kind, ledger_);
  }
}

const Group& Mesh::group(MeshGroup kind) const {
  const Group& g = groups_[static_cast<std::size_t>(kind)];
  if (!g.comm) {
    throw Error(Status::InvalidUsage,
                "mesh: rank " + std::to_string(world_.rank()) + " (pipeline stage " +
                    std::to_string(coordinates_.pp) + " of " + std::to_string(layout_.pp) +
                    ") has no " + std::string(to_string(kind)) +
                    " group (MeshOptions::embedding_group creates it on the first and last stage)");
  }
  return g;
}

}  // namespace chorus::train
