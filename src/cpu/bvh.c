/* The linear BVH on the CPU (Karras, "Maximizing Parallelism in the
 * Construction of BVHs, Octrees, and k-d Trees", 2012): Morton codes of
 * the triangle centroids, a stable radix sort, each internal node's
 * children found independently, boxes merged bottom-up by the second
 * child to arrive. The rule is src/core/collide_math.h, shared with the
 * CUDA build, so both build the same tree. */
#include <float.h>
#include <stdlib.h>
#include <string.h>

#include "core/collide_math.h"
#include "core/util.h"
#include "cpu/cpu.h"

static void load_triangle(const pm_mesh *m, size_t t, float *out, uint32_t *verts)
{
    for (int k = 0; k < 3; k++) {
        size_t v = m->indices ? m->indices[3 * t + k] : 3 * t + k;
        verts[k] = (uint32_t)v;
        memcpy(out + 3 * k, m->positions + 3 * v, 3 * sizeof(float));
    }
}

/* Stable LSD radix sort of n 30-bit codes, 10 bits a pass: order[i] is the
 * triangle of sorted position i (ties in triangle order, as cub's stable
 * sort of (code, index) on the GPU). */
static pm_status sort_codes(uint32_t *codes, uint32_t *order, size_t n)
{
    uint32_t *c2 = malloc(n * sizeof *c2), *o2 = malloc(n * sizeof *o2);
    size_t *hist = malloc(1024 * sizeof *hist);
    if (!c2 || !o2 || !hist) {
        free(c2);
        free(o2);
        free(hist);
        return pmi_error(PM_STATUS_OUT_OF_MEMORY,
                         "pm_bvh_build: cannot allocate the sort of %zu "
                         "codes",
                         n);
    }
    for (size_t i = 0; i < n; i++)
        order[i] = (uint32_t)i;
    uint32_t *src_c = codes, *src_o = order, *dst_c = c2, *dst_o = o2;
    for (int shift = 0; shift < 30; shift += 10) {
        memset(hist, 0, 1024 * sizeof *hist);
        for (size_t i = 0; i < n; i++)
            hist[(src_c[i] >> shift) & 1023]++;
        size_t run = 0;
        for (int d = 0; d < 1024; d++) {
            size_t h = hist[d];
            hist[d] = run;
            run += h;
        }
        for (size_t i = 0; i < n; i++) {
            size_t p = hist[(src_c[i] >> shift) & 1023]++;
            dst_c[p] = src_c[i];
            dst_o[p] = src_o[i];
        }
        uint32_t *t = src_c;
        src_c = dst_c;
        dst_c = t;
        t = src_o;
        src_o = dst_o;
        dst_o = t;
    }
    /* Three passes: the result is in c2/o2. */
    memcpy(codes, src_c, n * sizeof *codes);
    memcpy(order, src_o, n * sizeof *order);
    free(c2);
    free(o2);
    free(hist);
    return PM_STATUS_OK;
}

void pmi_cpu_bvh_destroy(pm_context *ctx, struct pm_bvh *b)
{
    (void)ctx;
    free(b->boxes);
    free(b->children);
    free(b->tris);
    free(b->tri_index);
    free(b->tri_verts);
    b->boxes = b->tris = NULL;
    b->children = NULL;
    b->tri_index = b->tri_verts = NULL;
}

/* Boxes of the internal nodes, bottom-up: each leaf walks towards the root;
 * at every node the first child to arrive stops, the second merges the
 * two children's boxes (both final by then) and goes on. */
static void merge_boxes(struct pm_bvh *b, const int32_t *parent, int *arrivals, int nt)
{
    const int64_t n = (int64_t)b->num_triangles;
#pragma omp parallel for num_threads(nt) schedule(static)
    for (int64_t leaf = 0; leaf < n; leaf++) {
        int32_t node = parent[(n - 1) + leaf];
        while (node >= 0) {
            if (__atomic_fetch_add(&arrivals[node], 1, __ATOMIC_ACQ_REL) == 0) break;
            const int32_t *ch = b->children + 2 * (size_t)node;
            pmi_box_merge(b->boxes + 6 * (size_t)ch[0], b->boxes + 6 * (size_t)ch[1],
                          b->boxes + 6 * (size_t)node);
            __atomic_thread_fence(__ATOMIC_RELEASE);
            node = parent[node];
        }
    }
}

