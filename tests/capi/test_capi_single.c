/* The C ABI on one rank, in C11 against chorus.h alone: every collective in
 * every dtype and op (capi_suite.h), error strings, the last-error contract,
 * init from arguments and from the environment, split and abort, and bad
 * arguments, each of which must return its code with a sentence and never
 * crash or hang. */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "capi_check.h"
#include "capi_suite.h"

/* Codes chorusGetErrorString knows, and values it must call unknown. */
static void check_error_strings(void) {
  snprintf(g_case, sizeof g_case, "error strings");
  const char* seen[9];
  for (int code = chorusSuccess; code <= chorusInProgress; ++code) {
    const char* text = chorusGetErrorString((chorusResult_t)code);
    CHECK(text != NULL && text[0] != '\0' && strcmp(text, "unknown result code") != 0);
    for (int earlier = 0; earlier < code; ++earlier) CHECK(strcmp(seen[earlier], text) != 0);
    seen[code] = text;
  }
  CHECK(strcmp(chorusGetErrorString((chorusResult_t)9), "unknown result code") == 0);
  CHECK(strcmp(chorusGetErrorString((chorusResult_t)-1), "unknown result code") == 0);
  CHECK(strcmp(chorusGetErrorString((chorusResult_t)1000), "unknown result code") == 0);
}

static void unset_launcher_env(void) {
  static const char* names[] = {
      "RANK",         "WORLD_SIZE",           "MASTER_ADDR",          "MASTER_PORT", "SLURM_PROCID",
      "SLURM_NTASKS", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "PMI_RANK",    "PMI_SIZE"};
  for (size_t i = 0; i < sizeof names / sizeof names[0]; ++i) unsetenv(names[i]);
}

/* Runs before any communicator exists: setenv is not safe next to library threads. */
static void check_init_from_env(void) {
  snprintf(g_case, sizeof g_case, "init from env");
  chorusComm_t comm = (chorusComm_t)&comm; /* must be overwritten with NULL */
  unset_launcher_env();
  chorusResult_t missing = chorusCommInitFromEnv(&comm);
  CHECK(missing == chorusInvalidArgument);
  CHECK(comm == NULL && chorusGetLastError(NULL)[0] != '\0');
  CHECK_RESULT(chorusInvalidArgument, chorusCommInitFromEnv(NULL));

  setenv("RANK", "0", 1);
  setenv("WORLD_SIZE", "1", 1);
  setenv("MASTER_ADDR", "127.0.0.1", 1);
  char port[16];
  snprintf(port, sizeof port, "%d", pick_free_port());
  setenv("MASTER_PORT", port, 1);
  CHECK_OK(chorusCommInitFromEnv(&comm));
  int value = 7;
  CHECK_OK(chorusAllReduce(&value, &value, 1, chorusInt32, chorusSum, comm));
  CHECK(value == 7);
  CHECK_OK(chorusCommDestroy(comm));
  unset_launcher_env();
}

static void check_init_arguments(void) {
  snprintf(g_case, sizeof g_case, "init arguments");
  static const char* bad_addresses[] = {"",   "nonsense",       "127.0.0.1",       "127.0.0.1:",
                                        ":5", "127.0.0.1:port", "127.0.0.1:70000", "127.0.0.1:-1"};
  chorusComm_t comm = NULL;
  CHECK_RESULT(chorusInvalidArgument, chorusCommInit(NULL, 1, 0, "127.0.0.1:0"));
  CHECK_RESULT(chorusInvalidArgument, chorusCommInit(&comm, 1, 0, NULL));
  CHECK(comm == NULL);
  for (size_t i = 0; i < sizeof bad_addresses / sizeof bad_addresses[0]; ++i) {
    snprintf(g_case, sizeof g_case, "init address \"%s\"", bad_addresses[i]);
    comm = (chorusComm_t)&comm;
    CHECK_RESULT(chorusInvalidArgument, chorusCommInit(&comm, 1, 0, bad_addresses[i]));
    CHECK(comm == NULL);
  }
  snprintf(g_case, sizeof g_case, "init shape");
  CHECK_RESULT(chorusInvalidArgument, chorusCommInit(&comm, 0, 0, "127.0.0.1:0"));
  CHECK_RESULT(chorusInvalidArgument, chorusCommInit(&comm, 1, 1, "127.0.0.1:0"));
  CHECK_RESULT(chorusInvalidArgument, chorusCommInit(&comm, 1, -1, "127.0.0.1:0"));
  CHECK(comm == NULL);
}

/* Calls that must fail with chorusInvalidArgument on a healthy one-rank comm,
 * leaving a sentence on the comm as well as on the thread. */
