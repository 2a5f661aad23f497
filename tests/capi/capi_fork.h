/* Forked multi-rank jobs for the C ABI tests: the parent picks a free loopback
 * port, forks one child per rank, and reaps them under a deadline. A child runs
 * `run_rank(nranks, rank, "127.0.0.1:<port>")` (which joins with chorusCommInit,
 * rank 0 hosting the store) and exits with its return value. A child whose init
 * fails returns kInitFailed: the port may have been taken meanwhile, so the
 * parent kills the others and retries with a new port. */
#ifndef CHORUS_TESTS_CAPI_FORK_H_
#define CHORUS_TESTS_CAPI_FORK_H_

enum { kMaxForkedRanks = 8, kInitFailed = 3 };

typedef int (*rank_main_t)(int nranks, int rank, const char* address);

/* The main() of a forked test: N = argv[1] ranks (min_ranks..kMaxForkedRanks, else a
 * usage line and 2). Runs the job (up to 3 attempts on init failures) with 50 s for
 * each child and 55 s in all (ctest allows 60); returns 0 when every rank returned 0.
 * Sets CHORUS_TIMEOUT to 20 s unless it is set, so a hang fails inside the deadline. */
int forked_main(int argc, char** argv, int min_ranks, rank_main_t run_rank);

#endif /* CHORUS_TESTS_CAPI_FORK_H_ */
