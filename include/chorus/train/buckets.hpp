// Gradient buckets: the wire format of reduced gradients and the pure bucket assignment that
// the gradient reducer (reducer.hpp) and DistributedDataParallel (ddp.hpp) share.
//
// Plain C++: including it pulls in no torch header.
#pragma once

#include <chorus/export.hpp>

#include <cstddef>
#include <vector>

namespace chorus::train {

/// Wire format of gradients. fp32 and fp64 buckets travel in the half type (Chorus accumulates
/// half types in fp32); the reduced values are converted back into the bucket.
enum class GradCompression { None, Fp16, Bf16 };

/// Pure function: assigns parameters (given their byte sizes, in registration order) to buckets.
/// Parameters are taken in reverse registration order (the order backward produces them); the
/// first bucket closes as soon as it holds >= first_cap bytes, every later one as soon as it
/// holds >= cap bytes (a bucket exceeds its cap by less than its last parameter). Every bucket is
/// non-empty; the last one may be below the cap. Throws InvalidArgument for a zero cap.
CHORUS_EXPORT std::vector<std::vector<std::size_t>> assign_buckets(
    const std::vector<std::size_t>& param_bytes, std::size_t first_cap, std::size_t cap);

/// The same walk for parameters of several kinds (e.g. dtypes: one flat buffer holds one
/// dtype): a bucket holds parameters of one kind only. Each kind has one open bucket at a time,
/// its first bucket closes at first_cap, its later ones at cap, as above; buckets are ordered by
/// the walk position of their first parameter (the order in which backward starts them). With
/// a single kind this is exactly the overload above. InvalidArgument when the sizes of
/// `param_bytes` and `kinds` differ or a cap is zero.
CHORUS_EXPORT std::vector<std::vector<std::size_t>> assign_buckets(
    const std::vector<std::size_t>& param_bytes, const std::vector<int>& kinds,
    std::size_t first_cap, std::size_t cap);

}  // namespace chorus::train
