// The checkpoint format (checkpoint_format.hpp): placement arithmetic, a tensor saved as ZeRO
// shards of tp shards on 4 thread-ranks loading at another layout, replicated pieces written
// once, earlier saves' files removed, and one sentence for each bad input (a missing tensor,
// another global shape or dtype, missing shards, corrupt and truncated files, bad pieces).
#include <chorus/error.hpp>
#include <chorus/train/checkpoint_format.hpp>

#include "train/checkpoint/index.hpp"
#include "train/checkpoint/placement.hpp"

#include "../checkpoint_test_util.hpp"
#include "thread_ranks.hpp"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <filesystem>
#include <fstream>

namespace chorus::train {
namespace {

namespace fs = std::filesystem;
using detail::Shape;

using chorus::testing::error_of;

/// A directory for one test.
class Dir : public chorus::testing::TempDir {
 public:
  Dir() : TempDir("format") {}
};

const at::Tensor kMatrix = at::arange(24, at::kDouble).view({6, 4}) * 0.5 - 3;
const at::Tensor kScalar = at::scalar_tensor(2.5, at::kDouble);

TEST(CheckpointPlacement, ShardsComposeIntoABoxAndFlatKeepsARange) {
  const std::vector<Placement> cuts{
      Placement::replicate("dp", 1, 2), Placement::shard("tp", 1, 2, 0, 3, 3),
      Placement::shard("cp", 0, 2, 0, 1, 2), Placement::flat("dp", 1, 2, 2, 5)};
  const detail::Region region = detail::region_of("w", {6, 4}, cuts);
  EXPECT_EQ(region.box, (detail::Box{{4, 0}, {2, 4}}));
  EXPECT_TRUE(region.flat);
  EXPECT_EQ(region.data_shape(), Shape{5});
  EXPECT_EQ(piece_shape("w", {6, 4}, {cuts[1]}), (Shape{3, 4}));
  EXPECT_EQ(detail::index_in(region.box, 5), (Shape{5, 1}));
  EXPECT_EQ(detail::overlap({{0, 0}, {3, 4}}, {{2, 1}, {4, 2}}), (detail::Box{{2, 1}, {1, 2}}));
  EXPECT_FALSE(detail::overlap({{0, 0}, {3, 4}}, {{3, 0}, {3, 4}}).has_value());
  EXPECT_EQ(to_string(cuts[1]), "Shard(tp 1/2, dim 0, [3, 6))");

  const auto refused = [](std::vector<Placement> p) {
    return error_of(Status::InvalidArgument, [&] { piece_shape("w", {6, 4}, p); });
  };
  EXPECT_EQ(refused({Placement::shard("tp", 1, 2, 0, 4, 4)}),
            "Shard(tp 1/2, dim 0, [4, 8)) of w cuts dimension 0 of size 6");
  EXPECT_EQ(refused({Placement::shard("tp", 0, 2, 2, 0, 1)}),
            "Shard(tp 0/2, dim 2, [0, 1)) of w cuts a dimension of a 2-d tensor");
  EXPECT_EQ(refused({Placement::flat("dp", 0, 2, 0, 4), Placement::shard("tp", 0, 1, 0, 0, 1)}),
            "Shard(tp 0/1, dim 0, [0, 1)) of w follows a Flat placement (Flat is the last cut)");
  EXPECT_EQ(refused({Placement::replicate("dp", 2, 2)}),
            "Replicate(dp 2/2) of w puts index 2 outside dp's 2 ranks");
}

/// Rank (dp, tp) of a 2 × 2 mesh: rows [3·tp, 3·tp + 3) of the matrix, of which dp holds the
/// flat half dp (a ZeRO shard of a tp shard); the scalar replicated.
std::vector<TensorPiece> mesh_pieces(int rank) {
  const int tp = rank % 2, dp = rank / 2;
  const at::Tensor rows = kMatrix.narrow(0, 3 * tp, 3);
  return {{"matrix",
           {6, 4},
           at::kDouble,
           {Placement::shard("tp", tp, 2, 0, 3 * tp, 3), Placement::flat("dp", dp, 2, 6 * dp, 6)},
           rows.reshape(-1).narrow(0, 6 * dp, 6)},
          {"scalar", {}, at::kDouble, {Placement::replicate("world", rank, 4)}, kScalar}};
}

void save_on(int ranks, const std::string& path,
             const std::function<std::vector<TensorPiece>(int)>& pieces) {
  chorus::testing::ThreadJob job(ranks);
  job.run([&](Communicator& c) {
    save_tensor_checkpoint(path, pieces(c.rank()), {TrainingState{3, 0, {}, {}}, {{"m", "x"}}}, c);
  });
}

TEST(CheckpointFormat, ZeroShardsOfTpShardsLoadIntoAnotherLayout) {
  Dir dir;
  const std::string path = dir.file("ck");
  save_on(4, path, mesh_pieces);
  // Three ranks of another layout: columns split in two, and a flat range across row shards.
  for (int r = 0; r < 3; ++r) {
    std::vector<TensorPiece> targets{
        {"matrix", {6, 4}, at::kDouble, {Placement::shard("x", r % 2, 2, 1, 2 * (r % 2), 2)}, {}},
        {"matrix", {6, 4}, at::kDouble, {Placement::flat("y", r, 3, 5 + r, 13)}, {}},
        {"scalar", {}, at::kDouble, {}, at::zeros({}, at::kDouble)}};
    const CheckpointHeader header = load_tensor_checkpoint(path, targets);
    EXPECT_EQ(header.state.step, 3);
    EXPECT_EQ(header.model, (RunConfig{{"m", "x"}}));
    EXPECT_TRUE(at::equal(targets[0].data, kMatrix.narrow(1, 2 * (r % 2), 2)));
    EXPECT_TRUE(at::equal(targets[1].data, kMatrix.reshape(-1).narrow(0, 5 + r, 13)));
    EXPECT_TRUE(at::equal(targets[2].data, kScalar));
  }
  // The replicated scalar is written once, by rank 0; each rank wrote its own matrix piece.
  const detail::Index index = detail::parse_index(
      std::string(std::istreambuf_iterator<char>(std::ifstream(path).rdbuf()), {}), path);
  std::vector<int> writers;
  for (const auto& p : index.pieces) writers.push_back(p.tensor == "scalar" ? -1 - p.file : p.file);
  std::sort(writers.begin(), writers.end());
  EXPECT_EQ(writers, (std::vector<int>{-1, 0, 1, 2, 3}));
  // A second save replaces the first one's data files.
  save_on(4, path, mesh_pieces);
  EXPECT_EQ(dir.names().size(), 5u);
}

TEST(CheckpointFormat, MissingTensorShapeAndDtypeAreNamedAndNothingChanges) {
  Dir dir;
  const std::string path = dir.file("ck");
  save_on(4, path, mesh_pieces);
  const at::Tensor untouched = at::zeros({}, at::kDouble);
  const auto refused = [&](TensorPiece wrong) {
    std::vector<TensorPiece> targets{{"scalar", {}, at::kDouble, {}, untouched}, wrong};
    return error_of(Status::InvalidArgument, [&] { load_tensor_checkpoint(path, targets); });
  };
  EXPECT_EQ(refused({"bias", {4}, at::kDouble, {}, {}}),
            "checkpoint " + path + " has no tensor bias (the model's has shape [4])");
  EXPECT_EQ(refused({"matrix", {6, 5}, at::kDouble, {}, {}}),
            "checkpoint " + path +
                " holds matrix with shape [6, 4], the model's matrix has shape "
                "[6, 5]");
  EXPECT_EQ(refused({"matrix", {6, 4}, at::kFloat, {}, {}}),
            "checkpoint " + path + " holds matrix as Double, the model's is Float");
  EXPECT_EQ(untouched.item<double>(), 0.0);
}

TEST(CheckpointFormat, MissingShardsAreNamed) {
  Dir dir;
  const std::string path = dir.file("ck");
  // Both ranks claim rows [0, 3): rows [3, 6) are saved by nobody.
  save_on(2, path, [](int r) {
    return std::vector<TensorPiece>{{"matrix",
                                     {6, 4},
                                     at::kDouble,
                                     {Placement::shard("tp", r, 2, 0, 0, 3)},
                                     kMatrix.narrow(0, 0, 3)}};
  });
  std::vector<TensorPiece> top{
      {"matrix", {6, 4}, at::kDouble, {Placement::shard("a", 0, 2, 0, 0, 3)}, {}}};
  load_tensor_checkpoint(path, top);
  EXPECT_TRUE(at::equal(top[0].data, kMatrix.narrow(0, 0, 3)));
  std::vector<TensorPiece> whole{{"matrix", {6, 4}, at::kDouble, {}, {}}};
  EXPECT_EQ(error_of(Status::InvalidArgument, [&] { load_tensor_checkpoint(path, whole); }),
            "checkpoint " + path +
                " cannot assemble matrix for this layout: no saved piece holds its element [3, 0] "
                "(saved: Shard(tp 0/2, dim 0, [0, 3)))");
}

/// The one data file of a one-rank save at `path`.
std::string data_file(const Dir& dir) {
  for (const std::string& name : dir.names())
    if (name.find(".rank0") != std::string::npos) return dir.file(name);
  return "";
}

TEST(CheckpointFormat, CorruptTruncatedAndMissingFilesAreNamed) {
  Dir dir;
  const std::string path = dir.file("ck");
  save_on(1, path, mesh_pieces);
  const std::string data = data_file(dir);
  std::vector<TensorPiece> targets{{"matrix", {6, 4}, at::kDouble, {}, {}}};
  const auto failure = [&] {
    return error_of(Status::SystemError, [&] { load_tensor_checkpoint(path, targets); });
  };
  {
    std::fstream f(data, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(9);
    f.put('\x55');
  }
  EXPECT_NE(failure().find("bytes [0, 48) of data file " + data + " fail their checksum (corrupt)"),
            std::string::npos);
  fs::resize_file(data, 40);
  EXPECT_NE(failure().find("data file " + data +
                           " is 40 bytes, the index records 56 (truncated or replaced)"),
            std::string::npos);
  fs::remove(data);
  EXPECT_NE(failure().find("cannot open data file " + data), std::string::npos);
  fs::resize_file(path, fs::file_size(path) - 30);
  EXPECT_EQ(failure(),
            "checkpoint " + path + ": its index fails its checksum (truncated or corrupt)");
  std::ofstream(path) << "PK\x03\x04 a torch archive\n";
  EXPECT_EQ(failure(),
            "checkpoint " + path +
                " is not a Chorus tensor checkpoint (its index starts 'PK?? a torch archive')");
  fs::remove(path);
  EXPECT_EQ(failure(), "cannot read checkpoint " + path + ": No such file or directory");
}

TEST(CheckpointFormat, BadPiecesFailOnEveryRankBeforeAnythingIsWritten) {
  Dir dir;
  const std::string path = dir.file("ck");
  std::vector<std::string> messages(2);
  chorus::testing::ThreadJob job(2);
  job.run([&](Communicator& c) {
    const int r = c.rank();
    std::vector<TensorPiece> wrong_data{{"matrix",
                                         {6, 4},
                                         at::kDouble,
                                         {Placement::shard("tp", r, 2, 0, 3 * r, 3)},
                                         r == 1 ? kMatrix : kMatrix.narrow(0, 0, 3)}};
    messages[static_cast<std::size_t>(r)] =
        error_of(Status::InvalidArgument, [&] { save_tensor_checkpoint(path, wrong_data, {}, c); });
    std::vector<TensorPiece> disagree{
        {"matrix", {6, 4 + r}, at::kDouble, {}, at::zeros({6, 4 + r}, at::kDouble)}};
    const std::string second =
        error_of(Status::InvalidArgument, [&] { save_tensor_checkpoint(path, disagree, {}, c); });
    EXPECT_NE(second.find("rank 0 saves matrix as Double [6, 4], rank 1 as Double [6, 5]"),
              std::string::npos)
        << second;
  });
  EXPECT_EQ(messages[0], messages[1]);
  EXPECT_EQ(messages[0],
            "save_tensor_checkpoint(" + path +
                ") failed on rank 1: matrix: data of shape [6, 4] for a piece of shape [3, 4]");
  EXPECT_TRUE(dir.names().empty());
}

TEST(CheckpointFormat, AFailedSaveLeavesNoDataFiles) {
  Dir dir;
  const std::string path = dir.file("ck");
  std::filesystem::create_directory(path);  // the data files can be written, the index cannot
  const auto pieces = [](int rank) {
    return std::vector<TensorPiece>{{"row",
                                     {2, 4},
                                     at::kDouble,
                                     {Placement::shard("tp", rank, 2, 0, rank, 1)},
                                     kMatrix.narrow(0, rank, 1)}};
  };
  std::vector<std::string> messages(2);
  chorus::testing::ThreadJob job(2);
  job.run([&](Communicator& c) {
    messages[static_cast<std::size_t>(c.rank())] = error_of(
        Status::SystemError, [&] { save_tensor_checkpoint(path, pieces(c.rank()), {}, c); });
  });
  EXPECT_EQ(messages[0], messages[1]);
  EXPECT_NE(messages[0].find("save_tensor_checkpoint(" + path + ") failed on rank 0: rename " +
                             path + ".tmp -> " + path),
            std::string::npos)
      << messages[0];
  EXPECT_EQ(dir.names(), (std::vector<std::string>{"ck"}));
}

}  // namespace
}  // namespace chorus::train
