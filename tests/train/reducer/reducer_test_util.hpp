// Shared pieces of the gradient reducer tests: meshes of thread-ranks, deterministic gradients.
#pragma once

#include <chorus/train/mesh.hpp>
#include <chorus/train/reducer.hpp>

#include "../tensor_parallel/tp_test_util.hpp"

#include <functional>
#include <string>
#include <vector>

namespace chorus::train::reducer_test {

using tp_test::expect_close;
using tp_test::filled;

/// Runs body(mesh) on `world` thread-ranks arranged as `degrees`, the mesh's ledger recording.
inline void on_mesh(int world, MeshDegrees degrees, const std::function<void(Mesh&)>& body) {
  torch::set_num_threads(1);
  chorus::testing::ThreadJob job(world);
  ASSERT_TRUE(job.ok());
  job.run([&](Communicator& comm) {
    Mesh mesh(comm, {.degrees = degrees});
    mesh.ledger()->enable();
    SCOPED_TRACE("world " + std::to_string(world) + " (pp " + std::to_string(degrees.pp) + ", dp " +
                 std::to_string(degrees.dp) + ", tp " + std::to_string(degrees.tp) + "), rank " +
                 std::to_string(comm.rank()));
    body(mesh);
  });
}

/// Runs body(group, rank) on n thread-ranks forming one group "dp" without a ledger.
inline void on_ranks(int n, const std::function<void(const Group&, int)>& body) {
  torch::set_num_threads(1);
  chorus::testing::ThreadJob job(n);
  ASSERT_TRUE(job.ok());
  job.run([&](Communicator& comm) {
    SCOPED_TRACE(std::to_string(n) + " ranks, rank " + std::to_string(comm.rank()));
    body(Group{comm, "dp", nullptr}, comm.rank());
  });
}

/// The gradient world rank `rank` holds for parameter `i` (shaped and typed like p) in `step`.
inline at::Tensor local_grad(const at::Tensor& p, int rank, std::size_t i, int step) {
  return filled(p.sizes(), 0.37 * rank + 1.3 * static_cast<double>(i) + 5.1 * step)
      .to(p.scalar_type());
}

/// Trained parameters of `types` (cycled) and several shapes: several buckets at small caps.
inline std::vector<at::Tensor> make_params(const std::vector<at::ScalarType>& types) {
  const std::vector<std::vector<std::int64_t>> shapes{{5, 3}, {7}, {2, 2, 2}, {11}, {4}};
  std::vector<at::Tensor> out;
  for (std::size_t i = 0; i < shapes.size(); ++i) {
    out.push_back(torch::zeros(shapes[i], types[i % types.size()]).requires_grad_());
  }
  return out;
}

/// Caps of 16 and 64 bytes, readiness by mark_ready only.
inline ReducerOptions small_buckets() {
  ReducerOptions o;
  o.first_bucket_bytes = 16;
  o.bucket_cap_bytes = 64;
  o.autograd_hooks = false;
  return o;
}

/// Sets every parameter's gradient to local_grad(rank, step) and marks it ready, in reverse
/// order as backward would (by tensor and by index alternately), skipping `skip`.
inline void mark_all(GradientReducer& reducer, std::vector<at::Tensor>& params, int rank, int step,
                     std::size_t skip = SIZE_MAX) {
  for (std::size_t i = params.size(); i-- > 0;) {
    if (i == skip) continue;
    const at::Tensor g = local_grad(params[i], rank, i, step);
    if (params[i].grad().defined()) {
      params[i].mutable_grad().copy_(g);  // into the alias handed over by the last step
    } else {
      params[i].mutable_grad() = g;
    }
    if (i % 2 == 0) {
      reducer.mark_ready(params[i]);
    } else {
      reducer.mark_ready(i);
    }
  }
}

/// sum over `ranks` of local_grad(p, r, i, step) / divisor, in fp64.
inline at::Tensor mean_of(const at::Tensor& p, const std::vector<int>& ranks, std::size_t i,
                          int step, double divisor) {
  at::Tensor sum = torch::zeros(p.sizes(), at::kDouble);
  for (int r : ranks) sum += local_grad(p, r, i, step).to(at::kDouble);
  return sum / divisor;
}

}  // namespace chorus::train::reducer_test
