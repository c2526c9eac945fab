/* The HistoPyramid (Ziegler, Tevs, Theobalt, Seidel 2006), in the
 * HP5 layout of Dyken, Ziegler, Theobalt, Seidel 2008: fan-in 5, each node
 * storing the running partial sums of its first four children, so one
 * traversal step is one read of a 4-, 8-, 16- or 32-byte element and four
 * comparisons per level. */
#include <stdlib.h>
#include <string.h>

#include "core/util.h"
#include "cpu/primitives_internal.h"

/* Layout (see docs/primitives.md):
 *  - Level 0's children are the n counts; level l's children are the node
 *    totals of level l-1. Node j of a level covers children 5j .. 5j+4;
 *    children past the end of the level below are virtual zeros and are
 *    never read. The top level has one node.
 *  - A node stores s[0..3] = c0, c0+c1, c0+c1+c2, c0+c1+c2+c3. Its total
 *    (s[3] + c4) is not stored: it is one of the partial sums of its parent
 *    (or the pyramid's total, kept on the host), and a traversal that
 *    reached the node already knows the key lies below it.
 *  - Each level stores its four sums in the narrowest of uint8_t, uint16_t,
 *    uint32_t and uint64_t (4, 8, 16 or 32 bytes per node) that holds a
 *    bound on its partial sums, fixed at build time. Flags and marching
 *    cubes' counts 0..15 thus need about one byte per element (the level-0
 *    nodes are 4 bytes per 5 elements) instead of four, which matters on a
 *    CPU where writing the pyramid is most of the build; counts up to
 *    2^32 - 1 over billions of elements still give exact 64-bit totals.
 *  - All levels live in one buffer, the top level first, then downwards to
 *    level 0 at the end. Bounds grow upwards, so element sizes never grow
 *    downwards and every level starts aligned to its element size. */
#define FANIN 5
#define MAX_LEVELS 32 /* 5^28 > 2^64 */

struct pm_histopyramid {
    size_t n;
    uint64_t total;
    int num_levels;
    size_t nodes[MAX_LEVELS];
    size_t offset[MAX_LEVELS];       /* bytes from the start of buffer */
    unsigned char width[MAX_LEVELS]; /* log2 of the bytes per sum: 0..3 */
    unsigned char *buffer;
    size_t buffer_bytes;
};

static uint64_t sat_mul(uint64_t a, uint64_t b)
{
    uint64_t r;
    return __builtin_mul_overflow(a, b, &r) ? UINT64_MAX : r;
}

/* Allocates the pyramid and its level table for n children whose partial
 * sums never exceed total_bound and whose single values never exceed
 * max_child. */
static pm_status hp_alloc(size_t n, uint64_t total_bound, uint64_t max_child, pm_histopyramid **out)
{
    pm_histopyramid *hp = calloc(1, sizeof *hp);
    if (!hp) return pmi_error(PM_STATUS_OUT_OF_MEMORY, "histopyramid: out of memory");
    hp->n = n;
    size_t below = n;
    uint64_t child_bound = max_child; /* bound on one child's value */
    while (below > 0) {
        int l = hp->num_levels++;
        hp->nodes[l] = (below - 1) / FANIN + 1;
        uint64_t part = sat_mul(child_bound, FANIN - 1);
        if (part > total_bound) part = total_bound;
        hp->width[l] = part <= UINT8_MAX ? 0 : part <= UINT16_MAX ? 1 : part <= UINT32_MAX ? 2 : 3;
        child_bound = sat_mul(child_bound, FANIN);
        if (child_bound > total_bound) child_bound = total_bound;
        if (hp->nodes[l] == 1) break;
        below = hp->nodes[l];
    }
    size_t bytes = 0;
    for (int l = hp->num_levels - 1; l >= 0; l--) {
        size_t lb;
        if (!pmi_mul_size(hp->nodes[l], (size_t)4 << hp->width[l], &lb) ||
            !pmi_add_size(bytes, lb, &bytes)) {
            free(hp);
            return pmi_error(PM_STATUS_OVERFLOW, "histopyramid: %zu elements overflow", n);
        }
        hp->offset[l] = bytes - lb;
    }
    hp->buffer_bytes = bytes;
    /* aligned_alloc wants a multiple of the alignment. */
    hp->buffer = bytes ? aligned_alloc(32, (bytes + 31) & ~(size_t)31) : NULL;
    if (bytes && !hp->buffer) {
        free(hp);
        return pmi_error(PM_STATUS_OUT_OF_MEMORY,
                         "histopyramid: cannot allocate %zu bytes of levels", bytes);
    }
    *out = hp;
    return PM_STATUS_OK;
}

