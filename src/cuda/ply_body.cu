/* The body of a binary little-endian PLY file of a mesh in device memory
 * (pm_mesh_write_context): the file's bytes are packed on the device a
 * chunk at a time (vertex records: position, then normal; face records:
 * the count 3, then three int32 indices, 13 bytes) and copied into the
 * context's two pinned staging buffers. While the host writes chunk c
 * from one, the device packs chunk c + 1 and copies it into the other, so
 * the download hides behind the file's writing and no host copy of the
 * mesh is ever made. The indices are checked before (its own entry, so
 * that a bad mesh is refused before the file is created). */
#include <limits.h>
#include <stdio.h>

#include "cuda/cuda_internal.h"

#define PB_THREADS 256
#define PB_FACE 13

/* Vertices [v0, v0 + k) as records of 12 (positions) or 24 bytes. */
static __global__ void pb_vertices(const float *__restrict__ pos_d, const float *__restrict__ nrm_d,
                                   unsigned long long v0, unsigned long long k, float *out_d)
{
    const unsigned long long j = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= k) return;
    const unsigned long long v = v0 + j;
    const int w = nrm_d ? 6 : 3;
    float *o = out_d + j * w;
    o[0] = pos_d[3 * v];
    o[1] = pos_d[3 * v + 1];
    o[2] = pos_d[3 * v + 2];
    if (nrm_d) {
        o[3] = nrm_d[3 * v];
        o[4] = nrm_d[3 * v + 1];
        o[5] = nrm_d[3 * v + 2];
    }
}

/* Faces [t0, t0 + k) as 13-byte records; a soup's triangle t is vertices
 * 3t, 3t + 1, 3t + 2 (idx NULL). Little-endian bytes, as the host's. */
static __global__ void pb_faces(const uint32_t *__restrict__ idx_d, unsigned long long t0,
                                unsigned long long k, unsigned char *out_d)
{
    const unsigned long long j = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= k) return;
    const unsigned long long t = t0 + j;
    unsigned char *o = out_d + j * PB_FACE;
    o[0] = 3;
    for (int c = 0; c < 3; c++) {
        const uint32_t i = idx_d ? idx_d[3 * t + c] : (uint32_t)(3 * t + c);
        o[1 + 4 * c] = (unsigned char)i;
        o[2 + 4 * c] = (unsigned char)(i >> 8);
        o[3 + 4 * c] = (unsigned char)(i >> 16);
        o[4 + 4 * c] = (unsigned char)(i >> 24);
    }
}

/* The first index position (3t + corner) whose vertex is >= nv, into *bad
 * (ULLONG_MAX when none). */
static __global__ void pb_check(const uint32_t *__restrict__ idx_d, unsigned long long n3,
                                unsigned long long nv, unsigned long long *bad_d)
{
    const unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
    for (unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x; i < n3;
         i += stride)
        if (idx_d[i] >= nv) {
            atomicMin(bad_d, i);
            return;
        }
}

static unsigned pb_grid(unsigned long long k)
{
    return (unsigned)((k + PB_THREADS - 1) / PB_THREADS);
}

/* A failed CUDA step: the status, with a message naming the file. */
static pm_status pb_failed(cudaError_t e, const char *path, const char *what)
{
    const pm_status s = pmi_cuda_status(e, what);
    char msg[512];
    snprintf(msg, sizeof msg, "%s", pm_last_error());
    return pmi_error(s, "%s: %s", path, msg);
}

extern "C" pm_status pmi_cuda_mesh_indices_check(pm_context *ctx, const pm_mesh *m,
                                                 const char *path)
{
    if (!m->indices || !m->num_triangles) return PM_STATUS_OK;
    PMI_TRY(pmi_cuda_begin(ctx));
    pmi_cuda_state *st = pmi_cuda(ctx);
    unsigned long long *bad_d = NULL;
    PMI_TRY(ctx->backend->scratch_alloc(ctx, sizeof *bad_d, (void **)&bad_d));
    const unsigned long long n3 = 3ull * m->num_triangles;
    const unsigned long long most = 8ull * (unsigned long long)st->num_sms;
    const unsigned blocks = (unsigned)(n3 / PB_THREADS < most ? n3 / PB_THREADS + 1 : most);
    cudaError_t e = cudaMemsetAsync(bad_d, 0xff, sizeof *bad_d, st->stream);
    if (e == cudaSuccess) {
        pb_check<<<blocks, PB_THREADS, 0, st->stream>>>(m->indices, n3, m->num_vertices, bad_d);
        e = cudaGetLastError();
    }
    if (e == cudaSuccess)
        e = cudaMemcpyAsync(&st->host[PMI_HOST_RESULT], bad_d, sizeof *bad_d,
                            cudaMemcpyDeviceToHost, st->stream);
    if (e == cudaSuccess) e = cudaStreamSynchronize(st->stream);
    ctx->backend->scratch_free(ctx, bad_d);
    if (e != cudaSuccess) return pb_failed(e, path, "checking the indices");
    const unsigned long long first = st->host[PMI_HOST_RESULT];
    if (first == ULLONG_MAX) return PM_STATUS_OK;
    uint32_t v = 0;
    e = cudaMemcpy(&v, m->indices + first, sizeof v, cudaMemcpyDeviceToHost);
    if (e != cudaSuccess) return pb_failed(e, path, "reading an index");
    return pmi_error(PM_STATUS_INVALID_ARGUMENT, "%s: triangle %llu refers to vertex %u of %zu",
                     path, first / 3, v, m->num_vertices);
}

