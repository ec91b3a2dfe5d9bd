/* A C caller of libflashlab.so (CTest capi_c_example): builds a problem with named fields, runs the
 * tiled FA2 forward on host arrays, asks the simulator for one record, and shows a refused call. Exits
 * non-zero if any of that goes differently; it is compiled as C99 so flashlab.h stays a C header. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "flashlab.h"

enum { kSeq = 8, kDim = 4 };

int main(void) {
  char err[256];
  flashlab_problem p;
  memset(&p, 0, sizeof p);
  p.struct_size = sizeof p;
  p.abi_version = FLASHLAB_ABI_VERSION;
  p.batch = p.heads_q = p.heads_kv = 1;
  p.seqlen_q = p.seqlen_k = kSeq;
  p.head_dim = kDim;
  p.dtype = FLASHLAB_FP32;
  p.causal = 1;
  p.window_left = p.window_right = -1;

  /* q = k = 0, v[j] = j: every visible score is equal, so row i averages v over columns 0..i (causal). */
  float q[kSeq * kDim] = {0}, v[kSeq * kDim], o[kSeq * kDim], lse[kSeq];
  for (int j = 0; j < kSeq * kDim; ++j) v[j] = (float)(j / kDim);
  flashlab_tensors t;
  memset(&t, 0, sizeof t);
  t.struct_size = sizeof t;
  t.abi_version = FLASHLAB_ABI_VERSION;
  t.q = q, t.k = q, t.v = v, t.o = o, t.lse = lse;
  if (flashlab_forward_v1("tiled-fa2", &p, &t, err, sizeof err) != 0) {
    printf("forward failed: %s\n", err);
    return 1;
  }
  for (int i = 0; i < kSeq; ++i)
    if (fabsf(o[i * kDim] - 0.5f * (float)i) > 1e-6f || fabsf(lse[i] - logf((float)(i + 1))) > 1e-6f) {
      printf("row %d: o %g (expected %g), lse %g (expected log %d)\n", i, o[i * kDim], 0.5 * i, lse[i], i + 1);
      return 1;
    }
  printf("tiled-fa2: o[i] = i/2 and lse[i] = log(i+1) for all %d causal rows\n", kSeq);

  char* json = NULL;
  if (flashlab_estimate(&p, "h100-sxm", "fa2", "fwd", "upstream", &json, err, sizeof err) != 0) {
    printf("estimate failed: %s\n", err);
    return 1;
  }
  printf("estimate: %.60s...\n", strstr(json, "\"bound\""));
  flashlab_free(json);

  p.heads_kv = 3; /* 1 query head on 3 kv heads */
  if (flashlab_forward_v1("tiled-fa2", &p, &t, err, sizeof err) == 0) {
    printf("a bad problem was accepted\n");
    return 1;
  }
  printf("refused: %s\n", err);
  return 0;
}
