/* Handles that are no longer live, across N forked ranks (N = argv[1], 1..8;
 * capi_fork.h): a destroyed split communicator, a destroyed world communicator,
 * destroying twice, requests released by chorusWait or by chorusTest reporting
 * done, a communicator destroyed while another thread is blocked in a call on it,
 * and values that never were handles. Every call must fail with its code
 * (chorusInvalidUsage for a destroyed or released handle, chorusInvalidArgument
 * for the others) and a sentence naming the function, in chorusGetLastError(NULL)
 * and in chorusGetLastError(handle); never crash. */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "capi_check.h"
#include "capi_fork.h"

/* `got` must be `code`, with a sentence naming `function` for the thread and for
 * `comm` (NULL: the thread's only; a request has no communicator to ask). */
static void expect_refused(chorusResult_t code, chorusResult_t got, chorusComm_t comm,
                           const char* function, int line) {
  if (got != code) {
    fprintf(stderr, "%s: line %d: %s returned %d, expected %d (%s)\n", g_who, line, function,
            (int)got, (int)code, chorusGetLastError(NULL));
    ++g_failures;
    return;
  }
  const char* mine = chorusGetLastError(NULL);
  if (strstr(mine, function) == NULL || strstr(chorusGetLastError(comm), function) == NULL) {
    fprintf(stderr, "%s: line %d: %s: the sentence \"%s\" does not name it\n", g_who, line,
            function, mine);
    ++g_failures;
  }
}
#define REFUSED(code, comm, function, call) \
  expect_refused((code), (call), (comm), (function), __LINE__)
#define DESTROYED(comm, function, call) REFUSED(chorusInvalidUsage, comm, function, call)

/* Every kind of entry point on a destroyed communicator `dead`. */
static void check_destroyed(chorusComm_t dead) {
  int value = 7;
  int32_t data[2] = {1, 2};
  chorusRequest_t request = (chorusRequest_t)&value;
  chorusComm_t out = (chorusComm_t)&value;
  DESTROYED(dead, "chorusCommRank", chorusCommRank(dead, &value));
  CHECK(value == 7);
  DESTROYED(dead, "chorusCommSize", chorusCommSize(dead, &value));
  DESTROYED(dead, "chorusAllReduce", chorusAllReduce(data, data, 2, chorusInt32, chorusSum, dead));
  DESTROYED(dead, "chorusBroadcast", chorusBroadcast(data, data, 2, chorusInt32, 0, dead));
  DESTROYED(dead, "chorusBarrier", chorusBarrier(dead));
  DESTROYED(dead, "chorusSend", chorusSend(data, 2, chorusInt32, 0, dead));
  DESTROYED(dead, "chorusIAllReduce",
            chorusIAllReduce(data, data, 2, chorusInt32, chorusSum, dead, &request));
  CHECK(request == NULL);
  DESTROYED(dead, "chorusCommSplit", chorusCommSplit(dead, 0, 0, &out));
  CHECK(out == NULL);
  DESTROYED(dead, "chorusCommAbort", chorusCommAbort(dead));
  DESTROYED(dead, "chorusMemFree", chorusMemFree(dead, NULL));
  DESTROYED(dead, "chorusCommDestroy", chorusCommDestroy(dead));
  CHECK(data[0] == 1 && data[1] == 2);
}

/* Split, use, destroy; the dead handle fails everywhere, also once a new
 * communicator may have taken its slot; a request issued before the destroy stays valid. */
static void check_split_destroyed(chorusComm_t world, int rank, int size) {
  snprintf(g_case, sizeof g_case, "destroyed split communicator");
  chorusComm_t sub = NULL;
  CHECK_OK(chorusCommSplit(world, 0, rank, &sub));
  if (sub == NULL) return;
  int32_t sum = 1;
  chorusRequest_t request = NULL;
  CHECK_OK(chorusIAllReduce(&sum, &sum, 1, chorusInt32, chorusSum, sub, &request));
  CHECK_OK(chorusCommDestroy(sub));
  CHECK_OK(chorusWait(request));
  CHECK(sum == size);
  check_destroyed(sub);

  snprintf(g_case, sizeof g_case, "destroyed handle after a new split");
  chorusComm_t again = NULL;
  CHECK_OK(chorusCommSplit(world, 1, rank, &again));
  if (again == NULL) return;
  CHECK(again != sub);
  DESTROYED(sub, "chorusCommRank", chorusCommRank(sub, &sum));
  int size_again = 0;
  CHECK_OK(chorusCommSize(again, &size_again));
  CHECK(size_again == size);
  CHECK_OK(chorusCommDestroy(again));
}

