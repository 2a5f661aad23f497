// The data-parallel gradient synchronisation of a model-parallel layout; see reducer.hpp.
#include <chorus/error.hpp>
#include <chorus/train/reducer.hpp>

namespace chorus::train {

DataParallelSync::DataParallelSync(const std::vector<at::Tensor>& params, const Mesh& mesh,
                                   ReducerOptions options, bool unsynced_steps)
    : data_context_(mesh.data_context()), cp_(mesh.cp()), unsynced_steps_(unsynced_steps) {
  options.divisor = mesh.layout().dp;
  synced_ = std::make_unique<GradientReducer>(params, data_context_, options);
  if (unsynced_steps && cp_.size() > 1) {
    options.divisor = 1;
    context_ = std::make_unique<GradientReducer>(params, cp_, options);
  }
}

DataParallelSync::~DataParallelSync() = default;

void DataParallelSync::begin_step(bool synced) {
  if (active_) throw Error(Status::InvalidUsage, "DataParallelSync::begin_step: a step is active");
  if (!synced && !unsynced_steps_) {
    throw Error(Status::InvalidUsage,
                "DataParallelSync::begin_step: an unsynchronised step "
                "needs unsynced_steps at construction");
  }
  synced_step_ = synced;
  active_ = true;
  if (GradientReducer* r = reducer()) r->begin_step();
}

GradientReducer* DataParallelSync::reducer() const {
  return synced_step_ ? synced_.get() : context_.get();
}

void DataParallelSync::finish_step() {
  if (!active_)
    throw Error(Status::InvalidUsage, "DataParallelSync::finish_step: no step is active");
  active_ = false;
  if (GradientReducer* r = reducer()) r->finish_step();
}

const Group& DataParallelSync::replica_group() const { return synced_step_ ? data_context_ : cp_; }

const GradientReducer& DataParallelSync::synced_reducer() const { return *synced_; }

}  // namespace chorus::train