pm_status pmi_cpu_bvh_build(pm_context *ctx, const pm_mesh *m, struct pm_bvh *b)
{
    const int nt = ctx->num_threads;
    const int64_t n = (int64_t)m->num_triangles;
    const size_t nodes = 2 * (size_t)n - 1;
    b->boxes = pmi_alloc_huge(nodes * 6 * sizeof(float));
    b->children = malloc((size_t)(n > 1 ? n - 1 : 1) * 2 * sizeof(int32_t));
    b->tris = pmi_alloc_huge((size_t)n * 9 * sizeof(float));
    b->tri_index = malloc((size_t)n * sizeof(uint32_t));
    b->tri_verts = malloc((size_t)n * 3 * sizeof(uint32_t));
    uint32_t *codes = malloc((size_t)n * sizeof(uint32_t));
    int32_t *parent = malloc(nodes * sizeof(int32_t));
    int *arrivals = calloc((size_t)(n > 1 ? n - 1 : 1), sizeof(int));
    pm_status s = PM_STATUS_OK;
    if (!b->boxes || !b->children || !b->tris || !b->tri_index || !b->tri_verts || !codes ||
        !parent || !arrivals) {
        s = pmi_error(PM_STATUS_OUT_OF_MEMORY,
                      "pm_bvh_build: cannot allocate the BVH of %lld "
                      "triangles",
                      (long long)n);
        goto done;
    }
    /* The scene box (exact min/max: independent of the order). */
    float lo[3] = {FLT_MAX, FLT_MAX, FLT_MAX}, hi[3] = {-FLT_MAX, -FLT_MAX, -FLT_MAX};
#pragma omp parallel num_threads(nt)
    {
        float l[3] = {FLT_MAX, FLT_MAX, FLT_MAX}, h[3] = {-FLT_MAX, -FLT_MAX, -FLT_MAX};
#pragma omp for schedule(static)
        for (int64_t t = 0; t < n; t++) {
            float tri[9], box[6];
            uint32_t v[3];
            load_triangle(m, (size_t)t, tri, v);
            pmi_box_of_triangle(tri, box);
            for (int k = 0; k < 3; k++) {
                l[k] = box[k] < l[k] ? box[k] : l[k];
                h[k] = box[3 + k] > h[k] ? box[3 + k] : h[k];
            }
        }
#pragma omp critical
        for (int k = 0; k < 3; k++) {
            lo[k] = l[k] < lo[k] ? l[k] : lo[k];
            hi[k] = h[k] > hi[k] ? h[k] : hi[k];
        }
    }
#pragma omp parallel for num_threads(nt) schedule(static)
    for (int64_t t = 0; t < n; t++) {
        float tri[9];
        uint32_t v[3];
        load_triangle(m, (size_t)t, tri, v);
        codes[t] = pmi_morton_triangle(tri, lo, hi);
    }
    s = sort_codes(codes, b->tri_index, (size_t)n);
    if (s != PM_STATUS_OK) goto done;
#pragma omp parallel for num_threads(nt) schedule(static)
    for (int64_t i = 0; i < n; i++) {
        float *tri = b->tris + 9 * (size_t)i;
        load_triangle(m, b->tri_index[i], tri, b->tri_verts + 3 * (size_t)i);
        pmi_box_of_triangle(tri, b->boxes + 6 * ((size_t)(n - 1) + (size_t)i));
    }
    parent[0] = -1;
#pragma omp parallel for num_threads(nt) schedule(static)
    for (int64_t i = 0; i < n - 1; i++) {
        int32_t *ch = b->children + 2 * (size_t)i;
        pmi_lbvh_children(codes, n, i, &ch[0], &ch[1]);
        parent[ch[0]] = (int32_t)i;
        parent[ch[1]] = (int32_t)i;
    }
    merge_boxes(b, parent, arrivals, nt);
    unsigned depth = 0;
#pragma omp parallel for num_threads(nt) schedule(static) reduction(max : depth)
    for (int64_t leaf = 0; leaf < n; leaf++) {
        unsigned d = 0;
        for (int32_t node = parent[(n - 1) + leaf]; node >= 0; node = parent[node])
            d++;
        depth = d > depth ? d : depth;
    }
    b->depth = depth;
done:
    free(codes);
    free(parent);
    free(arrivals);
    return s;
}
