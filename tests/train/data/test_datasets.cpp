// IDX reader on small synthetic files (gzip'd and plain, broken ones too) and the
// deterministic train/test split of the text corpus.
#include <chorus/train/data.hpp>

#include <gtest/gtest.h>

#include <zlib.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

namespace chorus::train {
namespace {

namespace fs = std::filesystem;

fs::path temp_path(const std::string& name) {
  return fs::temp_directory_path() / ("chorus-data-" + std::to_string(::getpid()) + "-" + name);
}

/// An IDX header (type 0x08) for `dims` followed by `data`.
std::string idx_bytes(const std::vector<std::uint32_t>& dims, const std::string& data,
                      unsigned char type = 0x08) {
  std::string bytes = {0, 0, static_cast<char>(type), static_cast<char>(dims.size())};
  for (auto d : dims) {
    for (int shift = 24; shift >= 0; shift -= 8) bytes.push_back(static_cast<char>(d >> shift));
  }
  return bytes + data;
}

void write_gzip(const fs::path& path, const std::string& bytes) {
  gzFile file = gzopen(path.c_str(), "wb");
  ASSERT_NE(file, nullptr);
  ASSERT_EQ(gzwrite(file, bytes.data(), static_cast<unsigned>(bytes.size())),
            static_cast<int>(bytes.size()));
  gzclose(file);
}

void write_plain(const fs::path& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

std::string pattern(std::size_t n) {
  std::string data;
  for (std::size_t i = 0; i < n; ++i) data.push_back(static_cast<char>((i * 37 + 5) % 256));
  return data;
}

TEST(ReadIdx, GzipAndPlain) {
  const std::string data = pattern(3 * 4 * 5);
  const auto gz = temp_path("a.gz");
  const auto plain = temp_path("a.idx");
  write_gzip(gz, idx_bytes({3, 4, 5}, data));
  write_plain(plain, idx_bytes({3, 4, 5}, data));
  for (const auto& path : {gz, plain}) {
    IdxArray array = read_idx(path);
    EXPECT_EQ(array.dims, (std::vector<std::size_t>{3, 4, 5}));
    ASSERT_EQ(array.data.size(), data.size());
    for (std::size_t i = 0; i < data.size(); ++i) {
      ASSERT_EQ(array.data[i], static_cast<std::uint8_t>(data[i])) << "byte " << i;
    }
    fs::remove(path);
  }
}

TEST(ReadIdx, RejectsBrokenFiles) {
  const auto path = temp_path("bad.gz");
  write_gzip(path, idx_bytes({4, 4}, pattern(15)));  // one byte short
  EXPECT_THROW(read_idx(path), Error);
  write_gzip(path, idx_bytes({4}, pattern(5)));  // one byte too many
  EXPECT_THROW(read_idx(path), Error);
  write_gzip(path, idx_bytes({4}, std::string(16, 'x'), 0x0D));  // float elements
  EXPECT_THROW(read_idx(path), Error);
  write_gzip(path, "hello world");
  EXPECT_THROW(read_idx(path), Error);
  fs::remove(path);
  EXPECT_THROW(read_idx(path), Error);  // missing
}

TEST(LoadFashionMnist, PairsImagesWithLabels) {
  const auto dir = temp_path("fmnist");
  fs::create_directories(dir);
  write_gzip(dir / "t10k-images-idx3-ubyte.gz", idx_bytes({2, 3, 3}, pattern(18)));
  write_gzip(dir / "t10k-labels-idx1-ubyte.gz", idx_bytes({2}, std::string{7, 2}));
  ImageDataset set = load_fashion_mnist(dir, false);
  EXPECT_EQ(set.count, 2u);
  EXPECT_EQ(set.rows, 3u);
  EXPECT_EQ(set.cols, 3u);
  EXPECT_EQ(set.labels, (std::vector<std::uint8_t>{7, 2}));
  write_gzip(dir / "t10k-labels-idx1-ubyte.gz", idx_bytes({3}, std::string{7, 2, 1}));
  EXPECT_THROW(load_fashion_mnist(dir, false), Error);
  fs::remove_all(dir);
}

TEST(LoadTextCorpus, SplitsEachFileDeterministically) {
  const auto a = temp_path("a.txt");
  const auto b = temp_path("b.txt");
  write_plain(a, "abcdefghij");  // 10 bytes: 8 train, 2 test at test_fraction 0.2
  write_plain(b, "zzzzz");       // 5 bytes: 4 train, 1 test
  TextCorpus corpus = load_text_corpus({a, b}, 0.2);
  EXPECT_EQ(corpus.vocab, "abcdefghijz");
  auto decode = [&](const std::vector<std::uint8_t>& ids) {
    std::string text;
    for (auto id : ids) text.push_back(corpus.vocab.at(id));
    return text;
  };
  EXPECT_EQ(decode(corpus.train), "abcdefghzzzz");
  EXPECT_EQ(decode(corpus.test), "ijz");
  fs::remove(a);
  fs::remove(b);
  EXPECT_THROW(load_text_corpus({a}, 0.2), Error);
}

TEST(LoadFortunes, SplitsEveryThirdFortuneToValidation) {
  const auto dir = temp_path("fortunes");
  fs::create_directories(dir);
  write_plain(dir / "b", "b0\n%\nb1\nline two\n%\n");
  write_plain(dir / "a", "a0\n%\na1\n%\n%\na2\n");  // an empty fortune is left out
  write_plain(dir / "a.dat", "index");              // skipped: has an extension
  fs::create_symlink(dir / "a", dir / "a.u8");      // skipped: a link
  const ByteCorpus corpus = load_fortunes(dir, 3);
  // In name order a0 a1 a2 b0 b1: fortunes 2 (a2) and 5 (none) go to validation.
  const auto text = [](const std::vector<std::uint8_t>& bytes) {
    return std::string(bytes.begin(), bytes.end());
  };
  EXPECT_EQ(text(corpus.train), "a0\n%\na1\n%\nb0\n%\nb1\nline two\n%\n");
  EXPECT_EQ(text(corpus.validation), "a2\n%\n");
  EXPECT_EQ(corpus.train_documents, 4u);
  EXPECT_EQ(corpus.validation_documents, 1u);
  EXPECT_THROW(load_fortunes(dir, 1), Error);
  fs::remove_all(dir);
  try {
    load_fortunes(dir);
    FAIL() << "a missing corpus was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no fortune files in " + dir.string()), std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("apt-get install fortunes"), std::string::npos);
  }
}

}  // namespace
}  // namespace chorus::train