static void check_bad_arguments(chorusComm_t comm) {
  snprintf(g_case, sizeof g_case, "bad arguments");
  int in[4] = {1, 2, 3, 4}, out[4] = {0};
  chorusRequest_t request = (chorusRequest_t)&request;
  size_t counts[1] = {4}, displs[1] = {0};
  const chorusDataType_t bad_dtypes[] = {(chorusDataType_t)99, (chorusDataType_t)10,
                                         (chorusDataType_t)-1};
  const chorusRedOp_t bad_ops[] = {(chorusRedOp_t)99, (chorusRedOp_t)5, (chorusRedOp_t)-1};
  for (int i = 0; i < 3; ++i) {
    CHECK_RESULT(chorusInvalidArgument,
                 chorusAllReduce(in, out, 4, bad_dtypes[i], chorusSum, comm));
    CHECK(chorusGetLastError(comm)[0] != '\0');
    CHECK_RESULT(chorusInvalidArgument, chorusAllReduce(in, out, 4, chorusInt32, bad_ops[i], comm));
    CHECK_RESULT(chorusInvalidArgument, chorusBroadcast(in, out, 4, bad_dtypes[i], 0, comm));
    CHECK_RESULT(chorusInvalidArgument, chorusSend(in, 4, bad_dtypes[i], 0, comm));
  }
  CHECK(strstr(chorusGetLastError(comm), "-1") != NULL);
  CHECK_RESULT(chorusInvalidArgument, chorusAllReduce(in, out, 4, chorusInt32, chorusSum, NULL));
  CHECK(strstr(chorusGetLastError(NULL), "NULL") != NULL);
  CHECK_RESULT(chorusInvalidArgument, chorusAllReduce(NULL, out, 4, chorusInt32, chorusSum, comm));
  CHECK_RESULT(chorusInvalidArgument, chorusAllReduce(in, NULL, 4, chorusInt32, chorusSum, comm));
  CHECK_RESULT(chorusInvalidArgument, chorusAllGather(in, NULL, 4, chorusInt32, comm));
  CHECK_RESULT(chorusInvalidArgument, chorusAlltoAll(NULL, out, 4, chorusInt32, comm));
  CHECK_RESULT(chorusInvalidArgument, chorusRecv(NULL, 4, chorusInt32, 0, comm));
  for (int root = -1; root <= 1; root += 2) {
    snprintf(g_case, sizeof g_case, "bad root %d", root);
    CHECK_RESULT(chorusInvalidArgument, chorusBroadcast(in, out, 4, chorusInt32, root, comm));
    CHECK_RESULT(chorusInvalidArgument,
                 chorusReduce(in, out, 4, chorusInt32, chorusSum, root, comm));
    CHECK_RESULT(chorusInvalidArgument, chorusGather(in, out, 4, chorusInt32, root, comm));
    CHECK_RESULT(chorusInvalidArgument, chorusScatter(in, out, 4, chorusInt32, root, comm));
    CHECK_RESULT(chorusInvalidArgument, chorusSend(in, 4, chorusInt32, root, comm));
    CHECK_RESULT(chorusInvalidArgument, chorusRecv(out, 4, chorusInt32, root, comm));
    CHECK_RESULT(chorusInvalidArgument,
                 chorusIBroadcast(in, out, 4, chorusInt32, root, comm, &request));
    CHECK(request == NULL);
  }
  snprintf(g_case, sizeof g_case, "bad alltoallv arrays");
  CHECK_RESULT(chorusInvalidArgument,
               chorusAlltoAllV(in, NULL, displs, out, counts, displs, chorusInt32, comm));
  CHECK_RESULT(chorusInvalidArgument,
               chorusAlltoAllV(in, counts, displs, out, counts, NULL, chorusInt32, comm));
  snprintf(g_case, sizeof g_case, "overflowing count");
  CHECK_RESULT(chorusInvalidArgument,
               chorusAllReduce(in, out, (size_t)-1 / 2, chorusInt64, chorusSum, comm));
}

/* Out-pointers and request handles. */
static void check_bad_handles(chorusComm_t comm) {
  snprintf(g_case, sizeof g_case, "bad handles");
  int value = 1, done = 5;
  chorusRequest_t request = NULL;
  chorusComm_t out = (chorusComm_t)&out;
  CHECK_RESULT(chorusInvalidArgument, chorusCommRank(comm, NULL));
  CHECK_RESULT(chorusInvalidArgument, chorusCommSize(comm, NULL));
  CHECK_RESULT(chorusInvalidArgument, chorusCommRank(NULL, &value));
  CHECK_RESULT(chorusInvalidArgument, chorusCommSize(NULL, &value));
  CHECK_RESULT(chorusInvalidArgument, chorusCommSplit(NULL, 0, 0, &out));
  CHECK(out == NULL);
  CHECK_RESULT(chorusInvalidArgument, chorusCommSplit(comm, 0, 0, NULL));
  CHECK_RESULT(chorusInvalidArgument, chorusCommDestroy(NULL));
  CHECK_RESULT(chorusInvalidArgument, chorusCommAbort(NULL));
  CHECK_RESULT(chorusInvalidArgument, chorusBarrier(NULL));
  CHECK_RESULT(chorusInvalidArgument, chorusIBarrier(comm, NULL));
  CHECK_RESULT(chorusInvalidArgument, chorusIBarrier(NULL, &request));
  CHECK(request == NULL);
  CHECK_RESULT(chorusInvalidArgument,
               chorusIAllReduce(&value, &value, 1, chorusInt32, chorusSum, comm, NULL));
  CHECK_RESULT(chorusInvalidArgument, chorusWait(NULL));
  CHECK_RESULT(chorusInvalidArgument, chorusTest(NULL, &done));
  CHECK(done == 5);
  /* A NULL done pointer leaves the request alive: it is then waited for. */
  CHECK_OK(chorusIAllReduce(&value, &value, 1, chorusInt32, chorusSum, comm, &request));
  CHECK_RESULT(chorusInvalidArgument, chorusTest(request, NULL));
  CHECK_OK(chorusWait(request));
  CHECK(value == 1);
}

