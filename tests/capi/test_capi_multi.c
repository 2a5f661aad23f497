/* The C ABI across N processes (N = argv[1], 2..5), in C11 against chorus.h
 * alone. The parent picks a free loopback port, forks N children that join
 * with chorusCommInit(N, rank, "127.0.0.1:<port>") (rank 0 hosts the store),
 * and waits for them under a deadline. Each child runs every collective
 * (capi_suite.h), a pending chorusTest, an I-form overlap, an even/odd
 * split, a collective mismatch and finally the death of one rank, and exits
 * non-zero on any failed check (capi_fork.h runs the job). */
#define _POSIX_C_SOURCE 200809L
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "capi_check.h"
#include "capi_fork.h"
#include "capi_suite.h"

static void sleep_ms(long ms) {
  struct timespec pause = {ms / 1000, (ms % 1000) * 1000000L};
  nanosleep(&pause, NULL);
}

/* Rank 0 receives from rank 1, which sends only after 500 ms: the first
 * chorusTest must report pending (chorusSuccess, *done = 0). */
static void check_pending_test(suite_t* s) {
  snprintf(g_case, sizeof g_case, "pending chorusTest");
  int64_t value = -1;
  if (s->rank == 1) {
    sleep_ms(500);
    value = 4242;
    CHECK_OK(chorusSend(&value, 1, chorusInt64, 0, s->comm));
  } else if (s->rank == 0) {
    chorusRequest_t request = NULL;
    CHECK_OK(chorusIRecv(&value, 1, chorusInt64, 1, s->comm, &request));
    int done = -1;
    CHECK_OK(chorusTest(request, &done));
    CHECK(done == 0);
    if (done == 0) CHECK_OK(finish(kTest, chorusSuccess, request));
    CHECK(value == 4242);
  }
  CHECK_OK(chorusBarrier(s->comm));
}

/* Three all-reduces in flight, waited in issue order; then two more and a
 * blocking call, after which both must already be complete. */
static void check_overlap(suite_t* s) {
  snprintf(g_case, sizeof g_case, "I-form overlap");
  enum { kCount = 4096 };
  static float a[kCount];
  static int32_t b[kCount];
  static double c[kCount];
  for (int i = 0; i < kCount; ++i) {
    a[i] = (float)(s->rank + i % 7);
    b[i] = s->rank * (i % 5 + 1);
    c[i] = (double)(s->rank - i % 3);
  }
  chorusRequest_t requests[3] = {NULL, NULL, NULL};
  CHECK_OK(chorusIAllReduce(a, a, kCount, chorusFloat32, chorusSum, s->comm, &requests[0]));
  CHECK_OK(chorusIAllReduce(b, b, kCount, chorusInt32, chorusMax, s->comm, &requests[1]));
  CHECK_OK(chorusIAllReduce(c, c, kCount, chorusFloat64, chorusMin, s->comm, &requests[2]));
  for (int r = 0; r < 3; ++r) CHECK_OK(chorusWait(requests[r]));
  int n = s->size, bad = 0;
  for (int i = 0; i < kCount; ++i) {
    bad += a[i] != (float)(n * (n - 1) / 2 + n * (i % 7));
    bad += b[i] != (n - 1) * (i % 5 + 1);
    bad += c[i] != (double)(-(i % 3));
  }
  CHECK(bad == 0);

  CHECK_OK(chorusIAllReduce(a, a, kCount, chorusFloat32, chorusSum, s->comm, &requests[0]));
  CHECK_OK(chorusIBarrier(s->comm, &requests[1]));
  int32_t one = 1;
  CHECK_OK(chorusAllReduce(&one, &one, 1, chorusInt32, chorusSum, s->comm));
  CHECK(one == n);
  for (int r = 0; r < 2; ++r) {
    int done = -1;
    CHECK_OK(chorusTest(requests[r], &done));
    CHECK(done == 1);
    if (done != 1) CHECK_OK(chorusWait(requests[r]));
  }
}

/* Even and odd ranks split, ordered by descending parent rank (key = -rank);
 * then every rank but 0 splits again while rank 0 passes color -1. Children
 * are destroyed (one aborted first) and the parent keeps working. */
