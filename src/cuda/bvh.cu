/* The linear BVH on the GPU (Karras, "Maximizing Parallelism in the
 * Construction of BVHs, Octrees, and k-d Trees", 2012): Morton codes of the
 * triangle centroids, cub's stable radix sort of (code, triangle), one
 * thread per internal node for its children, boxes merged bottom-up by the
 * second child to arrive. The rule is src/core/collide_math.h, shared with
 * src/cpu/bvh.c, so both backends build the same tree. */
#include <cub/device/device_radix_sort.cuh>

#include "cuda/cuda_internal.h"

extern "C" {
#include "core/collide_math.h"
}

#define BVH_THREADS 256

static unsigned bvh_grid(long long n)
{
    long long g = (n + BVH_THREADS - 1) / BVH_THREADS;
    return (unsigned)(g < 1 ? 1 : g > 65535 * 8 ? 65535 * 8 : g);
}

/* Floats as unsigned keys that order like the floats (for atomicMin/Max). */
static __device__ __forceinline__ unsigned f2key(float f)
{
    unsigned u = __float_as_uint(f);
    return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}
static __device__ __forceinline__ float key2f(unsigned k)
{
    return __uint_as_float((k & 0x80000000u) ? (k & 0x7fffffffu) : ~k);
}

static __device__ __forceinline__ void load_tri(const float *pos, const uint32_t *idx, size_t t,
                                                float *out, uint32_t *verts)
{
    for (int k = 0; k < 3; k++) {
        size_t v = idx ? idx[3 * t + k] : 3 * t + k;
        verts[k] = (uint32_t)v;
        out[3 * k] = pos[3 * v];
        out[3 * k + 1] = pos[3 * v + 1];
        out[3 * k + 2] = pos[3 * v + 2];
    }
}

/* A mesh in device memory: the first triangle with a vertex index out of
 * range or a non-finite coordinate (bad[0]), and that vertex (bad[1]). */
static __global__ void bvh_check_kernel(const float *pos, const uint32_t *idx, long long n,
                                        unsigned long long nv, unsigned long long *bad)
{
    for (long long t = blockIdx.x * (long long)blockDim.x + threadIdx.x; t < n;
         t += (long long)gridDim.x * blockDim.x)
        for (int k = 0; k < 3; k++) {
            unsigned long long v = idx ? idx[3 * t + k] : 3 * (unsigned long long)t + k;
            bool ok = v < nv && isfinite(pos[3 * v]) && isfinite(pos[3 * v + 1]) &&
                      isfinite(pos[3 * v + 2]);
            if (!ok) {
                unsigned long long old = atomicMin(&bad[0], (unsigned long long)t);
                if (old > (unsigned long long)t) bad[1] = v; /* a message hint only */
            }
        }
}

static __global__ void bvh_scene_kernel(const float *pos, const uint32_t *idx, long long n,
                                        unsigned *scene)
{
    unsigned lo[3] = {~0u, ~0u, ~0u}, hi[3] = {0, 0, 0};
    for (long long t = blockIdx.x * (long long)blockDim.x + threadIdx.x; t < n;
         t += (long long)gridDim.x * blockDim.x) {
        float tri[9];
        uint32_t v[3];
        load_tri(pos, idx, (size_t)t, tri, v);
        for (int c = 0; c < 9; c++) {
            unsigned k = f2key(tri[c]);
            lo[c % 3] = min(lo[c % 3], k);
            hi[c % 3] = max(hi[c % 3], k);
        }
    }
    for (int k = 0; k < 3; k++) {
        for (int off = 16; off; off >>= 1) {
            lo[k] = min(lo[k], __shfl_xor_sync(0xffffffffu, lo[k], off));
            hi[k] = max(hi[k], __shfl_xor_sync(0xffffffffu, hi[k], off));
        }
        if ((threadIdx.x & 31) == 0) {
            atomicMin(&scene[k], lo[k]);
            atomicMax(&scene[3 + k], hi[k]);
        }
    }
}

static __global__ void bvh_codes_kernel(const float *pos, const uint32_t *idx, long long n,
                                        const unsigned *scene, uint32_t *codes, uint32_t *order)
{
    float lo[3], hi[3];
    for (int k = 0; k < 3; k++) {
        lo[k] = key2f(scene[k]);
        hi[k] = key2f(scene[3 + k]);
    }
    for (long long t = blockIdx.x * (long long)blockDim.x + threadIdx.x; t < n;
         t += (long long)gridDim.x * blockDim.x) {
        float tri[9];
        uint32_t v[3];
        load_tri(pos, idx, (size_t)t, tri, v);
        codes[t] = pmi_morton_triangle(tri, lo, hi);
        order[t] = (uint32_t)t;
    }
}

static __global__ void bvh_leaves_kernel(const float *pos, const uint32_t *idx, long long n,
                                         const uint32_t *order, struct pm_bvh b)
{
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
         i += (long long)gridDim.x * blockDim.x) {
        uint32_t t = order[i];
        float *tri = b.tris + 9 * i;
        b.tri_index[i] = t;
        load_tri(pos, idx, t, tri, b.tri_verts + 3 * i);
        pmi_box_of_triangle(tri, b.boxes + 6 * ((size_t)(n - 1) + (size_t)i));
    }
}