/* A request released by chorusWait, and one released by chorusTest reporting done. */
static void check_released_requests(chorusComm_t world, int size) {
  snprintf(g_case, sizeof g_case, "released requests");
  int32_t value = 1;
  int done = 5;
  chorusRequest_t waited = NULL, tested = NULL;
  CHECK_OK(chorusIAllReduce(&value, &value, 1, chorusInt32, chorusSum, world, &waited));
  CHECK_OK(chorusWait(waited));
  CHECK(value == size);
  DESTROYED(NULL, "chorusWait", chorusWait(waited));
  DESTROYED(NULL, "chorusTest", chorusTest(waited, &done));
  CHECK(done == 5);

  CHECK_OK(chorusIBarrier(world, &tested));
  const time_t give_up = time(NULL) + 20;
  while (done != 1 && time(NULL) < give_up) {
    CHECK_OK(chorusTest(tested, &done));
    if (g_failures != 0) return;
  }
  CHECK(done == 1);
  done = 5;
  DESTROYED(NULL, "chorusTest", chorusTest(tested, &done));
  CHECK(done == 5);
  DESTROYED(NULL, "chorusWait", chorusWait(tested));
}

/* Values chorus never returned: chorusInvalidArgument, nothing dereferenced. */
static void check_never_handles(void) {
  snprintf(g_case, sizeof g_case, "values that never were handles");
  int value = 0;
  chorusComm_t stack = (chorusComm_t)&value;
  chorusRequest_t heap = (chorusRequest_t)malloc(64);
  REFUSED(chorusInvalidArgument, stack, "chorusCommRank", chorusCommRank(stack, &value));
  REFUSED(chorusInvalidArgument, stack, "chorusBarrier", chorusBarrier(stack));
  REFUSED(chorusInvalidArgument, NULL, "chorusWait", chorusWait(heap));
  REFUSED(chorusInvalidArgument, NULL, "chorusTest", chorusTest(heap, &value));
  free(heap);
}

typedef struct {
  chorusComm_t comm;
  int peer;
  chorusResult_t result;
} blocked_recv_t;

static void* receive_forever(void* arg) {
  blocked_recv_t* blocked = (blocked_recv_t*)arg;
  int32_t value = 0;
  blocked->result = chorusRecv(&value, 1, chorusInt32, blocked->peer, blocked->comm);
  return NULL;
}

/* A thread blocks in a receive nobody sends; this thread aborts and destroys the
 * communicator: the receive returns (the communicator lives until it does), and
 * the handle is dead afterwards. Every rank does the same, so all abort. */
static void check_destroy_while_blocked(chorusComm_t world, int rank, int size) {
  if (size < 2) return;
  snprintf(g_case, sizeof g_case, "destroy while another thread is blocked");
  blocked_recv_t blocked = {NULL, (rank + 1) % size, chorusSuccess};
  CHECK_OK(chorusCommSplit(world, 0, rank, &blocked.comm));
  if (blocked.comm == NULL) return;
  pthread_t thread;
  CHECK(pthread_create(&thread, NULL, receive_forever, &blocked) == 0);
  struct timespec pause = {0, 100 * 1000000L};
  nanosleep(&pause, NULL);
  CHECK_OK(chorusCommAbort(blocked.comm));
  CHECK_OK(chorusCommDestroy(blocked.comm));
  CHECK(pthread_join(thread, NULL) == 0);
  CHECK(blocked.result == chorusInvalidUsage || blocked.result == chorusRemoteError);
  DESTROYED(blocked.comm, "chorusCommRank", chorusCommRank(blocked.comm, &rank));
}

static int run_rank(int nranks, int rank, const char* address) {
  snprintf(g_who, sizeof g_who, "rank %d", rank);
  chorusComm_t world = NULL;
  if (chorusCommInit(&world, nranks, rank, address) != chorusSuccess) {
    fprintf(stderr, "%s: chorusCommInit: %s\n", g_who, chorusGetLastError(NULL));
    return kInitFailed;
  }
  check_split_destroyed(world, rank, nranks);
  check_released_requests(world, nranks);
  check_never_handles();
  check_destroy_while_blocked(world, rank, nranks);
  CHECK_OK(chorusBarrier(world));
  CHECK_OK(chorusCommDestroy(world));
  snprintf(g_case, sizeof g_case, "destroyed world communicator");
  check_destroyed(world);
  return g_failures == 0 ? 0 : 1;
}

int main(int argc, char** argv) { return forked_main(argc, argv, 1, run_rank); }