/* Stores node j of level l from its five children; returns the node total. */
static inline uint64_t store_node(pm_histopyramid *hp, int l, size_t j, const uint64_t c[FANIN])
{
    uint64_t s0 = c[0], s1 = s0 + c[1], s2 = s1 + c[2], s3 = s2 + c[3];
    unsigned char *p = hp->buffer + hp->offset[l];
    switch (hp->width[l]) {
    case 0: {
        uint8_t *q = (uint8_t *)p + 4 * j;
        q[0] = (uint8_t)s0, q[1] = (uint8_t)s1, q[2] = (uint8_t)s2, q[3] = (uint8_t)s3;
        break;
    }
    case 1: {
        uint16_t *q = (uint16_t *)p + 4 * j;
        q[0] = (uint16_t)s0, q[1] = (uint16_t)s1, q[2] = (uint16_t)s2, q[3] = (uint16_t)s3;
        break;
    }
    case 2: {
        uint32_t *q = (uint32_t *)p + 4 * j;
        q[0] = (uint32_t)s0, q[1] = (uint32_t)s1, q[2] = (uint32_t)s2, q[3] = (uint32_t)s3;
        break;
    }
    default: {
        uint64_t *q = (uint64_t *)p + 4 * j;
        q[0] = s0, q[1] = s1, q[2] = s2, q[3] = s3;
        break;
    }
    }
    return s3 + c[4];
}

/* Builds levels 2.. from the node totals of level 1 in tmp (which has room
 * for nodes[1] + nodes[2] values and is used as ping-pong storage). */
static void build_upper(pm_context *ctx, pm_histopyramid *hp, uint64_t *tmp)
{
    uint64_t *prev = tmp, *next = tmp + hp->nodes[1];
    int nt = ctx->num_threads;
    for (int l = 2; l < hp->num_levels; l++) {
        size_t below = hp->nodes[l - 1], nodes = hp->nodes[l];
#pragma omp parallel for num_threads(nt) schedule(static) if (nodes > 4096)
        for (size_t j = 0; j < nodes; j++) {
            uint64_t c[FANIN];
            for (int k = 0; k < FANIN; k++) {
                size_t i = FANIN * j + (size_t)k;
                c[k] = i < below ? prev[i] : 0;
            }
            next[j] = store_node(hp, l, j, c);
        }
        uint64_t *t = prev;
        prev = next;
        next = t;
    }
    hp->total = prev[0];
}

/* Levels 0 and 1 in one pass over the counts: each iteration reads 25
 * children, stores five level-0 nodes and the level-1 node above them, and
 * keeps only the level-1 node total in tmp. Level 0's totals (a fifth of n)
 * are never stored. The two base kinds differ only in how a child's value
 * is read: a macro keeps one copy of the loop for u32 counts and u8 flags.
 * With a single level (n <= 5) the one node's total is the pyramid's. */
