/* Chorus C ABI: collective communication for CPU clusters.
 *
 * Names follow NCCL so that ported code reads naturally. Every function returns
 * a chorusResult_t; on failure chorusGetLastError(comm) holds a sentence saying
 * why. Argument errors are detected before anything is sent.
 *
 * Buffers: counts are in elements. In place means send == recv for all-reduce,
 * broadcast, reduce and all-to-all; send == recv + rank*count*size for
 * all-gather; recv == send + rank*recvcount*size for reduce-scatter;
 * send == recv + root*count*size for gather at the root; recv == send +
 * root*count*size for scatter at the root. Buffers a rank does not use may be
 * NULL, and any buffer may be NULL when its count is 0.
 *
 * Non-blocking forms (chorusI...) return a request released by chorusWait, or
 * by chorusTest when it reports *done = 1. Operations on one communicator
 * complete in the order they were issued, except that a collective of count 0
 * (all-to-all-v and barrier aside) moves nothing and completes at once.
 *
 * Handles: every call checks the communicator and request it is given. A
 * destroyed communicator or a released request returns chorusInvalidUsage, NULL
 * or a value no call returned chorusInvalidArgument, each with a sentence naming
 * the function in chorusGetLastError(NULL) (and in chorusGetLastError(comm),
 * which for a handle that is not live returns the calling thread's sentence). */
#ifndef CHORUS_CHORUS_H_
#define CHORUS_CHORUS_H_

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define CHORUS_API __attribute__((visibility("default")))
#else
#define CHORUS_API
#endif

typedef struct chorusComm* chorusComm_t;
typedef struct chorusRequest* chorusRequest_t;

typedef enum {
  chorusSuccess = 0,
  chorusInvalidArgument = 1,
  chorusInvalidUsage = 2,
  chorusSystemError = 3,
  chorusRemoteError = 4, /* a peer failed or went away */
  chorusTimeout = 5,
  chorusMismatch = 6, /* ranks called different collectives */
  chorusInternalError = 7,
  chorusInProgress = 8
} chorusResult_t;

typedef enum {
  chorusInt8 = 0,
  chorusUint8 = 1,
  chorusInt32 = 2,
  chorusUint32 = 3,
  chorusInt64 = 4,
  chorusUint64 = 5,
  chorusFloat16 = 6,
  chorusBfloat16 = 7,
  chorusFloat32 = 8,
  chorusFloat64 = 9
} chorusDataType_t;

/* Avg: floats divide the sum once (fp32 sum for fp16/bf16); integers compute the
 * sum in 64 bits and divide with truncation toward zero. */
typedef enum {
  chorusSum = 0,
  chorusProd = 1,
  chorusMax = 2,
  chorusMin = 3,
  chorusAvg = 4
} chorusRedOp_t;

CHORUS_API const char* chorusGetErrorString(chorusResult_t result);
/* The last failure on `comm` as a sentence; NULL comm, or one that is not live (destroyed):
 * the calling thread's last failure. */
CHORUS_API const char* chorusGetLastError(chorusComm_t comm);

/* Reads RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT (falling back to Slurm, Open MPI, PMI);
   the store is at CHORUS_STORE_ADDR:CHORUS_STORE_PORT when set (chorusrun sets them). */
CHORUS_API chorusResult_t chorusCommInitFromEnv(chorusComm_t* comm);
/* Rank 0 hosts the store at store_host_port ("host:port"). */
CHORUS_API chorusResult_t chorusCommInit(chorusComm_t* comm, int nranks, int rank,
                                         const char* store_host_port);
/* Ranks with equal color form a communicator ordered by key, ties by parent rank;
 * color < 0: *out = NULL. */
CHORUS_API chorusResult_t chorusCommSplit(chorusComm_t comm, int color, int key, chorusComm_t* out);
/* Completes (or fails) the communicator's queued operations, whose requests stay
 * valid, and frees it; when another thread is inside a call on it, it is freed as
 * that call returns. Destroying it again is chorusInvalidUsage. */
CHORUS_API chorusResult_t chorusCommDestroy(chorusComm_t comm);
CHORUS_API chorusResult_t chorusCommAbort(chorusComm_t comm);
CHORUS_API chorusResult_t chorusCommRank(chorusComm_t comm, int* rank);
CHORUS_API chorusResult_t chorusCommSize(chorusComm_t comm, int* size);

/* Collective: `bytes` bytes for this rank (sizes may differ between ranks), 64-byte aligned,
 * in memory the ranks of one host share; all-reduces, reduce-scatters and all-gathers on
 * buffers inside it on every rank work in place in the peers' memory (algorithm "shm_window").
 * Ordinary memory when the ranks do not all share a host. bytes == 0: *ptr = NULL. Memory not freed
 * goes with the communicator. */
CHORUS_API chorusResult_t chorusMemAlloc(chorusComm_t comm, size_t bytes, void** ptr);
/* Local: frees what chorusMemAlloc returned on this rank (nothing may still use it);
 * NULL does nothing; any other pointer is chorusInvalidArgument. */
CHORUS_API chorusResult_t chorusMemFree(chorusComm_t comm, void* ptr);

CHORUS_API chorusResult_t chorusAllReduce(const void* sendbuf, void* recvbuf, size_t count,
                                          chorusDataType_t dtype, chorusRedOp_t op,
                                          chorusComm_t comm);
