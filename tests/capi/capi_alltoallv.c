/* The shared collective sweep (see capi_suite.h): all-to-all-v with uneven
 * counts (including empty blocks), displacements in elements that leave a
 * one-element gap after every block, and a check that the gaps stay untouched. */
#include <stdlib.h>
#include <string.h>

#include "capi_check.h"
#include "capi_suite.h"

/* Elements rank `from` sends to rank `to`: 0..3 times `scale`; both ranks
 * compute it alike, so send and receive counts agree. */
static size_t pair_count(int from, int to, unsigned variant, size_t scale) {
  return ((unsigned)from + 2u * (unsigned)to + variant) % 4u * scale;
}

/* Blocks in rank order, each followed by a one-element gap; returns the length. */
static size_t layout(const size_t* counts, size_t* displs, int nranks) {
  size_t next = 0;
  for (int j = 0; j < nranks; ++j) {
    displs[j] = next;
    next += counts[j] + 1;
  }
  return next;
}

static const char* element(const void* buf, chorusDataType_t dtype, size_t index) {
  return (const char*)buf + index * dtype_size(dtype);
}

static int is_sentinel(const void* buf, chorusDataType_t dtype, size_t index) {
  for (size_t b = 0; b < dtype_size(dtype); ++b) {
    if ((unsigned char)element(buf, dtype, index)[b] != 0xA5u) return 0;
  }
  return 1;
}

static chorusResult_t run(suite_t* s, completion_t how, const void* send, const size_t* counts[4],
                          void* recv, chorusDataType_t dt) {
  if (how == kBlocking) {
    return chorusAlltoAllV(send, counts[0], counts[1], recv, counts[2], counts[3], dt, s->comm);
  }
  chorusRequest_t request = NULL;
  chorusResult_t issued = chorusIAlltoAllV(send, counts[0], counts[1], recv, counts[2], counts[3],
                                           dt, s->comm, &request);
  return finish(how, issued, request);
}

/* scale 0: every count is 0 and both buffers are NULL. */
static void all_to_all_v_case(suite_t* s, chorusDataType_t dt, size_t scale, unsigned variant) {
  completion_t how = suite_next(s, NULL);
  snprintf(g_case, sizeof g_case, "alltoallv %s scale=%zu variant=%u %s", dtype_name(dt), scale,
           variant, completion_name(how));
  size_t n = (size_t)s->size;
  size_t* arrays = calloc(4 * n, sizeof(size_t));
  size_t *sc = arrays, *sd = arrays + n, *rc = arrays + 2 * n, *rd = arrays + 3 * n;
  for (int j = 0; j < s->size; ++j) {
    sc[j] = pair_count(s->rank, j, variant, scale);
    rc[j] = pair_count(j, s->rank, variant, scale);
  }
  size_t send_length = layout(sc, sd, s->size), recv_length = layout(rc, rd, s->size);
  void* send = scale ? alloc_buffer(send_length, dt) : NULL;
  void* recv = scale ? alloc_buffer(recv_length, dt) : NULL;
  for (int j = 0; send != NULL && j < s->size; ++j) {
    fill_movement((char*)send + sd[j] * dtype_size(dt), dt, s->rank, j, sc[j]);
  }
  const size_t* counts[4] = {sc, sd, rc, rd};
  CHECK_OK(run(s, how, send, counts, recv, dt));
  for (int j = 0; recv != NULL && j < s->size; ++j) {
    check_movement("recv block", element(recv, dt, rd[j]), dt, j, s->rank, rc[j]);
    CHECK(is_sentinel(recv, dt, rd[j] + rc[j]));
  }
  free(send);
  free(recv);
  free(arrays);
}

void check_all_to_all_v(suite_t* s) {
  static const size_t kScales[] = {0, 1, 100};
  for (int d = 0; d < kNumDtypes; ++d) {
    for (size_t k = 0; k < sizeof kScales / sizeof kScales[0]; ++k) {
      for (unsigned variant = 0; variant < (kScales[k] ? 2u : 1u); ++variant) {
        all_to_all_v_case(s, kAllDtypes[d], kScales[k], variant);
      }
    }
  }
}
