/* Helpers of the C ABI tests, in C11 against chorus.h alone: failure counting,
 * typed element access (including fp16/bf16), the closed-form values the tests
 * send, and the reductions they are expected to produce. */
#ifndef CHORUS_TESTS_CAPI_CHECK_H_
#define CHORUS_TESTS_CAPI_CHECK_H_

#include <chorus/chorus.h>
#include <stddef.h>
#include <stdio.h>

/* Failures so far in this process; a test exits non-zero when it is not 0. */
extern int g_failures;
/* Prefix of every failure line ("rank 2" in the multi-process test). */
extern char g_who[32];
/* The case being run ("allreduce int8 sum count=5 in place, wait"), printed with failures. */
extern char g_case[160];

void check_failed(const char* file, int line, const char* what);

/* Counts and reports a failed condition; evaluates `cond` once. */
#define CHECK(cond) ((cond) ? (void)0 : check_failed(__FILE__, __LINE__, #cond))
/* Expects `call` to return `code`, and a sentence in chorusGetLastError(NULL) on failure. */
#define CHECK_RESULT(code, call) expect_result((code), (call), __FILE__, __LINE__, #call)
#define CHECK_OK(call) CHECK_RESULT(chorusSuccess, call)

void expect_result(chorusResult_t expected, chorusResult_t got, const char* file, int line,
                   const char* call);

enum { kNumDtypes = 10, kNumOps = 5 };
extern const chorusDataType_t kAllDtypes[kNumDtypes];
extern const chorusRedOp_t kAllOps[kNumOps];

size_t dtype_size(chorusDataType_t dtype);
const char* dtype_name(chorusDataType_t dtype);
const char* op_name(chorusRedOp_t op);
int dtype_is_float(chorusDataType_t dtype);

/* Element `index` of a typed buffer, read or written as a double. */
void put_value(void* buf, chorusDataType_t dtype, size_t index, double value);
double get_value(const void* buf, chorusDataType_t dtype, size_t index);
/* Equal within the dtype's precision (exact for integers). */
int values_match(chorusDataType_t dtype, double got, double expected);

/* Value rank `rank` contributes at `index` to a reduction: small integers (signed
 * types may be negative) chosen so that sums and products of up to 8 ranks are
 * exact in every dtype, bf16 included, for up to 5 ranks (3^5 = 243 fits
 * uint8 and is exact in bf16). */
double reduce_input(chorusDataType_t dtype, int rank, size_t index);
/* The reduction of reduce_input(dtype, r, index) over ranks 0..nranks-1, with
 * DESIGN.md's avg: integers truncate the 64-bit sum toward zero. */
double reduce_expected(chorusDataType_t dtype, chorusRedOp_t op, int nranks, size_t index);
/* Value `from` sends to `to` at `index` in a data-movement collective. */
double movement_value(chorusDataType_t dtype, int from, int to, size_t index);

/* Reports every element of buf[0..count) that differs from expect(i); at most a
 * few lines per call. Returns 1 when all matched. */
typedef double (*expected_fn)(const void* context, size_t index);
int check_buffer(const char* what, const void* buf, chorusDataType_t dtype, size_t count,
                 expected_fn expect, const void* context);

/* A loopback TCP port that was free a moment ago (bound to port 0, then
 * closed), or -1. Another process may take it before it is used again. */
int pick_free_port(void);

#endif /* CHORUS_TESTS_CAPI_CHECK_H_ */
