// Modular rank arithmetic shared by the pattern headers (pure functions).
#pragma once

namespace chorus::algorithms::patterns {

/// a mod n in [0, n) for any sign of a (n > 0).
constexpr int wrap(int a, int n) { return ((a % n) + n) % n; }

/// Whom a rank sends to and receives from in one round of an exchange.
struct Partners {
  int send_to;
  int recv_from;
};

}  // namespace chorus::algorithms::patterns
