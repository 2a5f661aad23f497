// The index of a checkpoint (checkpoint_format.hpp): a text file of one record per line, so
// that a person can read it and a diff can compare two.
//
//   chorus-checkpoint 1
//   tag 3f0c2a9e81d4b771
//   step 12
//   epoch 0
//   extra <key> <int>                 TrainingState::extra
//   config <key> <value>              TrainingState::config
//   model <key> <value>               CheckpointHeader::model
//   file <rank> <name> <bytes>        a data file, named relative to the index's directory
//   tensor <name> <dtype> <shape>     shape "3,24,24" ("-" for a scalar)
//   piece <tensor> <file rank> <offset> <bytes> <checksum> <n> then n placements of 7 fields:
//         <R|S|F> <mesh_dim> <index> <count> <dim> <offset> <length>
//   checksum <16 hex digits>          of every byte before this line
//
// Strings are escaped: bytes outside '!'..'~', '%' and '~' as %XX, the empty string as "~".
#pragma once

#include "placement.hpp"

#include <chorus/train/checkpoint_format.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace chorus::train::detail {

struct IndexFile {
  int rank = 0;
  std::string name;
  std::int64_t bytes = 0;
};

struct IndexTensor {
  std::string name;
  std::string dtype;  ///< c10's name: "Double", "Float", "Long", ...
  Shape shape;
};

struct IndexPiece {
  std::string tensor;
  std::vector<Placement> placements;
  int file = -1;  ///< the rank whose data file holds it (-1 while not written)
  std::int64_t offset = 0;
  std::int64_t bytes = 0;
  std::uint64_t checksum = 0;
};

struct Index {
  std::string tag;
  CheckpointHeader header;
  std::vector<IndexFile> files;
  std::vector<IndexTensor> tensors;
  std::vector<IndexPiece> pieces;
};

/// The index as text, its checksum line last.
std::string format_index(const Index& index);

/// Parses `text` read from `path`; SystemError "checkpoint <path> is not a Chorus tensor
/// checkpoint ...", "checkpoint <path>: its index fails its checksum (truncated or corrupt)" or
/// "checkpoint <path>: malformed index line 7: '...'".
Index parse_index(const std::string& text, const std::string& path);

}  // namespace chorus::train::detail
