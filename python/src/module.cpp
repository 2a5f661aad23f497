// chorus_torch._C: the Python face of ProcessGroupChorus. The package's
// __init__.py does the bootstrap through the c10d store and registers the backend.
#include "ddp_hook.hpp"
#include "process_group_chorus.hpp"

#include "bootstrap/store.hpp"

#include <pybind11/chrono.h>
#include <torch/csrc/utils/pybind.h>
#include <torch/csrc/distributed/c10d/reducer.hpp>

namespace py = pybind11;

namespace {

/// Rank 0's Chorus store: on `host` when it is a loopback address, else on every
/// IPv4 interface; port 0 lets the kernel pick a free port (no race with others).
std::shared_ptr<chorus::StoreServer> start_store(const std::string& host,
                                                 const std::string& secret) {
  const bool loopback = host == "localhost" || host.rfind("127.", 0) == 0;
  return std::make_shared<chorus::StoreServer>(loopback ? host : "0.0.0.0", 0, secret);
}

}  // namespace

PYBIND11_MODULE(_C, m) {
  m.doc() = "Chorus process group for torch.distributed";
  py::module::import("torch.distributed");  // registers c10d.ProcessGroup, our base class

  py::class_<chorus::StoreServer, std::shared_ptr<chorus::StoreServer>>(m, "StoreServer")
      .def(py::init(&start_store), py::arg("host"), py::arg("secret"))
      .def_property_readonly("port", &chorus::StoreServer::port);

  py::class_<chorus_torch::ProcessGroupChorus, c10d::ProcessGroup,
             c10::intrusive_ptr<chorus_torch::ProcessGroupChorus>>(m, "ProcessGroupChorus")
      .def(py::init([](int rank, int size, const std::string& address, const std::string& secret,
                       std::chrono::milliseconds timeout,
                       std::shared_ptr<chorus::StoreServer> server) {
             return c10::make_intrusive<chorus_torch::ProcessGroupChorus>(
                 rank, size, address, secret, timeout, std::move(server));
           }),
           py::arg("rank"), py::arg("size"), py::arg("store_address"), py::arg("secret"),
           py::arg("timeout"), py::arg("server"), py::call_guard<py::gil_scoped_release>())
      .def("last_algorithm", &chorus_torch::ProcessGroupChorus::last_algorithm)
      .def("_share_bucket", &chorus_torch::ProcessGroupChorus::share_bucket, py::arg("bucket"),
           py::call_guard<py::gil_scoped_release>());

  // DDP's Reducer is torch's pybind11 class (torch.distributed imported above).
  m.def("_register_avg_hook", &chorus_torch::register_avg_hook, py::arg("reducer"),
        py::arg("process_group"));
}
