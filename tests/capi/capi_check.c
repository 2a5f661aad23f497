/* Helpers of the C ABI tests (see capi_check.h). */
#include "capi_check.h"

#include <arpa/inet.h>
#include <math.h>
#include <netinet/in.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

int g_failures = 0;
char g_who[32] = "";
char g_case[160] = "";

const chorusDataType_t kAllDtypes[kNumDtypes] = {
    chorusInt8,   chorusUint8,   chorusInt32,    chorusUint32,  chorusInt64,
    chorusUint64, chorusFloat16, chorusBfloat16, chorusFloat32, chorusFloat64};
const chorusRedOp_t kAllOps[kNumOps] = {chorusSum, chorusProd, chorusMax, chorusMin, chorusAvg};

void check_failed(const char* file, int line, const char* what) {
  ++g_failures;
  fprintf(stderr, "%s%s%s:%d: [%s] check failed: %s\n", g_who, g_who[0] ? ": " : "", file, line,
          g_case, what);
}

void expect_result(chorusResult_t expected, chorusResult_t got, const char* file, int line,
                   const char* call) {
  if (got == expected && (got == chorusSuccess || chorusGetLastError(NULL)[0] != '\0')) return;
  ++g_failures;
  fprintf(stderr, "%s%s%s:%d: [%s] %s returned %d (%s), expected %d (%s); last error: \"%s\"\n",
          g_who, g_who[0] ? ": " : "", file, line, g_case, call, (int)got,
          chorusGetErrorString(got), (int)expected, chorusGetErrorString(expected),
          chorusGetLastError(NULL));
}

size_t dtype_size(chorusDataType_t dtype) {
  static const size_t sizes[kNumDtypes] = {1, 1, 4, 4, 8, 8, 2, 2, 4, 8};
  return sizes[dtype];
}

const char* dtype_name(chorusDataType_t dtype) {
  static const char* names[kNumDtypes] = {"int8",   "uint8",   "int32",    "uint32",  "int64",
                                          "uint64", "float16", "bfloat16", "float32", "float64"};
  return names[dtype];
}

const char* op_name(chorusRedOp_t op) {
  static const char* names[kNumOps] = {"sum", "prod", "max", "min", "avg"};
  return names[op];
}

int dtype_is_float(chorusDataType_t dtype) { return dtype >= chorusFloat16; }

static int dtype_is_unsigned(chorusDataType_t dtype) {
  return dtype == chorusUint8 || dtype == chorusUint32 || dtype == chorusUint64;
}

/* IEEE binary16 from a float, rounding to nearest even (normal and subnormal). */
static uint16_t half_from_float(float value) {
  uint32_t bits;
  memcpy(&bits, &value, sizeof bits);
  uint32_t sign = (bits >> 16) & 0x8000u;
  int exponent = (int)((bits >> 23) & 0xffu) - 127 + 15;
  uint32_t mantissa = (bits & 0x7fffffu) | 0x800000u;
  if (((bits >> 23) & 0xffu) == 0xffu)
    return (uint16_t)(sign | 0x7c00u | ((bits & 0x7fffffu) ? 0x200u : 0));
  if (exponent >= 31) return (uint16_t)(sign | 0x7c00u);
  if (exponent < -10) return (uint16_t)sign;
  int shift = exponent > 0 ? 13 : 14 - exponent;
  uint32_t half = mantissa >> shift;
  uint32_t rest = mantissa & ((1u << shift) - 1u);
  uint32_t halfway = 1u << (shift - 1);
  if (rest > halfway || (rest == halfway && (half & 1u))) ++half;
  if (exponent > 0)
    half = ((uint32_t)exponent << 10) + (half - 0x400u); /* carry may bump the exponent */
  return (uint16_t)(sign | half);
}

static float half_to_float(uint16_t half) {
  int exponent = (half >> 10) & 0x1f;
  int mantissa = half & 0x3ff;
  float magnitude = exponent == 0    ? ldexpf((float)mantissa, -24)
                    : exponent == 31 ? (mantissa ? NAN : INFINITY)
                                     : ldexpf((float)(mantissa | 0x400), exponent - 25);
  return (half & 0x8000u) ? -magnitude : magnitude;
}

static uint16_t bf16_from_float(float value) {
  uint32_t bits;
  memcpy(&bits, &value, sizeof bits);
  if (isnan(value)) return 0x7fc0u;
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return (uint16_t)(bits >> 16);
}

static float bf16_to_float(uint16_t value) {
  uint32_t bits = (uint32_t)value << 16;
  float result;
  memcpy(&result, &bits, sizeof result);
  return result;
}

