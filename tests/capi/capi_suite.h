/* Every collective of the C ABI, run on one communicator and checked against
 * closed-form values: all dtypes, all ops, in place and not, counts {0, 5, 1000}
 * (count 0 with NULL buffers), completed by the blocking call, by chorusWait or
 * by polling chorusTest. Collective: every rank of the communicator runs the
 * same sequence, so cases (and the roots they use) line up across ranks. */
#ifndef CHORUS_TESTS_CAPI_SUITE_H_
#define CHORUS_TESTS_CAPI_SUITE_H_

#include <chorus/chorus.h>
#include <stddef.h>

/* How a case completes its operation. */
typedef enum { kBlocking = 0, kWait = 1, kTest = 2 } completion_t;

typedef struct {
  chorusComm_t comm;
  int rank;
  int size;
  unsigned iteration; /* advanced identically on every rank; picks completion and root */
} suite_t;

enum { kNumCounts = 3 };
extern const size_t kCounts[kNumCounts];

/* Fills *suite from the communicator's rank and size. */
void suite_init(suite_t* suite, chorusComm_t comm);
/* The completion mode of the next case, and the root it uses. */
completion_t suite_next(suite_t* suite, int* root);
const char* completion_name(completion_t how);

/* Finishes an issued I-form: returns `issued` when it failed (the request must
 * then be NULL), else the operation's result through chorusWait or chorusTest
 * polling (with a deadline, sleeping between polls). */
chorusResult_t finish(completion_t how, chorusResult_t issued, chorusRequest_t request);

/* Typed buffers: NULL for 0 bytes; filled with the 0xA5 sentinel. */
void* alloc_buffer(size_t count, chorusDataType_t dtype);
/* buf[i] = reduce_input(dtype, rank, offset + i) / movement_value(dtype, from, to, i). */
void fill_reduce_input(void* buf, chorusDataType_t dtype, int rank, size_t offset, size_t count);
void fill_movement(void* buf, chorusDataType_t dtype, int from, int to, size_t count);
/* Checks buf[i] == movement_value(dtype, from, to, i) for i < count. */
void check_movement(const char* what, const void* buf, chorusDataType_t dtype, int from, int to,
                    size_t count);

void check_reductions(suite_t* suite); /* all-reduce, reduce, reduce-scatter */
void check_movements(suite_t* suite);  /* broadcast, all-gather, gather, scatter, all-to-all */
void check_all_to_all_v(suite_t* suite);
void check_send_recv(suite_t* suite); /* needs 2 or more ranks */
void check_barrier(suite_t* suite);

/* All of the above. */
void run_all_collectives(suite_t* suite);

#endif /* CHORUS_TESTS_CAPI_SUITE_H_ */
