/* Shared scaffolding of the test programs: the device under test from
 * argv[1] ("cpu" or "cuda"; exit 77 = skipped when CUDA is unavailable),
 * a reproducible random generator whose seed is printed on failure, check
 * macros, and helpers that move arrays into the context's memory. */
#ifndef PM_TEST_COMMON_H
#define PM_TEST_COMMON_H

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "pyramesh.h"

#define PMT_SKIP 77

static int pmt_failures;
static uint64_t pmt_seed;
static uint64_t pmt_state;

#define PMT_CHECK(cond, ...)                                                                       \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            pmt_failures++;                                                                        \
            fprintf(stderr, "%s:%d: check failed: %s (seed %" PRIu64 "): ", __FILE__, __LINE__,    \
                    #cond, pmt_seed);                                                              \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fprintf(stderr, "\n");                                                                 \
        }                                                                                          \
    } while (0)

#define PMT_OK(expr)                                                                               \
    do {                                                                                           \
        pm_status s_ = (expr);                                                                     \
        if (s_ != PM_STATUS_OK) {                                                                  \
            fprintf(stderr, "%s:%d: %s returned %s: %s (seed %" PRIu64 ")\n", __FILE__, __LINE__,  \
                    #expr, pm_status_string(s_), pm_last_error(), pmt_seed);                       \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

/* xorshift64*: fast, reproducible. */
static inline uint64_t pmt_rand(void)
{
    pmt_state ^= pmt_state >> 12;
    pmt_state ^= pmt_state << 25;
    pmt_state ^= pmt_state >> 27;
    return pmt_state * 2685821657736338717ULL;
}
/* Uniform in [0, 1). */
static inline double pmt_uniform(void)
{
    return (double)(pmt_rand() >> 11) * (1.0 / 9007199254740992.0);
}

static inline void pmt_seed_init(void)
{
    const char *e = getenv("PM_TEST_SEED");
    pmt_seed = e ? strtoull(e, NULL, 10) : (uint64_t)time(NULL) ^ ((uint64_t)clock() << 32);
    if (pmt_seed == 0) pmt_seed = 1;
    pmt_state = pmt_seed;
}

/* Parses argv, seeds the generator and creates the context under test.
 * Returns 0 when the test must be skipped (caller returns PMT_SKIP). */
static inline int pmt_init(int argc, char **argv, pm_context **ctx, pm_device *dev)
{
    pmt_seed_init();
    *dev = PM_DEVICE_CPU;
    if (argc > 1 && strcmp(argv[1], "cuda") == 0) *dev = PM_DEVICE_CUDA;
    if (*dev == PM_DEVICE_CUDA && !pm_cuda_available()) {
        printf("skipped: no usable CUDA device\n");
        return 0;
    }
    pm_context_desc d = {sizeof d, *dev, 0, 0, NULL};
    PMT_OK(pm_context_create(&d, ctx));
    printf("device %s, seed %" PRIu64 " (set PM_TEST_SEED to repeat)\n",
           pm_context_device_name(*ctx), pmt_seed);
    return 1;
}

/* Copies a host array into freshly allocated context memory. */
static inline void *pmt_to_ctx(pm_context *ctx, const void *host, size_t bytes)
{
    void *p = NULL;
    PMT_OK(pm_alloc(ctx, bytes, &p));
    PMT_OK(pm_upload(ctx, p, host, bytes));
    return p;
}

/* Copies context memory into a fresh host array (caller frees). */
static inline void *pmt_to_host(pm_context *ctx, const void *dev, size_t bytes)
{
    void *h = malloc(bytes ? bytes : 1);
    if (!h) {
        fprintf(stderr, "out of host memory\n");
        exit(1);
    }
    PMT_OK(pm_download(ctx, h, dev, bytes));
    return h;
}

/* A host mesh's arrays copied into fresh context memory (flagged so; the
 * caller pm_frees them), and a context mesh's into fresh host arrays (the
 * caller frees them). */
static inline pm_mesh pmt_mesh_to_ctx(pm_context *ctx, const pm_mesh *h)
{
    pm_mesh d = *h;
    d.positions = (float *)pmt_to_ctx(ctx, h->positions, 12 * h->num_vertices);
    d.normals = h->normals ? (float *)pmt_to_ctx(ctx, h->normals, 12 * h->num_vertices) : NULL;
    d.indices = h->indices ? (uint32_t *)pmt_to_ctx(ctx, h->indices, 12 * h->num_triangles) : NULL;
    d.in_context_memory = 1;
    d.owns_arrays = 0;
    return d;
}

static inline pm_mesh pmt_mesh_to_host(pm_context *ctx, const pm_mesh *d)
{
    pm_mesh h = *d;
    h.positions = (float *)pmt_to_host(ctx, d->positions, 12 * d->num_vertices);
    h.normals = d->normals ? (float *)pmt_to_host(ctx, d->normals, 12 * d->num_vertices) : NULL;
    h.indices = d->indices ? (uint32_t *)pmt_to_host(ctx, d->indices, 12 * d->num_triangles) : NULL;
    h.in_context_memory = 0;
    return h;
}

static inline int pmt_finish(const char *name)
{
    if (pmt_failures) {
        printf("%s: %d checks FAILED (seed %" PRIu64 ")\n", name, pmt_failures, pmt_seed);
        return 1;
    }
    printf("%s: all checks passed\n", name);
    return 0;
}

/* The test hooks and the path a call took (pm_isosurface_report.path). */
/* Whether hook `name` is in PYRAMESH_TEST_HOOKS (a comma-separated list). */
static inline int hook_set(const char *name)
{
    const char *e = getenv("PYRAMESH_TEST_HOOKS");
    size_t n = strlen(name);
    for (const char *p = e; p && *p;) {
        size_t len = strcspn(p, ",");
        if (len == n && !strncmp(p, name, n)) return 1;
        p += len + (p[len] == ',');
    }
    return 0;
}

/* Whether the report's path holds the word "key=value". */
static inline int path_has(const pm_isosurface_report *r, const char *word)
{
    size_t n = strlen(word);
    for (const char *p = r->path; *p;) {
        size_t len = strcspn(p, " ");
        if (len == n && !strncmp(p, word, n)) return 1;
        p += len + (p[len] == ' ');
    }
    return 0;
}

#endif
