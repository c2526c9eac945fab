/* Host memory on a CUDA context never poisons the process. pm_isosurface and
 * pm_field_compute copy host inputs in themselves (same mesh and field, byte
 * for byte, as the CPU backend); the primitives and the per-frame async calls
 * refuse a host pointer with PM_STATUS_INVALID_ARGUMENT naming it, before any
 * kernel runs; managed and mapped pinned memory are used in place; after
 * every misuse the context and new contexts keep working. On the CPU backend
 * host memory is context memory and every call simply works. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_common.h"
#ifdef PM_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

/* A ball of radius 0.375 n in an n^3 f32 volume (distance field). */
static float *ball(size_t n)
{
    float *v = malloc(n * n * n * sizeof *v);
    const double c = (n - 1) / 2.0, r = 0.375 * n;
    for (size_t k = 0; k < n; k++)
        for (size_t j = 0; j < n; j++)
            for (size_t i = 0; i < n; i++) {
                double x = i - c, y = j - c, z = k - c;
                v[i + n * (j + n * k)] = (float)(r - __builtin_sqrt(x * x + y * y + z * z));
            }
    return v;
}

static int same_mesh(const pm_mesh *a, const pm_mesh *b)
{
    return a->num_vertices == b->num_vertices && a->num_triangles == b->num_triangles &&
           !memcmp(a->positions, b->positions, 12 * a->num_vertices) &&
           !memcmp(a->normals, b->normals, 12 * a->num_vertices) &&
           !memcmp(a->indices, b->indices, 12 * a->num_triangles);
}

/* The extraction of a host volume on ctx equals the CPU backend's. */
static void host_volume_n(pm_context *ctx, pm_context *cpu, size_t n, const char *what)
{
    float *v = ball(n);
    pm_volume vol = {v, PM_SAMPLE_F32, n, n, n, 0, 0, {1, 1, 1}, {0, 0, 0}};
    pm_mesh m, ref;
    PMT_OK(pm_isosurface(ctx, &vol, 0.0, NULL, &m));
    PMT_OK(pm_isosurface(cpu, &vol, 0.0, NULL, &ref));
    PMT_CHECK(m.num_triangles > 0 && same_mesh(&m, &ref), "%s: host volume mesh differs from the CPU's",
              what);
    pm_mesh_free(ctx, &m);
    pm_mesh_free(cpu, &ref);
    free(v);
}

/* A small volume (copied in one piece) and one of 25 MB whose upload and
 * mesh download go through the pinned staging buffers (8 MiB chunks, from
 * 4 MiB on: src/cuda/host_copy.cu). */
static void host_volume(pm_context *ctx, pm_context *cpu, const char *what)
{
    host_volume_n(ctx, cpu, 24, what);
    host_volume_n(ctx, cpu, 184, what);
}

/* pm_upload / pm_download of pageable host memory through the staging
 * buffers: sizes around the chunk and the staging threshold, an odd tail,
 * the bytes back unchanged. */
static void staged_copies(pm_context *ctx)
{
    const size_t sizes[] = {(4u << 20) - 1, 4u << 20, (8u << 20) + 1, (16u << 20) + 12345};
    for (size_t s = 0; s < sizeof sizes / sizeof *sizes; s++) {
        const size_t n = sizes[s];
        unsigned char *a = malloc(n), *b = malloc(n);
        uint64_t x = pmt_seed + s;
        for (size_t i = 0; i < n; i++) {
            x = x * 6364136223846793005ull + 1442695040888963407ull;
            a[i] = (unsigned char)(x >> 56);
        }
        void *d = NULL;
        PMT_OK(pm_alloc(ctx, n, &d));
        PMT_OK(pm_upload(ctx, d, a, n));
        memset(b, 0, n);
        PMT_OK(pm_download(ctx, b, d, n));
        PMT_CHECK(!memcmp(a, b, n), "%zu bytes: the staged round trip changed them", n);
        pm_free(ctx, d);
        free(a);
        free(b);
    }
}

