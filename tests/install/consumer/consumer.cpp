// Uses the installed C++ API through the shared library, errors included.
#include <chorus/communicator.hpp>

#include <cstdio>

int main() {
  chorus::InitOptions options;
  options.store_address = "127.0.0.1:0";
  chorus::Communicator comm = chorus::Communicator::init(options);
  double x = 4.0;
  comm.all_reduce(&x, &x, 1, chorus::DataType::Float64, chorus::ReduceOp::Max);
  try {
    comm.broadcast(&x, &x, 1, chorus::DataType::Float64, 7);
    return 1;
  } catch (const chorus::Error& e) {
    if (e.status() != chorus::Status::InvalidArgument) return 2;
  }
  std::printf("c++ consumer: %.1f\n", x);
  return x == 4.0 ? 0 : 3;
}
