/* The shared collective sweep (see capi_suite.h): data-movement collectives.
 * Rank `from` sends movement_value(dtype, from, to, i) to rank `to`; a value
 * every rank receives alike (broadcast, all-gather, gather) uses to == from. */
#include <stdlib.h>
#include <string.h>

#include "capi_check.h"
#include "capi_suite.h"

/* Address of element `index` of a typed buffer (NULL stays NULL). */
static void* at(void* buf, chorusDataType_t dtype, size_t index) {
  return buf != NULL ? (char*)buf + index * dtype_size(dtype) : NULL;
}

static void name_case(const char* collective, chorusDataType_t dtype, size_t count, int in_place,
                      completion_t how, int root) {
  snprintf(g_case, sizeof g_case, "%s %s count=%zu %s %s root=%d", collective, dtype_name(dtype),
           count, in_place ? "in-place" : "out-of-place", completion_name(how), root);
}

/* Off the root, send is NULL when out of place; the root's own recv is filled too. */
static void broadcast_case(suite_t* s, chorusDataType_t dt, size_t count, int in_place) {
  int root;
  completion_t how = suite_next(s, &root);
  name_case("broadcast", dt, count, in_place, how, root);
  void* recv = alloc_buffer(count, dt);
  void* send = in_place ? recv : s->rank == root ? alloc_buffer(count, dt) : NULL;
  if (s->rank == root) fill_movement(send, dt, root, root, count);
  chorusResult_t result;
  if (how == kBlocking) {
    result = chorusBroadcast(send, recv, count, dt, root, s->comm);
  } else {
    chorusRequest_t request = NULL;
    chorusResult_t issued = chorusIBroadcast(send, recv, count, dt, root, s->comm, &request);
    result = finish(how, issued, request);
  }
  CHECK_OK(result);
  check_movement("recv", recv, dt, root, root, count);
  if (send != recv) free(send);
  free(recv);
}

/* In place: send == recv + rank*count, already holding this rank's block. */
static void all_gather_case(suite_t* s, chorusDataType_t dt, size_t count, int in_place) {
  completion_t how = suite_next(s, NULL);
  name_case("allgather", dt, count, in_place, how, -1);
  void* recv = alloc_buffer(count * (size_t)s->size, dt);
  void* send = in_place ? at(recv, dt, (size_t)s->rank * count) : alloc_buffer(count, dt);
  fill_movement(send, dt, s->rank, s->rank, count);
  chorusResult_t result;
  if (how == kBlocking) {
    result = chorusAllGather(send, recv, count, dt, s->comm);
  } else {
    chorusRequest_t request = NULL;
    chorusResult_t issued = chorusIAllGather(send, recv, count, dt, s->comm, &request);
    result = finish(how, issued, request);
  }
  CHECK_OK(result);
  for (int from = 0; from < s->size; ++from) {
    check_movement("recv block", at(recv, dt, (size_t)from * count), dt, from, from, count);
  }
  if (!in_place) free(send);
  free(recv);
}

/* recv is NULL off the root; in place at the root: send == recv + root*count. */
static void gather_case(suite_t* s, chorusDataType_t dt, size_t count, int in_place) {
  int root;
  completion_t how = suite_next(s, &root);
  name_case("gather", dt, count, in_place, how, root);
  int is_root = s->rank == root;
  void* recv = is_root ? alloc_buffer(count * (size_t)s->size, dt) : NULL;
  void* send = in_place && is_root ? at(recv, dt, (size_t)root * count) : alloc_buffer(count, dt);
  fill_movement(send, dt, s->rank, s->rank, count);
  chorusResult_t result;
  if (how == kBlocking) {
    result = chorusGather(send, recv, count, dt, root, s->comm);
  } else {
    chorusRequest_t request = NULL;
    chorusResult_t issued = chorusIGather(send, recv, count, dt, root, s->comm, &request);
    result = finish(how, issued, request);
  }
  CHECK_OK(result);
  for (int from = 0; is_root && from < s->size; ++from) {
    check_movement("root recv block", at(recv, dt, (size_t)from * count), dt, from, from, count);
  }
  if (!(in_place && is_root)) free(send);
  free(recv);
}

/* send is NULL off the root; in place at the root: recv == send + root*count. */
static void scatter_case(suite_t* s, chorusDataType_t dt, size_t count, int in_place) {
  int root;
  completion_t how = suite_next(s, &root);
  name_case("scatter", dt, count, in_place, how, root);
  int is_root = s->rank == root;
  void* send = is_root ? alloc_buffer(count * (size_t)s->size, dt) : NULL;
  void* recv = in_place && is_root ? at(send, dt, (size_t)root * count) : alloc_buffer(count, dt);
  for (int to = 0; is_root && to < s->size; ++to) {
    fill_movement(at(send, dt, (size_t)to * count), dt, root, to, count);
  }
  chorusResult_t result;
  if (how == kBlocking) {
    result = chorusScatter(send, recv, count, dt, root, s->comm);
  } else {
    chorusRequest_t request = NULL;
    chorusResult_t issued = chorusIScatter(send, recv, count, dt, root, s->comm, &request);
    result = finish(how, issued, request);
  }
  CHECK_OK(result);
  check_movement("recv", recv, dt, root, s->rank, count);
  if (!(in_place && is_root)) free(recv);
  free(send);
}

/* Block `to` of send goes to rank `to`; block `from` of recv came from `from`. */
static void all_to_all_case(suite_t* s, chorusDataType_t dt, size_t count, int in_place) {
  completion_t how = suite_next(s, NULL);
  name_case("alltoall", dt, count, in_place, how, -1);
  size_t total = count * (size_t)s->size;
  void* send = alloc_buffer(total, dt);
  void* recv = in_place ? send : alloc_buffer(total, dt);
  for (int to = 0; to < s->size; ++to) {
    fill_movement(at(send, dt, (size_t)to * count), dt, s->rank, to, count);
  }
  chorusResult_t result;
  if (how == kBlocking) {
    result = chorusAlltoAll(send, recv, count, dt, s->comm);
  } else {
    chorusRequest_t request = NULL;
    chorusResult_t issued = chorusIAlltoAll(send, recv, count, dt, s->comm, &request);
    result = finish(how, issued, request);
  }
  CHECK_OK(result);
  for (int from = 0; from < s->size; ++from) {
    check_movement("recv block", at(recv, dt, (size_t)from * count), dt, from, s->rank, count);
  }
  if (!in_place) free(recv);
  free(send);
}

void check_movements(suite_t* s) {
  for (int d = 0; d < kNumDtypes; ++d) {
    for (int c = 0; c < kNumCounts; ++c) {
      for (int in_place = 0; in_place < 2; ++in_place) {
        broadcast_case(s, kAllDtypes[d], kCounts[c], in_place);
        all_gather_case(s, kAllDtypes[d], kCounts[c], in_place);
        gather_case(s, kAllDtypes[d], kCounts[c], in_place);
        scatter_case(s, kAllDtypes[d], kCounts[c], in_place);
        all_to_all_case(s, kAllDtypes[d], kCounts[c], in_place);
      }
    }
  }
}
