// The Fashion-MNIST MLP and the character-level LSTM (see tasks.hpp).
#include "tasks.hpp"

#include <chorus/train/data.hpp>

namespace chorus::train_tool {
namespace {

constexpr std::int64_t kClasses = 10;
// Fashion-MNIST's training-set pixel mean and standard deviation (scaled to [0, 1]).
constexpr double kPixelMean = 0.2860;
constexpr double kPixelStd = 0.3530;

/// 784 -> hidden (x layers, ReLU) -> 10.
class MlpTask : public Task {
 public:
  explicit MlpTask(const Options& options)
      : hidden_(options.hidden), layers_(options.layers), compute_(mixed_precision(options)) {
    const std::string dir = train::default_fashion_mnist_dir();
    train_ = to_tensors(train::load_fashion_mnist(dir, true));
    test_ = to_tensors(train::load_fashion_mnist(dir, false));
    std::int64_t width = train_.input.size(1);
    for (int l = 0; l < layers_; ++l) {
      net_->push_back(torch::nn::Linear(width, hidden_));
      net_->push_back(torch::nn::ReLU());
      width = hidden_;
    }
    net_->push_back(torch::nn::Linear(width, kClasses));
  }
  std::string describe() const override {
    return "mlp 784-" + std::to_string(hidden_) + "x" + std::to_string(layers_) +
           "-10 on Fashion-MNIST (" + std::to_string(train_size()) + " train, " +
           std::to_string(test_size()) + " test)";
  }
  train::RunConfig config() const override {
    return {{"--model", "mlp"},
            {"--hidden", std::to_string(hidden_)},
            {"--layers", std::to_string(layers_)},
            {"training set", "Fashion-MNIST (" + std::to_string(train_size()) + " images)"}};
  }
  std::shared_ptr<torch::nn::Module> module() override { return net_.ptr(); }
  std::size_t train_size() const override {
    return static_cast<std::size_t>(train_.target.size(0));
  }
  std::size_t test_size() const override { return static_cast<std::size_t>(test_.target.size(0)); }
  Batch batch(const std::vector<std::size_t>& indices, bool train) const override {
    const Batch& split = train ? train_ : test_;
    auto index = index_tensor(indices);
    auto pixels = split.input.index_select(0, index).to(torch::kFloat32).div_(255.0);
    return {pixels.sub_(kPixelMean).div_(kPixelStd), split.target.index_select(0, index)};
  }
  torch::Tensor forward(const torch::Tensor& input) override { return run(input, nullptr); }
  std::vector<std::vector<std::size_t>> zero3_units() const override {
    std::vector<std::vector<std::size_t>> units;
    std::size_t index = 0;
    for (const auto& layer : *net_) {
      const std::size_t held = layer.ptr()->parameters().size();
      if (held == 0) continue;
      units.emplace_back();
      for (std::size_t k = 0; k < held; ++k) units.back().push_back(index++);
    }
    return units;
  }
  torch::Tensor forward_sharded(const torch::Tensor& input, train::Zero3& zero) override {
    return run(input, &zero);
  }
  double clip_norm() const override { return 0.0; }

  /// The layers in turn, each Linear through zero.run_unit when sharded.
  torch::Tensor run(torch::Tensor x, train::Zero3* zero) {
    std::size_t unit = 0;
    for (auto& layer : *net_) {
      auto* linear = layer.ptr()->as<torch::nn::LinearImpl>();
      if (linear == nullptr) {
        x = layer.forward(x);
        continue;
      }
      const auto body = [&](const torch::Tensor& h) { return linear_forward(*linear, h); };
      x = zero ? zero->run_unit(unit++, x, body) : body(x);
    }
    return x;
  }

  /// A Linear on fp32 input and output, computed in the parameters' type: fp32, bf16, or for
  /// fp16 (which torch 1.13 cannot multiply on CPU) through fp32 copies of the parameters.
  torch::Tensor linear_forward(torch::nn::LinearImpl& linear, const torch::Tensor& x) const {
    if (!compute_) return linear.forward(x);
    if (*compute_ == torch::kBFloat16) return linear.forward(x.to(*compute_)).to(torch::kFloat);
    return torch::nn::functional::linear(x, linear.weight.to(torch::kFloat),
                                         linear.bias.to(torch::kFloat));
  }

  static torch::Tensor index_tensor(const std::vector<std::size_t>& indices) {
    std::vector<std::int64_t> values(indices.begin(), indices.end());
    return torch::tensor(values, torch::kInt64);
  }

 private:
  /// uint8 images [N, rows*cols] (converted per batch: a quarter of the memory) and int64 labels.
  static Batch to_tensors(const train::ImageDataset& set) {
    const auto n = static_cast<std::int64_t>(set.count);
    const auto pixels = static_cast<std::int64_t>(set.rows * set.cols);
    auto input =
        torch::from_blob(const_cast<std::uint8_t*>(set.pixels.data()), {n, pixels}, torch::kUInt8)
            .clone();
    auto target = torch::from_blob(const_cast<std::uint8_t*>(set.labels.data()), {n}, torch::kUInt8)
                      .to(torch::kInt64);
    return {input, target};
  }