static __global__ void bvh_nodes_kernel(const uint32_t *codes, long long n, int32_t *children,
                                        int32_t *parent)
{
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n - 1;
         i += (long long)gridDim.x * blockDim.x) {
        int32_t l, r;
        pmi_lbvh_children(codes, n, i, &l, &r);
        children[2 * i] = l;
        children[2 * i + 1] = r;
        parent[l] = (int32_t)i;
        parent[r] = (int32_t)i;
    }
    if (blockIdx.x == 0 && threadIdx.x == 0) parent[0] = -1;
}

/* Bottom-up boxes: the second child to arrive at a node merges. The
 * sibling's box is read through L2 (__ldcg) after the fence of its writer. */
static __global__ void bvh_boxes_kernel(long long n, const int32_t *children, const int32_t *parent,
                                        float *boxes, unsigned *arrivals, unsigned *depth)
{
    for (long long leaf = blockIdx.x * (long long)blockDim.x + threadIdx.x; leaf < n;
         leaf += (long long)gridDim.x * blockDim.x) {
        unsigned d = 0;
        for (int32_t node = parent[(n - 1) + leaf]; node >= 0; node = parent[node])
            d++;
        atomicMax(depth, d);
        int32_t node = parent[(n - 1) + leaf];
        while (node >= 0) {
            __threadfence();
            if (atomicAdd(&arrivals[node], 1u) == 0) break;
            __threadfence();
            int32_t c0 = children[2 * node], c1 = children[2 * node + 1];
            float a[6], b[6], m[6];
            for (int k = 0; k < 6; k++) {
                a[k] = __ldcg(boxes + 6 * (size_t)c0 + k);
                b[k] = __ldcg(boxes + 6 * (size_t)c1 + k);
            }
            pmi_box_merge(a, b, m);
            for (int k = 0; k < 6; k++)
                __stcg(boxes + 6 * (size_t)node + k, m[k]);
            node = parent[node];
        }
    }
}

extern "C" void pmi_cuda_bvh_destroy(pm_context *ctx, struct pm_bvh *b)
{
    (void)ctx;
    cudaFree(b->boxes);
    cudaFree(b->children);
    cudaFree(b->tris);
    cudaFree(b->tri_index);
    cudaFree(b->tri_verts);
    cudaGetLastError();
    b->boxes = b->tris = NULL;
    b->children = NULL;
    b->tri_index = b->tri_verts = NULL;
}

/* Copies the mesh to the device when it is in host memory. */
static pm_status bvh_device_mesh(const pm_mesh *m, const float **pos, const uint32_t **idx,
                                 void **own_pos, void **own_idx)
{
    *own_pos = *own_idx = NULL;
    if (m->in_context_memory) {
        *pos = m->positions;
        *idx = m->indices;
        return PM_STATUS_OK;
    }
    size_t nt = m->num_triangles;
    size_t nv = m->num_vertices;
    PMI_CU_TRY(cudaMalloc(own_pos, nv * 3 * sizeof(float) + 4), "pm_bvh_build: positions");
    PMI_CU_TRY(cudaMemcpy(*own_pos, m->positions, nv * 3 * sizeof(float), cudaMemcpyHostToDevice),
               "pm_bvh_build: positions upload");
    if (m->indices) {
        PMI_CU_TRY(cudaMalloc(own_idx, nt * 3 * sizeof(uint32_t)), "pm_bvh_build: indices");
        PMI_CU_TRY(
            cudaMemcpy(*own_idx, m->indices, nt * 3 * sizeof(uint32_t), cudaMemcpyHostToDevice),
            "pm_bvh_build: indices upload");
    }
    *pos = (const float *)*own_pos;
    *idx = (const uint32_t *)*own_idx;
    return PM_STATUS_OK;
}

