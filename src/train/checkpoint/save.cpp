// save_tensor_checkpoint (checkpoint_format.hpp), in four collective phases, each ending with
// every rank learning whether any rank failed (raise_if_any_failed), so all ranks throw the
// same sentence or all go on:
//
//   1. each rank checks its pieces and describes them (an index without data);
//   2. the descriptions are all-gathered; every rank checks that the ranks agree on each
//      tensor's dtype and global shape and computes the same owners: the lowest rank holding
//      a region writes it;
//   3. each rank writes the pieces it owns to its data file under a tag rank 0 chose;
//   4. rank 0 gathers where the pieces went, writes the index and removes the data files of
//      earlier saves.
#include "save.hpp"
#include "../checkpoint_checks.hpp"
#include "files.hpp"
#include "index.hpp"

#include <chorus/error.hpp>
#include <chorus/train/checkpoint_format.hpp>

#include <ATen/ATen.h>

#include <cctype>
#include <chrono>
#include <filesystem>
#include <map>
#include <random>

namespace chorus::train {
namespace {

namespace fs = std::filesystem;
using detail::Index;
using detail::IndexPiece;
using detail::IndexTensor;

std::string dtype_name(at::ScalarType t) { return c10::toString(t); }

/// Throws InvalidArgument unless `piece` is well formed; its description otherwise.
IndexPiece described(const TensorPiece& piece) {
  const std::string& name = piece.name;
  bool plain = !name.empty();
  for (unsigned char c : name) plain = plain && std::isgraph(c);
  require_argument(plain, "tensor name '" + name + "' is empty or holds whitespace");
  const detail::Region region = detail::region_of(name, piece.global_shape, piece.placements);
  const at::Tensor& data = piece.data;
  require_argument(data.defined(), name + ": the piece has no data");
  require_argument(data.device().is_cpu(), name + ": the piece's data is not on the CPU");
  require_argument(data.scalar_type() == piece.dtype,
                   name + ": data of dtype " + dtype_name(data.scalar_type()) +
                       " for a tensor of dtype " + dtype_name(piece.dtype));
  require_argument(data.sizes().vec() == region.data_shape(),
                   name + ": data of shape " + detail::to_string(data.sizes().vec()) +
                       " for a piece of shape " + detail::to_string(region.data_shape()));
  return {.tensor = name, .placements = piece.placements};
}

/// Every rank's `text`, in rank order.
std::vector<std::string> all_gather_text(const chorus::Communicator& comm,
                                         const std::string& text) {
  chorus::Communicator c = comm;
  const auto n = static_cast<std::size_t>(c.size());
  std::int64_t length = static_cast<std::int64_t>(text.size());
  std::vector<std::int64_t> lengths(n);
  c.all_gather(&length, lengths.data(), 1, DataType::Int64);
  std::size_t width = 0;
  for (std::int64_t l : lengths) width = std::max(width, static_cast<std::size_t>(l));
  std::string padded = text;
  padded.resize(width);
  std::string all(width * n, '\0');
  c.all_gather(padded.data(), all.data(), width, DataType::Uint8);
  std::vector<std::string> out;
  for (std::size_t r = 0; r < n; ++r) {
    out.push_back(all.substr(r * width, static_cast<std::size_t>(lengths[r])));
  }
  return out;
}

/// The ranks' tensors merged (first appearance in rank order); InvalidArgument when two ranks
/// describe one tensor differently.
std::vector<IndexTensor> merged_tensors(const std::vector<Index>& ranks) {
  std::vector<IndexTensor> out;
  std::map<std::string, std::pair<std::size_t, int>> seen;  // name -> (position, first rank)
  for (std::size_t r = 0; r < ranks.size(); ++r) {
    for (const IndexTensor& t : ranks[r].tensors) {
      const auto [it, fresh] = seen.emplace(t.name, std::pair{out.size(), static_cast<int>(r)});
      if (fresh) {
        out.push_back(t);
        continue;
      }
      const IndexTensor& first = out[it->second.first];
      require_argument(first.dtype == t.dtype && first.shape == t.shape,
                       "rank " + std::to_string(it->second.second) + " saves " + t.name + " as " +
                           first.dtype + " " + detail::to_string(first.shape) + ", rank " +
                           std::to_string(r) + " as " + t.dtype + " " + detail::to_string(t.shape));
    }
  }
  return out;
}

/// Which of rank `rank`'s pieces it writes: those of a region no lower rank holds, once each,
/// and only those with elements.
std::vector<bool> owned(const std::vector<Index>& ranks, int rank) {
  std::map<std::string, int> owner;  // tensor + region -> lowest rank
  std::map<std::string, detail::Shape> shapes;
  for (const Index& index : ranks)
    for (const IndexTensor& t : index.tensors) shapes[t.name] = t.shape;
  const auto key = [&shapes](const IndexPiece& p) {
    return p.tensor + " " + detail::region_of(p.tensor, shapes.at(p.tensor), p.placements).key();
  };
  for (std::size_t r = 0; r < ranks.size(); ++r)
    for (const IndexPiece& p : ranks[r].pieces) owner.emplace(key(p), static_cast<int>(r));
  std::vector<bool> out;
  std::map<std::string, bool> taken;
  for (const IndexPiece& p : ranks[static_cast<std::size_t>(rank)].pieces) {
    const std::string k = key(p);
    const bool mine = owner.at(k) == rank && !taken[k] &&
                      detail::region_of(p.tensor, shapes.at(p.tensor), p.placements).numel() > 0;
    taken[k] = true;
    out.push_back(mine);
  }
  return out;
}

/// A fresh tag, the same on every rank (rank 0's).
std::string new_tag(const chorus::Communicator& comm) {
  std::uint64_t tag = 0;
  if (comm.rank() == 0) {
    std::random_device device;
    tag = (std::uint64_t{device()} << 32 | device()) ^
          static_cast<std::uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
  }
  chorus::Communicator c = comm;
  c.broadcast(&tag, &tag, 1, DataType::Uint64, 0);
  return detail::to_hex(tag);
}

std::string data_file_name(const std::string& path, const std::string& tag, int rank) {
  return fs::path(path).filename().string() + "." + tag + ".rank" + std::to_string(rank);
}

/// Writes this rank's owned pieces to its data file; returns what went where (no file when it
/// owns nothing).
Index write_pieces(const std::string& path, const std::string& tag,
                   const std::vector<TensorPiece>& pieces, const std::vector<bool>& mine,
                   int rank) {
  Index written;
  std::vector<at::Tensor> keep;
  std::vector<detail::Bytes> parts;
  std::int64_t offset = 0;
  for (std::size_t i = 0; i < pieces.size(); ++i) {
    if (!mine[i]) continue;
    const at::Tensor& data = keep.emplace_back(pieces[i].data.contiguous());
    const auto bytes = static_cast<std::size_t>(data.nbytes());
    parts.push_back({data.data_ptr(), bytes});
    written.pieces.push_back(
        {.tensor = pieces[i].name,
         .placements = pieces[i].placements,
         .file = rank,
         .offset = offset,
         .bytes = static_cast<std::int64_t>(bytes),
         .checksum = detail::checksum({static_cast<const char*>(data.data_ptr()), bytes})});
    offset += static_cast<std::int64_t>(bytes);
  }
  if (parts.empty()) return written;
  const std::string name = data_file_name(path, tag, rank);
  detail::write_file_atomically((fs::path(path).parent_path() / name).string(), parts);
  written.files.push_back({.rank = rank, .name = name, .bytes = offset});
  return written;
}

/// Removes the data files of earlier saves at `path`: "<name>.<16 hex>.rank<r>" of another tag.
void remove_stale_files(const std::string& path, const std::string& tag) {
  const fs::path p(path);
  const std::string prefix = p.filename().string() + ".";
  fs::path dir = p.parent_path();
  if (dir.empty()) dir = ".";
  std::error_code error;
  for (const auto& entry : fs::directory_iterator(dir, error)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind(prefix, 0) != 0 || name.size() < prefix.size() + 22) continue;
    const std::string rest = name.substr(prefix.size());
    const bool hex = rest.find_first_not_of("0123456789abcdef") == 16;
    if (!hex || rest.compare(16, 5, ".rank") != 0 || rest.compare(0, 16, tag) == 0) continue;
    if (rest.find_first_not_of("0123456789", 21) != std::string::npos) continue;
    fs::remove(entry.path(), error);
  }
}

/// Rank 0: the index of every rank's written pieces, in place at `path`.
void write_index(const std::string& path, const std::string& tag, const CheckpointHeader& header,
                 std::vector<IndexTensor> tensors, const std::vector<std::string>& written) {
  Index index;
  index.tag = tag;
  index.header = header;
  index.tensors = std::move(tensors);
  for (std::size_t r = 0; r < written.size(); ++r) {
    Index part = detail::parse_index(written[r], "(rank " + std::to_string(r) + "'s pieces)");
    index.files.insert(index.files.end(), part.files.begin(), part.files.end());
    index.pieces.insert(index.pieces.end(), part.pieces.begin(), part.pieces.end());
  }
  const std::string text = detail::format_index(index);
  detail::write_file_atomically(path, {{text.data(), text.size()}});
  remove_stale_files(path, tag);
}

}  // namespace