static void host_points(pm_context *ctx, pm_context *cpu)
{
    const size_t n = 2000;
    float *xyz = malloc(3 * n * sizeof *xyz);
    for (size_t i = 0; i < 3 * n; i++) xyz[i] = (float)pmt_uniform();
    pm_field_params p;
    memset(&p, 0, sizeof p);
    p.radius = 0.02;
    pm_field f, g;
    PMT_OK(pm_field_compute(ctx, xyz, n, &p, &f));
    PMT_OK(pm_field_compute(cpu, xyz, n, &p, &g));
    const size_t pts = f.volume.nx * f.volume.ny * f.volume.nz;
    float *fh = malloc(pts * sizeof *fh);
    PMT_OK(pm_download(ctx, fh, f.volume.data, pts * sizeof *fh));
    PMT_CHECK(pts == g.volume.nx * g.volume.ny * g.volume.nz && !memcmp(fh, g.volume.data, pts * sizeof *fh),
              "field of host points differs from the CPU's");
    free(fh);
    pm_field_free(ctx, &f);
    pm_field_free(cpu, &g);
    free(xyz);
}

/* Each primitive refuses a host pointer by its argument's name. */
static void refusals(pm_context *ctx)
{
    enum { N = 1000 };
    static float hf[N];
    static uint32_t hu[N];
    static uint8_t hb[N];
    static uint64_t h64[N];
    void *d;
    PMT_OK(pm_alloc(ctx, N * 8, &d));
    double r;
    size_t count;
    uint64_t total;
    struct {
        pm_status s;
        const char *name;
    } c[] = {
        {pm_reduce_f32(ctx, hf, N, PM_REDUCE_SUM, &r), "in"},
        {pm_scan_exclusive_u32(ctx, d, N, hu, &total), "out"},
        {pm_filter_f32(ctx, hf, N, PM_LESS, 0.5f, d, N, &count), "in"},
        {pm_compact(ctx, hb, N, d, N, &count), "flags"},
        {pm_expand(ctx, d, 1, h64, NULL, N, &count), "out_source"},
        {pm_compact_async(ctx, d, N, d, N, h64), "count_ctx"},
    };
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++)
        PMT_CHECK(c[i].s == PM_STATUS_INVALID_ARGUMENT, "refusal %zu: status %s", i, pm_status_string(c[i].s));
    /* The message of the last one names its argument and the remedy. */
    PMT_CHECK(strstr(pm_last_error(), "count_ctx is host memory") && strstr(pm_last_error(), "pm_upload"),
              "message: %s", pm_last_error());
    const size_t n = 24;
    float *v = ball(n);
    pm_volume vol = {v, PM_SAMPLE_F32, n, n, n, 0, 0, {1, 1, 1}, {0, 0, 0}};
    pm_isosurface_options o;
    memset(&o, 0, sizeof o);
    o.out_positions = d;
    o.vertex_capacity = N / 3;
    o.triangle_capacity = N;
    pm_isosurface_counts *cnt = d;
    pm_status s = pm_isosurface_async(ctx, &vol, 0.0, &o, cnt);
    PMT_CHECK(s == PM_STATUS_INVALID_ARGUMENT && strstr(pm_last_error(), "host memory"),
              "async with a host volume: %s %s", pm_status_string(s), pm_last_error());
    free(v);
    pm_free(ctx, d);
}

#ifdef PM_HAVE_CUDA
/* Managed and mapped pinned flags are read in place by pm_compact. */
static void managed_and_mapped(pm_context *ctx)
{
    enum { N = 5000 };
    uint8_t *fm = NULL, *fp = NULL;
    uint64_t *out;
    if (cudaMallocManaged((void **)&fm, N, cudaMemAttachGlobal) != cudaSuccess ||
        cudaHostAlloc((void **)&fp, N, cudaHostAllocMapped) != cudaSuccess) {
        PMT_CHECK(0, "cudaMallocManaged / cudaHostAlloc failed");
        return;
    }
    size_t want = 0;
    for (size_t i = 0; i < N; i++) {
        fm[i] = fp[i] = (uint8_t)(pmt_rand() % 3 == 0);
        want += fm[i] != 0;
    }
    PMT_OK(pm_alloc(ctx, N * sizeof *out, (void **)&out));
    size_t c1 = 0, c2 = 0;
    PMT_OK(pm_compact(ctx, fm, N, out, N, &c1));
    PMT_OK(pm_compact(ctx, fp, N, out, N, &c2));
    PMT_CHECK(c1 == want && c2 == want, "managed %zu / mapped %zu kept, want %zu", c1, c2, want);
    pm_free(ctx, out);
    cudaFree(fm);
    cudaFreeHost(fp);
}
#endif

