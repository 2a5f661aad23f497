/* Uses the installed C ABI: one rank, one all-reduce. */
#include <chorus/chorus.h>
#include <stdio.h>

int main(void) {
  chorusComm_t comm;
  float x = 2.5f;
  if (chorusCommInit(&comm, 1, 0, "127.0.0.1:0") != chorusSuccess) return 1;
  if (chorusAllReduce(&x, &x, 1, chorusFloat32, chorusSum, comm) != chorusSuccess) return 2;
  chorusCommDestroy(comm);
  printf("c consumer: %.1f\n", x);
  return x == 2.5f ? 0 : 3;
}
