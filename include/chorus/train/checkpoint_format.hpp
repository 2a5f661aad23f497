// The checkpoint format every parallel strategy shares (docs/parallel.md, "Checkpoints"):
// tensors saved by logical name and global shape, each rank's pieces with their placement, so
// that a checkpoint saved by one layout loads into any other.
//
// A tensor is a logical tensor ("layers.0.mlp.fc1.weight", global shape [4h, h]) of which a
// rank holds a piece. The piece is described by placements applied in order to the global
// tensor, each over a named mesh dimension with this rank's index along it:
//
//   Replicate(mesh_dim)              the whole (current) tensor: no cut
//   Shard(mesh_dim, dim, offset, n)  indices [offset, offset + n) along `dim`
//   Flat(mesh_dim, offset, n)        elements [offset, offset + n) of the row-major flattening
//
// so [Shard(tp, dim 0, 8, 8), Flat(dp, 0, 40)] is the first 40 elements of rows [8, 16): a
// ZeRO shard of a tensor-parallel shard. Flat, if present, is the last cut. A piece's data has
// the shape its Shards leave (1-d of n elements after a Flat).
//
// On disk, a checkpoint at `path` is an index file at `path` (text: the TrainingState, a
// description of the model, every tensor's name, dtype and global shape, every saved piece's
// placements, data file, byte range and checksum) and one data file per rank that saved a
// piece, `path.<tag>.rank<r>` (raw bytes, native byte order). A region held by several ranks
// (a replicated tensor, a tp shard replicated over dp) is written once, by the lowest world
// rank holding it. Every file is written to a temporary and renamed; the index is renamed last,
// and the tag is new at every save, so a reader sees the previous checkpoint or the new one,
// never a mix; the previous save's data files are removed after the new index is in place.
// Every rank reads the data files it needs: the directory must be one all ranks see.
//
// Errors: InvalidArgument for a checkpoint that does not fit the targets (a missing tensor, a
// global shape or dtype that differs, a region no saved piece covers) and for bad pieces;
// SystemError for files that are missing, truncated or corrupt (checksums) or unwritable. Every
// sentence is one line naming the path, the tensor and the numbers.
#pragma once

#include <chorus/communicator.hpp>
#include <chorus/export.hpp>
#include <chorus/train/checkpoint.hpp>

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>
#include <vector>

namespace chorus::train {

enum class PlacementKind { Replicate, Shard, Flat };

/// One cut of a piece (see the file comment).
struct Placement {
  PlacementKind kind = PlacementKind::Replicate;
  std::string mesh_dim;     ///< the mesh dimension this cut is over ("tp", "dp")
  int index = 0;            ///< this rank's index along mesh_dim
  int count = 1;            ///< mesh_dim's size
  std::int64_t dim = 0;     ///< Shard: the tensor dimension that is cut
  std::int64_t offset = 0;  ///< Shard: first index along dim; Flat: first flat element
  std::int64_t length = 0;  ///< Shard: indices along dim; Flat: elements

  static Placement replicate(std::string mesh_dim, int index, int count);
  static Placement shard(std::string mesh_dim, int index, int count, std::int64_t dim,
                         std::int64_t offset, std::int64_t length);
  static Placement flat(std::string mesh_dim, int index, int count, std::int64_t offset,
                        std::int64_t length);
  bool operator==(const Placement&) const = default;
};

/// "Replicate(dp 0/2)", "Shard(tp 1/2, dim 0, [4, 8))", "Flat(dp 0/3, [0, 10))".
CHORUS_EXPORT std::string to_string(const Placement& placement);

/// A rank's piece of a logical tensor: what it saves, or what it wants loaded.
struct TensorPiece {
  std::string name;  ///< logical name: no whitespace, the same in every layout
  std::vector<std::int64_t> global_shape;
  at::ScalarType dtype = at::kFloat;
  std::vector<Placement> placements;  ///< empty: the whole tensor
  at::Tensor data;                    ///< CPU, of piece_shape(); for a load, may be undefined
};

/// The shape of the data of a piece of `global_shape` cut by `placements`. InvalidArgument
/// naming the tensor and the placement when a cut falls outside the tensor ("Shard(tp 1/2,
/// dim 0, [4, 12)) of layers.0.mlp.fc1.bias cuts dimension 0 of size 8"), a dim is out of
/// range, an index is outside its count, or a cut follows a Flat.
CHORUS_EXPORT std::vector<std::int64_t> piece_shape(const std::string& name,
                                                    const std::vector<std::int64_t>& global_shape,
                                                    const std::vector<Placement>& placements);

/// What a checkpoint records besides tensors: the training progress (compared by
/// config_difference on resume) and a description of the model (e.g. the GPT's layers, hidden,
/// heads, vocabulary), compared by model loaders whatever the layout.
struct CheckpointHeader {
  TrainingState state;
  RunConfig model;
};

/// Collective over every rank holding pieces: writes the checkpoint at `path` (see the file
/// comment). Each rank passes its own pieces; a tensor's pieces on different ranks must agree
/// on its dtype and global shape. Pieces need not cover their tensor (a gap fails only a load
/// that needs it). Returns on every rank once the index is in place, or throws on every rank
/// the first failing rank's sentence (InvalidArgument for a bad piece, SystemError for I/O).
CHORUS_EXPORT void save_tensor_checkpoint(const std::string& path,
                                          const std::vector<TensorPiece>& pieces,
                                          const CheckpointHeader& header,
                                          const chorus::Communicator& comm);

/// A tensor as a checkpoint holds it.
struct SavedTensor {
  std::string name;
  std::vector<std::int64_t> global_shape;
  at::ScalarType dtype = at::kFloat;
};

/// What a checkpoint's index says, without its data.
struct CheckpointListing {
  CheckpointHeader header;
  std::vector<SavedTensor> tensors;  ///< in the order they were first saved
};

/// Local: the header and tensors of the checkpoint at `path` (SystemError when the index is
/// missing, malformed, truncated or corrupt).
CHORUS_EXPORT CheckpointListing read_tensor_checkpoint(const std::string& path);

/// Local: fills every target's data from the checkpoint at `path`, whatever layout saved it:
/// for each target it reads the saved pieces that overlap the target's region (only those)
/// and assembles them. It checks every target (name present, same global shape and dtype, a
/// valid placement) before reading any data, and assigns the targets only when every one was
/// assembled, so a refused load changes nothing. A target with defined data is filled in place
/// (its shape and dtype must be the piece's); an undefined one gets a new tensor.
CHORUS_EXPORT CheckpointHeader load_tensor_checkpoint(const std::string& path,
                                                      std::vector<TensorPiece>& targets);

}  // namespace chorus::train
