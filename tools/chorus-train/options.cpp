// Parser of chorus-train's command line (see options.hpp).
#include "options.hpp"

#include <chorus/error.hpp>

#include <functional>
#include <map>
#include <stdexcept>

namespace chorus::train_tool {
namespace {

Error bad(const std::string& option, const std::string& value, const std::string& why) {
  return Error(Status::InvalidArgument,
               "chorus-train: " + option + " '" + value + "' is not valid: " + why);
}

std::int64_t to_int(const std::string& option, const std::string& value, std::int64_t min) {
  std::size_t used = 0;
  std::int64_t number = 0;
  try {
    number = std::stoll(value, &used);
  } catch (const std::exception&) {
    throw bad(option, value, "expected an integer");
  }
  if (used != value.size()) throw bad(option, value, "expected an integer");
  if (number < min) throw bad(option, value, "must be at least " + std::to_string(min));
  return number;
}

double to_double(const std::string& option, const std::string& value) {
  std::size_t used = 0;
  double number = 0;
  try {
    number = std::stod(value, &used);
  } catch (const std::exception&) {
    throw bad(option, value, "expected a number");
  }
  if (used != value.size() || !(number >= 0)) throw bad(option, value, "expected a number >= 0");
  return number;
}

using Setter = std::function<void(Options&, const std::string&)>;

const std::map<std::string, Setter>& valued_options() {
  static const std::map<std::string, Setter> setters = {
      {"--model",
       [](Options& o, const std::string& v) {
         if (v != "mlp" && v != "lstm") throw bad("--model", v, "expected mlp or lstm");
         o.model = v == "mlp" ? ModelKind::Mlp : ModelKind::Lstm;
       }},
      {"--epochs",
       [](Options& o, const std::string& v) {
         o.epochs = static_cast<int>(to_int("--epochs", v, 1));
       }},
      {"--batch", [](Options& o, const std::string& v) { o.batch = to_int("--batch", v, 1); }},
      {"--steps", [](Options& o, const std::string& v) { o.steps = to_int("--steps", v, 0); }},
      {"--lr", [](Options& o, const std::string& v) { o.lr = to_double("--lr", v); }},
      {"--checkpoint", [](Options& o, const std::string& v) { o.checkpoint = v; }},
      {"--checkpoint-every",
       [](Options& o, const std::string& v) {
         o.checkpoint_every = to_int("--checkpoint-every", v, 0);
       }},
      {"--seed",
       [](Options& o, const std::string& v) {
         o.seed = static_cast<std::uint64_t>(to_int("--seed", v, 0));
       }},
      {"--bucket-cap-mb",
       [](Options& o, const std::string& v) { o.bucket_cap_mb = to_double("--bucket-cap-mb", v); }},
      {"--compression",
       [](Options& o, const std::string& v) {
         if (v == "none")
           o.compression = Compression::None;
         else if (v == "fp16")
           o.compression = Compression::Fp16;
         else if (v == "bf16")
           o.compression = Compression::Bf16;
         else
           throw bad("--compression", v, "expected none, fp16 or bf16");
       }},
      {"--threads",
       [](Options& o, const std::string& v) {
         o.threads = static_cast<int>(to_int("--threads", v, 1));
       }},
      {"--alternate-sync",
       [](Options& o, const std::string& v) {
         o.alternate_sync = to_int("--alternate-sync", v, 1);
       }},
      {"--log-every",
       [](Options& o, const std::string& v) { o.log_every = to_int("--log-every", v, 1); }},
      {"--hidden", [](Options& o, const std::string& v) { o.hidden = to_int("--hidden", v, 1); }},
      {"--layers",
       [](Options& o, const std::string& v) {
         o.layers = static_cast<int>(to_int("--layers", v, 1));
       }},
  };
  return setters;
}

}  // namespace

Options parse_options(int argc, const char* const argv[]) {
  Options options;
  for (int i = 1; i < argc; ++i) {
    std::string word = argv[i];
    std::string value;
    const bool has_inline = word.rfind("--", 0) == 0 && word.find('=') != std::string::npos;
    if (has_inline) {
      value = word.substr(word.find('=') + 1);
      word = word.substr(0, word.find('='));
    }
    if (word == "-h" || word == "--help") {
      options.help = true;
    } else if (word == "--no-sync") {
      options.no_sync = true;
    } else if (word == "--no-shared-buckets") {
      options.shared_buckets = false;
    } else if (word == "--no-overlap") {
      options.overlap = false;
    } else if (word == "--resume") {
      options.resume = true;
    } else if (word == "--no-eval") {
      options.eval = false;
    } else if (auto it = valued_options().find(word); it != valued_options().end()) {
      if (!has_inline) {
        if (i + 1 >= argc) throw bad(word, "", "the option needs a value");
        value = argv[++i];
      }
      it->second(options, value);
    } else {
      throw bad("option", word, "unknown (see --help)");
    }
  }
  if (options.alternate_sync > 0 && options.no_sync) {
    throw bad("--alternate-sync", std::to_string(options.alternate_sync),
              "cannot be combined with --no-sync");
  }
  if (options.resume && options.checkpoint.empty()) {
    throw bad("--resume", "", "needs --checkpoint path");
  }
  return options;
}

std::string usage_text() {
  return R"(usage: chorusrun -n N chorus-train [options]
Trains a model with Chorus DDP on N ranks (also runs alone as one rank).
  --model mlp|lstm       mlp: Fashion-MNIST classifier 784-H-..-H-10 (--hidden, --layers);
                         lstm: character-level LSTM on /usr/share/common-licenses  [mlp]
  --epochs E             passes over the training set                       [1]
  --batch B              samples per rank per step                          [64]
  --steps S              stop after S steps in total (0 = no limit)         [0]
  --lr X                 learning rate: mlp SGD+momentum 0.9, lstm Adam [0.05 / 0.003]
  --no-sync              same compute without gradient synchronisation (benchmark)
  --alternate-sync K     blocks of K synchronised and K unsynchronised steps take turns
                         in the same processes; the summary gives both step medians
                         (benchmark: the replicas drift apart)
  --no-shared-buckets    gradient buckets in ordinary memory, not host-shared (benchmark)
  --no-overlap           all-reduce every bucket after backward, none from the gradient
                         hooks (DdpOptions::overlap_backward = false)
  --checkpoint PATH      save model, optimizer, step and sampler state at the end
  --checkpoint-every N   ... and every N steps
  --resume               continue from --checkpoint PATH when it exists
  --seed S               initial weights and data order                     [1]
  --bucket-cap-mb M      DDP gradient bucket cap                            [25]
  --compression C        gradients on the wire: none|fp16|bf16              [none]
  --threads T            torch threads per rank                             [1]
  --log-every N          progress line every N steps                        [50]
  --hidden H             MLP width / LSTM state size                        [1024 / 256]
  --layers L             MLP hidden layers                                  [3]
  --no-eval              skip the final test-set evaluation
Environment: CHORUS_FASHION_MNIST_DIR (default /usr/share/datasets/fashion-mnist).
)";
}

}  // namespace chorus::train_tool
