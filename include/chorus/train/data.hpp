// Chorus training data: a distributed sampler, readers for Fashion-MNIST (gzip'd IDX), for a
// character-level text corpus and for a byte-level corpus of fortunes, and distributed
// evaluation with exact metrics.
//
// This header does not include torch: the readers return plain byte arrays, which a
// training program turns into tensors with torch::from_blob (see tools/chorus-train).
// Errors are chorus::Error: InvalidArgument for bad arguments, SystemError for files
// that cannot be read or are not what they claim to be.
#pragma once

#include <chorus/communicator.hpp>

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace chorus::train {

// ---------------------------------------------------------------------------------------
// Distributed sampler
// ---------------------------------------------------------------------------------------

/// What happens to the last dataset_size % nranks samples of an epoch.
enum class TailPolicy {
  /// Pad by wrapping around to the start of the (shuffled) order so that every rank gets
  /// ceil(n / nranks) samples; a few samples are seen twice per epoch (PyTorch's default).
  Pad,
  /// Drop the tail so that every rank gets floor(n / nranks) samples; with shuffling a
  /// different tail is dropped each epoch.
  Drop,
};

/// Position of a sampler inside its epochs, for checkpoints.
struct SamplerState {
  std::uint64_t epoch = 0;     ///< the current epoch
  std::uint64_t position = 0;  ///< samples of this rank's epoch share already handed out
};

/// The permutation of [0, n) for `epoch`: a Fisher-Yates shuffle driven by splitmix64
/// seeded from (seed, epoch). Fully specified here (no std::shuffle / distribution), so
/// every rank, compiler and standard library computes the same order.
std::vector<std::size_t> epoch_permutation(std::size_t n, std::uint64_t seed, std::uint64_t epoch);

/// Shards a dataset of `dataset_size` samples over `nranks` ranks. Each epoch every rank
/// computes the same global order (the epoch permutation, or 0..n-1 without shuffle),
/// extends or truncates it per TailPolicy to a multiple of nranks, and takes the positions
/// rank, rank + nranks, rank + 2 nranks, ... So within one epoch the ranks' shares are
/// disjoint (Drop) or overlap only in the wrapped padding (Pad), and together they cover
/// every sample (Pad) or all but at most nranks - 1 (Drop).
class DistributedSampler {
 public:
  DistributedSampler(std::size_t dataset_size, int rank, int nranks, std::uint64_t seed,
                     bool shuffle = true, TailPolicy tail = TailPolicy::Pad);

  /// Starts `epoch` from its beginning.
  void set_epoch(std::uint64_t epoch);
  std::uint64_t epoch() const { return state_.epoch; }

  /// Samples per rank per epoch (the same on every rank).
  std::size_t samples_per_rank() const { return per_rank_; }
  /// This rank's indices for the current epoch, in order.
  std::vector<std::size_t> epoch_indices() const;
  /// The next up to `batch_size` indices of this rank's epoch share; empty when the epoch
  /// is exhausted (call set_epoch(epoch() + 1) to go on). Every rank gets batches of the
  /// same sizes, so ranks stay in lockstep.
  std::vector<std::size_t> next_batch(std::size_t batch_size);
  bool epoch_done() const { return state_.position >= per_rank_; }

  SamplerState state() const { return state_; }
  /// Restores a state saved by state() of a sampler with the same arguments.
  void load_state(const SamplerState& state);

 private:
  std::size_t dataset_size_;
  int rank_;
  int nranks_;
  std::uint64_t seed_;
  bool shuffle_;
  TailPolicy tail_;
  std::size_t per_rank_;
  SamplerState state_;
  std::vector<std::size_t> current_;  ///< epoch_indices() of state_.epoch
};

// ---------------------------------------------------------------------------------------
// Datasets
// ---------------------------------------------------------------------------------------

/// An IDX array of unsigned bytes (type code 0x08): dims and row-major data.
struct IdxArray {
  std::vector<std::size_t> dims;
  std::vector<std::uint8_t> data;
};

/// Reads an IDX file of unsigned bytes, gzip-compressed or not (zlib reads both).
IdxArray read_idx(const std::string& path);

/// Images and labels of one Fashion-MNIST split: pixels are count x rows x cols bytes.
struct ImageDataset {
  std::size_t count = 0;
  std::size_t rows = 0;
  std::size_t cols = 0;
  std::vector<std::uint8_t> pixels;
  std::vector<std::uint8_t> labels;  ///< classes 0..9
};

/// $CHORUS_FASHION_MNIST_DIR, else where Debian's dataset-fashion-mnist installs it
/// (/usr/share/datasets/fashion-mnist).
std::string default_fashion_mnist_dir();

/// Loads {train,t10k}-{images-idx3,labels-idx1}-ubyte.gz from `dir`; checks that the
/// counts of images and labels agree.
ImageDataset load_fashion_mnist(const std::string& dir, bool train);

/// A character-level corpus: every byte value that occurs is a token.
struct TextCorpus {
  std::string vocab;                ///< the distinct bytes, sorted; token id = index here
  std::vector<std::uint8_t> train;  ///< token ids
  std::vector<std::uint8_t> test;   ///< token ids
};

/// The licence texts Debian's base-files package ships in /usr/share/common-licenses
/// (present on every Debian machine): Apache-2.0, GPL-2, GPL-3, LGPL-2.1, LGPL-3, MPL-2.0.
std::vector<std::string> default_corpus_files();

/// Reads `files` and splits each deterministically: its first (1 - test_fraction) bytes
/// go to train, the rest to test (so both halves contain every licence's style).
TextCorpus load_text_corpus(const std::vector<std::string>& files, double test_fraction);

/// A byte-level corpus of documents: token id = byte value (vocabulary 256).
struct ByteCorpus {
  std::vector<std::uint8_t> train;
  std::vector<std::uint8_t> validation;
  std::size_t train_documents = 0;
  std::size_t validation_documents = 0;
};

/// Where Debian's fortunes package installs its English fortune files.
inline constexpr const char* kFortunesDir = "/usr/share/games/fortunes";

/// Reads the fortune files of `dir`: every regular file whose name has no extension (the
/// .dat indexes and the .u8 links are skipped), in name order. A file is a list of fortunes,
/// each ended by a line "%". Fortune k of the whole sequence (counting from 0, over the files
/// in name order) goes to validation when k % validation_every == validation_every - 1, to
/// train otherwise; each split is the concatenation of its fortunes, each followed by "%\n".
/// SystemError "no fortune files in DIR (...)" naming the package when `dir` holds none;
/// InvalidArgument when validation_every < 2.
ByteCorpus load_fortunes(const std::string& dir, std::size_t validation_every = 10);

// ---------------------------------------------------------------------------------------
// Distributed evaluation
// ---------------------------------------------------------------------------------------

/// The contiguous part [first, last) of [0, n) that `rank` evaluates: sizes differ by at
/// most one, shards are disjoint and cover [0, n) exactly; no sample is padded or dropped.
std::pair<std::size_t, std::size_t> eval_shard(std::size_t n, int rank, int nranks);

/// One rank's sums over its shard. loss_sum is the sum (not mean) of per-sample (or per-
/// token) losses in nats; count the samples (tokens) and correct the right predictions.
struct EvalSums {
  double loss_sum = 0.0;
  std::int64_t correct = 0;
  std::int64_t count = 0;
};

/// Metrics over the whole dataset.
struct EvalResult {
  std::int64_t count = 0;
  std::int64_t correct = 0;
  double mean_loss = 0.0;   ///< loss_sum / count
  double accuracy = 0.0;    ///< correct / count
  double perplexity = 0.0;  ///< exp(mean_loss)
};

/// Collective: all-reduces the sums (loss in fp64, counts in int64) and derives the
/// metrics, identical on every rank. Exact in the counts; the loss differs from a single
/// process only by the order of fp64 additions.
EvalResult all_reduce_eval(Communicator& comm, const EvalSums& local);

/// The metrics of already-summed totals (what all_reduce_eval returns for them).
EvalResult eval_result(const EvalSums& total);

}  // namespace chorus::train