static void* fail_on_comm(void* comm) {
  /* A new thread starts with no last error of its own. */
  CHECK(strcmp(chorusGetLastError(NULL), "") == 0);
  CHECK_RESULT(chorusInvalidArgument, chorusCommSize((chorusComm_t)comm, NULL));
  return NULL;
}

/* chorusGetLastError(NULL) is per thread; chorusGetLastError(comm) is shared. */
static void check_last_error(chorusComm_t comm) {
  snprintf(g_case, sizeof g_case, "last error");
  CHECK(strcmp(chorusGetLastError(comm), "") == 0);
  CHECK_RESULT(chorusInvalidArgument, chorusCommRank(comm, NULL));
  char mine[256];
  snprintf(mine, sizeof mine, "%s", chorusGetLastError(NULL));
  CHECK(strcmp(mine, chorusGetLastError(comm)) == 0);
  CHECK(strstr(mine, "chorusCommRank") != NULL);
  pthread_t thread;
  CHECK(pthread_create(&thread, NULL, fail_on_comm, comm) == 0);
  CHECK(pthread_join(thread, NULL) == 0);
  CHECK(strcmp(chorusGetLastError(NULL), mine) == 0);
  CHECK(strstr(chorusGetLastError(comm), "chorusCommSize") != NULL);
  /* Success leaves the last failure in place. */
  CHECK_OK(chorusBarrier(comm));
  CHECK(strstr(chorusGetLastError(comm), "chorusCommSize") != NULL);
}

/* Split of one rank: color < 0 gives NULL; an aborted child fails its calls
 * while the parent keeps working. */
static void check_split_and_abort(chorusComm_t comm) {
  snprintf(g_case, sizeof g_case, "split");
  chorusComm_t child = (chorusComm_t)&child;
  CHECK_OK(chorusCommSplit(comm, -1, 0, &child));
  CHECK(child == NULL);
  CHECK_OK(chorusCommSplit(comm, 3, 9, &child));
  CHECK(child != NULL);
  int rank = -1, size = -1;
  CHECK_OK(chorusCommRank(child, &rank));
  CHECK_OK(chorusCommSize(child, &size));
  CHECK(rank == 0 && size == 1);
  double value = 2.5;
  CHECK_OK(chorusAllReduce(&value, &value, 1, chorusFloat64, chorusProd, child));
  CHECK(value == 2.5);
  snprintf(g_case, sizeof g_case, "abort");
  CHECK_OK(chorusCommAbort(child));
  chorusResult_t after = chorusAllReduce(&value, &value, 1, chorusFloat64, chorusSum, child);
  CHECK(after == chorusInvalidUsage || after == chorusRemoteError);
  CHECK(chorusGetLastError(child)[0] != '\0');
  CHECK_OK(chorusCommDestroy(child));
  CHECK_OK(chorusAllReduce(&value, &value, 1, chorusFloat64, chorusSum, comm));
  CHECK(value == 2.5);
}

int main(void) {
  alarm(50); /* ctest's limit is 60 s; a hang must still fail here */
  check_error_strings();
  check_init_from_env();
  check_init_arguments();
  snprintf(g_case, sizeof g_case, "init");
  chorusComm_t comm = NULL;
  CHECK_OK(chorusCommInit(&comm, 1, 0, "127.0.0.1:0"));
  if (comm == NULL) return 1;
  check_last_error(comm);
  suite_t suite;
  suite_init(&suite, comm);
  CHECK(suite.rank == 0 && suite.size == 1);
  run_all_collectives(&suite);
  check_bad_arguments(comm);
  check_bad_handles(comm);
  check_split_and_abort(comm);
  CHECK_OK(chorusCommDestroy(comm));
  if (g_failures != 0) fprintf(stderr, "%d check(s) failed\n", g_failures);
  return g_failures == 0 ? 0 : 1;
}