CHORUS_API chorusResult_t chorusBroadcast(const void* sendbuf, void* recvbuf, size_t count,
                                          chorusDataType_t dtype, int root, chorusComm_t comm);
CHORUS_API chorusResult_t chorusReduce(const void* sendbuf, void* recvbuf, size_t count,
                                       chorusDataType_t dtype, chorusRedOp_t op, int root,
                                       chorusComm_t comm);
CHORUS_API chorusResult_t chorusAllGather(const void* sendbuf, void* recvbuf, size_t sendcount,
                                          chorusDataType_t dtype, chorusComm_t comm);
CHORUS_API chorusResult_t chorusReduceScatter(const void* sendbuf, void* recvbuf, size_t recvcount,
                                              chorusDataType_t dtype, chorusRedOp_t op,
                                              chorusComm_t comm);
CHORUS_API chorusResult_t chorusGather(const void* sendbuf, void* recvbuf, size_t sendcount,
                                       chorusDataType_t dtype, int root, chorusComm_t comm);
CHORUS_API chorusResult_t chorusScatter(const void* sendbuf, void* recvbuf, size_t recvcount,
                                        chorusDataType_t dtype, int root, chorusComm_t comm);
CHORUS_API chorusResult_t chorusAlltoAll(const void* sendbuf, void* recvbuf, size_t count,
                                         chorusDataType_t dtype, chorusComm_t comm);
CHORUS_API chorusResult_t chorusAlltoAllV(const void* sendbuf, const size_t* sendcounts,
                                          const size_t* sdispls, void* recvbuf,
                                          const size_t* recvcounts, const size_t* rdispls,
                                          chorusDataType_t dtype, chorusComm_t comm);
CHORUS_API chorusResult_t chorusSend(const void* buf, size_t count, chorusDataType_t dtype,
                                     int peer, chorusComm_t comm);
CHORUS_API chorusResult_t chorusRecv(void* buf, size_t count, chorusDataType_t dtype, int peer,
                                     chorusComm_t comm);
CHORUS_API chorusResult_t chorusBarrier(chorusComm_t comm);

CHORUS_API chorusResult_t chorusIAllReduce(const void* sendbuf, void* recvbuf, size_t count,
                                           chorusDataType_t dtype, chorusRedOp_t op,
                                           chorusComm_t comm, chorusRequest_t* request);
CHORUS_API chorusResult_t chorusIBroadcast(const void* sendbuf, void* recvbuf, size_t count,
                                           chorusDataType_t dtype, int root, chorusComm_t comm,
                                           chorusRequest_t* request);
CHORUS_API chorusResult_t chorusIReduce(const void* sendbuf, void* recvbuf, size_t count,
                                        chorusDataType_t dtype, chorusRedOp_t op, int root,
                                        chorusComm_t comm, chorusRequest_t* request);
CHORUS_API chorusResult_t chorusIAllGather(const void* sendbuf, void* recvbuf, size_t sendcount,
                                           chorusDataType_t dtype, chorusComm_t comm,
                                           chorusRequest_t* request);
CHORUS_API chorusResult_t chorusIReduceScatter(const void* sendbuf, void* recvbuf, size_t recvcount,
                                               chorusDataType_t dtype, chorusRedOp_t op,
                                               chorusComm_t comm, chorusRequest_t* request);
CHORUS_API chorusResult_t chorusIGather(const void* sendbuf, void* recvbuf, size_t sendcount,
                                        chorusDataType_t dtype, int root, chorusComm_t comm,
                                        chorusRequest_t* request);
CHORUS_API chorusResult_t chorusIScatter(const void* sendbuf, void* recvbuf, size_t recvcount,
                                         chorusDataType_t dtype, int root, chorusComm_t comm,
                                         chorusRequest_t* request);
CHORUS_API chorusResult_t chorusIAlltoAll(const void* sendbuf, void* recvbuf, size_t count,
                                          chorusDataType_t dtype, chorusComm_t comm,
                                          chorusRequest_t* request);
CHORUS_API chorusResult_t chorusIAlltoAllV(const void* sendbuf, const size_t* sendcounts,
                                           const size_t* sdispls, void* recvbuf,
                                           const size_t* recvcounts, const size_t* rdispls,
                                           chorusDataType_t dtype, chorusComm_t comm,
                                           chorusRequest_t* request);
CHORUS_API chorusResult_t chorusISend(const void* buf, size_t count, chorusDataType_t dtype,
                                      int peer, chorusComm_t comm, chorusRequest_t* request);
CHORUS_API chorusResult_t chorusIRecv(void* buf, size_t count, chorusDataType_t dtype, int peer,
                                      chorusComm_t comm, chorusRequest_t* request);
CHORUS_API chorusResult_t chorusIBarrier(chorusComm_t comm, chorusRequest_t* request);

/* Waits for and releases the request; returns the operation's result. */
CHORUS_API chorusResult_t chorusWait(chorusRequest_t request);
/* *done = 1 when complete (the request is then released and its result returned),
 * else chorusSuccess with *done = 0. */
CHORUS_API chorusResult_t chorusTest(chorusRequest_t request, int* done);

#ifdef __cplusplus
}
#endif

#endif /* CHORUS_CHORUS_H_ */
