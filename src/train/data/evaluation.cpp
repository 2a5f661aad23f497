// Distributed evaluation: disjoint unpadded shards, sums all-reduced in fp64/int64.
#include <chorus/train/data.hpp>

#include <chorus/error.hpp>

#include <array>
#include <cmath>

namespace chorus::train {

// Rank r gets n / N samples plus one more when r < n % N; its first index is the sum of
// the sizes of ranks 0..r-1, i.e. r * (n / N) + min(r, n % N).
std::pair<std::size_t, std::size_t> eval_shard(std::size_t n, int rank, int nranks) {
  require_argument(nranks > 0 && rank >= 0 && rank < nranks,
                   "eval_shard: rank " + std::to_string(rank) + " is not in [0, " +
                       std::to_string(nranks) + ")");
  const auto ranks = static_cast<std::size_t>(nranks);
  const auto r = static_cast<std::size_t>(rank);
  const std::size_t base = n / ranks;
  const std::size_t extra = n % ranks;
  const std::size_t first = r * base + std::min(r, extra);
  return {first, first + base + (r < extra ? 1 : 0)};
}

EvalResult eval_result(const EvalSums& total) {
  EvalResult result;
  result.count = total.count;
  result.correct = total.correct;
  if (total.count > 0) {
    result.mean_loss = total.loss_sum / static_cast<double>(total.count);
    result.accuracy = static_cast<double>(total.correct) / static_cast<double>(total.count);
    result.perplexity = std::exp(result.mean_loss);
  }
  return result;
}

EvalResult all_reduce_eval(Communicator& comm, const EvalSums& local) {
  double loss = local.loss_sum;
  std::array<std::int64_t, 2> counts{local.correct, local.count};
  Request loss_request = comm.iall_reduce(&loss, &loss, 1, DataType::Float64, ReduceOp::Sum);
  Request count_request =
      comm.iall_reduce(counts.data(), counts.data(), counts.size(), DataType::Int64, ReduceOp::Sum);
  loss_request.wait();
  count_request.wait();
  return eval_result(EvalSums{loss, counts[0], counts[1]});
}

}  // namespace chorus::train