/* pm_mesh_free gives large host arrays back to the context, and the next
 * mesh of about the same size is written into them (src/core/host_arrays.c):
 * the same mesh as on a fresh context, in the recycled memory (glibc, where
 * the library can tell an array's size); a mesh still held keeps its arrays. */
static void recycled_arrays(pm_context *ctx, pm_context *cpu)
{
    const size_t n = 224; /* about 97,000 vertices: arrays of more than 1 MiB */
    float *v = ball(n);
    pm_volume vol = {v, PM_SAMPLE_F32, n, n, n, 0, 0, {1, 1, 1}, {0, 0, 0}};
    pm_isosurface_options o = {.struct_size = sizeof o, .normals = PM_NORMALS_CENTRAL};
    pm_mesh ref, a, b, c;
    PMT_OK(pm_isosurface(cpu, &vol, 0.0, &o, &ref));
    PMT_OK(pm_isosurface(ctx, &vol, 0.0, &o, &a));
    PMT_CHECK(ref.num_vertices * 12 > ((size_t)1 << 20), "recycled: mesh too small (%zu vertices)",
              ref.num_vertices);
    const void *was[3] = {a.positions, a.normals, a.indices};
    pm_mesh_free(ctx, &a);
    PMT_OK(pm_isosurface(ctx, &vol, 0.0, &o, &b));
    PMT_CHECK(same_mesh(&b, &ref), "recycled: the mesh in recycled arrays differs");
#if defined(__GLIBC__)
    const void *now[3] = {b.positions, b.normals, b.indices};
    for (int q = 0; q < 3; q++)
        PMT_CHECK(now[q] == was[0] || now[q] == was[1] || now[q] == was[2],
                  "recycled: array %d of the second mesh is not one of the first's", q);
#endif
    PMT_OK(pm_isosurface(ctx, &vol, 0.0, &o, &c));
    PMT_CHECK(same_mesh(&c, &ref), "recycled: the mesh beside a held one differs");
    PMT_CHECK(c.positions != b.positions && c.normals != b.normals && c.indices != b.indices &&
                  c.positions != b.normals && c.normals != b.positions,
              "recycled: a held mesh's array was handed out again");
    pm_mesh_free(ctx, &b);
    pm_mesh_free(ctx, &c);
    pm_mesh_free(cpu, &ref);
    free(v);
}

/* The same for meshes in device memory (output_in_context_memory): the
 * CUDA context keeps freed arrays of 1 MiB and more and hands them to the
 * next mesh (src/cuda/backend.cu), whose bytes are those of a fresh
 * context; a held mesh's arrays are never handed out again, and pm_free
 * of a recycled array is fine. */
static void recycled_device_arrays(pm_context *ctx, pm_context *cpu)
{
    const size_t n = 224;
    float *v = ball(n);
    pm_volume vol = {v, PM_SAMPLE_F32, n, n, n, 0, 0, {1, 1, 1}, {0, 0, 0}};
    pm_isosurface_options o = {.struct_size = sizeof o, .normals = PM_NORMALS_CENTRAL};
    pm_mesh ref, a, b, c;
    PMT_OK(pm_isosurface(cpu, &vol, 0.0, &o, &ref));
    o.output_in_context_memory = 1;
    PMT_OK(pm_isosurface(ctx, &vol, 0.0, &o, &a));
    const void *was[3] = {a.positions, a.normals, a.indices};
    pm_mesh_free(ctx, &a);
    PMT_OK(pm_isosurface(ctx, &vol, 0.0, &o, &b));
    const void *now[3] = {b.positions, b.normals, b.indices};
    for (int q = 0; q < 3; q++)
        PMT_CHECK(now[q] == was[0] || now[q] == was[1] || now[q] == was[2],
                  "recycled (device): array %d of the second mesh is not one of the first's", q);
    PMT_OK(pm_isosurface(ctx, &vol, 0.0, &o, &c));
    PMT_CHECK(c.positions != b.positions && c.normals != b.normals && c.indices != b.indices &&
                  c.positions != b.normals && c.normals != b.positions,
              "recycled (device): a held mesh's array was handed out again");
    const pm_mesh *dm[2] = {&b, &c};
    for (int k = 0; k < 2; k++) {
        pm_mesh h = ref;
        PMT_CHECK(dm[k]->num_vertices == ref.num_vertices &&
                      dm[k]->num_triangles == ref.num_triangles,
                  "recycled (device): mesh %d has other counts", k);
        if (dm[k]->num_vertices != ref.num_vertices || dm[k]->num_triangles != ref.num_triangles)
            continue;
        const size_t vb = 12 * ref.num_vertices, tb = 12 * ref.num_triangles;
        h.positions = malloc(vb);
        h.normals = malloc(vb);
        h.indices = malloc(tb);
        PMT_OK(pm_download(ctx, h.positions, dm[k]->positions, vb));
        PMT_OK(pm_download(ctx, h.normals, dm[k]->normals, vb));
        PMT_OK(pm_download(ctx, h.indices, dm[k]->indices, tb));
        PMT_CHECK(same_mesh(&h, &ref), "recycled (device): mesh %d differs from the CPU's", k);
        free(h.positions), free(h.normals), free(h.indices);
    }
    pm_mesh_free(ctx, &b);
    /* a caller may free a mesh's arrays itself */
    pm_free(ctx, c.positions), pm_free(ctx, c.normals), pm_free(ctx, c.indices);
    pm_mesh_free(cpu, &ref);
    free(v);
}

