/* Collision detection on the CPU by breadth-first filtering of candidate
 * node pairs (Horn, GPU Gems 2 ch. 36, 2005; the tree traversal of
 * Gottschalk, Lin and Manocha's RAPID, 1996): each level decides every pair
 * of the stream (src/core/collide_math.h), tests leaf pairs with the exact
 * predicate (src/core/tri_tri.h) and writes the children of the split
 * pairs into the next level's stream. The first levels run on one thread
 * until the stream holds SPLIT_AT pairs; then each of those pairs is a
 * task: a thread takes the next one and filters its subtree pairs level by
 * level in its own buffers, so the threads meet at one barrier per call
 * (not two per level) and a thread another job holds up only takes fewer
 * tasks. Levels that would exceed the thread's share of the bound are cut
 * into parts. The pairs found are sorted at the end. */
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "core/collide_math.h"
#include "core/tri_tri.h"
#include "core/util.h"
#include "cpu/cpu.h"

/* A stream at least this long ends the serial top of the traversal: its
 * pairs are handed out to the threads one at a time. */
#define SPLIT_AT 256

typedef struct hits {
    uint64_t *v;
    size_t n, cap;
    int failed;
} hits;

/* The two level buffers of one nesting (a level cut into parts is
 * finished by the next nesting). */
typedef struct lvlbuf {
    uint64_t *v[2];
    size_t cap[2];
} lvlbuf;

/* One thread's state: its hits, level buffers and counts. */
typedef struct worker {
    hits h;
    lvlbuf *nest;
    size_t nnest;
    uint64_t levels, box_tests, leaf_tests, parts;
    char pad[64];
} worker;

typedef struct job {
    const struct pm_bvh *a, *b;
    const pmi_xform *x;
    int self, nt;
    size_t bound;      /* max_candidates */
    size_t task_bound; /* a thread's share of it: bound / threads */
} job;

static void hits_push(hits *h, uint64_t v)
{
    if (h->n == h->cap) {
        size_t cap = h->cap ? 2 * h->cap : 1024;
        uint64_t *p = realloc(h->v, cap * sizeof *p);
        if (!p) {
            h->failed = 1;
            return;
        }
        h->v = p;
        h->cap = cap;
    }
    h->v[h->n++] = v;
}

/* The leaf pair (na, nb): the exact test, the self-collision exclusions. */
static void test_leaves(const job *j, uint32_t na, uint32_t nb, hits *h)
{
    const int64_t an = (int64_t)j->a->num_triangles, bn = (int64_t)j->b->num_triangles;
    size_t la = na - (size_t)(an - 1), lb = nb - (size_t)(bn - 1);
    const float *ta = j->a->tris + 9 * la, *tb = j->b->tris + 9 * lb;
    if (j->self &&
        pmi_tris_adjacent(j->a->tri_verts + 3 * la, j->b->tri_verts + 3 * lb, ta, tb, j->a->soup))
        return;
    float tx[9];
    if (!j->x->identity) {
        for (int k = 0; k < 3; k++)
            pmi_xform_point(j->x, tb + 3 * k, tx + 3 * k);
        tb = tx;
    }
    if (!pmi_tri_tri(ta, tb)) return;
    uint64_t ia = j->a->tri_index[la], ib = j->b->tri_index[lb];
    if (j->self && ia > ib) {
        uint64_t t = ia;
        ia = ib;
        ib = t;
    }
    hits_push(h, (ia << 32) | ib);
}

/* Grows *p to hold at least `need` elements of `elem` bytes (by at least
 * half, so a growing traversal reallocates rarely). */
static int grow(void **p, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap) return 1;
    size_t c = *cap + *cap / 2;
    if (c < need) c = need;
    if (c < 1024) c = 1024;
    void *q = realloc(*p, c * elem);
    if (!q) return 0;
    *p = q;
    *cap = c;
    return 1;
}

/* Runs the traversal serially from the candidate pairs in[0..n), level
 * `level` done before them, with the level buffers of nesting `nest`:
 * each level is filtered into the other buffer in one pass (decide, test
 * the leaf pairs, write the children of the split ones). A level whose
 * children exceed the thread's share of the bound (task_bound) is cut
 * into consecutive parts of at most that many children, each finished by
 * a nested call before the rest of the level is decided. */