/* clang-format off */
#define BUILD_BASE(hp, tmp, n, VALUE)                                                          \
    do {                                                                                       \
        size_t nodes0_ = (hp)->nodes[0];                                                       \
        int two_ = (hp)->num_levels > 1;                                                       \
        size_t groups_ = two_ ? (hp)->nodes[1] : 1;                                            \
        uint64_t single_ = 0;                                                                  \
        _Pragma("omp parallel for num_threads(ctx->num_threads) schedule(static)")             \
        for (size_t g = 0; g < groups_; g++) {                                                 \
            uint64_t t[FANIN];                                                                 \
            for (size_t q = 0; q < FANIN; q++) {                                               \
                size_t j = FANIN * g + q, i0 = FANIN * j;                                      \
                uint64_t c[FANIN];                                                             \
                if (j >= nodes0_) {                                                            \
                    t[q] = 0;                                                                  \
                    continue;                                                                  \
                }                                                                              \
                if (i0 + FANIN <= (n)) {                                                       \
                    for (size_t k = 0; k < FANIN; k++) c[k] = VALUE(i0 + k);                   \
                } else {                                                                       \
                    for (size_t k = 0; k < FANIN; k++)                                         \
                        c[k] = i0 + k < (n) ? VALUE(i0 + k) : 0;                               \
                }                                                                              \
                t[q] = store_node((hp), 0, j, c);                                              \
            }                                                                                  \
            if (two_) (tmp)[g] = store_node((hp), 1, g, t);                                    \
            else single_ = t[0];                                                               \
        }                                                                                      \
        if (two_) build_upper(ctx, (hp), (tmp));                                               \
        else (hp)->total = single_;                                                            \
    } while (0)
/* clang-format on */

static pm_status alloc_tmp(const pm_histopyramid *hp, uint64_t **tmp)
{
    size_t m = 1;
    if (hp->num_levels > 1) m += hp->nodes[1];
    if (hp->num_levels > 2) m += hp->nodes[2];
    *tmp = malloc(m * sizeof(uint64_t));
    if (!*tmp)
        return pmi_error(PM_STATUS_OUT_OF_MEMORY, "histopyramid: cannot allocate %zu sums", m);
    return PM_STATUS_OK;
}

pm_status pmi_cpu_histopyramid_build(pm_context *ctx, const uint32_t *counts, size_t n,
                                     pm_histopyramid **out)
{
    /* A first pass for the total and the largest count: they bound every
     * partial sum, which decides the width of each level's sums. */
    uint64_t total = 0;
    uint32_t maxc = 0;
#pragma omp parallel for num_threads(ctx->num_threads) schedule(static) \
    reduction(+ : total) reduction(max : maxc)
    for (size_t i = 0; i < n; i++) {
        total += counts[i];
        maxc = counts[i] > maxc ? counts[i] : maxc;
    }
    /* Only more than 2^32 counts near 2^32 can wrap the 64-bit total. */
    if (sat_mul(n, maxc) == UINT64_MAX) {
        uint64_t t = 0;
        for (size_t i = 0; i < n; i++)
            if (__builtin_add_overflow(t, counts[i], &t))
                return pmi_error(PM_STATUS_OVERFLOW,
                                 "pm_histopyramid_build: the total of the counts exceeds 2^64");
    }
    pm_histopyramid *hp = NULL;
    pm_status s = hp_alloc(n, total, maxc, &hp);
    if (s != PM_STATUS_OK) return s;
    if (n == 0) {
        *out = hp;
        return PM_STATUS_OK;
    }
    uint64_t *tmp;
    if ((s = alloc_tmp(hp, &tmp)) != PM_STATUS_OK) {
        pmi_cpu_histopyramid_destroy(ctx, hp);
        return s;
    }
#define COUNT_VALUE(i) ((uint64_t)counts[(i)])
    BUILD_BASE(hp, tmp, n, COUNT_VALUE);
#undef COUNT_VALUE
    free(tmp);
    *out = hp;
    return PM_STATUS_OK;
}

pm_status pmi_cpu_histopyramid_build_flags(pm_context *ctx, const uint8_t *flags, size_t n,
                                           pm_histopyramid **out)
{
    pm_histopyramid *hp = NULL;
    pm_status s = hp_alloc(n, n, 1, &hp); /* no first pass: the total is at most n */
    if (s != PM_STATUS_OK) return s;
    if (n == 0) {
        *out = hp;
        return PM_STATUS_OK;
    }
    uint64_t *tmp;
    if ((s = alloc_tmp(hp, &tmp)) != PM_STATUS_OK) {
        pmi_cpu_histopyramid_destroy(ctx, hp);
        return s;
    }
#define FLAG_VALUE(i) ((uint64_t)(flags[(i)] != 0))
    BUILD_BASE(hp, tmp, n, FLAG_VALUE);
#undef FLAG_VALUE
    free(tmp);
    *out = hp;
    return PM_STATUS_OK;
}

