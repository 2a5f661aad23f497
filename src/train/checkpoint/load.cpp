// load_tensor_checkpoint (checkpoint_format.hpp): every target is checked against the index
// first (name, global shape, dtype, placement), then assembled from the saved pieces whose box
// overlaps its own, with a mask of the elements filled, so that a region no saved piece covers
// is named; the targets are assigned only when every one was assembled.
#include "files.hpp"
#include "index.hpp"

#include <chorus/error.hpp>
#include <chorus/train/checkpoint_format.hpp>

#include <ATen/ATen.h>

#include <cstring>
#include <filesystem>
#include <map>

namespace chorus::train {
namespace {

namespace fs = std::filesystem;
using detail::Box;
using detail::Index;
using detail::IndexPiece;
using detail::IndexTensor;
using detail::Region;

Index read_index(const std::string& path) {
  return detail::parse_index(detail::read_file(path, "checkpoint " + path), path);
}

/// The ScalarType c10::toString names `name`; SystemError for none.
at::ScalarType scalar_type_named(const std::string& name, const std::string& path) {
  for (int i = 0; i < static_cast<int>(at::ScalarType::NumOptions); ++i) {
    const auto type = static_cast<at::ScalarType>(i);
    if (name == c10::toString(type)) return type;
  }
  throw Error(Status::SystemError, "checkpoint " + path + " names an unknown dtype '" + name + "'");
}

/// What one target needs: its tensor in the index, its region, the tensor's saved pieces.
struct Plan {
  const IndexTensor* tensor = nullptr;
  Region region;
  std::vector<const IndexPiece*> pieces;
};

Plan plan_of(const Index& index, const TensorPiece& target, const std::string& path) {
  const std::string& name = target.name;
  Plan plan;
  for (const IndexTensor& t : index.tensors)
    if (t.name == name) plan.tensor = &t;
  require_argument(plan.tensor != nullptr, "checkpoint " + path + " has no tensor " + name +
                                               " (the model's has shape " +
                                               detail::to_string(target.global_shape) + ")");
  require_argument(plan.tensor->shape == target.global_shape,
                   "checkpoint " + path + " holds " + name + " with shape " +
                       detail::to_string(plan.tensor->shape) + ", the model's " + name +
                       " has shape " + detail::to_string(target.global_shape));
  const std::string dtype = c10::toString(target.dtype);
  require_argument(plan.tensor->dtype == dtype, "checkpoint " + path + " holds " + name + " as " +
                                                    plan.tensor->dtype + ", the model's is " +
                                                    dtype);
  plan.region = detail::region_of(name, target.global_shape, target.placements);
  if (target.data.defined()) {
    require_argument(target.data.sizes().vec() == plan.region.data_shape() &&
                         target.data.scalar_type() == target.dtype,
                     name + ": a target of " +
                         std::string(c10::toString(target.data.scalar_type())) + " " +
                         detail::to_string(target.data.sizes().vec()) + " for a piece of " + dtype +
                         " " + detail::to_string(plan.region.data_shape()));
  }
  for (const IndexPiece& p : index.pieces)
    if (p.tensor == name) plan.pieces.push_back(&p);
  return plan;
}

/// `t` narrowed to `box`, where `t` holds the box at `origin`.
at::Tensor narrowed(at::Tensor t, const Box& box, const detail::Shape& origin) {
  for (std::size_t i = 0; i < box.size.size(); ++i) {
    t = t.narrow(static_cast<std::int64_t>(i), box.offset[i] - origin[i], box.size[i]);
  }
  return t;
}

/// A saved piece's data, read and checked, as a tensor of its region's data shape.
at::Tensor read_piece(const Index& index, const std::string& path, const IndexPiece& piece,
                      const Region& region, at::ScalarType dtype) {
  const std::string what = "checkpoint " + path + ", a piece of " + piece.tensor;
  const detail::IndexFile* file = nullptr;
  for (const detail::IndexFile& f : index.files)
    if (f.rank == piece.file) file = &f;
  const auto bytes = region.numel() * static_cast<std::int64_t>(c10::elementSize(dtype));
  if (file == nullptr || piece.bytes != bytes || piece.offset < 0 ||
      piece.offset + bytes > file->bytes) {
    throw Error(Status::SystemError, what + ": its index entry names no valid byte range");
  }
  const fs::path data = fs::path(path).parent_path() / file->name;
  const std::string raw = detail::read_checked_range(data.string(), file->bytes, piece.offset,
                                                     bytes, piece.checksum, what);
  at::Tensor out = at::empty(region.data_shape(), at::TensorOptions().dtype(dtype));
  std::memcpy(out.data_ptr(), raw.data(), raw.size());
  return out;
}

/// "Shard(tp 0/2, dim 0, [0, 4)); Shard(tp 1/2, dim 0, [4, 8))": the saved pieces.
std::string saved_pieces(const Plan& plan) {
  std::string out;
  std::size_t shown = 0;
  for (const IndexPiece* p : plan.pieces) {
    if (shown++ == 4) return out + "; and " + std::to_string(plan.pieces.size() - 4) + " more";
    std::string cuts;
    for (const Placement& q : p->placements) cuts += (cuts.empty() ? "" : " ") + to_string(q);
    out += (out.empty() ? "" : "; ") + (cuts.empty() ? std::string("the whole tensor") : cuts);
  }
  return out.empty() ? "none" : out;
}

/// Copies the saved pieces overlapping the plan's box into `out`, marking `have`.
void fill(const Index& index, const std::string& path, const Plan& plan, at::Tensor& out,
          at::Tensor& have) {
  const Box& want = plan.region.box;
  for (const IndexPiece* piece : plan.pieces) {
    Region saved;
    try {
      saved = detail::region_of(piece->tensor, plan.tensor->shape, piece->placements);
    } catch (const Error& e) {
      throw Error(Status::SystemError, "checkpoint " + path + ": " + e.what());
    }
    const std::optional<Box> common = detail::overlap(saved.box, want);
    if (!common || saved.numel() == 0) continue;
    const at::Tensor values = read_piece(index, path, *piece, saved, out.scalar_type());
    at::Tensor box = values;
    at::Tensor box_have = at::ones(saved.box.size, at::kBool);
    if (saved.flat) {
      box = at::zeros(saved.box.size, out.options());
      box.view(-1).narrow(0, saved.flat_offset, saved.flat_length).copy_(values);
      box_have.fill_(false).view(-1).narrow(0, saved.flat_offset, saved.flat_length).fill_(true);
    }
    const at::Tensor source_have = narrowed(box_have, *common, saved.box.offset);
    at::Tensor target = narrowed(out, *common, want.offset);
    target.copy_(at::where(source_have, narrowed(box, *common, saved.box.offset), target));
    at::Tensor target_have = narrowed(have, *common, want.offset);
    target_have.logical_or_(source_have);
  }
}

at::Tensor assemble(const Index& index, const std::string& path, const TensorPiece& target,
                    const Plan& plan) {
  const Region& region = plan.region;
  at::Tensor out = at::zeros(region.box.size, at::TensorOptions().dtype(target.dtype));
  at::Tensor have = at::zeros(region.box.size, at::kBool);
  if (region.numel() > 0) fill(index, path, plan, out, have);
  at::Tensor needed = have.view(-1);
  if (region.flat) needed = needed.narrow(0, region.flat_offset, region.flat_length);
  if (needed.numel() > 0 && !needed.all().item<bool>()) {
    const std::int64_t first = (~needed).nonzero()[0][0].item<std::int64_t>();
    const std::int64_t flat = first + (region.flat ? region.flat_offset : 0);
    throw Error(Status::InvalidArgument, "checkpoint " + path + " cannot assemble " + target.name +
                                             " for this layout: no saved piece holds its element " +
                                             detail::to_string(detail::index_in(region.box, flat)) +
                                             " (saved: " + saved_pieces(plan) + ")");
  }
  if (!region.flat) return out;
  return out.view(-1).narrow(0, region.flat_offset, region.flat_length).clone();
}

}  // namespace

CheckpointListing read_tensor_checkpoint(const std::string& path) {
  const Index index = read_index(path);
  CheckpointListing out{index.header, {}};
  for (const IndexTensor& t : index.tensors) {
    out.tensors.push_back({t.name, t.shape, scalar_type_named(t.dtype, path)});
  }
  return out;
}

CheckpointHeader load_tensor_checkpoint(const std::string& path,
                                        std::vector<TensorPiece>& targets) {
  const Index index = read_index(path);
  std::vector<Plan> plans;
  for (const TensorPiece& target : targets) plans.push_back(plan_of(index, target, path));
  std::vector<at::Tensor> values;
  for (std::size_t i = 0; i < targets.size(); ++i) {
    values.push_back(assemble(index, path, targets[i], plans[i]));
  }
  at::NoGradGuard no_grad;
  for (std::size_t i = 0; i < targets.size(); ++i) {
    if (targets[i].data.defined())
      targets[i].data.copy_(values[i]);
    else
      targets[i].data = values[i];
  }
  return index.header;
}

}  // namespace chorus::train
