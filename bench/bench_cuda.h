/* Shared by the GPU benchmarks that drive pyramesh's public API: error
 * checks that end the program with the file and line, and the size list
 * of the command line. */
#ifndef PM_BENCH_CUDA_H
#define PM_BENCH_CUDA_H

#include <stdio.h>
#include <stdlib.h>

#include <cuda_runtime.h>

#include "pyramesh.h"

#define CK(x)                                                                                      \
    do {                                                                                           \
        cudaError_t e_ = (x);                                                                      \
        if (e_ != cudaSuccess) {                                                                   \
            fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, cudaGetErrorString(e_));            \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)
#define PK(x)                                                                                      \
    do {                                                                                           \
        pm_status s_ = (x);                                                                        \
        if (s_ != PM_STATUS_OK) {                                                                  \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, pm_status_string(s_),           \
                    pm_last_error());                                                              \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

/* A comma-separated size list ("128,256,512") into ns (at most max
 * entries); returns the count. */
static inline int bench_sizes(const char *list, int *ns, int max)
{
    int nn = 0;
    for (const char *p = list; *p && nn < max;) {
        char *end;
        ns[nn++] = (int)strtol(p, &end, 10);
        p = end;
        if (*p == ',')
            p++;
        else
            break;
    }
    return nn;
}

#endif
