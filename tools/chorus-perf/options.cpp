// chorus-perf's command-line parser (see options.hpp).
#include "options.hpp"

#include <charconv>
#include <chorus/error.hpp>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <string_view>

#include "collectives.hpp"

namespace chorus::perf {
namespace {

/// The most sizes (table rows per collective, dtype and op) one run may ask for.
constexpr std::size_t kMaxRows = 10000;

[[noreturn]] void bad(const std::string& sentence) {
  throw Error(Status::InvalidArgument, sentence);
}

/// "1.5", "2": a factor as the user would have typed it.
std::string format_factor(double factor) {
  char text[32];
  std::snprintf(text, sizeof text, "%g", factor);
  return text;
}

long long parse_integer(const std::string& option, const std::string& text, long long min_value,
                        long long max_value) {
  long long value = 0;
  auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size() || value < min_value ||
      value > max_value) {
    bad(option + " needs an integer in [" + std::to_string(min_value) + ", " +
        std::to_string(max_value) + "], got '" + text + "'");
  }
  return value;
}

std::vector<DataType> parse_dtypes(const std::string& text) {
  std::vector<DataType> dtypes;
  if (text == "all") {
    for (int i = 0; i < kNumDataTypes; ++i) dtypes.push_back(static_cast<DataType>(i));
    return dtypes;
  }
  DataType dtype;
  if (!parse_dtype(text, &dtype)) bad("-d: unknown data type '" + text + "'");
  return {dtype};
}

std::vector<ReduceOp> parse_ops(const std::string& text) {
  std::vector<ReduceOp> ops;
  if (text == "all") {
    for (int i = 0; i < kNumReduceOps; ++i) ops.push_back(static_cast<ReduceOp>(i));
    return ops;
  }
  ReduceOp op;
  if (!parse_reduce_op(text, &op)) bad("-o: unknown reduce op '" + text + "'");
  return {op};
}

std::vector<std::string> parse_collectives(const std::string& text) {
  std::vector<std::string> names;
  for (const BenchInfo& info : all_benches()) {
    if (text == "all" || text == info.name) names.emplace_back(info.name);
  }
  if (names.empty()) bad("-t: unknown collective '" + text + "'");
  return names;
}

double parse_factor(const std::string& text) {
  char* end = nullptr;
  double value = std::strtod(text.c_str(), &end);
  if (text.empty() || *end != '\0' || !std::isfinite(value) || value <= 1 || value > 1e6) {
    bad("-f needs a factor above 1, got '" + text + "'");
  }
  return value;
}

void apply(Options& o, char flag, const std::string& value) {
  const std::string option = std::string("-") + flag;
  switch (flag) {
    case 'b':
      o.min_bytes = parse_size(option, value);
      break;
    case 'e':
      o.max_bytes = parse_size(option, value);
      break;
    case 'f':
      o.step_factor = parse_factor(value);
      break;
    case 'i':
      o.step_bytes = parse_size(option, value);
      break;
    case 'n':
      o.iters = static_cast<int>(parse_integer(option, value, 1, 1 << 30));
      break;
    case 'w':
      o.warmup = static_cast<int>(parse_integer(option, value, 0, 1 << 30));
      break;
    case 'c':
      o.check = parse_integer(option, value, 0, 1) == 1;
      break;
    case 'd':
      o.dtypes = parse_dtypes(value);
      break;
    case 'o':
      o.ops = parse_ops(value);
      break;
    case 'r':
      o.root = static_cast<int>(parse_integer(option, value, 0, 1 << 30));
      break;
    case 't':
      o.collectives = parse_collectives(value);
      break;
    case 'a':
      if (value.empty()) bad("-a needs an algorithm name");
      o.algorithm = value;
      break;
    default:
      bad("unknown option '" + option + "'");
  }
}

/// The sizes min, then *factor (or +step) while <= max, at most `limit` of them.
std::vector<std::size_t> sizes_up_to(const Options& options, std::size_t limit) {
  std::vector<std::size_t> sizes;
  std::size_t size = options.min_bytes;
  while (size <= options.max_bytes && sizes.size() < limit) {
    sizes.push_back(size);
    std::size_t next =
        options.step_bytes > 0
            ? size + options.step_bytes
            : static_cast<std::size_t>(std::ceil(static_cast<double>(size) * options.step_factor));
    if (next <= size) next = size + 1;  // 0 * factor: move on to 1 byte
    size = next;
  }
  return sizes;
}

/// The sentence refusing a range of more than kMaxRows sizes: how many, and what to change.
std::string too_many_rows(const Options& o) {
  const std::string range =
      "-b " + std::to_string(o.min_bytes) + " -e " + std::to_string(o.max_bytes);
  if (o.step_bytes == 0) {
    return range + " -f " + format_factor(o.step_factor) + " gives more than " +
           std::to_string(kMaxRows) + " sizes (chorus-perf runs at most " +
           std::to_string(kMaxRows) + "): raise -f or narrow -b/-e";
  }
  const std::size_t span = o.max_bytes - o.min_bytes;
  const std::size_t step = (span + kMaxRows - 2) / (kMaxRows - 1);  // ceil(span / (rows - 1))
  return range + " -i " + std::to_string(o.step_bytes) + " gives " +
         std::to_string(span / o.step_bytes + 1) + " sizes (chorus-perf runs at most " +
         std::to_string(kMaxRows) + "): raise -i to at least " + std::to_string(step) +
         " or narrow -b/-e";
}

}  // namespace