static void check_split(suite_t* s) {
  snprintf(g_case, sizeof g_case, "split even/odd");
  chorusComm_t half = NULL;
  CHECK_OK(chorusCommSplit(s->comm, s->rank % 2, -s->rank, &half));
  suite_t sub;
  suite_init(&sub, half);
  int members = (s->size - s->rank % 2 + 1) / 2;
  int highest = s->rank % 2 == (s->size - 1) % 2 ? s->size - 1 : s->size - 2;
  CHECK(sub.size == members && sub.rank == (highest - s->rank) / 2);
  int32_t sum = s->rank;
  CHECK_OK(chorusAllReduce(&sum, &sum, 1, chorusInt32, chorusSum, half));
  int expected = 0;
  for (int r = s->rank % 2; r < s->size; r += 2) expected += r;
  CHECK(sum == expected);
  check_barrier(&sub);

  snprintf(g_case, sizeof g_case, "split without rank 0");
  chorusComm_t rest = (chorusComm_t)&rest;
  CHECK_OK(chorusCommSplit(s->comm, s->rank == 0 ? -1 : 1, 0, &rest));
  CHECK((rest == NULL) == (s->rank == 0));
  if (rest != NULL) {
    int size = 0;
    CHECK_OK(chorusCommSize(rest, &size));
    CHECK(size == s->size - 1);
    CHECK_OK(chorusCommAbort(rest));
    CHECK_OK(chorusCommDestroy(rest));
  }
  CHECK_OK(chorusCommDestroy(half));
  int32_t one = 1;
  CHECK_OK(chorusAllReduce(&one, &one, 1, chorusInt32, chorusSum, s->comm));
  CHECK(one == s->size);
}

/* chorusMemAlloc: host-shared memory; an in-place all-reduce of 100003 floats in it is
 * right (tests/comm/test_shm_window.cpp checks the algorithm); chorusMemFree checks its
 * pointer. */
static void check_shared_memory(suite_t* s) {
  snprintf(g_case, sizeof g_case, "chorusMemAlloc");
  enum { kCount = 100003 };
  float* data = NULL;
  CHECK(chorusMemAlloc(s->comm, kCount * sizeof(float), NULL) == chorusInvalidArgument);
  CHECK_OK(chorusMemAlloc(s->comm, kCount * sizeof(float), (void**)&data));
  CHECK(data != NULL && (uintptr_t)data % 64 == 0);
  if (data == NULL) return;
  for (int i = 0; i < kCount; ++i) data[i] = (float)(s->rank + i % 7);
  CHECK_OK(chorusAllReduce(data, data, kCount, chorusFloat32, chorusSum, s->comm));
  int bad = 0;
  for (int i = 0; i < kCount; ++i) {
    float want = (float)(s->size * (s->size - 1) / 2 + s->size * (i % 7));
    bad += data[i] != want;
  }
  CHECK(bad == 0);
  void* zero = (void*)&bad;
  CHECK_OK(chorusMemAlloc(s->comm, 0, &zero));
  CHECK(zero == NULL);
  CHECK_OK(chorusMemFree(s->comm, data));
  CHECK_OK(chorusMemFree(s->comm, NULL));
  CHECK(chorusMemFree(s->comm, data) == chorusInvalidArgument);
  CHECK(strstr(chorusGetLastError(s->comm), "free_shared") != NULL);
}

/* On a sub-communicator of every rank, rank 0 calls all-reduce while the others
 * call broadcast: every rank fails with chorusMismatch (or chorusRemoteError,
 * when a peer that saw the mismatch first broke the connections), the sentence
 * names the failure, and the parent communicator stays usable.
 * Run on 2 ranks only: there the two calls must exchange a message, which
 * carries the fingerprint. On 3 ranks the chosen algorithms can wait on each
 * other without exchanging any message (rank 0's all-reduce waits for rank 2,
 * rank 2's broadcast waits for rank 0), which ends only at CHORUS_TIMEOUT. */