pm_status pmi_cpu_histopyramid_total(pm_context *ctx, const pm_histopyramid *hp, uint64_t *total)
{
    (void)ctx;
    *total = hp->total;
    return PM_STATUS_OK;
}

/* Keys from the top node down: at each level a key is compared with the
 * node's four partial sums; the number of sums <= key is the child it falls
 * in, and the sum before that child is subtracted. After level 0 the node
 * index is the source element and the key what is left of it, the local
 * index. One key is a chain of dependent loads, so BATCH independent keys
 * descend in lockstep to keep several loads in flight; each key is still
 * traversed on its own, exactly as a GPU thread would. */
#define BATCH 8

static inline void step(const unsigned char *p, int width, uint64_t *key, size_t *j)
{
    /* s[0] = 0, so the sum before child c is s[c]: no data-dependent branch. */
    uint64_t s[5];
    s[0] = 0;
    switch (width) { /* the same for every key of a level: predicted */
    case 0: {
        const uint8_t *q = (const uint8_t *)p + 4 * *j;
        s[1] = q[0], s[2] = q[1], s[3] = q[2], s[4] = q[3];
        break;
    }
    case 1: {
        const uint16_t *q = (const uint16_t *)p + 4 * *j;
        s[1] = q[0], s[2] = q[1], s[3] = q[2], s[4] = q[3];
        break;
    }
    case 2: {
        const uint32_t *q = (const uint32_t *)p + 4 * *j;
        s[1] = q[0], s[2] = q[1], s[3] = q[2], s[4] = q[3];
        break;
    }
    default: {
        const uint64_t *q = (const uint64_t *)p + 4 * *j;
        s[1] = q[0], s[2] = q[1], s[3] = q[2], s[4] = q[3];
        break;
    }
    }
    uint64_t k = *key;
    unsigned c = (unsigned)(k >= s[1]) + (unsigned)(k >= s[2]) + (unsigned)(k >= s[3]) +
                 (unsigned)(k >= s[4]);
    *key = k - s[c];
    *j = FANIN * *j + c;
}

/* Traverses keys first .. first + m - 1 (m <= BATCH). */
static inline void traverse_batch(const pm_histopyramid *hp, uint64_t first, size_t m,
                                  uint64_t *out_source, uint32_t *out_local)
{
    uint64_t key[BATCH];
    size_t j[BATCH];
    for (size_t b = 0; b < BATCH; b++) {
        key[b] = b < m ? first + b : first; /* pad with a valid key */
        j[b] = 0;
    }
    for (int l = hp->num_levels - 1; l >= 0; l--) {
        const unsigned char *p = hp->buffer + hp->offset[l];
        int width = hp->width[l];
        for (size_t b = 0; b < BATCH; b++)
            step(p, width, &key[b], &j[b]);
    }
    for (size_t b = 0; b < m; b++) {
        if (out_source) out_source[b] = j[b];
        if (out_local) out_local[b] = (uint32_t)key[b];
    }
}

pm_status pmi_cpu_histopyramid_traverse(pm_context *ctx, const pm_histopyramid *hp,
                                        uint64_t first_key, size_t num_keys, uint64_t *out_source,
                                        uint32_t *out_local)
{
    if (first_key >= hp->total || num_keys > hp->total - first_key)
        return pmi_error(PM_STATUS_INVALID_ARGUMENT,
                         "pm_histopyramid_traverse: %zu keys from %llu exceed the total %llu",
                         num_keys, (unsigned long long)first_key, (unsigned long long)hp->total);
    size_t batches = (num_keys - 1) / BATCH + 1;
#pragma omp parallel for num_threads(ctx->num_threads) schedule(static) if (batches > 128)
    for (size_t b = 0; b < batches; b++) {
        size_t i = b * BATCH, m = num_keys - i < BATCH ? num_keys - i : BATCH;
        traverse_batch(hp, first_key + i, m, out_source ? out_source + i : NULL,
                       out_local ? out_local + i : NULL);
    }
    return PM_STATUS_OK;
}

void pmi_cpu_histopyramid_destroy(pm_context *ctx, pm_histopyramid *hp)
{
    (void)ctx;
    if (!hp) return;
    free(hp->buffer);
    free(hp);
}
