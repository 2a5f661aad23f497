/* Forked multi-rank jobs (see capi_fork.h). */
#define _POSIX_C_SOURCE 200809L
#include "capi_fork.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "capi_check.h"

enum { kAttempts = 3, kParentSeconds = 55, kChildSeconds = 50 };

static volatile sig_atomic_t g_deadline_passed = 0;
static void on_alarm(int signal_number) {
  (void)signal_number;
  g_deadline_passed = 1;
}

static void kill_all(const pid_t* children, const int* running, int n) {
  for (int r = 0; r < n; ++r) {
    if (running[r]) kill(children[r], SIGKILL);
  }
}

static int run_child(int nranks, int rank, int port, rank_main_t run_rank, unsigned seconds) {
  signal(SIGALRM, SIG_DFL); /* the parent's handler only sets a flag; a child must die */
  alarm(seconds);
  char address[64];
  snprintf(address, sizeof address, "127.0.0.1:%d", port);
  return run_rank(nranks, rank, address);
}

/* Forks the ranks and reaps them. Returns 0 when all passed, kInitFailed when
 * an init failed (the rest are killed), 1 on any other failure or the deadline. */
static int run_job(int nranks, int port, rank_main_t run_rank, unsigned child_seconds) {
  pid_t children[kMaxForkedRanks];
  int running[kMaxForkedRanks] = {0};
  fflush(NULL);
  for (int r = 0; r < nranks; ++r) {
    children[r] = fork();
    if (children[r] == 0) _exit(run_child(nranks, r, port, run_rank, child_seconds));
    running[r] = children[r] > 0;
    if (children[r] < 0) {
      kill_all(children, running, r);
      return 1;
    }
  }
  int outcome = 0, left = nranks;
  while (left > 0) {
    int status = 0;
    pid_t pid = waitpid(-1, &status, 0);
    if (pid < 0 && errno == EINTR && g_deadline_passed) {
      fprintf(stderr, "deadline passed with %d rank(s) still running; killing them\n", left);
      kill_all(children, running, nranks);
      outcome = 1;
      continue;
    }
    if (pid < 0) break;
    for (int r = 0; r < nranks; ++r) {
      if (children[r] != pid) continue;
      running[r] = 0;
      --left;
      int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      if (code != 0 && outcome == 0) {
        fprintf(stderr, "rank %d exited with %d\n", r, code);
        outcome = code == kInitFailed ? kInitFailed : 1;
        if (outcome == kInitFailed) kill_all(children, running, nranks);
      }
    }
  }
  return outcome;
}

int forked_main(int argc, char** argv, int min_ranks, rank_main_t run_rank) {
  int nranks = argc > 1 ? atoi(argv[1]) : 0;
  if (nranks < min_ranks || nranks > kMaxForkedRanks) {
    fprintf(stderr, "usage: %s NRANKS (%d..%d)\n", argv[0], min_ranks, kMaxForkedRanks);
    return 2;
  }
  setenv("CHORUS_TIMEOUT", "20", 0);
  struct sigaction action;
  memset(&action, 0, sizeof action);
  action.sa_handler = on_alarm; /* no SA_RESTART: waitpid returns EINTR */
  sigaction(SIGALRM, &action, NULL);
  alarm(kParentSeconds);
  for (int attempt = 1; attempt <= kAttempts; ++attempt) {
    int port = pick_free_port();
    if (port <= 0) continue;
    int outcome = run_job(nranks, port, run_rank, kChildSeconds);
    if (outcome != kInitFailed) return outcome;
    fprintf(stderr, "attempt %d on port %d: init failed, retrying\n", attempt, port);
  }
  return 1;
}