namespace detail {

void save_pieces(const std::string& caller, const std::string& path,
                 const std::vector<TensorPiece>& pieces, const CheckpointHeader& header,
                 const chorus::Communicator& comm) {
  require_argument(!path.empty(), caller + ": empty path");
  const std::string where =
      caller + "(" + path + ") failed on rank " + std::to_string(comm.rank()) + ": ";
  const auto run = [&](Status status, auto&& action) {
    std::optional<Error> failure = detail::failure_of(action, status);
    if (failure) failure = Error(failure->status(), where + failure->what());
    detail::raise_if_any_failed(comm, failure);
  };
  Index mine;
  run(Status::InvalidArgument, [&] {
    for (const TensorPiece& piece : pieces) {
      mine.pieces.push_back(described(piece));
      mine.tensors.push_back({piece.name, dtype_name(piece.dtype), piece.global_shape});
    }
    mine.tensors = merged_tensors({mine});
  });
  std::vector<Index> ranks;
  std::vector<IndexTensor> tensors;
  std::vector<bool> own;
  run(Status::InvalidArgument, [&] {
    for (const std::string& text : all_gather_text(comm, detail::format_index(mine))) {
      ranks.push_back(
          detail::parse_index(text, "(pieces of rank " + std::to_string(ranks.size()) + ")"));
    }
    tensors = merged_tensors(ranks);
    own = owned(ranks, comm.rank());
  });
  const std::string tag = new_tag(comm);
  Index written;
  try {
    run(Status::SystemError, [&] { written = write_pieces(path, tag, pieces, own, comm.rank()); });
    const std::vector<std::string> all = all_gather_text(comm, detail::format_index(written));
    run(Status::SystemError, [&] {
      if (comm.rank() == 0) write_index(path, tag, header, tensors, all);
    });
  } catch (const Error&) {
    // No index names this save's data files: remove this rank's.
    for (const auto& f : written.files) fs::remove(fs::path(path).parent_path() / f.name);
    throw;
  }
}

}  // namespace detail

void save_tensor_checkpoint(const std::string& path, const std::vector<TensorPiece>& pieces,
                            const CheckpointHeader& header, const chorus::Communicator& comm) {
  detail::save_pieces("save_tensor_checkpoint", path, pieces, header, comm);
}

}  // namespace chorus::train