static void check_mismatch(suite_t* s) {
  if (s->size != 2) return;
  snprintf(g_case, sizeof g_case, "mismatch");
  chorusComm_t sub = NULL;
  CHECK_OK(chorusCommSplit(s->comm, 0, s->rank, &sub));
  if (sub == NULL) return;
  int32_t value[4] = {1, 2, 3, 4};
  chorusRequest_t request = NULL;
  if (s->rank == 0) {
    CHECK_OK(chorusIAllReduce(value, value, 4, chorusInt32, chorusSum, sub, &request));
  } else {
    CHECK_OK(chorusIBroadcast(value, value, 4, chorusInt32, 0, sub, &request));
  }
  chorusResult_t result = request != NULL ? chorusWait(request) : chorusInternalError;
  if (result != chorusMismatch && result != chorusRemoteError) {
    CHECK_RESULT(chorusMismatch, result); /* reports the code and the sentence */
  }
  if (result == chorusMismatch) {
    CHECK(strstr(chorusGetLastError(sub), "allreduce") != NULL);
    CHECK(strstr(chorusGetLastError(sub), "broadcast") != NULL);
  }
  CHECK(strstr(chorusGetLastError(sub), "chorusWait") != NULL);
  CHECK_OK(chorusCommDestroy(sub));
  int32_t one = 1;
  CHECK_OK(chorusAllReduce(&one, &one, 1, chorusInt32, chorusSum, s->comm));
  CHECK(one == s->size);
}

/* The last rank leaves without a word; the survivors' pending all-reduce fails
 * with chorusRemoteError (the transport sees the dead process) well before
 * CHORUS_TIMEOUT, and the broken communicator is still destroyed cleanly.
 * The leaver first receives one message from every survivor: it then knows
 * they all finished every earlier operation, so none of them can still be
 * waiting for data it sent (a barrier would not tell it that). Returns 1 on
 * the rank that leaves (it must exit at once). */
static int check_peer_death(suite_t* s) {
  snprintf(g_case, sizeof g_case, "peer death");
  int leaver = s->size - 1;
  int32_t token = s->rank;
  if (s->rank == leaver) {
    for (int r = 0; r < leaver; ++r) {
      CHECK_OK(chorusRecv(&token, 1, chorusInt32, r, s->comm));
      CHECK(token == r);
    }
    return 1;
  }
  CHECK_OK(chorusSend(&token, 1, chorusInt32, leaver, s->comm));
  struct timespec start, end;
  clock_gettime(CLOCK_MONOTONIC, &start);
  int32_t value = 1;
  chorusRequest_t request = NULL;
  CHECK_OK(chorusIAllReduce(&value, &value, 1, chorusInt32, chorusSum, s->comm, &request));
  CHECK_RESULT(chorusRemoteError, request != NULL ? chorusWait(request) : chorusInternalError);
  clock_gettime(CLOCK_MONOTONIC, &end);
  CHECK(end.tv_sec - start.tv_sec < 10);
  CHECK(chorusGetLastError(s->comm)[0] != '\0');
  CHECK_RESULT(chorusRemoteError, chorusBarrier(s->comm));
  CHECK_OK(chorusCommDestroy(s->comm));
  return 0;
}

static int run_rank(int nranks, int rank, const char* address) {
  snprintf(g_who, sizeof g_who, "rank %d", rank);
  chorusComm_t comm = NULL;
  chorusResult_t init = chorusCommInit(&comm, nranks, rank, address);
  if (init != chorusSuccess) {
    fprintf(stderr, "%s: chorusCommInit: %s\n", g_who, chorusGetLastError(NULL));
    return kInitFailed;
  }
  suite_t suite;
  suite_init(&suite, comm);
  CHECK(suite.rank == rank && suite.size == nranks);
  run_all_collectives(&suite);
  check_pending_test(&suite);
  check_overlap(&suite);
  check_split(&suite);
  check_shared_memory(&suite);
  check_mismatch(&suite);
  if (check_peer_death(&suite)) _exit(g_failures == 0 ? 0 : 1); /* no destroy, no goodbye */
  return g_failures == 0 ? 0 : 1;
}

int main(int argc, char** argv) { return forked_main(argc, argv, 2, run_rank); }
