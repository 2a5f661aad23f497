// Readers for gzip'd IDX files (Fashion-MNIST), the licence-text corpus and the fortunes.
#include <chorus/train/data.hpp>

#include <chorus/error.hpp>

#include <zlib.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>

namespace chorus::train {
namespace {

struct GzCloser {
  void operator()(gzFile_s* file) const { gzclose(file); }
};
using GzFile = std::unique_ptr<gzFile_s, GzCloser>;

Error file_error(const std::string& path, const std::string& what) {
  return Error(Status::SystemError, "cannot read " + path + ": " + what);
}

/// Reads exactly `size` bytes (zlib passes uncompressed files through unchanged).
void read_exact(gzFile file, const std::string& path, std::uint8_t* out, std::size_t size) {
  while (size > 0) {
    const unsigned chunk = static_cast<unsigned>(std::min<std::size_t>(size, 1u << 30));
    const int got = gzread(file, out, chunk);
    if (got <= 0) throw file_error(path, "the file ends early (truncated or not IDX)");
    out += got;
    size -= static_cast<std::size_t>(got);
  }
}

std::uint32_t big_endian_u32(const std::uint8_t* p) {
  return (std::uint32_t{p[0]} << 24) | (std::uint32_t{p[1]} << 16) | (std::uint32_t{p[2]} << 8) |
         std::uint32_t{p[3]};
}

std::string read_whole_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw file_error(path, "cannot open it");
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

}  // namespace

// IDX layout: bytes 0,1 are zero, byte 2 the element type (0x08 = unsigned byte), byte 3
// the number of dimensions d; then d big-endian uint32 sizes; then the data, row-major.
IdxArray read_idx(const std::string& path) {
  GzFile file(gzopen(path.c_str(), "rb"));
  if (!file) throw file_error(path, "cannot open it");
  std::array<std::uint8_t, 4> magic{};
  read_exact(file.get(), path, magic.data(), magic.size());
  if (magic[0] != 0 || magic[1] != 0 || magic[3] == 0) throw file_error(path, "not an IDX file");
  if (magic[2] != 0x08) throw file_error(path, "IDX element type is not unsigned byte (0x08)");
  IdxArray array;
  std::size_t total = 1;
  for (int d = 0; d < magic[3]; ++d) {
    std::array<std::uint8_t, 4> size{};
    read_exact(file.get(), path, size.data(), size.size());
    array.dims.push_back(big_endian_u32(size.data()));
    total *= array.dims.back();
  }
  array.data.resize(total);
  read_exact(file.get(), path, array.data.data(), total);
  std::uint8_t extra = 0;
  if (gzread(file.get(), &extra, 1) != 0) throw file_error(path, "trailing bytes after the data");
  return array;
}

std::string default_fashion_mnist_dir() {
  const char* env = std::getenv("CHORUS_FASHION_MNIST_DIR");
  return env && *env ? env : "/usr/share/datasets/fashion-mnist";
}

ImageDataset load_fashion_mnist(const std::string& dir, bool train) {
  const std::string prefix = dir + "/" + (train ? "train" : "t10k");
  IdxArray images = read_idx(prefix + "-images-idx3-ubyte.gz");
  IdxArray labels = read_idx(prefix + "-labels-idx1-ubyte.gz");
  if (images.dims.size() != 3 || labels.dims.size() != 1 || images.dims[0] != labels.dims[0]) {
    throw file_error(prefix, "images (3-d) and labels (1-d) do not describe the same samples");
  }
  ImageDataset set;
  set.count = images.dims[0];
  set.rows = images.dims[1];
  set.cols = images.dims[2];
  set.pixels = std::move(images.data);
  set.labels = std::move(labels.data);
  return set;
}

std::vector<std::string> default_corpus_files() {
  const std::string dir = "/usr/share/common-licenses/";
  std::vector<std::string> files;
  for (const char* name : {"Apache-2.0", "GPL-2", "GPL-3", "LGPL-2.1", "LGPL-3", "MPL-2.0"}) {
    files.push_back(dir + name);
  }
  return files;
}

TextCorpus load_text_corpus(const std::vector<std::string>& files, double test_fraction) {
  require_argument(!files.empty(), "load_text_corpus: no files");
  require_argument(test_fraction > 0.0 && test_fraction < 1.0,
                   "load_text_corpus: test_fraction must be in (0, 1)");
  std::string train_text;
  std::string test_text;
  for (const auto& path : files) {
    const std::string text = read_whole_file(path);
    const auto cut =
        static_cast<std::size_t>(static_cast<double>(text.size()) * (1.0 - test_fraction));
    train_text += text.substr(0, cut);
    test_text += text.substr(cut);
  }
  std::array<bool, 256> seen{};
  for (unsigned char c : train_text + test_text) seen[c] = true;
  TextCorpus corpus;
  std::array<std::uint8_t, 256> id{};
  for (int c = 0; c < 256; ++c) {
    if (!seen[static_cast<std::size_t>(c)]) continue;
    id[static_cast<std::size_t>(c)] = static_cast<std::uint8_t>(corpus.vocab.size());
    corpus.vocab.push_back(static_cast<char>(c));
  }
  for (unsigned char c : train_text) corpus.train.push_back(id[c]);
  for (unsigned char c : test_text) corpus.test.push_back(id[c]);
  return corpus;
}

}  // namespace chorus::train

namespace chorus::train {
namespace {

/// The fortune files of `dir` in name order (empty when there is no such directory).
std::vector<std::string> fortune_files(const std::string& dir) {
  std::vector<std::string> files;
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator(dir, error)) {
    if (!entry.is_regular_file(error) || entry.is_symlink(error)) continue;
    if (entry.path().has_extension()) continue;
    files.push_back(entry.path().string());
  }
  std::sort(files.begin(), files.end());
  return files;
}

/// The fortunes of one file's text: the texts between lines "%", empty ones left out.
std::vector<std::string> split_fortunes(const std::string& text) {
  std::vector<std::string> fortunes;
  std::string current;
  std::size_t begin = 0;
  while (begin < text.size()) {
    std::size_t end = text.find('\n', begin);
    end = end == std::string::npos ? text.size() : end + 1;
    const std::string line = text.substr(begin, end - begin);
    if (line == "%\n" || line == "%") {
      if (!current.empty()) fortunes.push_back(std::move(current));
      current.clear();
    } else {
      current += line;
    }
    begin = end;
  }
  if (!current.empty()) fortunes.push_back(std::move(current));
  return fortunes;
}

}  // namespace

ByteCorpus load_fortunes(const std::string& dir, std::size_t validation_every) {
  require_argument(validation_every >= 2, "load_fortunes: validation_every " +
                                              std::to_string(validation_every) +
                                              " must be at least 2");
  const std::vector<std::string> files = fortune_files(dir);
  if (files.empty()) {
    throw Error(Status::SystemError, "no fortune files in " + dir +
                                         " (Debian's fortunes package installs them in " +
                                         kFortunesDir + ": apt-get install fortunes)");
  }
  ByteCorpus corpus;
  std::size_t k = 0;
  for (const std::string& path : files) {
    for (const std::string& fortune : split_fortunes(read_whole_file(path))) {
      const bool validation = k++ % validation_every == validation_every - 1;
      auto& out = validation ? corpus.validation : corpus.train;
      out.insert(out.end(), fortune.begin(), fortune.end());
      out.push_back('%');
      out.push_back('\n');
      (validation ? corpus.validation_documents : corpus.train_documents) += 1;
    }
  }
  return corpus;
}

}  // namespace chorus::train