static pm_status bvh_build(pm_context *ctx, const pm_mesh *m, struct pm_bvh *b, const float *pos,
                           const uint32_t *idx)
{
    pmi_cuda_state *st = pmi_cuda(ctx);
    cudaStream_t s = st->stream;
    const long long n = (long long)m->num_triangles;
    const size_t nodes = 2 * (size_t)n - 1;
    PMI_CU_TRY(cudaMalloc((void **)&b->boxes, nodes * 6 * sizeof(float)), "pm_bvh_build: boxes");
    PMI_CU_TRY(cudaMalloc((void **)&b->children, (size_t)(n > 1 ? n - 1 : 1) * 2 * sizeof(int32_t)),
               "pm_bvh_build: nodes");
    PMI_CU_TRY(cudaMalloc((void **)&b->tris, (size_t)n * 9 * sizeof(float)), "pm_bvh_build: tris");
    PMI_CU_TRY(cudaMalloc((void **)&b->tri_index, (size_t)n * sizeof(uint32_t)),
               "pm_bvh_build: triangle indices");
    PMI_CU_TRY(cudaMalloc((void **)&b->tri_verts, (size_t)n * 3 * sizeof(uint32_t)),
               "pm_bvh_build: vertex indices");
    /* Scratch: codes and order (twice, for the sort), parents, arrival
     * counters, the scene box, the depth, the check words, cub's space. */
    size_t sort_bytes = 0;
    cub::DeviceRadixSort::SortPairs(NULL, sort_bytes, (const uint32_t *)NULL, (uint32_t *)NULL,
                                    (const uint32_t *)NULL, (uint32_t *)NULL, (int)n, 0, 30, s);
    size_t u32 = pmi_align256((size_t)n * sizeof(uint32_t));
    size_t par = pmi_align256(nodes * sizeof(int32_t));
    size_t total = 4 * u32 + par + u32 + 256 + pmi_align256(sort_bytes);
    char *w;
    PMI_TRY(pmi_cuda_scratch(ctx, total, (void **)&w));
    uint32_t *codes = (uint32_t *)w, *order = (uint32_t *)(w + u32);
    uint32_t *codes2 = (uint32_t *)(w + 2 * u32), *order2 = (uint32_t *)(w + 3 * u32);
    int32_t *parent = (int32_t *)(w + 4 * u32);
    unsigned *arrivals = (unsigned *)(w + 4 * u32 + par);
    unsigned *words = (unsigned *)(w + 5 * u32 + par); /* scene[6], depth */
    void *sort_tmp = w + 5 * u32 + par + 256;
    unsigned init[8] = {~0u, ~0u, ~0u, 0, 0, 0, 0, 0};
    PMI_CU_TRY(cudaMemcpyAsync(words, init, sizeof init, cudaMemcpyHostToDevice, s),
               "pm_bvh_build: init");
    PMI_CU_TRY(cudaMemsetAsync(arrivals, 0, u32, s), "pm_bvh_build: init");
    unsigned g = bvh_grid(n);
    bvh_scene_kernel<<<g, BVH_THREADS, 0, s>>>(pos, idx, n, words);
    bvh_codes_kernel<<<g, BVH_THREADS, 0, s>>>(pos, idx, n, words, codes, order);
    PMI_TRY(pmi_cuda_launched("pm_bvh_build: codes"));
    PMI_CU_TRY(cub::DeviceRadixSort::SortPairs(sort_tmp, sort_bytes, codes, codes2, order, order2,
                                               (int)n, 0, 30, s),
               "pm_bvh_build: sort");
    bvh_leaves_kernel<<<g, BVH_THREADS, 0, s>>>(pos, idx, n, order2, *b);
    bvh_nodes_kernel<<<g, BVH_THREADS, 0, s>>>(codes2, n, b->children, parent);
    bvh_boxes_kernel<<<g, BVH_THREADS, 0, s>>>(n, b->children, parent, b->boxes, arrivals,
                                               words + 6);
    PMI_TRY(pmi_cuda_launched("pm_bvh_build: tree"));
    unsigned depth = 0;
    PMI_CU_TRY(cudaMemcpyAsync(&depth, words + 6, sizeof depth, cudaMemcpyDeviceToHost, s),
               "pm_bvh_build: depth");
    PMI_TRY(pmi_cuda_wait(ctx, "pm_bvh_build"));
    b->depth = depth;
    return PM_STATUS_OK;
}

extern "C" pm_status pmi_cuda_bvh_build(pm_context *ctx, const pm_mesh *m, struct pm_bvh *b)
{
    PMI_TRY(pmi_cuda_begin(ctx));
    const float *pos = NULL;
    const uint32_t *idx = NULL;
    void *own_pos = NULL, *own_idx = NULL;
    pm_status s = bvh_device_mesh(m, &pos, &idx, &own_pos, &own_idx);
    if (s == PM_STATUS_OK && m->in_context_memory) {
        /* A device mesh was not checked on the host. */
        unsigned long long *bad = NULL, hb[2] = {~0ull, 0};
        cudaError_t e = cudaMalloc((void **)&bad, sizeof hb);
        if (e == cudaSuccess) e = cudaMemcpy(bad, hb, sizeof hb, cudaMemcpyHostToDevice);
        if (e == cudaSuccess) {
            bvh_check_kernel<<<bvh_grid((long long)m->num_triangles), BVH_THREADS, 0,
                               pmi_cuda(ctx)->stream>>>(pos, idx, (long long)m->num_triangles,
                                                        m->num_vertices, bad);
            e = cudaStreamSynchronize(pmi_cuda(ctx)->stream);
        }
        if (e == cudaSuccess) e = cudaMemcpy(hb, bad, sizeof hb, cudaMemcpyDeviceToHost);
        cudaFree(bad);
        if (e != cudaSuccess)
            s = pmi_cuda_status(e, "pm_bvh_build: mesh check");
        else if (hb[0] != ~0ull)
            s = pmi_error(PM_STATUS_INVALID_ARGUMENT,
                          "pm_bvh_build: triangle %llu uses vertex %llu, which is out of range "
                          "or has a non-finite coordinate",
                          hb[0], hb[1]);
    }
    if (s == PM_STATUS_OK) s = bvh_build(ctx, m, b, pos, idx);
    cudaFree(own_pos);
    cudaFree(own_idx);
    cudaGetLastError();
    return s;
}