std::size_t parse_size(const std::string& option, const std::string& text) {
  std::string digits = text;
  unsigned shift = 0;
  if (!digits.empty()) {
    char suffix = digits.back();
    if (suffix == 'K' || suffix == 'k') shift = 10;
    if (suffix == 'M' || suffix == 'm') shift = 20;
    if (suffix == 'G' || suffix == 'g') shift = 30;
    if (shift != 0) digits.pop_back();
  }
  constexpr long long kMax = 1ll << 40;  // 1 TiB: larger is surely a typo
  long long value = parse_integer(option, digits, 0, kMax >> shift);
  return static_cast<std::size_t>(value) << shift;
}

Options parse_options(int argc, const char* const argv[]) {
  Options options;
  for (int i = 1; i < argc; ++i) {
    std::string_view word = argv[i];
    if (word == "-h" || word == "--help") {
      options.help = true;
      continue;
    }
    if (word == "-z") {
      options.in_place = true;
      continue;
    }
    if (word == "--shared") {
      options.shared = true;
      continue;
    }
    if (word == "--tune") {
      if (i + 1 >= argc || std::string_view(argv[i + 1]).empty()) bad("--tune needs a file name");
      options.tune_file = argv[++i];
      continue;
    }
    if (word.size() < 2 || word[0] != '-') bad("unexpected argument '" + std::string(word) + "'");
    if (std::string_view("befinwcdorta").find(word[1]) == std::string_view::npos) {
      bad("unknown option '" + std::string(word) + "'");
    }
    std::string value;
    if (word.size() > 2) {
      value = std::string(word.substr(2));  // -b8
    } else if (i + 1 < argc) {
      value = argv[++i];
    } else {
      bad("option '" + std::string(word) + "' needs a value");
    }
    apply(options, word[1], value);
  }
  if (options.min_bytes > options.max_bytes) {
    bad("-b " + std::to_string(options.min_bytes) + " is larger than -e " +
        std::to_string(options.max_bytes));
  }
  message_sizes(options);  // refuses a range of more than kMaxRows sizes
  return options;
}

std::vector<std::size_t> message_sizes(const Options& options) {
  std::vector<std::size_t> sizes = sizes_up_to(options, kMaxRows + 1);
  if (sizes.size() > kMaxRows) bad(too_many_rows(options));
  return sizes;
}

std::string usage_text() {
  return R"(usage: chorusrun -n N chorus-perf [options]

Times Chorus collectives and prints the nccl-tests table (rank 0 prints).

  -b SIZE   smallest message (bytes; K/M/G suffixes = 2^10/2^20/2^30; default 32M)
  -e SIZE   largest message (default 32M)
  -f F      multiply the size by F each step (default 2)
  -i SIZE   add SIZE each step instead of multiplying
            (a range of more than 10000 sizes is refused)
  -n N      timed iterations per size (default 20)
  -w N      warm-up iterations per size (default 5)
  -c 0|1    check the results (default 1); wrong elements make the exit status 1
  -d TYPE   int8 uint8 int32 uint32 int64 uint64 float16 bfloat16 float32 float64, or all
  -o OP     sum prod max min avg, or all (default sum)
  -r ROOT   root of broadcast, reduce, gather, scatter (default 0)
  -t NAME   allreduce broadcast reduce allgather reducescatter gather scatter
            alltoall alltoallv sendrecv barrier, or all (default allreduce)
  -a ALGO   algorithm (sets CHORUS_ALGO, e.g. "ring" or "allreduce=ring")
  -z        also time the in-place form
  --shared  buffers from Communicator::alloc_shared (host-shared memory: all-reduces
            then run in place in the peers' buffers, algorithm shm_window)
  --tune F  measure the cost model's alpha/beta/gamma here and write them to F
            (merged with F if it exists; point CHORUS_TUNING_FILE at it); across
            hosts both the shm links inside hosts and the tcp links between them
  -h        this text

SIZE is the buffer size nccl-tests reports: for allgather, gather and alltoall(v)
the receive buffer, for reducescatter and scatter the send buffer; counts are
rounded down to a multiple of the rank count there. time = mean over the timed
iterations, max over ranks. algbw = size / time. busbw = algbw * factor:
allreduce 2(n-1)/n; allgather, reducescatter, gather, scatter, alltoall,
alltoallv (n-1)/n; broadcast, reduce, sendrecv 1; barrier has no bandwidth.
alltoallv sends block - ((r+p) mod 2) * block/2 elements from rank r to rank p
(block = count/n); its algbw counts the bytes actually sent per rank.
)";
}

}  // namespace chorus::perf