static pm_status run_serial(job *j, worker *w, const uint64_t *in, size_t n, uint64_t level,
                            size_t nest)
{
    const int64_t an = (int64_t)j->a->num_triangles, bn = (int64_t)j->b->num_triangles;
    const float *boxes_a = j->a->boxes, *boxes_b = j->b->boxes;
    if (nest >= w->nnest) {
        lvlbuf *p = realloc(w->nest, (nest + 1) * sizeof *p);
        if (!p) goto oom;
        w->nest = p;
        memset(p + w->nnest, 0, (nest + 1 - w->nnest) * sizeof *p);
        w->nnest = nest + 1;
    }
    const uint64_t *cur = in;
    int next = 0;
    while (n) {
        level++;
        if (level > w->levels) w->levels = level;
        w->box_tests += n;
        size_t want = n < j->task_bound / 3 ? 3 * n : j->task_bound;
        lvlbuf *lb = &w->nest[nest];
        if (!grow((void **)&lb->v[next], &lb->cap[next], want, sizeof(uint64_t))) goto oom;
        uint64_t *out = lb->v[next];
        size_t m = 0;
        int cut = 0;
        for (size_t i = 0; i < n; i++) {
            uint32_t na = (uint32_t)(cur[i] >> 32), nb = (uint32_t)cur[i];
            int f = pmi_pair_fate(boxes_a, an, boxes_b, bn, na, nb, j->self, j->x);
            if (f == PMI_PAIR_DROP) continue;
            if (f == PMI_PAIR_LEAF) {
                w->leaf_tests++;
                test_leaves(j, na, nb, &w->h);
                continue;
            }
            unsigned k = pmi_pair_children(f);
            if (m + k > j->task_bound) {
                /* Finish the part written so far (its buffers are the
                 * next nesting's; this one's stay where they are). */
                if (!cut) w->parts++;
                cut = 1;
                pm_status s = run_serial(j, w, out, m, level, nest + 1);
                if (s != PM_STATUS_OK) return s;
                m = 0;
            }
            pmi_pair_split(j->a->children, j->b->children, na, nb, f, j->self, out + m);
            m += k;
        }
        if (cut) return run_serial(j, w, out, m, level, nest + 1);
        cur = out;
        n = m;
        next ^= 1;
    }
    return PM_STATUS_OK;
oom:
    return pmi_error(PM_STATUS_OUT_OF_MEMORY,
                     "pm_collide: cannot allocate a candidate stream of %zu pairs", n);
}

/* The traversal: its top levels serially until the stream holds SPLIT_AT
 * pairs (or would pass the bound), then every pair of that level is a
 * task, finished by one thread (run_serial), the threads taking tasks in
 * turn. No barrier but the one at the end. */
static pm_status run_all(job *j, worker *ws)
{
    worker *w0 = &ws[0];
    uint64_t *buf[2] = {NULL, NULL};
    size_t cap[2] = {0, 0}, n = 1;
    int c = 0;
    uint64_t level = 0;
    pm_status s = PM_STATUS_OK;
    if (!grow((void **)&buf[0], &cap[0], 1, sizeof(uint64_t))) goto oom;
    buf[0][0] = 0; /* (root, root) */
    const int64_t an = (int64_t)j->a->num_triangles, bn = (int64_t)j->b->num_triangles;
    while (n && n < SPLIT_AT && 3 * n <= j->bound) {
        level++;
        w0->box_tests += n;
        if (!grow((void **)&buf[c ^ 1], &cap[c ^ 1], 3 * n, sizeof(uint64_t))) goto oom;
        const uint64_t *cur = buf[c];
        uint64_t *out = buf[c ^ 1];
        size_t m = 0;
        for (size_t i = 0; i < n; i++) {
            uint32_t na = (uint32_t)(cur[i] >> 32), nb = (uint32_t)cur[i];
            int f = pmi_pair_fate(j->a->boxes, an, j->b->boxes, bn, na, nb, j->self, j->x);
            if (f == PMI_PAIR_LEAF) {
                w0->leaf_tests++;
                test_leaves(j, na, nb, &w0->h);
            } else if (f != PMI_PAIR_DROP) {
                pmi_pair_split(j->a->children, j->b->children, na, nb, f, j->self, out + m);
                m += pmi_pair_children(f);
            }
        }
        c ^= 1;
        n = m;
    }
    w0->levels = level;
    if (n) {
        const uint64_t *cur = buf[c];
        int failed = 0;
#pragma omp parallel for num_threads(j->nt) schedule(dynamic, 1)
        for (size_t i = 0; i < n; i++) {
            int stop;
#pragma omp atomic read
            stop = failed;
            if (stop) continue;
            pm_status r = run_serial(j, &ws[omp_get_thread_num()], cur + i, 1, level, 0);
            if (r != PM_STATUS_OK) {
#pragma omp critical(pm_collide_fail)
                if (!failed) {
                    s = r;
#pragma omp atomic write
                    failed = 1;
                }
            }
        }
    }
    free(buf[0]);
    free(buf[1]);
    return s;
oom:
    free(buf[0]);
    free(buf[1]);
    return pmi_error(PM_STATUS_OUT_OF_MEMORY,
                     "pm_collide: cannot allocate a candidate stream of %zu pairs", n);
}

/* Sorts 64-bit keys: LSD radix, 11 bits a pass (a small histogram: the
 * per-frame calls sort a few thousand pairs), passes whose digit is the
 * same in every key skipped. */
