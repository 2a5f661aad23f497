// The model-parallel mesh: every group of a pp × dp × cp × tp layout, created once.
//
// Construction is collective over the world communicator: every rank calls
// Communicator::split once per group kind, in the order of kMeshGroups (tp, cp, dp, pp, dp_cp,
// ep, edp, then embedding when asked), with the members mesh_layout.hpp computes, and names
// each split by its kind, so a flight-recorder dump after a hang says which dimension is stuck
// ("world.split1.color0.tp"). A bad layout throws Error(InvalidArgument) before any split, on
// every rank alike (the check is a pure function of the world size and the degrees).
//
// Every communicating function of the training layer takes a Group: the group's communicator,
// its name and the ledger its collectives are recorded in (one ledger per mesh, per rank).
#pragma once

#include <chorus/communicator.hpp>
#include <chorus/train/ledger.hpp>
#include <chorus/train/mesh_layout.hpp>

#include <array>
#include <memory>
#include <string>
#include <vector>

namespace chorus::train {

/// One communicating group as the training layer sees it. Copies share the communicator and
/// the ledger.
struct Group {
  Communicator comm;
  std::string name;                          ///< "tp", "dp", ... (ledger entries carry it)
  std::shared_ptr<CollectiveLedger> ledger;  ///< may be null: nothing is recorded

  int rank() const { return comm.rank(); }
  int size() const { return comm.size(); }
  void record(CollectiveKind kind, std::size_t bytes) const {
    if (ledger) ledger->record(name, kind, bytes);
  }
};

struct MeshOptions {
  MeshDegrees degrees;
  bool embedding_group = false;  ///< also create {first, last pipeline stage} (tied embeddings)
};

class CHORUS_EXPORT Mesh {
 public:
  /// Collective over `world`: checks the layout, then creates every group.
  Mesh(Communicator world, const MeshOptions& options);

  const MeshLayout& layout() const { return layout_; }
  /// This rank's coordinates.
  const MeshCoordinates& coordinates() const { return coordinates_; }
  const Communicator& world() const { return world_; }
  const std::shared_ptr<CollectiveLedger>& ledger() const { return ledger_; }

  /// This rank's group of kind `kind`. InvalidUsage for the embedding group when it was not
  /// asked for or this rank is on a middle stage.
  const Group& group(MeshGroup kind) const;
  const Group& tp() const { return group(MeshGroup::Tp); }
  const Group& cp() const { return group(MeshGroup::Cp); }
  const Group& dp() const { return group(MeshGroup::Dp); }
  const Group& pp() const { return group(MeshGroup::Pp); }
  const Group& data_context() const { return group(MeshGroup::DataContext); }
  const Group& expert() const { return group(MeshGroup::Expert); }
  const Group& expert_data() const { return group(MeshGroup::ExpertData); }
  const Group& embedding() const { return group(MeshGroup::Embedding); }

 private:
  Communicator world_;
  MeshLayout layout_;
  MeshCoordinates coordinates_;
  std::shared_ptr<CollectiveLedger> ledger_;
  std::array<Group, kMeshGroups.size()> groups_;
};

}  // namespace chorus::train
