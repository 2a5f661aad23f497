// The placements and tensor names of a ShardedState's pieces (sharded_state.cpp), shared by
// its save and load (sharded_checkpoint.cpp). Private to src/train.
#pragma once

#include "optimizer_slots.hpp"

#include <chorus/train/sharded_checkpoint.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace chorus::train::detail {

/// Elements of the parameter's local tensor (its piece's data shape).
std::int64_t local_numel(const TensorPiece& parameter);

/// The placements of `span`'s range of `parameter`: the parameter's, then Flat(dp, range)
/// (Replicate(dp) for a replicated state, whose spans must cover their parameters whole).
std::vector<Placement> span_placements(const ShardedState& state, const TensorPiece& parameter,
                                       const FlatSpan& span);

/// The placements of a parameter's step count (a scalar): Replicate over every mesh dimension
/// the parameter's placements and the state name.
std::vector<Placement> step_placements(const ShardedState& state, const TensorPiece& parameter);

/// `span`'s elements of `of`, a tensor shaped like the span's holder (a view).
/// InvalidArgument for a span outside its holder or parameter.
at::Tensor holder_range(const ShardedState& state, const FlatSpan& span, const at::Tensor& of);

/// Rewrites `state`'s spans, given in the flattening of each parameter's local tensor, into the
/// flattening of its saved piece: saved_index[k] holds, for each local element of parameter k
/// (row-major), its index in the saved piece's flattening, or -1 when it is not saved (e.g.
/// vocabulary padding). A span becomes one span per run of consecutive saved indices.
/// InvalidArgument unless there is one index per parameter.
void to_saved_layout(ShardedState& state, const std::vector<at::Tensor>& saved_index);

/// "optimizer/<slot>/<parameter>".
std::string slot_name(const std::string& slot, const std::string& parameter);

}  // namespace chorus::train::detail