void put_value(void* buf, chorusDataType_t dtype, size_t index, double value) {
  switch (dtype) {
    case chorusInt8:
      ((int8_t*)buf)[index] = (int8_t)value;
      break;
    case chorusUint8:
      ((uint8_t*)buf)[index] = (uint8_t)value;
      break;
    case chorusInt32:
      ((int32_t*)buf)[index] = (int32_t)value;
      break;
    case chorusUint32:
      ((uint32_t*)buf)[index] = (uint32_t)value;
      break;
    case chorusInt64:
      ((int64_t*)buf)[index] = (int64_t)value;
      break;
    case chorusUint64:
      ((uint64_t*)buf)[index] = (uint64_t)value;
      break;
    case chorusFloat16:
      ((uint16_t*)buf)[index] = half_from_float((float)value);
      break;
    case chorusBfloat16:
      ((uint16_t*)buf)[index] = bf16_from_float((float)value);
      break;
    case chorusFloat32:
      ((float*)buf)[index] = (float)value;
      break;
    case chorusFloat64:
      ((double*)buf)[index] = value;
      break;
  }
}

double get_value(const void* buf, chorusDataType_t dtype, size_t index) {
  switch (dtype) {
    case chorusInt8:
      return ((const int8_t*)buf)[index];
    case chorusUint8:
      return ((const uint8_t*)buf)[index];
    case chorusInt32:
      return ((const int32_t*)buf)[index];
    case chorusUint32:
      return ((const uint32_t*)buf)[index];
    case chorusInt64:
      return (double)((const int64_t*)buf)[index];
    case chorusUint64:
      return (double)((const uint64_t*)buf)[index];
    case chorusFloat16:
      return half_to_float(((const uint16_t*)buf)[index]);
    case chorusBfloat16:
      return bf16_to_float(((const uint16_t*)buf)[index]);
    case chorusFloat32:
      return ((const float*)buf)[index];
    case chorusFloat64:
      return ((const double*)buf)[index];
  }
  return NAN;
}

int values_match(chorusDataType_t dtype, double got, double expected) {
  double tolerance = dtype == chorusFloat16 || dtype == chorusBfloat16 ? 1e-2
                     : dtype == chorusFloat32                          ? 1e-6
                     : dtype == chorusFloat64                          ? 1e-12
                                                                       : 0.0;
  double scale = fabs(expected) > 1.0 ? fabs(expected) : 1.0;
  return fabs(got - expected) <= tolerance * scale;
}

double reduce_input(chorusDataType_t dtype, int rank, size_t index) {
  int base = (int)((rank * 7u + index * 3u + 1u) % 4u); /* 0..3 */
  return dtype_is_unsigned(dtype) ? base : base - 2;    /* 0..3 or -2..1 */
}

double reduce_expected(chorusDataType_t dtype, chorusRedOp_t op, int nranks, size_t index) {
  double sum = 0.0, product = 1.0, low = INFINITY, high = -INFINITY;
  for (int rank = 0; rank < nranks; ++rank) {
    double value = reduce_input(dtype, rank, index);
    sum += value;
    product *= value;
    low = value < low ? value : low;
    high = value > high ? value : high;
  }
  switch (op) {
    case chorusSum:
      return sum;
    case chorusProd:
      return product;
    case chorusMax:
      return high;
    case chorusMin:
      return low;
    case chorusAvg:
      return dtype_is_float(dtype) ? sum / nranks : (double)((int64_t)sum / nranks);
  }
  return NAN;
}

double movement_value(chorusDataType_t dtype, int from, int to, size_t index) {
  int value = (int)((from * 37u + to * 11u + index) % 100u);
  return dtype_is_unsigned(dtype) ? value : value - 50;
}

int check_buffer(const char* what, const void* buf, chorusDataType_t dtype, size_t count,
                 expected_fn expect, const void* context) {
  int reported = 0;
  for (size_t i = 0; i < count; ++i) {
    double expected = expect(context, i);
    double got = get_value(buf, dtype, i);
    if (values_match(dtype, got, expected)) continue;
    if (reported++ == 0) ++g_failures;
    if (reported <= 3) {
      fprintf(stderr, "%s%s[%s] %s: element %zu is %g, expected %g\n", g_who, g_who[0] ? ": " : "",
              g_case, what, i, got, expected);
    }
  }
  return reported == 0;
}

int pick_free_port(void) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in address;
  memset(&address, 0, sizeof address);
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof address;
  int port = -1;
  if (fd >= 0 && bind(fd, (struct sockaddr*)&address, sizeof address) == 0 &&
      getsockname(fd, (struct sockaddr*)&address, &length) == 0) {
    port = ntohs(address.sin_port);
  }
  if (fd >= 0) close(fd);
  return port;
}