static pm_status sort_u64(uint64_t *v, size_t n)
{
    enum { BITS = 11, DIGITS = 1 << BITS };
    if (n < 2) return PM_STATUS_OK;
    uint64_t *tmp = malloc(n * sizeof *tmp);
    size_t *hist = malloc(DIGITS * sizeof *hist);
    if (!tmp || !hist) {
        free(tmp);
        free(hist);
        return pmi_error(PM_STATUS_OUT_OF_MEMORY, "pm_collide: cannot sort %zu pairs", n);
    }
    uint64_t *src = v, *dst = tmp;
    for (int shift = 0; shift < 64; shift += BITS) {
        memset(hist, 0, DIGITS * sizeof *hist);
        for (size_t i = 0; i < n; i++)
            hist[(src[i] >> shift) & (DIGITS - 1)]++;
        if (hist[(src[0] >> shift) & (DIGITS - 1)] == n) continue;
        size_t run = 0;
        for (int d = 0; d < DIGITS; d++) {
            size_t h = hist[d];
            hist[d] = run;
            run += h;
        }
        for (size_t i = 0; i < n; i++)
            dst[hist[(src[i] >> shift) & (DIGITS - 1)]++] = src[i];
        uint64_t *t = src;
        src = dst;
        dst = t;
    }
    if (src != v) memcpy(v, src, n * sizeof *v);
    free(tmp);
    free(hist);
    return PM_STATUS_OK;
}

pm_status pmi_cpu_collide(pm_context *ctx, const struct pm_bvh *a, const struct pm_bvh *b,
                          const pmi_xform *x, const pm_collide_options *o, uint32_t *pairs,
                          size_t capacity, size_t *count)
{
    job j;
    memset(&j, 0, sizeof j);
    j.a = a;
    j.b = b;
    j.x = x;
    j.self = a == b;
    j.nt = ctx->num_threads;
    j.bound = o->max_candidates;
    /* The threads' level buffers together stay within the bound (a pair
     * has at most 3 children, so any share of at least 3 works). */
    j.task_bound = j.bound / (size_t)j.nt > 16 ? j.bound / (size_t)j.nt : 16;
    worker *ws = calloc((size_t)j.nt, sizeof *ws);
    if (!ws) return pmi_error(PM_STATUS_OUT_OF_MEMORY, "pm_collide: out of host memory");
    pm_status s = run_all(&j, ws);
    size_t total = 0;
    uint64_t levels = 0, box_tests = 0, leaf_tests = 0, parts = 0;
    for (int t = 0; t < j.nt; t++) {
        if (ws[t].h.failed && s == PM_STATUS_OK)
            s = pmi_error(PM_STATUS_OUT_OF_MEMORY, "pm_collide: cannot store the pairs found");
        total += ws[t].h.n;
        levels = ws[t].levels > levels ? ws[t].levels : levels;
        box_tests += ws[t].box_tests;
        leaf_tests += ws[t].leaf_tests;
        parts += ws[t].parts;
    }
    uint64_t *all = NULL;
    if (s == PM_STATUS_OK) {
        all = malloc((total ? total : 1) * sizeof *all);
        if (!all)
            s = pmi_error(PM_STATUS_OUT_OF_MEMORY, "pm_collide: cannot gather %zu pairs", total);
    }
    if (s == PM_STATUS_OK) {
        size_t k = 0;
        for (int t = 0; t < j.nt; t++) {
            if (ws[t].h.n) memcpy(all + k, ws[t].h.v, ws[t].h.n * sizeof *all);
            k += ws[t].h.n;
        }
        s = sort_u64(all, total);
    }
    if (s == PM_STATUS_OK) {
        size_t w = total < capacity ? total : capacity;
        for (size_t i = 0; i < w; i++) {
            pairs[2 * i] = (uint32_t)(all[i] >> 32);
            pairs[2 * i + 1] = (uint32_t)all[i];
        }
        *count = total;
        pmi_collide_set_path(total ? "backend=cpu traversal=tasks sort=radix"
                                   : "backend=cpu traversal=tasks sort=none");
        if (o->stats_levels) *o->stats_levels = levels;
        if (o->stats_box_tests) *o->stats_box_tests = box_tests;
        if (o->stats_leaf_tests) *o->stats_leaf_tests = leaf_tests;
        if (o->stats_parts) *o->stats_parts = parts;
        if (total > capacity)
            s = pmi_error(PM_STATUS_TRUNCATED, "pm_collide: %zu intersecting pairs, capacity %zu",
                          total, capacity);
    }
    free(all);
    for (int t = 0; t < j.nt; t++) {
        free(ws[t].h.v);
        for (size_t k = 0; k < ws[t].nnest; k++) {
            free(ws[t].nest[k].v[0]);
            free(ws[t].nest[k].v[1]);
        }
        free(ws[t].nest);
    }
    free(ws);
    return s;
}
