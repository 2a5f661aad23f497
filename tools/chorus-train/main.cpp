// chorus-train: data-parallel training of a Fashion-MNIST MLP or a character LSTM with
// Chorus DDP. Run under chorusrun (or any launcher init_from_env understands); started
// without launcher variables it runs as a single rank.
#include "counting_allocator.hpp"
#include "gpt_trainer.hpp"
#include "options.hpp"
#include "trainer.hpp"

#include <chorus/communicator.hpp>
#include <chorus/error.hpp>

#include <cstdlib>
#include <exception>
#include <iostream>

namespace {

bool launched() {
  for (const char* name :
       {"RANK", "WORLD_SIZE", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "SLURM_PROCID"}) {
    if (std::getenv(name) != nullptr) return true;
  }
  return false;
}

chorus::Communicator connect() {
  if (launched()) return chorus::Communicator::init_from_env();
  chorus::InitOptions single;  // one rank, its store on a free loopback port
  single.store_address = "127.0.0.1:0";
  return chorus::Communicator::init(single);
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const auto options = chorus::train_tool::parse_options(argc, argv);
    if (options.peak_memory) chorus::bench::CountingAllocator::install();  // before any tensor
    if (options.help) {
      std::cout << chorus::train_tool::usage_text();
      return 0;
    }
    if (options.pp_dry_run && options.write_compute_profile.empty()) {
      std::cout << chorus::train_tool::pipeline_dry_run(options);
      return 0;
    }
    chorus::Communicator comm = connect();
    if (!options.write_compute_profile.empty()) {  // on every rank at once
      std::cout << chorus::train_tool::write_gpt_compute_profile(options, comm);
      return 0;
    }
    chorus::train_tool::run_training(options, comm);
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "chorus-train: " << e.what() << "\n";
    return 1;
  }
}
