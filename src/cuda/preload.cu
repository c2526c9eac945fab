/* Kernel preloading. CUDA loads a kernel when it is first launched (lazy
 * module loading, the default since CUDA 12.2); a fresh process pays that
 * inside its first extraction (on the H100: 2.4 ms of pass 1 and 2.8 ms of
 * pass 2 of the first call, against 1.4 and 0.5 ms when loaded).
 * A context made on a GPU starts a thread that loads the kernels of the
 * field, extraction and write paths (cudaFuncGetAttributes loads a
 * kernel) while the caller goes on: reading its input, uploading it.
 * Each module lists its kernels in two tiers: 0, the paths of f32
 * samples (every particle field, most volumes); 1, the other sample types
 * and the rarer paths. A kernel the caller launches before the thread
 * reaches it loads itself, as without the thread; nothing waits for the
 * thread but pm_context_destroy, which stops it after the kernel it is
 * loading. The thread makes no copies and queues no work (the marching
 * cubes tables are still uploaded by the first call), so a caller's
 * stream capture cannot be disturbed by it. The hook nopreload leaves every kernel to load at its first
 * launch (the A/B of bench/RESULTS-cudamc.md). */
#include <pthread.h>
#include <time.h>

#include "core/hooks.h"
#include "cuda/cuda_internal.h"

struct pmi_preload {
    const int *stop;
    int loaded;
};

int pmi_preload_fn(pmi_preload *p, const void *fn)
{
    if (__atomic_load_n(p->stop, __ATOMIC_ACQUIRE)) return 0;
    cudaFuncAttributes a;
    if (cudaFuncGetAttributes(&a, fn) == cudaSuccess)
        p->loaded++;
    else
        cudaGetLastError();
    return 1;
}

static double preload_now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec * 1e-6;
}

static void *preload_main(void *arg)
{
    pmi_cuda_state *st = (pmi_cuda_state *)arg;
    const double t0 = preload_now_ms();
    pmi_preload p = {&st->preload_stop, 0};
    if (cudaSetDevice(st->device) == cudaSuccess) {
        /* In the order a reconstruction uses them: field, extraction, write. */
        for (int tier = 0; tier < 2; tier++) {
            pmi_neighbours_preload(&p, tier);
            pmi_density_preload(&p, tier);
            pmi_isosurface_preload(&p, tier);
            pmi_mc_stream_preload(&p, tier);
            pmi_mc_expand_preload(&p, tier);
            pmi_ply_body_preload(&p, tier);
            pmi_mc_classify_preload(&p, tier);
            pmi_piece_preload(&p, tier);
        }
    }
    cudaGetLastError();
    st->preload_loaded = p.loaded;
    st->preload_ms = preload_now_ms() - t0;
    return NULL;
}

void pmi_cuda_preload_start(pmi_cuda_state *st)
{
    unsigned hooks = 0;
    if (pmi_hooks(&hooks) != PM_STATUS_OK) hooks = 0; /* the extraction reports a bad list */
    if (hooks & PMI_HOOK_NOPRELOAD) return;
    st->preload_stop = 0;
    st->preload_running = pthread_create(&st->preload_thread, NULL, preload_main, st) == 0;
}

void pmi_cuda_preload_stop(pmi_cuda_state *st)
{
    if (!st->preload_running) return;
    __atomic_store_n(&st->preload_stop, 1, __ATOMIC_RELEASE);
    pthread_join(st->preload_thread, NULL);
    st->preload_running = 0;
}

extern "C" int pmi_cuda_preload_wait(pm_context *ctx, double *ms)
{
    pmi_cuda_state *st = pmi_cuda(ctx);
    if (st->preload_running) {
        pthread_join(st->preload_thread, NULL);
        st->preload_running = 0;
    }
    if (ms) *ms = st->preload_ms;
    return st->preload_loaded;
}