extern "C" pm_status pmi_cuda_ply_body(pm_context *ctx, const pm_mesh *m, const char *path,
                                       pm_status (*put)(void *user, const void *bytes, size_t n),
                                       void *user)
{
    PMI_TRY(pmi_cuda_begin(ctx));
    pmi_cuda_state *st = pmi_cuda(ctx);
    cudaStream_t s = st->stream;
    const size_t vb = m->normals ? 24 : 12;
    const unsigned long long vper = PMI_PIN_CHUNK / vb, fper = PMI_PIN_CHUNK / PB_FACE;
    const unsigned long long nvc = (m->num_vertices + vper - 1) / vper;
    const unsigned long long nchunks = nvc + (m->num_triangles + fper - 1) / fper;
    if (!nchunks) return PM_STATUS_OK;
    PMI_TRY(pmi_cuda_pin_buffers(st));
    /* One device chunk: the stream orders chunk c + 1's packing after
     * chunk c's copy out of it. */
    const unsigned long long body =
        (unsigned long long)vb * m->num_vertices + (unsigned long long)PB_FACE * m->num_triangles;
    unsigned char *chunk_d = NULL;
    PMI_TRY(ctx->backend->scratch_alloc(ctx, body < PMI_PIN_CHUNK ? (size_t)body : PMI_PIN_CHUNK,
                                        (void **)&chunk_d));
    pm_status r = PM_STATUS_OK;
    size_t len[2] = {0, 0};
    for (unsigned long long c = 0; r == PM_STATUS_OK && c <= nchunks; c++) {
        const int b = (int)(c & 1);
        if (c < nchunks) {
            /* Chunk c: packed, then copied into pinned buffer b (whose
             * bytes the host wrote out two chunks ago). */
            unsigned long long first, k;
            if (c < nvc) {
                first = c * vper;
                k = m->num_vertices - first < vper ? m->num_vertices - first : vper;
                pb_vertices<<<pb_grid(k), PB_THREADS, 0, s>>>(m->positions, m->normals, first, k,
                                                              (float *)chunk_d);
                len[b] = (size_t)k * vb;
            } else {
                first = (c - nvc) * fper;
                k = m->num_triangles - first < fper ? m->num_triangles - first : fper;
                pb_faces<<<pb_grid(k), PB_THREADS, 0, s>>>(m->indices, first, k, chunk_d);
                len[b] = (size_t)k * PB_FACE;
            }
            cudaError_t e = cudaGetLastError();
            if (e == cudaSuccess)
                e = cudaMemcpyAsync(st->pin[b], chunk_d, len[b], cudaMemcpyDeviceToHost, s);
            if (e == cudaSuccess) e = cudaEventRecord(st->pin_ev[b], s);
            if (e != cudaSuccess) {
                r = pb_failed(e, path, "packing and copying the PLY body");
                break;
            }
            st->pin_busy[b] = 1;
        }
        if (c > 0) {
            /* Chunk c - 1 is written while chunk c is packed and copied. */
            const int a = b ^ 1;
            cudaError_t e = cudaEventSynchronize(st->pin_ev[a]);
            st->pin_busy[a] = 0;
            r = e == cudaSuccess ? put(user, st->pin[a], len[a])
                                 : pb_failed(e, path, "copying the PLY body");
        }
    }
    /* After a failure a copy may still be in flight into a buffer. */
    if (cudaStreamSynchronize(s) != cudaSuccess) cudaGetLastError();
    st->pin_busy[0] = st->pin_busy[1] = 0;
    ctx->backend->scratch_free(ctx, chunk_d);
    return r;
}

/* Kernel preloading (preload.cu): the binary PLY body's kernels. */
void pmi_ply_body_preload(pmi_preload *p, int tier)
{
    if (tier != 0) return;
    const void *const k[] = {(const void *)pb_check, (const void *)pb_vertices,
                             (const void *)pb_faces};
    pmi_preload_all(p, k);
}
