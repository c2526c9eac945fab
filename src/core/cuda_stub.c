/* Builds without nvcc: there is no CUDA backend. */
#include "core/backend.h"

const pmi_backend *pmi_cuda_backend(void) { return NULL; }
int pmi_cuda_device_count(void) { return 0; }
