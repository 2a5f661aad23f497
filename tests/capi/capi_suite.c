/* The shared collective sweep (see capi_suite.h): plumbing and the reductions. */
#define _POSIX_C_SOURCE 200809L
#include "capi_suite.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "capi_check.h"

const size_t kCounts[kNumCounts] = {0, 5, 1000};

void suite_init(suite_t* suite, chorusComm_t comm) {
  suite->comm = comm;
  suite->rank = -1;
  suite->size = 0;
  suite->iteration = 0;
  CHECK_OK(chorusCommRank(comm, &suite->rank));
  CHECK_OK(chorusCommSize(comm, &suite->size));
}

completion_t suite_next(suite_t* suite, int* root) {
  unsigned i = suite->iteration++;
  if (root != NULL) *root = (int)((i / 3u) % (unsigned)suite->size);
  return (completion_t)(i % 3u);
}

const char* completion_name(completion_t how) {
  return how == kBlocking ? "blocking" : how == kWait ? "wait" : "test";
}

static double now_seconds(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

chorusResult_t finish(completion_t how, chorusResult_t issued, chorusRequest_t request) {
  if (issued != chorusSuccess) {
    CHECK(request == NULL);
    return issued;
  }
  CHECK(request != NULL);
  if (how != kTest) return chorusWait(request);
  const double deadline = now_seconds() + 30.0;
  const struct timespec pause = {0, 100 * 1000};
  while (now_seconds() < deadline) {
    int done = -1;
    chorusResult_t result = chorusTest(request, &done);
    if (done == 1) return result;
    CHECK(done == 0 && result == chorusSuccess);
    if (done != 0) return result;
    nanosleep(&pause, NULL);
  }
  CHECK(!"chorusTest did not report done within 30 s");
  return chorusTimeout;
}

void* alloc_buffer(size_t count, chorusDataType_t dtype) {
  size_t bytes = count * dtype_size(dtype);
  if (bytes == 0) return NULL;
  void* buf = malloc(bytes);
  if (buf == NULL) abort();
  memset(buf, 0xA5, bytes);
  return buf;
}

void fill_reduce_input(void* buf, chorusDataType_t dtype, int rank, size_t offset, size_t count) {
  for (size_t i = 0; i < count; ++i)
    put_value(buf, dtype, i, reduce_input(dtype, rank, offset + i));
}

void fill_movement(void* buf, chorusDataType_t dtype, int from, int to, size_t count) {
  for (size_t i = 0; i < count; ++i) put_value(buf, dtype, i, movement_value(dtype, from, to, i));
}

typedef struct {
  chorusDataType_t dtype;
  chorusRedOp_t op;
  int nranks;
  size_t offset;
  int from, to;
} expectation_t;

static double expect_reduced(const void* context, size_t index) {
  const expectation_t* e = context;
  return reduce_expected(e->dtype, e->op, e->nranks, e->offset + index);
}

static double expect_moved(const void* context, size_t index) {
  const expectation_t* e = context;
  return movement_value(e->dtype, e->from, e->to, index);
}

void check_movement(const char* what, const void* buf, chorusDataType_t dtype, int from, int to,
                    size_t count) {
  expectation_t e = {dtype, chorusSum, 0, 0, from, to};
  check_buffer(what, buf, dtype, count, expect_moved, &e);
}

static void check_reduced(const char* what, const void* buf, chorusDataType_t dtype,
                          chorusRedOp_t op, int nranks, size_t offset, size_t count) {
  expectation_t e = {dtype, op, nranks, offset, 0, 0};
  check_buffer(what, buf, dtype, count, expect_reduced, &e);
}

static void name_case(const char* collective, chorusDataType_t dtype, chorusRedOp_t op,
                      size_t count, int in_place, completion_t how, int root) {
  snprintf(g_case, sizeof g_case, "%s %s %s count=%zu %s %s root=%d", collective, dtype_name(dtype),
           op_name(op), count, in_place ? "in-place" : "out-of-place", completion_name(how), root);
}

static void all_reduce_case(suite_t* s, chorusDataType_t dt, chorusRedOp_t op, size_t count,
                            int in_place) {
  completion_t how = suite_next(s, NULL);
  name_case("allreduce", dt, op, count, in_place, how, -1);
  void* send = alloc_buffer(count, dt);
  void* recv = in_place ? send : alloc_buffer(count, dt);
  fill_reduce_input(send, dt, s->rank, 0, count);
  chorusResult_t result;
  if (how == kBlocking) {
    result = chorusAllReduce(send, recv, count, dt, op, s->comm);
  } else {
    chorusRequest_t request = NULL;
    chorusResult_t issued = chorusIAllReduce(send, recv, count, dt, op, s->comm, &request);
    result = finish(how, issued, request);
  }
  CHECK_OK(result);
  check_reduced("recv", recv, dt, op, s->size, 0, count);
  if (!in_place) free(recv);
  free(send);
}

/* Off the root, recv is NULL when out of place (a buffer the rank does not use). */
static void reduce_case(suite_t* s, chorusDataType_t dt, chorusRedOp_t op, size_t count,
                        int in_place) {
  int root;
  completion_t how = suite_next(s, &root);
  name_case("reduce", dt, op, count, in_place, how, root);
  void* send = alloc_buffer(count, dt);
  void* recv = in_place ? send : s->rank == root ? alloc_buffer(count, dt) : NULL;
  fill_reduce_input(send, dt, s->rank, 0, count);
  chorusResult_t result;
  if (how == kBlocking) {
    result = chorusReduce(send, recv, count, dt, op, root, s->comm);
  } else {
    chorusRequest_t request = NULL;
    chorusResult_t issued = chorusIReduce(send, recv, count, dt, op, root, s->comm, &request);
    result = finish(how, issued, request);
  }
  CHECK_OK(result);
  if (s->rank == root) check_reduced("root recv", recv, dt, op, s->size, 0, count);
  if (recv != send) free(recv);
  free(send);
}

/* send holds size*count elements; this rank's result is block `rank` of the
 * reduction. In place: recv == send + rank*count. */
static void reduce_scatter_case(suite_t* s, chorusDataType_t dt, chorusRedOp_t op, size_t count,
                                int in_place) {
  completion_t how = suite_next(s, NULL);
  name_case("reducescatter", dt, op, count, in_place, how, -1);
  size_t own = (size_t)s->rank * count;
  void* send = alloc_buffer(count * (size_t)s->size, dt);
  void* recv =
      in_place ? (send ? (char*)send + own * dtype_size(dt) : NULL) : alloc_buffer(count, dt);
  fill_reduce_input(send, dt, s->rank, 0, count * (size_t)s->size);
  chorusResult_t result;
  if (how == kBlocking) {
    result = chorusReduceScatter(send, recv, count, dt, op, s->comm);
  } else {
    chorusRequest_t request = NULL;
    chorusResult_t issued = chorusIReduceScatter(send, recv, count, dt, op, s->comm, &request);
    result = finish(how, issued, request);
  }
  CHECK_OK(result);
  check_reduced("recv", recv, dt, op, s->size, own, count);
  if (!in_place) free(recv);
  free(send);
}

void check_reductions(suite_t* s) {
  for (int d = 0; d < kNumDtypes; ++d) {
    for (int o = 0; o < kNumOps; ++o) {
      for (int c = 0; c < kNumCounts; ++c) {
        for (int in_place = 0; in_place < 2; ++in_place) {
          all_reduce_case(s, kAllDtypes[d], kAllOps[o], kCounts[c], in_place);
          reduce_case(s, kAllDtypes[d], kAllOps[o], kCounts[c], in_place);
          reduce_scatter_case(s, kAllDtypes[d], kAllOps[o], kCounts[c], in_place);
        }
      }
    }
  }
}

/* One direction of the ring; chorusI* when how != kBlocking. */
static chorusResult_t send_or_recv(suite_t* s, completion_t how, int sending, void* buf,
                                   size_t count, chorusDataType_t dt, int peer) {
  chorusRequest_t request = NULL;
  chorusResult_t issued;
  if (sending) {
    if (how == kBlocking) return chorusSend(buf, count, dt, peer, s->comm);
    issued = chorusISend(buf, count, dt, peer, s->comm, &request);
  } else {
    if (how == kBlocking) return chorusRecv(buf, count, dt, peer, s->comm);
    issued = chorusIRecv(buf, count, dt, peer, s->comm, &request);
  }
  return finish(how, issued, request);
}

/* Ring exchange: each rank sends to rank+1 and receives from rank-1. Even ranks
 * send first and odd ranks receive first, so the ring cannot deadlock even when
 * a send waits for its receiver (operations on a communicator run in order). */
void check_send_recv(suite_t* s) {
  int next = (s->rank + 1) % s->size, prev = (s->rank + s->size - 1) % s->size;
  for (int d = 0; d < kNumDtypes; ++d) {
    for (int c = 0; c < kNumCounts; ++c) {
      chorusDataType_t dt = kAllDtypes[d];
      size_t count = kCounts[c];
      completion_t how = suite_next(s, NULL);
      name_case("send/recv", dt, chorusSum, count, 0, how, -1);
      void* out = alloc_buffer(count, dt);
      void* in = alloc_buffer(count, dt);
      fill_movement(out, dt, s->rank, next, count);
      for (int step = 0; step < 2; ++step) {
        int sending = (step == 0) == (s->rank % 2 == 0);
        CHECK_OK(
            send_or_recv(s, how, sending, sending ? out : in, count, dt, sending ? next : prev));
      }
      check_movement("recv", in, dt, prev, s->rank, count);
      free(out);
      free(in);
    }
  }
}

void check_barrier(suite_t* s) {
  for (int i = 0; i < 3; ++i) {
    completion_t how = suite_next(s, NULL);
    snprintf(g_case, sizeof g_case, "barrier %s", completion_name(how));
    if (how == kBlocking) {
      CHECK_OK(chorusBarrier(s->comm));
    } else {
      chorusRequest_t request = NULL;
      chorusResult_t issued = chorusIBarrier(s->comm, &request);
      CHECK_OK(finish(how, issued, request));
    }
  }
}

void run_all_collectives(suite_t* s) {
  check_reductions(s);
  check_movements(s);
  check_all_to_all_v(s);
  if (s->size > 1) check_send_recv(s);
  check_barrier(s);
  g_case[0] = '\0';
}