  std::int64_t hidden_;
  int layers_;
  std::optional<torch::ScalarType> compute_;  ///< --mixed-precision (nullopt: fp32)
  torch::nn::Sequential net_;
  Batch train_;
  Batch test_;
};

/// Embedding -> one-layer LSTM -> linear over the vocabulary; sample i of a split is the
/// window of kSeq + 1 tokens starting at i * kSeq (input: the first kSeq, target: the last).
class LstmTask : public Task {
 public:
  static constexpr std::int64_t kSeq = 64;
  static constexpr std::int64_t kEmbed = 64;

  explicit LstmTask(const Options& options) : hidden_(options.hidden) {
    auto corpus = train::load_text_corpus(train::default_corpus_files(), 0.1);
    vocab_ = static_cast<std::int64_t>(corpus.vocab.size());
    train_ = to_tensor(corpus.train);
    test_ = to_tensor(corpus.test);
    net_ = std::make_shared<torch::nn::Module>();
    embed_ = net_->register_module("embed", torch::nn::Embedding(vocab_, kEmbed));
    lstm_ = net_->register_module(
        "lstm", torch::nn::LSTM(torch::nn::LSTMOptions(kEmbed, hidden_).batch_first(true)));
    head_ = net_->register_module("head", torch::nn::Linear(hidden_, vocab_));
  }
  std::string describe() const override {
    return "char-lstm embed " + std::to_string(kEmbed) + ", state " + std::to_string(hidden_) +
           ", vocab " + std::to_string(vocab_) + ", windows of " + std::to_string(kSeq) +
           " on /usr/share/common-licenses (" + std::to_string(train_size()) + " train, " +
           std::to_string(test_size()) + " test windows)";
  }
  train::RunConfig config() const override {
    return {{"--model", "lstm"},
            {"--hidden", std::to_string(hidden_)},
            {"training set", "/usr/share/common-licenses (" + std::to_string(train_size()) +
                                 " windows, vocabulary " + std::to_string(vocab_) + ")"}};
  }
  std::shared_ptr<torch::nn::Module> module() override { return net_; }
  std::size_t train_size() const override { return windows(train_); }
  std::size_t test_size() const override { return windows(test_); }
  Batch batch(const std::vector<std::size_t>& indices, bool train) const override {
    const torch::Tensor& text = train ? train_ : test_;
    std::vector<torch::Tensor> rows;
    for (auto i : indices)
      rows.push_back(text.narrow(0, static_cast<std::int64_t>(i) * kSeq, kSeq + 1));
    auto windows = torch::stack(rows);
    return {windows.narrow(1, 0, kSeq), windows.narrow(1, 1, kSeq).reshape({-1})};
  }
  torch::Tensor forward(const torch::Tensor& input) override {
    auto output = std::get<0>(lstm_->forward(embed_->forward(input)));
    return head_->forward(output).reshape({-1, vocab_});
  }
  double clip_norm() const override { return 1.0; }

 private:
  static torch::Tensor to_tensor(const std::vector<std::uint8_t>& ids) {
    return torch::from_blob(const_cast<std::uint8_t*>(ids.data()),
                            {static_cast<std::int64_t>(ids.size())}, torch::kUInt8)
        .to(torch::kInt64);
  }
  static std::size_t windows(const torch::Tensor& text) {
    return static_cast<std::size_t>((text.size(0) - 1) / kSeq);
  }

  std::int64_t hidden_;
  std::int64_t vocab_ = 0;
  std::shared_ptr<torch::nn::Module> net_;
  torch::nn::Embedding embed_{nullptr};
  torch::nn::LSTM lstm_{nullptr};
  torch::nn::Linear head_{nullptr};
  torch::Tensor train_;
  torch::Tensor test_;
};

}  // namespace

std::optional<torch::ScalarType> mixed_precision(const Options& options) {
  switch (options.mixed_precision) {
    case Precision::Bf16:
      return torch::kBFloat16;
    case Precision::Fp16:
      return torch::kHalf;
    case Precision::Fp32:
      break;
  }
  return std::nullopt;
}

std::unique_ptr<torch::optim::Optimizer> make_optimizer(const Options& options,
                                                        std::vector<torch::Tensor> parameters) {
  if (options.optimizer == OptimizerKind::Sgd) {
    return std::make_unique<torch::optim::SGD>(std::move(parameters),
                                               torch::optim::SGDOptions(options.lr).momentum(0.9));
  }
  return std::make_unique<torch::optim::Adam>(std::move(parameters),
                                              torch::optim::AdamOptions(options.lr));
}

std::unique_ptr<Task> make_task(const Options& options) {
  if (options.model == ModelKind::Mlp) return std::make_unique<MlpTask>(options);
  return std::make_unique<LstmTask>(options);
}

}  // namespace chorus::train_tool
