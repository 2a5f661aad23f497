/* mpi_collectives: the MPI peer of chorus-perf, for bench/compare.py.
 *
 * Same meaning of size, time, algbw and busbw as tools/chorus-perf (nccl-tests):
 *   SIZE is the buffer nccl-tests reports: for allgather, gather and alltoall the
 *   receive buffer, for reducescatter and scatter the send buffer; the element
 *   count is rounded down to a multiple of the rank count there.
 *   time  = mean over the timed iterations, max over ranks (after warm-up and a barrier).
 *   algbw = size / time.  busbw = algbw * factor: allreduce 2(n-1)/n; allgather,
 *   reducescatter, gather, scatter, alltoall, alltoallv (n-1)/n; broadcast, reduce 1.
 *   alltoallv: chorus-perf's uneven counts (set_alltoallv_counts); algbw's size is the bytes
 *   a rank sends, averaged over the ranks.
 * Data: fp32, op sum, root 0, out of place.
 *
 * usage: mpirun -np N mpi_collectives [-t NAME[,NAME...]|all] [-b BYTES] [-e BYTES]
 *                                     [-f FACTOR] [-n ITERS] [-w WARMUP]
 * Output (rank 0): comment lines start with '#'; one data line per size:
 *   collective  size(B)  count  time(us)  algbw(GB/s)  busbw(GB/s)
 */
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum {
  kAllReduce,
  kBroadcast,
  kReduce,
  kAllGather,
  kReduceScatter,
  kAllToAll,
  kGather,
  kScatter,
  kAllToAllV
};

struct Bench {
  const char* name;
  int blocked; /* count is a multiple of the rank count, block = count / n */
};

static const struct Bench kBenches[] = {
    {"allreduce", 0}, {"broadcast", 0}, {"reduce", 0},  {"allgather", 1}, {"reducescatter", 1},
    {"alltoall", 1},  {"gather", 1},    {"scatter", 1}, {"alltoallv", 1},
};

/* alltoallv's uneven counts, chorus-perf's: rank r sends block - ((r + p) mod 2) * block/2
 * elements to rank p, at displacement p * block on both sides. */
static int* v_counts;
static int* v_displs;

static void set_alltoallv_counts(int block, int rank, int n) {
  for (int p = 0; p < n; ++p) {
    v_counts[p] = block - ((rank + p) % 2) * (block / 2);
    v_displs[p] = p * block;
  }
}

/* Bytes a rank sends in alltoallv, averaged over the ranks (chorus-perf's algbw size). */
static double alltoallv_bytes(int block, int n) {
  double total = 0;
  for (int r = 0; r < n; ++r)
    for (int p = 0; p < n; ++p) total += block - ((r + p) % 2) * (block / 2);
  return total / n * sizeof(float);
}
enum { kNumBenches = sizeof kBenches / sizeof kBenches[0] };

struct Options {
  int selected[kNumBenches];
  long long min_bytes, max_bytes;
  double factor;
  int iters, warmup;
};

static double bus_factor(int bench, int n) {
  if (bench == kAllReduce) return 2.0 * (n - 1) / n;
  if (bench == kBroadcast || bench == kReduce) return 1.0;
  return (double)(n - 1) / n;
}

static void usage_exit(int rank, const char* why) {
  if (rank == 0) fprintf(stderr, "mpi_collectives: %s\n", why);
  MPI_Finalize();
  exit(2);
}

/* "64M" = 64 * 2^20 bytes (K/M/G suffixes as in chorus-perf); -1 when malformed. */
static long long parse_bytes(const char* text) {
  char* end = NULL;
  long long value = strtoll(text, &end, 10);
  if (end == text || value < 0) return -1;
  if (*end == '\0') return value;
  if (end[1] != '\0') return -1;
  if (*end == 'K' || *end == 'k') return value << 10;
  if (*end == 'M' || *end == 'm') return value << 20;
  if (*end == 'G' || *end == 'g') return value << 30;
  return -1;
}

static void select_benches(struct Options* o, const char* list, int rank) {
  char copy[256];
  snprintf(copy, sizeof copy, "%s", list);
  for (char* name = strtok(copy, ","); name; name = strtok(NULL, ",")) {
    int found = 0;
    for (int b = 0; b < kNumBenches; ++b) {
      if (strcmp(name, "all") == 0 || strcmp(name, kBenches[b].name) == 0) {
        o->selected[b] = 1;
        found = 1;
      }
    }
    if (!found) usage_exit(rank, "unknown collective in -t");
  }
}

static struct Options parse_options(int argc, char** argv, int rank) {
  struct Options o = {{0}, 8, 64ll << 20, 8.0, 20, 5};
  int any = 0;
  for (int i = 1; i + 1 < argc; i += 2) {
    const char* v = argv[i + 1];
    if (strcmp(argv[i], "-t") == 0) {
      select_benches(&o, v, rank);
      any = 1;
    } else if (strcmp(argv[i], "-b") == 0) {
      o.min_bytes = parse_bytes(v);
    } else if (strcmp(argv[i], "-e") == 0) {
      o.max_bytes = parse_bytes(v);
    } else if (strcmp(argv[i], "-f") == 0) {
      o.factor = atof(v);
    } else if (strcmp(argv[i], "-n") == 0) {
      o.iters = atoi(v);
    } else if (strcmp(argv[i], "-w") == 0) {
      o.warmup = atoi(v);
    } else {
      usage_exit(rank, "unknown option");
    }
  }
  if (argc % 2 == 0) usage_exit(rank, "every option needs a value");
  if (!any) o.selected[kAllReduce] = 1;
  if (o.factor <= 1 || o.iters < 1 || o.warmup < 0 || o.min_bytes < 0 || o.min_bytes > o.max_bytes)
    usage_exit(rank, "bad -f/-n/-w/-b/-e value");
  return o;
}