#ifdef PM_HAVE_CUDA
/* Internal (src/cuda/backend.cu): whether ctx's scratch is pool memory. */
int pmi_cuda_scratch_pooled(pm_context *ctx);

/* Subdivision takes its buffers from the context's scratch: the
 * stream-ordered pool, or cudaMalloc memory where the device refuses
 * pools (the nopool hook makes this one refuse). Both give the CPU's
 * bytes, and the path is the one expected. */
static void scratch_pool(pm_context *ctx, pm_context *cpu)
{
    const size_t n = 40;
    float *v = ball(n);
    pm_volume vol = {v, PM_SAMPLE_F32, n, n, n, 0, 0, {1, 1, 1}, {0, 0, 0}};
    pm_mesh m, ref, got;
    PMT_OK(pm_isosurface(cpu, &vol, 0.0, NULL, &m));
    pm_subdivide_options so = {.struct_size = sizeof so, .normals = PM_NORMALS_CENTRAL};
    for (int round = 0; round < 2; round++) { /* the second reuses the scratch */
        PMT_OK(pm_subdivide_loop(cpu, &m, 2, &so, &ref));
        PMT_OK(pm_subdivide_loop(ctx, &m, 2, &so, &got));
        PMT_CHECK(got.num_triangles > m.num_triangles && same_mesh(&got, &ref),
                  "scratch (%s): subdivision differs from the CPU's",
                  hook_set("nopool") ? "cudaMalloc" : "pool");
        pm_mesh_free(ctx, &got);
        pm_mesh_free(cpu, &ref);
    }
    /* (A device may refuse pools by itself: only the hook's effect is
     * certain.) */
    if (hook_set("nopool"))
        PMT_CHECK(!pmi_cuda_scratch_pooled(ctx), "scratch: pooled with the nopool hook set");
    printf("scratch: %s\n", pmi_cuda_scratch_pooled(ctx) ? "pool" : "cudaMalloc");
    pm_mesh_free(cpu, &m);
    free(v);
}
#endif

int main(int argc, char **argv)
{
    pm_context *ctx, *cpu;
    pm_device dev;
    if (!pmt_init(argc, argv, &ctx, &dev)) return PMT_SKIP;
    pm_context_desc d = {sizeof d, PM_DEVICE_CPU, 0, 0, NULL};
    PMT_OK(pm_context_create(&d, &cpu));
    host_volume(ctx, cpu, "first call");
    host_points(ctx, cpu);
    staged_copies(ctx);
    recycled_arrays(ctx, cpu);
    if (dev == PM_DEVICE_CUDA) {
        recycled_device_arrays(ctx, cpu);
        refusals(ctx);
#ifdef PM_HAVE_CUDA
        managed_and_mapped(ctx);
        scratch_pool(ctx, cpu);
#endif
        /* After the refusals: this context and a new one still work. */
        host_volume(ctx, cpu, "after the refusals");
        pm_context *again;
        PMT_OK(pm_context_create(NULL, &again));
        host_volume(again, cpu, "a new context");
        pm_context_destroy(again);
    }
    pm_context_destroy(cpu);
    pm_context_destroy(ctx);
    return pmt_finish("test_host_memory");
}
