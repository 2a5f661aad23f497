// Shared pieces of the tensor-parallel layer tests: deterministic tensors, thread-rank groups
// of 1-4 with a recording ledger, and PARALLEL.md section 4's tolerance.
#pragma once

#include <chorus/train/mesh.hpp>

#include "thread_ranks.hpp"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <functional>
#include <string>
#include <vector>

namespace chorus::train::tp_test {

/// A deterministic fp64 tensor of `shape` (the same on every rank; `salt` tells them apart).
inline at::Tensor filled(at::IntArrayRef shape, double salt) {
  std::int64_t n = 1;
  for (std::int64_t s : shape) n *= s;
  return at::sin(at::arange(n, at::kDouble) * 0.731 + salt).reshape(shape);
}

/// Slice r of `parts` equal slices of `full` along `dim`.
inline at::Tensor slice(const at::Tensor& full, int parts, int r, std::int64_t dim) {
  return full.chunk(parts, dim)[r];
}

/// PARALLEL.md section 4: max|a − b| ≤ rtol · max(max|b|, 1e-3); rtol 1e-10 in fp64, 1e-5 in
/// fp32.
inline void expect_close(const at::Tensor& a, const at::Tensor& b, const std::string& what,
                         double rtol = 1e-10) {
  ASSERT_TRUE(a.defined()) << what << " is undefined";
  ASSERT_EQ(a.sizes(), b.sizes()) << what;
  const double bound = rtol * std::max(b.abs().max().item<double>(), 1e-3);
  const double error = (a - b).abs().max().item<double>();
  EXPECT_LE(error, bound) << what << "\n" << a << "\n" << b;
}

/// A Group of the whole thread job, named "tp", with a ledger recording from the start.
inline Group whole(Communicator& comm) {
  auto ledger = std::make_shared<CollectiveLedger>();
  ledger->enable();
  return Group{comm, "tp", ledger};
}

/// The ledger's entries since the last call: exactly `expected` (none on a group of one).
inline void expect_ledger(const Group& g, std::vector<LedgerEntry> expected,
                          const std::string& what) {
  if (g.size() == 1) expected.clear();
  const std::vector<LedgerEntry> got = g.ledger->take();
  EXPECT_EQ(got, expected) << what << ": got " << describe(got) << "; expected "
                           << describe(expected);
}

inline LedgerEntry tp_entry(CollectiveKind kind, std::size_t bytes) { return {"tp", kind, bytes}; }

/// Runs body(group, rank, size) on groups of 1, 2, 3 and 4 thread-ranks.
inline void run(const std::function<void(const Group&, int, int)>& body) {
  for (int n = 1; n <= 4; ++n) {
    chorus::testing::ThreadJob job(n);
    ASSERT_TRUE(job.ok());
    job.run([&](Communicator& c) {
      SCOPED_TRACE("tp " + std::to_string(n) + ", rank " + std::to_string(c.rank()));
      body(whole(c), c.rank(), c.size());
    });
  }
}

/// The sum over the group of `x` (a test-side reduction: recorded in no ledger).
inline at::Tensor sum_over(const Group& g, const at::Tensor& x) {
  at::Tensor out = x.contiguous().clone();
  Communicator comm = g.comm;
  if (g.size() > 1)
    comm.all_reduce(out.data_ptr(), out.data_ptr(), out.numel(), DataType::Float64, ReduceOp::Sum);
  return out;
}

/// Every rank's `shard` concatenated along `dim` in rank order: the full tensor reassembled
/// (a test-side all-gather: recorded in no ledger).
inline at::Tensor reassembled(const Group& g, const at::Tensor& shard, std::int64_t dim) {
  const at::Tensor local = shard.contiguous();
  at::Tensor rows = at::empty({g.size(), local.numel()}, local.options());
  Communicator comm = g.comm;
  comm.all_gather(local.data_ptr(), rows.data_ptr(), local.numel(), DataType::Float64);
  std::vector<at::Tensor> shards;
  for (const at::Tensor& row : rows.unbind(0)) shards.push_back(row.view(local.sizes()));
  return at::cat(shards, dim);
}

}  // namespace chorus::train::tp_test