/* One call of the collective on count elements (block = count / n per rank). */
static void run_once(int bench, float* send, float* recv, int count, int block) {
  switch (bench) {
    case kAllReduce:
      MPI_Allreduce(send, recv, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
      break;
    case kBroadcast:
      MPI_Bcast(send, count, MPI_FLOAT, 0, MPI_COMM_WORLD);
      break;
    case kReduce:
      MPI_Reduce(send, recv, count, MPI_FLOAT, MPI_SUM, 0, MPI_COMM_WORLD);
      break;
    case kAllGather:
      MPI_Allgather(send, block, MPI_FLOAT, recv, block, MPI_FLOAT, MPI_COMM_WORLD);
      break;
    case kReduceScatter:
      MPI_Reduce_scatter_block(send, recv, block, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
      break;
    case kAllToAll:
      MPI_Alltoall(send, block, MPI_FLOAT, recv, block, MPI_FLOAT, MPI_COMM_WORLD);
      break;
    case kGather:
      MPI_Gather(send, block, MPI_FLOAT, recv, block, MPI_FLOAT, 0, MPI_COMM_WORLD);
      break;
    case kScatter:
      MPI_Scatter(send, block, MPI_FLOAT, recv, block, MPI_FLOAT, 0, MPI_COMM_WORLD);
      break;
    case kAllToAllV:
      MPI_Alltoallv(send, v_counts, v_displs, MPI_FLOAT, recv, v_counts, v_displs, MPI_FLOAT,
                    MPI_COMM_WORLD);
      break;
  }
}

/* Seconds per iteration, max over ranks. Both buffers hold count elements,
 * enough for every collective's send and receive side. */
static double measure(int bench, int count, int block, const struct Options* o) {
  size_t elems = count > 0 ? (size_t)count : 1;
  float* send = malloc(elems * sizeof(float));
  float* recv = malloc(elems * sizeof(float));
  if (!send || !recv) MPI_Abort(MPI_COMM_WORLD, 1);
  for (size_t i = 0; i < elems; ++i) send[i] = recv[i] = (float)(i % 17);
  for (int i = 0; i < o->warmup; ++i) run_once(bench, send, recv, count, block);
  MPI_Barrier(MPI_COMM_WORLD);
  double start = MPI_Wtime();
  for (int i = 0; i < o->iters; ++i) run_once(bench, send, recv, count, block);
  double local = (MPI_Wtime() - start) / o->iters, slowest = 0;
  MPI_Allreduce(&local, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  free(send);
  free(recv);
  return slowest;
}

/* The size sequence of chorus-perf: ceil(size * factor), at least size + 1. */
static long long next_size(long long size, double factor) {
  long long next = (long long)ceil((double)size * factor);
  return next > size ? next : size + 1;
}

static void run_bench(int bench, const struct Options* o, int rank, int n) {
  for (long long bytes = o->min_bytes; bytes <= o->max_bytes; bytes = next_size(bytes, o->factor)) {
    long long elements = bytes / (long long)sizeof(float);
    long long block = kBenches[bench].blocked ? elements / n : elements;
    long long count = kBenches[bench].blocked ? block * n : elements;
    if (count > 0x7fffffff) usage_exit(rank, "size above 2^31 elements");
    if (bench == kAllToAllV) set_alltoallv_counts((int)block, rank, n);
    double seconds = measure(bench, (int)count, (int)block, o);
    double size =
        bench == kAllToAllV ? alltoallv_bytes((int)block, n) : (double)count * sizeof(float);
    double algbw = seconds > 0 ? size / seconds / 1e9 : 0;
    if (rank == 0) {
      printf("%-14s %12lld %12lld %12.2f %9.3f %9.3f\n", kBenches[bench].name,
             count * (long long)sizeof(float), count, seconds * 1e6, algbw,
             algbw * bus_factor(bench, n));
      fflush(stdout);
    }
  }
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, n = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  struct Options o = parse_options(argc, argv, rank);
  v_counts = malloc((size_t)n * sizeof(int));
  v_displs = malloc((size_t)n * sizeof(int));
  if (!v_counts || !v_displs) MPI_Abort(MPI_COMM_WORLD, 1);
  if (rank == 0) {
    char version[MPI_MAX_LIBRARY_VERSION_STRING];
    int length = 0;
    MPI_Get_library_version(version, &length);
    version[strcspn(version, "\n,")] = '\0';
    printf("# mpi_collectives: nranks %d iters %d warmup %d library %s\n", n, o.iters, o.warmup,
           version);
    printf("# collective   size(B) count time(us) algbw(GB/s) busbw(GB/s)\n");
  }
  for (int b = 0; b < kNumBenches; ++b) {
    if (o.selected[b]) run_bench(b, &o, rank, n);
  }
  free(v_counts);
  free(v_displs);
  MPI_Finalize();
  return 0;
}
