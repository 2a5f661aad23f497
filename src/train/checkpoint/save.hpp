// The body of save_tensor_checkpoint, shared with the Module checkpoints of checkpoint.hpp.
#pragma once

#include <chorus/train/checkpoint_format.hpp>

#include <string>
#include <vector>

namespace chorus::train::detail {

/// save_tensor_checkpoint, whose failures read "<caller>(<path>) failed on rank <r>: <why>".
void save_pieces(const std::string& caller, const std::string& path,
                 const std::vector<TensorPiece>& pieces, const CheckpointHeader& header,
                 const chorus::Communicator& comm);

}  // namespace chorus::train::detail
