/* The device-to-host copy a mesh of B bytes cannot beat: cudaMemcpy from a
 * device array into pinned (cudaHostAlloc) memory, and for comparison into
 * pageable memory that was already touched. Median and range of 20 after a
 * warm-up. bench/bench_cli_sequence.sh runs it with the CLI's mesh size:
 * the "measured pinned download" that issue 23 item 6 holds the CLI's
 * extract stage to. Usage: bench_download BYTES [DEVICE]. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <algorithm>
#include <chrono>
#include <vector>

#include <cuda_runtime.h>

#define CK(x)                                                                                      \
    do {                                                                                           \
        cudaError_t e_ = (x);                                                                      \
        if (e_ != cudaSuccess) {                                                                   \
            fprintf(stderr, "%s: %s\n", #x, cudaGetErrorString(e_));                               \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

static void timed(const char *what, void *dst, const void *src, size_t bytes)
{
    std::vector<double> ms;
    for (int r = 0; r < 21; r++) {
        auto t0 = std::chrono::steady_clock::now();
        CK(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost));
        auto t1 = std::chrono::steady_clock::now();
        if (r) ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
    }
    std::sort(ms.begin(), ms.end());
    const double med = ms[ms.size() / 2];
    printf("%s: %zu bytes, median %.3f ms (%.3f-%.3f), %.1f GB/s\n", what, bytes, med, ms.front(),
           ms.back(), bytes / med * 1e-6);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: bench_download BYTES [DEVICE]\n");
        return 2;
    }
    const size_t bytes = strtoull(argv[1], NULL, 10);
    CK(cudaSetDevice(argc > 2 ? atoi(argv[2]) : 0));
    cudaDeviceProp p;
    CK(cudaGetDeviceProperties(&p, argc > 2 ? atoi(argv[2]) : 0));
    void *dev = NULL, *pin = NULL;
    CK(cudaMalloc(&dev, bytes));
    CK(cudaMemset(dev, 1, bytes));
    CK(cudaHostAlloc(&pin, bytes, cudaHostAllocDefault));
    char *page = (char *)malloc(bytes);
    if (!page) {
        fprintf(stderr, "bench_download: no host memory for %zu bytes\n", bytes);
        return 1;
    }
    memset(page, 0, bytes);
    printf("%s, device to host\n", p.name);
    timed("pinned", pin, dev, bytes);
    timed("pageable (touched)", page, dev, bytes);
    free(page);
    CK(cudaFreeHost(pin));
    CK(cudaFree(dev));
    return 0;
}
