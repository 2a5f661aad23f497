// The C ABI's collectives and point-to-point calls, blocking and non-blocking.
//
// A thin skin: each entry point range-checks the C enums and out-pointers, then
// calls the C++ API, which checks everything that depends on the communicator
// (ranks, roots, peers, NULL buffers with count > 0, in-place rules, size
// overflow) before anything is sent. Blocking calls are the C++ blocking forms,
// which issue and wait, so they complete after every pending request.
#include <span>

#include "capi/handles.hpp"

namespace {

using chorus::Communicator;
using chorus::Request;
using chorus::capi::issue;
using chorus::capi::to_dtype;
using chorus::capi::to_op;
using chorus::capi::with_comm;

/// One count or displacement array of all-to-all-v: one entry per rank. A NULL
/// array becomes an empty span, which the C++ side rejects as missing.
std::span<const std::size_t> per_rank(const std::size_t* values, const Communicator& comm) {
  return {values, values != nullptr ? static_cast<std::size_t>(comm.size()) : 0};
}

}  // namespace

extern "C" {

chorusResult_t chorusIAllReduce(const void* sendbuf, void* recvbuf, size_t count,
                                chorusDataType_t dtype, chorusRedOp_t op, chorusComm_t comm,
                                chorusRequest_t* request) {
  return issue(comm, request, __func__, [&](Communicator& c) {
    return c.iall_reduce(sendbuf, recvbuf, count, to_dtype(dtype), to_op(op));
  });
}

chorusResult_t chorusIBroadcast(const void* sendbuf, void* recvbuf, size_t count,
                                chorusDataType_t dtype, int root, chorusComm_t comm,
                                chorusRequest_t* request) {
  return issue(comm, request, __func__, [&](Communicator& c) {
    return c.ibroadcast(sendbuf, recvbuf, count, to_dtype(dtype), root);
  });
}

chorusResult_t chorusIReduce(const void* sendbuf, void* recvbuf, size_t count,
                             chorusDataType_t dtype, chorusRedOp_t op, int root, chorusComm_t comm,
                             chorusRequest_t* request) {
  return issue(comm, request, __func__, [&](Communicator& c) {
    return c.ireduce(sendbuf, recvbuf, count, to_dtype(dtype), to_op(op), root);
  });
}

chorusResult_t chorusIAllGather(const void* sendbuf, void* recvbuf, size_t sendcount,
                                chorusDataType_t dtype, chorusComm_t comm,
                                chorusRequest_t* request) {
  return issue(comm, request, __func__, [&](Communicator& c) {
    return c.iall_gather(sendbuf, recvbuf, sendcount, to_dtype(dtype));
  });
}

chorusResult_t chorusIReduceScatter(const void* sendbuf, void* recvbuf, size_t recvcount,
                                    chorusDataType_t dtype, chorusRedOp_t op, chorusComm_t comm,
                                    chorusRequest_t* request) {
  return issue(comm, request, __func__, [&](Communicator& c) {
    return c.ireduce_scatter(sendbuf, recvbuf, recvcount, to_dtype(dtype), to_op(op));
  });
}

chorusResult_t chorusIGather(const void* sendbuf, void* recvbuf, size_t sendcount,
                             chorusDataType_t dtype, int root, chorusComm_t comm,
                             chorusRequest_t* request) {
  return issue(comm, request, __func__, [&](Communicator& c) {
    return c.igather(sendbuf, recvbuf, sendcount, to_dtype(dtype), root);
  });
}

chorusResult_t chorusIScatter(const void* sendbuf, void* recvbuf, size_t recvcount,
                              chorusDataType_t dtype, int root, chorusComm_t comm,
                              chorusRequest_t* request) {
  return issue(comm, request, __func__, [&](Communicator& c) {
    return c.iscatter(sendbuf, recvbuf, recvcount, to_dtype(dtype), root);
  });
}

chorusResult_t chorusIAlltoAll(const void* sendbuf, void* recvbuf, size_t count,
                               chorusDataType_t dtype, chorusComm_t comm,
                               chorusRequest_t* request) {
  return issue(comm, request, __func__, [&](Communicator& c) {
    return c.iall_to_all(sendbuf, recvbuf, count, to_dtype(dtype));
  });
}

chorusResult_t chorusIAlltoAllV(const void* sendbuf, const size_t* sendcounts,
                                const size_t* sdispls, void* recvbuf, const size_t* recvcounts,
                                const size_t* rdispls, chorusDataType_t dtype, chorusComm_t comm,
                                chorusRequest_t* request) {
  return issue(comm, request, __func__, [&](Communicator& c) {
    return c.iall_to_all_v(sendbuf, per_rank(sendcounts, c), per_rank(sdispls, c), recvbuf,
                           per_rank(recvcounts, c), per_rank(rdispls, c), to_dtype(dtype));
  });
}

chorusResult_t chorusISend(const void* buf, size_t count, chorusDataType_t dtype, int peer,
                           chorusComm_t comm, chorusRequest_t* request) {
  return issue(comm, request, __func__,
               [&](Communicator& c) { return c.isend(buf, count, to_dtype(dtype), peer); });
}

chorusResult_t chorusIRecv(void* buf, size_t count, chorusDataType_t dtype, int peer,
                           chorusComm_t comm, chorusRequest_t* request) {
  return issue(comm, request, __func__,
               [&](Communicator& c) { return c.irecv(buf, count, to_dtype(dtype), peer); });
}

chorusResult_t chorusIBarrier(chorusComm_t comm, chorusRequest_t* request) {
  return issue(comm, request, __func__, [](Communicator& c) { return c.ibarrier(); });
}

chorusResult_t chorusAllReduce(const void* sendbuf, void* recvbuf, size_t count,
                               chorusDataType_t dtype, chorusRedOp_t op, chorusComm_t comm) {
  return with_comm(comm, __func__, [&](Communicator& c) {
    c.all_reduce(sendbuf, recvbuf, count, to_dtype(dtype), to_op(op));
  });
}

chorusResult_t chorusBroadcast(const void* sendbuf, void* recvbuf, size_t count,
                               chorusDataType_t dtype, int root, chorusComm_t comm) {
  return with_comm(comm, __func__, [&](Communicator& c) {
    c.broadcast(sendbuf, recvbuf, count, to_dtype(dtype), root);
  });
}

chorusResult_t chorusReduce(const void* sendbuf, void* recvbuf, size_t count,
                            chorusDataType_t dtype, chorusRedOp_t op, int root, chorusComm_t comm) {
  return with_comm(comm, __func__, [&](Communicator& c) {
    c.reduce(sendbuf, recvbuf, count, to_dtype(dtype), to_op(op), root);
  });
}

chorusResult_t chorusAllGather(const void* sendbuf, void* recvbuf, size_t sendcount,
                               chorusDataType_t dtype, chorusComm_t comm) {
  return with_comm(comm, __func__, [&](Communicator& c) {
    c.all_gather(sendbuf, recvbuf, sendcount, to_dtype(dtype));
  });
}

chorusResult_t chorusReduceScatter(const void* sendbuf, void* recvbuf, size_t recvcount,
                                   chorusDataType_t dtype, chorusRedOp_t op, chorusComm_t comm) {
  return with_comm(comm, __func__, [&](Communicator& c) {
    c.reduce_scatter(sendbuf, recvbuf, recvcount, to_dtype(dtype), to_op(op));
  });
}

chorusResult_t chorusGather(const void* sendbuf, void* recvbuf, size_t sendcount,
                            chorusDataType_t dtype, int root, chorusComm_t comm) {
  return with_comm(comm, __func__, [&](Communicator& c) {
    c.gather(sendbuf, recvbuf, sendcount, to_dtype(dtype), root);
  });
}

chorusResult_t chorusScatter(const void* sendbuf, void* recvbuf, size_t recvcount,
                             chorusDataType_t dtype, int root, chorusComm_t comm) {
  return with_comm(comm, __func__, [&](Communicator& c) {
    c.scatter(sendbuf, recvbuf, recvcount, to_dtype(dtype), root);
  });
}

chorusResult_t chorusAlltoAll(const void* sendbuf, void* recvbuf, size_t count,
                              chorusDataType_t dtype, chorusComm_t comm) {
  return with_comm(comm, __func__, [&](Communicator& c) {
    c.all_to_all(sendbuf, recvbuf, count, to_dtype(dtype));
  });
}

chorusResult_t chorusAlltoAllV(const void* sendbuf, const size_t* sendcounts, const size_t* sdispls,
                               void* recvbuf, const size_t* recvcounts, const size_t* rdispls,
                               chorusDataType_t dtype, chorusComm_t comm) {
  return with_comm(comm, __func__, [&](Communicator& c) {
    c.all_to_all_v(sendbuf, per_rank(sendcounts, c), per_rank(sdispls, c), recvbuf,
                   per_rank(recvcounts, c), per_rank(rdispls, c), to_dtype(dtype));
  });
}

chorusResult_t chorusSend(const void* buf, size_t count, chorusDataType_t dtype, int peer,
                          chorusComm_t comm) {
  return with_comm(comm, __func__,
                   [&](Communicator& c) { c.send(buf, count, to_dtype(dtype), peer); });
}

chorusResult_t chorusRecv(void* buf, size_t count, chorusDataType_t dtype, int peer,
                          chorusComm_t comm) {
  return with_comm(comm, __func__,
                   [&](Communicator& c) { c.recv(buf, count, to_dtype(dtype), peer); });
}

chorusResult_t chorusBarrier(chorusComm_t comm) {
  return with_comm(comm, __func__, [](Communicator& c) { c.barrier(); });
}

}  // extern "C"
