/* Collision detection on the CPU by breadth-first filtering of candidate
 * node pairs (Horn, GPU Gems 2 ch. 36, 2005; the tree traversal of
 * Gottschalk, Lin and Manocha's RAPID, 1996): each level decides every pair
 * in parallel (src/core/collide_math.h), tests leaf pairs with the exact
 * predicate (src/core/tri_tri.h) and compacts the children of the split
 * pairs into the next level by a blocked scan, as pm_compact does. A level
 * whose children exceed the bound is written and finished in parts. */
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "core/collide_math.h"
#include "core/tri_tri.h"
#include "core/util.h"
#include "cpu/cpu.h"

/* Pairs per block of the blocked scan. */
#define BLOCK 2048

typedef struct hits {
    uint64_t *v;
    size_t n, cap;
    int failed;
} hits;

typedef struct job {
    const struct pm_bvh *a, *b;
    const pmi_xform *x;
    int self, nt;
    size_t bound; /* max_candidates */
    hits *hits;   /* one per thread */
    uint64_t levels, box_tests, leaf_tests, parts;
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

/* Decides every pair of the level (fates), tests the leaf pairs, and sums
 * the children per block into offs. Returns the total number of children. */
static uint64_t decide_level(job *j, const uint64_t *cur, size_t n, uint8_t *fate, uint64_t *offs,
                             size_t nblocks)
{
    const int64_t an = (int64_t)j->a->num_triangles, bn = (int64_t)j->b->num_triangles;
    uint64_t leaves = 0;
#pragma omp parallel for num_threads(j->nt) schedule(dynamic, 1) reduction(+ : leaves)
    for (size_t blk = 0; blk < nblocks; blk++) {
        hits *h = &j->hits[omp_get_thread_num()];
        uint64_t kids = 0;
        size_t end = (blk + 1) * BLOCK < n ? (blk + 1) * BLOCK : n;
        for (size_t i = blk * BLOCK; i < end; i++) {
            uint32_t na = (uint32_t)(cur[i] >> 32), nb = (uint32_t)cur[i];
            int f = pmi_pair_fate(j->a->boxes, an, j->b->boxes, bn, na, nb, j->self, j->x);
            fate[i] = (uint8_t)f;
            kids += pmi_pair_children(f);
            if (f == PMI_PAIR_LEAF) {
                leaves++;
                test_leaves(j, na, nb, h);
            }
        }
        offs[blk] = kids;
    }
    j->levels++;
    j->box_tests += n;
    j->leaf_tests += leaves;
    uint64_t run = 0;
    for (size_t blk = 0; blk < nblocks; blk++) {
        uint64_t k = offs[blk];
        offs[blk] = run;
        run += k;
    }
    return run;
}

/* Writes the children of pairs first .. last-1 (whose blocks' offsets,
 * relative to `base`, are offs) to out. */
static void write_children(const job *j, const uint64_t *cur, const uint8_t *fate, size_t first,
                           size_t last, const uint64_t *offs, uint64_t base, uint64_t *out)
{
    size_t b0 = first / BLOCK, b1 = (last + BLOCK - 1) / BLOCK;
#pragma omp parallel for num_threads(j->nt) schedule(static)
    for (size_t blk = b0; blk < b1; blk++) {
        size_t i = blk * BLOCK > first ? blk * BLOCK : first;
        size_t end = (blk + 1) * BLOCK < last ? (blk + 1) * BLOCK : last;
        uint64_t pos = (blk * BLOCK >= first ? offs[blk] : base) - base;
        for (; i < end; i++) {
            int f = fate[i];
            if (f < PMI_PAIR_SPLIT_A) continue;
            pmi_pair_split(j->a->children, j->b->children, (uint32_t)(cur[i] >> 32),
                           (uint32_t)cur[i], f, j->self, out + pos);
            pos += pmi_pair_children(f);
        }
    }
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

/* Runs the traversal from the candidate pairs in[0..n) to the end. Memory:
 * two level buffers of at most `bound` pairs per call; a level whose
 * children exceed the bound is cut into parts of at most `bound` children,
 * each finished by a nested call before the next part is written. */
static pm_status run_levels(job *j, const uint64_t *in, size_t n)
{
    pm_status s = PM_STATUS_OK;
    void *buf[2] = {NULL, NULL}, *fate = NULL, *offs = NULL;
    size_t cap[2] = {0, 0}, fate_cap = 0, offs_cap = 0;
    const uint64_t *cur = in;
    int next = 0;
    while (n) {
        size_t nblocks = (n + BLOCK - 1) / BLOCK;
        if (!grow(&fate, &fate_cap, n, 1) || !grow(&offs, &offs_cap, nblocks, sizeof(uint64_t)))
            goto oom;
        uint64_t total = decide_level(j, cur, n, fate, offs, nblocks);
        size_t want = total < j->bound ? (size_t)total : j->bound;
        if (!grow(&buf[next], &cap[next], want, sizeof(uint64_t))) goto oom;
        if (total <= j->bound) {
            write_children(j, cur, fate, 0, n, offs, 0, buf[next]);
            cur = buf[next];
            next ^= 1;
            n = (size_t)total;
            continue;
        }
        /* Too many children: cut the level into consecutive parts of at
         * most `bound` children each. */
        const uint8_t *f = fate;
        size_t first = 0;
        j->parts++;
        while (first < n && s == PM_STATUS_OK) {
            size_t last = first;
            uint64_t kids = 0;
            while (last < n && kids + pmi_pair_children(f[last]) <= j->bound)
                kids += pmi_pair_children(f[last++]);
            size_t fb = first / BLOCK;
            uint64_t base = ((uint64_t *)offs)[fb];
            for (size_t i = fb * BLOCK; i < first; i++)
                base += pmi_pair_children(f[i]);
            write_children(j, cur, f, first, last, offs, base, buf[next]);
            s = run_levels(j, buf[next], (size_t)kids);
            first = last;
        }
        break;
    }
    goto done;
oom:
    s = pmi_error(PM_STATUS_OUT_OF_MEMORY,
                  "pm_collide: cannot allocate a candidate stream of %zu pairs", n);
done:
    free(buf[0]);
    free(buf[1]);
    free(fate);
    free(offs);
    return s;
}

/* Sorts 64-bit keys: LSD radix, 16 bits a pass. */
static pm_status sort_u64(uint64_t *v, size_t n)
{
    uint64_t *tmp = malloc(n * sizeof *tmp);
    size_t *hist = malloc(65536 * sizeof *hist);
    if (!tmp || !hist) {
        free(tmp);
        free(hist);
        return pmi_error(PM_STATUS_OUT_OF_MEMORY, "pm_collide: cannot sort %zu pairs", n);
    }
    uint64_t *src = v, *dst = tmp;
    for (int shift = 0; shift < 64; shift += 16) {
        memset(hist, 0, 65536 * sizeof *hist);
        for (size_t i = 0; i < n; i++)
            hist[(src[i] >> shift) & 0xffff]++;
        size_t run = 0;
        for (int d = 0; d < 65536; d++) {
            size_t h = hist[d];
            hist[d] = run;
            run += h;
        }
        for (size_t i = 0; i < n; i++)
            dst[hist[(src[i] >> shift) & 0xffff]++] = src[i];
        uint64_t *t = src;
        src = dst;
        dst = t;
    }
    free(tmp); /* four passes: the result is back in v */
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
    j.hits = calloc((size_t)j.nt, sizeof *j.hits);
    if (!j.hits) return pmi_error(PM_STATUS_OUT_OF_MEMORY, "pm_collide: out of host memory");
    const uint64_t root = 0;
    pm_status s = run_levels(&j, &root, 1);
    size_t total = 0;
    for (int t = 0; t < j.nt; t++) {
        if (j.hits[t].failed && s == PM_STATUS_OK)
            s = pmi_error(PM_STATUS_OUT_OF_MEMORY, "pm_collide: cannot store the pairs found");
        total += j.hits[t].n;
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
            if (j.hits[t].n) memcpy(all + k, j.hits[t].v, j.hits[t].n * sizeof *all);
            k += j.hits[t].n;
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
        if (o->stats_levels) *o->stats_levels = j.levels;
        if (o->stats_box_tests) *o->stats_box_tests = j.box_tests;
        if (o->stats_leaf_tests) *o->stats_leaf_tests = j.leaf_tests;
        if (o->stats_parts) *o->stats_parts = j.parts;
        if (total > capacity)
            s = pmi_error(PM_STATUS_TRUNCATED, "pm_collide: %zu intersecting pairs, capacity %zu",
                          total, capacity);
    }
    free(all);
    for (int t = 0; t < j.nt; t++)
        free(j.hits[t].v);
    free(j.hits);
    return s;
}
