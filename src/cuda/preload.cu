/* Kernel preloading. CUDA loads a kernel when it is first launched (lazy
 * module loading, the default since CUDA 12.2); a fresh process paid that
 * inside its first extraction (on the H100: pass 1 2.3-2.5 ms and pass 2
 * 2.9-3.0 ms of the first call, against 1.3-1.4 and 0.5 ms when loaded).
 * A context made on a GPU starts a thread that loads the kernels of the
 * field, extraction and write paths (cudaFuncGetAttributes loads a
 * kernel) while the caller goes on: reading its input, uploading it.
 * Each module lists its kernels in two tiers: 0, the paths of f32
 * samples (every particle field, most volumes); 1, the other sample types
 * and the rarer paths. A kernel the caller launches before the thread
 * reaches it loads itself, as without the thread. The thread makes no
 * copies and queues no work, so a caller's stream capture cannot be
 * disturbed by it. Nothing waits for it but pm_context_destroy, which
 * stops it after the kernel it is loading, and the process's exit: an
 * atexit handler (registered after CUDA's own, so it runs first) stops
 * and joins the threads of contexts never destroyed, since CUDA's
 * teardown under a thread still inside the runtime can crash the
 * process. PYRAMESH_PRELOAD=0 turns the thread off (docs/environment.md);
 * so does CUDA_MODULE_LOADING=EAGER, which has loaded everything. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "cuda/cuda_internal.h"

struct pmi_preload {
    const int *stop;
    int listed, loaded;
};

int pmi_preload_fn(pmi_preload *p, const void *fn)
{
    if (__atomic_load_n(p->stop, __ATOMIC_ACQUIRE)) return 0;
    p->listed++;
    cudaFuncAttributes a;
    if (cudaFuncGetAttributes(&a, fn) == cudaSuccess)
        p->loaded++;
    else
        cudaGetLastError();
    return 1;
}

static void *preload_main(void *arg)
{
    pmi_cuda_state *st = (pmi_cuda_state *)arg;
    const double t0 = pmi_now_ms();
    pmi_preload p = {&st->preload_stop, 0, 0};
    if (cudaSetDevice(st->device) == cudaSuccess) {
        /* In the order a reconstruction uses them: field, extraction, write. */
        for (int tier = 0; tier < 2; tier++) {
            pmi_neighbours_preload(&p, tier);
            pmi_density_preload(&p, tier);
            pmi_isosurface_preload(&p, tier);
            pmi_mc_direct_preload(&p, tier);
            pmi_mc_stream_preload(&p, tier);
            pmi_mc_expand_preload(&p, tier);
            pmi_ply_body_preload(&p, tier);
            pmi_piece_preload(&p, tier);
            pmi_mc_classify_preload(&p, tier);
        }
    }
    cudaGetLastError();
    st->preload_listed = p.listed;
    st->preload_loaded = p.loaded;
    st->preload_ms = pmi_now_ms() - t0;
    return NULL;
}

/* The contexts whose thread runs and has not been joined, for the exit
 * handler; a thread is joined by whoever takes it off this list. */
static pthread_mutex_t preload_mu = PTHREAD_MUTEX_INITIALIZER;
static pmi_cuda_state *preload_list;
static int preload_atexit_set;

/* Takes st off the list; whether it was there. Call with preload_mu. */
static int preload_unlink(pmi_cuda_state *st)
{
    for (pmi_cuda_state **q = &preload_list; *q; q = &(*q)->preload_next)
        if (*q == st) {
            *q = st->preload_next;
            st->preload_next = NULL;
            return 1;
        }
    return 0;
}

static void preload_join(pmi_cuda_state *st, int stop)
{
    if (stop) __atomic_store_n(&st->preload_stop, 1, __ATOMIC_RELEASE);
    pthread_join(st->preload_thread, NULL);
}

static void preload_at_exit(void)
{
    pthread_mutex_lock(&preload_mu);
    pmi_cuda_state *l = preload_list;
    preload_list = NULL;
    pthread_mutex_unlock(&preload_mu);
    for (pmi_cuda_state *st = l, *next; st; st = next) {
        next = st->preload_next;
        preload_join(st, 1);
    }
}

void pmi_cuda_preload_start(pmi_cuda_state *st)
{
    const char *e = getenv("PYRAMESH_PRELOAD");
    if (e && strcmp(e, "0") == 0) return;
    e = getenv("CUDA_MODULE_LOADING");
    if (e && strcmp(e, "EAGER") == 0) return;
    st->preload_stop = 0;
    pthread_mutex_lock(&preload_mu);
    if (!preload_atexit_set) preload_atexit_set = atexit(preload_at_exit) == 0;
    if (preload_atexit_set && pthread_create(&st->preload_thread, NULL, preload_main, st) == 0) {
        st->preload_next = preload_list;
        preload_list = st;
    }
    pthread_mutex_unlock(&preload_mu);
}

void pmi_cuda_preload_stop(pmi_cuda_state *st)
{
    pthread_mutex_lock(&preload_mu);
    const int mine = preload_unlink(st);
    pthread_mutex_unlock(&preload_mu);
    if (mine) preload_join(st, 1);
}

int pmi_cuda_preload_wait(pm_context *ctx, int *listed, double *ms)
{
    pmi_cuda_state *st = pmi_cuda(ctx);
    pthread_mutex_lock(&preload_mu);
    const int mine = preload_unlink(st);
    pthread_mutex_unlock(&preload_mu);
    if (mine) preload_join(st, 0);
    if (listed) *listed = st->preload_listed;
    if (ms) *ms = st->preload_ms;
    return st->preload_loaded;
}
