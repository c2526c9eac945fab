/* pm_isosurface. cpu: the optimised CPU path against a plain serial marching
 * cubes written here (loop over every cell, same tables and rules), bit for
 * bit, over awkward dims, every sample type, normal mode, mesh mode, inside
 * convention, strides, anisotropic spacing and 1 or 2 threads; closed
 * surfaces (sphere, torus) are watertight, consistently oriented, with the
 * right Euler characteristic, volume and normals; the cayley field gives the
 * crossing count of ANCHORS.md. cuda: the CUDA mesh equals the CPU mesh
 * byte for byte. Every call's pm_isosurface_report.path is checked: the
 * paths that PYRAMESH_TEST_HOOKS forces (the CTest variants) really ran,
 * and without hooks the default paths did. */
#include <math.h>

#include "test_common.h"
#include "test_volumes.h"

#include "core/mc_tables.h"

#define PMT_PI 3.14159265358979323846

/* ------------------------------------------------------------------------ */
/* The serial reference                                                      */
/* ------------------------------------------------------------------------ */

typedef struct ref_vol {
    const pm_volume *v;
    size_t rs, ss;
    double h[3];
} ref_vol;

static double rv(const ref_vol *R, size_t i, size_t j, size_t k)
{
    size_t p = i + j * R->rs + k * R->ss;
    switch (R->v->type) {
    case PM_SAMPLE_U8: return ((const uint8_t *)R->v->data)[p];
    case PM_SAMPLE_U16: return ((const uint16_t *)R->v->data)[p];
    case PM_SAMPLE_I16: return ((const int16_t *)R->v->data)[p];
    case PM_SAMPLE_F32: return ((const float *)R->v->data)[p];
    case PM_SAMPLE_F64: return ((const double *)R->v->data)[p];
    }
    return 0;
}

static int ref_inside(double v, double iso, int above) { return above ? v > iso : v < iso; }

static void ref_gradient(const ref_vol *R, pm_normals mode, size_t i, size_t j, size_t k,
                         double g[3])
{
    size_t n[3] = {R->v->nx, R->v->ny, R->v->nz}, p[3] = {i, j, k};
    for (int a = 0; a < 3; a++) {
        size_t ip, im;
        if (mode == PM_NORMALS_FORWARD) {
            if (p[a] + 1 < n[a])
                ip = p[a] + 1, im = p[a];
            else
                ip = p[a], im = p[a] - 1;
        } else {
            ip = p[a] + 1 < n[a] ? p[a] + 1 : p[a];
            im = p[a] > 0 ? p[a] - 1 : 0;
        }
        if (mode != PM_NORMALS_SOBEL) {
            size_t u[3] = {i, j, k}, w[3] = {i, j, k};
            u[a] = ip;
            w[a] = im;
            /* docs/isosurface.md: the difference times the weight 1 / (span h). */
            const double wt = 1.0 / ((double)(ip - im) * R->h[a]);
            g[a] = (rv(R, u[0], u[1], u[2]) - rv(R, w[0], w[1], w[2])) * wt;
            continue;
        }
        /* Sobel across the two other axes b < c, c outer, weights 1 2 1. */
        int b = a == 0 ? 1 : 0, c = a == 2 ? 1 : 2;
        double s = 0;
        for (int dc = -1; dc <= 1; dc++)
            for (int db = -1; db <= 1; db++) {
                long qb = (long)p[b] + db, qc = (long)p[c] + dc;
                if (qb < 0) qb = 0;
                if (qb > (long)n[b] - 1) qb = (long)n[b] - 1;
                if (qc < 0) qc = 0;
                if (qc > (long)n[c] - 1) qc = (long)n[c] - 1;
                size_t u[3], w[3];
                u[a] = ip;
                w[a] = im;
                u[b] = w[b] = (size_t)qb;
                u[c] = w[c] = (size_t)qc;
                double wt = (db == 0 ? 2.0 : 1.0) * (dc == 0 ? 2.0 : 1.0);
                s = s + wt * (rv(R, u[0], u[1], u[2]) - rv(R, w[0], w[1], w[2]));
            }
        g[a] = s / ((16.0 * (double)(ip - im)) * R->h[a]);
    }
}

static void ref_vertex(const ref_vol *R, double iso, const pm_isosurface_options *o, size_t i,
                       size_t j, size_t k, int axis, float *pos, float *nrm)
{
    size_t d[3] = {0, 0, 0};
    d[axis] = 1;
    double vlo = rv(R, i, j, k), vhi = rv(R, i + d[0], j + d[1], k + d[2]);
    double t = (iso - vlo) / (vhi - vlo);
    if (!(t >= 0.0 && t <= 1.0)) t = 0.5;
    double q[3] = {(double)i, (double)j, (double)k};
    q[axis] += t;
    for (int c = 0; c < 3; c++)
        pos[c] = (float)(R->v->origin[c] + R->h[c] * q[c]);
    if (o->normals == PM_NORMALS_NONE) return;
    double g0[3], g1[3], n[3];
    ref_gradient(R, o->normals, i, j, k, g0);
    ref_gradient(R, o->normals, i + d[0], j + d[1], k + d[2], g1);
    for (int c = 0; c < 3; c++) {
        n[c] = (1.0 - t) * g0[c] + t * g1[c];
        if ((o->inside != PM_INSIDE_BELOW)) n[c] = -n[c];
    }
    double l2 = n[0] * n[0] + n[1] * n[1] + n[2] * n[2];
    if (l2 > 0 && isfinite(l2)) {
        double inv = 1.0 / sqrt(l2);
        if (isfinite(n[0] * inv) && isfinite(n[1] * inv) && isfinite(n[2] * inv)) {
            for (int c = 0; c < 3; c++)
                nrm[c] = (float)(n[c] * inv);
            return;
        }
    }
    for (int c = 0; c < 3; c++)
        nrm[c] = 0.0f;
    nrm[axis] = ref_inside(vlo, iso, (o->inside != PM_INSIDE_BELOW)) ? 1.0f : -1.0f;
}

typedef struct ref_mesh {
    size_t nv, nt;
    float *pos, *nrm;
    uint32_t *idx;
} ref_mesh;

static void *xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p) {
        fprintf(stderr, "out of memory\n");
        exit(1);
    }
    return p;
}

/* The whole mesh by the book: every cell in linear order, its case, its
 * triangles in table order; indexed vertices numbered by lattice point,
 * then x, y, z edge. */
static void ref_isosurface(const pm_volume *v, double iso, const pm_isosurface_options *o,
                           ref_mesh *m)
{
    ref_vol R = {v, v->row_stride ? v->row_stride : v->nx, 0, {1, 1, 1}};
    R.ss = v->slice_stride ? v->slice_stride : R.rs * v->ny;
    for (int a = 0; a < 3; a++)
        if (v->spacing[a] != 0) R.h[a] = v->spacing[a];
    size_t nx = v->nx, ny = v->ny, nz = v->nz, np = nx * ny * nz;
    int indexed = o->mode == PM_MESH_INDEXED;
    memset(m, 0, sizeof *m);
    uint32_t *vid = NULL;
    size_t cap = 5 * (nx - 1) * (ny - 1) * (nz - 1) + 1; /* at most 5 per cell */
    if (indexed) {
        vid = xmalloc(sizeof(uint32_t) * 3 * np);
        m->pos = xmalloc(sizeof(float) * 3 * 3 * np);
        m->nrm = xmalloc(sizeof(float) * 3 * 3 * np);
        for (size_t k = 0; k < nz; k++)
            for (size_t j = 0; j < ny; j++)
                for (size_t i = 0; i < nx; i++)
                    for (int a = 0; a < 3; a++) {
                        size_t d[3] = {0, 0, 0}, n[3] = {nx, ny, nz}, p[3] = {i, j, k};
                        d[a] = 1;
                        if (p[a] + 1 >= n[a]) continue;
                        int in0 = ref_inside(rv(&R, i, j, k), iso, (o->inside != PM_INSIDE_BELOW));
                        int in1 = ref_inside(rv(&R, i + d[0], j + d[1], k + d[2]), iso,
                                             (o->inside != PM_INSIDE_BELOW));
                        if (in0 == in1) continue;
                        vid[3 * (i + nx * (j + ny * k)) + a] = (uint32_t)m->nv;
                        ref_vertex(&R, iso, o, i, j, k, a, m->pos + 3 * m->nv, m->nrm + 3 * m->nv);
                        m->nv++;
                    }
    }
    float *tp = xmalloc(sizeof(float) * 9 * cap), *tn = xmalloc(sizeof(float) * 9 * cap);
    uint32_t *ti = xmalloc(sizeof(uint32_t) * 3 * cap);
    for (size_t k = 0; k + 1 < nz; k++)
        for (size_t j = 0; j + 1 < ny; j++)
            for (size_t i = 0; i + 1 < nx; i++) {
                int cs = 0;
                for (int c = 0; c < 8; c++)
                    if (ref_inside(rv(&R, i + pmi_mc_corner[c][0], j + pmi_mc_corner[c][1],
                                      k + pmi_mc_corner[c][2]),
                                   iso, (o->inside != PM_INSIDE_BELOW)))
                        cs |= 1 << c;
                for (int t = 0; t < pmi_mc_tri_count[cs]; t++) {
                    if (m->nt == cap) {
                        cap *= 2;
                        tp = realloc(tp, sizeof(float) * 9 * cap);
                        tn = realloc(tn, sizeof(float) * 9 * cap);
                        ti = realloc(ti, sizeof(uint32_t) * 3 * cap);
                        if (!tp || !tn || !ti) exit(1);
                    }
                    for (int q = 0; q < 3; q++) {
                        int e = pmi_mc_tri_table[cs][3 * t + q];
                        int c0 = pmi_mc_edge_corner[e][0], a = pmi_mc_edge_axis[e];
                        size_t pi = i + pmi_mc_corner[c0][0], pj = j + pmi_mc_corner[c0][1],
                               pk = k + pmi_mc_corner[c0][2];
                        if (indexed)
                            ti[3 * m->nt + q] = vid[3 * (pi + nx * (pj + ny * pk)) + a];
                        else
                            ref_vertex(&R, iso, o, pi, pj, pk, a, tp + 9 * m->nt + 3 * q,
                                       tn + 9 * m->nt + 3 * q);
                    }
                    m->nt++;
                }
            }
    if (indexed) {
        free(tp);
        free(tn);
        m->idx = ti;
    } else {
        free(ti);
        m->pos = tp;
        m->nrm = tn;
        m->nv = 3 * m->nt;
    }
    free(vid);
}

static void ref_free(ref_mesh *m)
{
    free(m->pos);
    free(m->nrm);
    free(m->idx);
}

/* ------------------------------------------------------------------------ */
/* Comparisons and mesh checks                                               */
/* ------------------------------------------------------------------------ */

static int same_mesh(const pm_mesh *a, const ref_mesh *r, int normals, const char *what)
{
    int ok = 1;
    PMT_CHECK(a->num_vertices == r->nv && a->num_triangles == r->nt,
              "%s: counts %zu/%zu vs reference %zu/%zu", what, a->num_vertices, a->num_triangles,
              r->nv, r->nt);
    if (a->num_vertices != r->nv || a->num_triangles != r->nt) return 0;
    if (r->nv && memcmp(a->positions, r->pos, sizeof(float) * 3 * r->nv)) {
        size_t f = 0;
        while (a->positions[f] == r->pos[f])
            f++;
        PMT_CHECK(0, "%s: positions differ first at float %zu: %.9g vs %.9g", what, f,
                  a->positions[f], r->pos[f]);
        ok = 0;
    }
    if (normals && r->nv) {
        PMT_CHECK(a->normals != NULL, "%s: no normals", what);
        if (a->normals && memcmp(a->normals, r->nrm, sizeof(float) * 3 * r->nv)) {
            size_t f = 0;
            while (a->normals[f] == r->nrm[f])
                f++;
            PMT_CHECK(0, "%s: normals differ first at float %zu: %.9g vs %.9g", what, f,
                      a->normals[f], r->nrm[f]);
            ok = 0;
        }
    }
    if (!normals) PMT_CHECK(a->normals == NULL, "%s: normals returned for NONE", what);
    if (r->idx) {
        PMT_CHECK(a->indices != NULL, "%s: no indices", what);
        if (a->indices && r->nt && memcmp(a->indices, r->idx, sizeof(uint32_t) * 3 * r->nt)) {
            PMT_CHECK(0, "%s: indices differ", what);
            ok = 0;
        }
    } else {
        PMT_CHECK(a->indices == NULL, "%s: indices returned for a soup", what);
    }
    for (size_t q = 0; q < 3 * a->num_vertices; q++) {
        if (!isfinite(a->positions[q]) || (a->normals && !isfinite(a->normals[q]))) {
            PMT_CHECK(0, "%s: non-finite output at float %zu", what, q);
            ok = 0;
            break;
        }
    }
    return ok;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* Closed-surface checks on an indexed mesh: every undirected edge in
 * exactly two triangles, once in each direction; returns the Euler
 * characteristic V - E + F (V = referenced vertices), and the enclosed
 * volume and area. */
static long closed_check(const pm_mesh *m, const char *what, double *volume, double *area)
{
    size_t nt = m->num_triangles;
    uint64_t *e = xmalloc(sizeof(uint64_t) * 3 * nt);
    for (size_t t = 0; t < nt; t++)
        for (int q = 0; q < 3; q++) {
            uint64_t a = m->indices[3 * t + q], b = m->indices[3 * t + (q + 1) % 3];
            e[3 * t + q] = a << 32 | b; /* directed */
        }
    qsort(e, 3 * nt, sizeof *e, cmp_u64);
    size_t dup = 0, unmatched = 0, degenerate = 0;
    for (size_t q = 0; q < 3 * nt; q++) {
        if (q && e[q] == e[q - 1]) dup++;
        uint64_t a = e[q] >> 32, b = e[q] & 0xffffffffu, rev = b << 32 | a;
        if (a == b) degenerate++;
        if (!bsearch(&rev, e, 3 * nt, sizeof *e, cmp_u64)) unmatched++;
    }
    PMT_CHECK(dup == 0, "%s: %zu directed edges used twice (inconsistent orientation)", what, dup);
    PMT_CHECK(unmatched == 0, "%s: %zu edges without their opposite (holes)", what, unmatched);
    PMT_CHECK(degenerate == 0, "%s: %zu degenerate edges", what, degenerate);
    free(e);
    /* Undirected edges: each appears twice as directed. */
    long E = (long)(3 * nt / 2);
    uint8_t *used = calloc(m->num_vertices + 1, 1);
    long V = 0;
    for (size_t q = 0; q < 3 * nt; q++)
        if (!used[m->indices[q]]) used[m->indices[q]] = 1, V++;
    free(used);
    double vol = 0, ar = 0;
    size_t agree = 0, total = 0;
    for (size_t t = 0; t < nt; t++) {
        const float *p0 = m->positions + 3 * m->indices[3 * t];
        const float *p1 = m->positions + 3 * m->indices[3 * t + 1];
        const float *p2 = m->positions + 3 * m->indices[3 * t + 2];
        double u[3], w[3], c[3];
        for (int a = 0; a < 3; a++)
            u[a] = (double)p1[a] - p0[a], w[a] = (double)p2[a] - p0[a];
        c[0] = u[1] * w[2] - u[2] * w[1];
        c[1] = u[2] * w[0] - u[0] * w[2];
        c[2] = u[0] * w[1] - u[1] * w[0];
        ar += 0.5 * sqrt(c[0] * c[0] + c[1] * c[1] + c[2] * c[2]);
        vol += (p0[0] * ((double)p1[1] * p2[2] - (double)p1[2] * p2[1]) +
                p0[1] * ((double)p1[2] * p2[0] - (double)p1[0] * p2[2]) +
                p0[2] * ((double)p1[0] * p2[1] - (double)p1[1] * p2[0])) /
               6.0;
        if (m->normals && (c[0] != 0 || c[1] != 0 || c[2] != 0))
            for (int q = 0; q < 3; q++) {
                const float *n = m->normals + 3 * m->indices[3 * t + q];
                agree += n[0] * c[0] + n[1] * c[1] + n[2] * c[2] > 0;
                total++;
            }
    }
    if (m->normals)
        PMT_CHECK(agree >= total - total / 200,
                  "%s: only %zu of %zu vertex normals agree with "
                  "their face normal",
                  what, agree, total);
    *volume = vol;
    *area = ar;
    return V - E + (long)nt;
}

/* Equal as numbers: normals of a negated field may differ in the sign of a
 * zero component (0 - 0 is +0 either way, then the sign flips). */
static int same_values(const float *a, const float *b, size_t n)
{
    for (size_t q = 0; q < n; q++)
        if (!(a[q] == b[q])) return 0;
    return 1;
}

static pm_context *make_ctx(int threads)
{
    pm_context *c;
    pm_context_desc d = {sizeof d, PM_DEVICE_CPU, 0, threads, NULL};
    PMT_OK(pm_context_create(&d, &c));
    return c;
}

/* ------------------------------------------------------------------------ */
/* The path a call took (pm_isosurface_report.path)                          */
/* ------------------------------------------------------------------------ */

/* hook_set and path_has: test_common.h. */

/* The CPU's path words: the forced ones under the hooks; by default the
 * AVX2 kernels where the CPU has them; the two-pass extraction's stores.
 * Counts the extractions that ran. */
static size_t cpu_slab_runs, cpu_twopass_runs, cpu_declined_sample, cpu_declined_budget;
static void check_cpu_path(const pm_isosurface_report *r, int soup, const char *what)
{
    int slab = path_has(r, "extract=slab"), twopass = path_has(r, "extract=twopass");
    int by_sample = path_has(r, "declined=sample"), by_budget = path_has(r, "declined=budget");
    cpu_slab_runs += slab;
    cpu_twopass_runs += twopass;
    cpu_declined_sample += by_sample;
    cpu_declined_budget += by_budget;
    /* A decline is reported with the two-pass extraction it led to, none
     * under hook twopass (nothing declined), none sampled under walkfull. */
    PMT_CHECK(by_sample + by_budget == (twopass && !hook_set("twopass")), "%s: path \"%s\"", what,
              r->path);
    if (hook_set("walkfull"))
        PMT_CHECK(!by_sample, "%s: hook walkfull, path \"%s\"", what, r->path);
    PMT_CHECK(path_has(r, "backend=cpu") && slab + twopass == 1, "%s: path \"%s\"", what, r->path);
    PMT_CHECK(soup == path_has(r, "soup=gather"), "%s: path \"%s\"", what, r->path);
    if (hook_set("twopass")) PMT_CHECK(twopass, "%s: hook twopass, path \"%s\"", what, r->path);
    if (twopass) {
        /* Streaming stores for large meshes (none here) and under the hook. */
        int stream = path_has(r, "stores=stream"), cached = path_has(r, "stores=cached");
        PMT_CHECK(stream + cached == 1, "%s: path \"%s\"", what, r->path);
#if defined(__x86_64__)
        PMT_CHECK(stream == hook_set("twopass"), "%s: hook twopass %d, path \"%s\"", what,
                  hook_set("twopass"), r->path);
#endif
    }
    int avx2 = 0;
#if defined(__x86_64__) && defined(__GNUC__)
    avx2 = __builtin_cpu_supports("avx2") && !hook_set("scalar");
#endif
    const char *simd = avx2 ? "simd=avx2" : "simd=scalar";
    PMT_CHECK(path_has(r, simd), "%s: expected %s, path \"%s\"", what, simd, r->path);
}

/* The CUDA's path words: a soup from the cells, an indexed mesh's
 * vertices and triangles by blocks; under the hooks, nopdl launches every
 * kernel the plain way and stream takes no volume through the direct
 * classification. */
static void check_cuda_path(const pm_isosurface_report *r, int soup, const char *what)
{
    PMT_CHECK(path_has(r, "backend=cuda"), "%s: path \"%s\"", what, r->path);
    PMT_CHECK(path_has(r, soup ? "pass2=cells" : "pass2=blocks"), "%s: path \"%s\"", what, r->path);
    if (hook_set("nopdl")) PMT_CHECK(path_has(r, "launch=plain"), "%s: path \"%s\"", what, r->path);
    if (hook_set("stream"))
        PMT_CHECK(!path_has(r, "pass1=direct"), "%s: hook stream, path \"%s\"", what, r->path);
}

/* ------------------------------------------------------------------------ */
/* CPU tests                                                                 */
/* ------------------------------------------------------------------------ */

static const char *normals_name[] = {"default", "none", "forward", "central", "sobel"};

/* Random samples with plenty of values equal to iso and, for floats, NaN
 * and infinities; compared bit for bit with the reference in every mode. */
static void test_random(pm_context *c1, pm_context *c2)
{
    static const size_t dims[][3] = {{2, 2, 2},  {3, 5, 7},  {31, 33, 17},
                                     {40, 3, 2}, {2, 9, 33}, {67, 45, 21}};
    for (size_t d = 0; d < sizeof dims / sizeof dims[0]; d++) {
        size_t nx = dims[d][0], ny = dims[d][1], nz = dims[d][2], n = nx * ny * nz;
        for (int type = PM_SAMPLE_U8; type <= PM_SAMPLE_F64; type++) {
            /* The one volume big enough to run threaded: two types only
             * (one under the sanitizers, which make it slow). */
            if (n > 50000 && type != PM_SAMPLE_I16 && type != PM_SAMPLE_F32) continue;
#if defined(__SANITIZE_ADDRESS__)
            if (n > 50000 && type != PM_SAMPLE_F32) continue;
#endif
            double *src = xmalloc(sizeof(double) * n), iso;
            int is_float = type == PM_SAMPLE_F32 || type == PM_SAMPLE_F64;
            iso = type == PM_SAMPLE_U8 ? 10 : type == PM_SAMPLE_U16 ? 1000 : 0;
            for (size_t p = 0; p < n; p++) {
                double u = pmt_uniform();
                if (type == PM_SAMPLE_U8)
                    src[p] = floor(u * 21); /* 0..20, iso 10 */
                else if (type == PM_SAMPLE_U16)
                    src[p] = 990 + floor(u * 21);
                else if (type == PM_SAMPLE_I16)
                    src[p] = floor(u * 21) - 10;
                else
                    src[p] = u < 0.05 ? 0.0 : 2 * u - 1;
                if (is_float && pmt_uniform() < 0.01) src[p] = NAN;
                if (is_float && pmt_uniform() < 0.005)
                    src[p] = pmt_uniform() < 0.5 ? -INFINITY : INFINITY;
            }
            /* Strides with padding, anisotropic spacing, an origin. */
            size_t rs = nx + 3, ss = rs * ny + 5;
            void *data = pmt_convert(src, nx, ny, nz, (pm_sample_type)type, rs, ss);
            pm_volume v = {data,
                           (pm_sample_type)type,
                           nx,
                           ny,
                           nz,
                           rs,
                           ss,
                           {0.5, 1.25, 2.0},
                           {-3.0, 1.5, 0.25}};
            for (int nm = PM_NORMALS_NONE; nm <= PM_NORMALS_SOBEL; nm++)
                for (int mode = 0; mode < 2; mode++)
                    for (int above = 0; above < 2; above++) {
                        /* Keep the run short: every normal mode on the small
                         * volumes and on f32/u8, fewer on the bigger ones. */
                        int all = n < 5000 || type == PM_SAMPLE_F32;
                        if (n > 50000) all = 0;
                        if (!all && nm != PM_NORMALS_NONE && nm != PM_NORMALS_SOBEL) continue;
                        pm_isosurface_options o;
                        pm_isosurface_report rep;
                        memset(&rep, 0, sizeof rep); /* timed is an input */
                        memset(&o, 0, sizeof o);
                        o.normals = (pm_normals)nm;
                        o.mode = (pm_mesh_mode)mode;
                        o.inside = (above) ? PM_INSIDE_ABOVE : PM_INSIDE_BELOW;
                        o.report = &rep;
                        /* Integer volumes: iso also between sample values. */
                        double is = (!is_float && (nm & 1)) ? iso + 0.5 : iso;
                        ref_mesh r;
                        ref_isosurface(&v, is, &o, &r);
                        char what[160];
                        for (int th = 0; th < 2; th++) {
                            pm_mesh m;
                            PMT_OK(pm_isosurface(th ? c2 : c1, &v, is, &o, &m));
                            snprintf(what, sizeof what,
                                     "random %zux%zux%zu %s iso %g normals %s %s above %d "
                                     "threads %d",
                                     nx, ny, nz, pm_sample_type_string((pm_sample_type)type), is,
                                     normals_name[nm], mode ? "soup" : "indexed", above, th + 1);
                            same_mesh(&m, &r, nm != PM_NORMALS_NONE, what);
                            check_cpu_path(&rep, mode, what);
                            PMT_CHECK(m.owns_arrays == 1, "%s: owns_arrays", what);
                            pm_mesh_free(th ? c2 : c1, &m);
                        }
                        ref_free(&r);
                    }
            free(data);
            free(src);
        }
    }
}

/* Sphere and torus: watertight, oriented, Euler characteristic, volume,
 * area, normals; soup equals the expanded indexed mesh; PM_INSIDE_ABOVE on the
 * negated field gives the same bits; 1 and 2 threads agree. */
static void test_closed(pm_context *c1, pm_context *c2)
{
    const size_t n = 64;
    struct {
        pmt_field f;
        double a, b;
        long chi;
        double vol, area;
        const char *name;
    } cases[] = {
        {PMT_FIELD_SPHERE, 0.6, 0, 2, 4.0 / 3.0 * PMT_PI * 0.216, 4 * PMT_PI * 0.36, "sphere"},
        {PMT_FIELD_TORUS, 0.55, 0.25, 0, 2 * PMT_PI * PMT_PI * 0.55 * 0.0625,
         4 * PMT_PI * PMT_PI * 0.55 * 0.25, "torus"},
    };
    for (int cI = 0; cI < 2; cI++) {
        double *f = pmt_field_f64(cases[cI].f, n, n, n, cases[cI].a, cases[cI].b);
        double *neg = xmalloc(sizeof(double) * n * n * n);
        for (size_t p = 0; p < n * n * n; p++)
            neg[p] = -f[p];
        float *d32 = pmt_convert(f, n, n, n, PM_SAMPLE_F32, 0, 0);
        float *n32 = pmt_convert(neg, n, n, n, PM_SAMPLE_F32, 0, 0);
        double s = 2.0 / (double)(n - 1);
        pm_volume v = {d32, PM_SAMPLE_F32, n, n, n, 0, 0, {s, s, s}, {-1, -1, -1}};
        pm_volume vn = v;
        vn.data = n32;
        for (int nm = PM_NORMALS_FORWARD; nm <= PM_NORMALS_SOBEL; nm++) {
            pm_isosurface_options o;
            pm_isosurface_report rep;
            memset(&rep, 0, sizeof rep); /* timed is an input */
            memset(&o, 0, sizeof o);
            o.normals = (pm_normals)nm;
            o.inside = PM_INSIDE_BELOW; /* signed distance fields: negative inside */
            o.report = &rep;
            pm_mesh m, m2, mn, ms;
            PMT_OK(pm_isosurface(c1, &v, 0.0, &o, &m));
            char what[96];
            snprintf(what, sizeof what, "%s normals %s", cases[cI].name, normals_name[nm]);
            check_cpu_path(&rep, 0, what);
            PMT_OK(pm_isosurface(c2, &v, 0.0, &o, &m2));
            double vol, area;
            long chi = closed_check(&m, what, &vol, &area);
            PMT_CHECK(chi == cases[cI].chi, "%s: Euler characteristic %ld, expected %ld", what, chi,
                      cases[cI].chi);
            PMT_CHECK(fabs(vol - cases[cI].vol) < 0.01 * cases[cI].vol,
                      "%s: volume %.6f vs analytic %.6f", what, vol, cases[cI].vol);
            PMT_CHECK(fabs(area - cases[cI].area) < 0.01 * cases[cI].area,
                      "%s: area %.6f vs analytic %.6f", what, area, cases[cI].area);
            PMT_CHECK(m.num_vertices == m2.num_vertices && m.num_triangles == m2.num_triangles &&
                          !memcmp(m.positions, m2.positions, 12 * m.num_vertices) &&
                          !memcmp(m.normals, m2.normals, 12 * m.num_vertices) &&
                          !memcmp(m.indices, m2.indices, 12 * m.num_triangles),
                      "%s: 1 and 2 threads differ", what);
            /* The negated field with PM_INSIDE_ABOVE: the same bits (but for
             * the sign of zero normal components). */
            o.inside = PM_INSIDE_ABOVE;
            PMT_OK(pm_isosurface(c2, &vn, -0.0, &o, &mn));
            PMT_CHECK(mn.num_vertices == m.num_vertices && mn.num_triangles == m.num_triangles &&
                          !memcmp(m.positions, mn.positions, 12 * m.num_vertices) &&
                          same_values(m.normals, mn.normals, 3 * m.num_vertices) &&
                          !memcmp(m.indices, mn.indices, 12 * m.num_triangles),
                      "%s: PM_INSIDE_ABOVE on the negated field differs", what);
            /* Soup: the indexed triangles expanded, bit for bit. */
            o.inside = PM_INSIDE_BELOW;
            o.mode = PM_MESH_SOUP;
            PMT_OK(pm_isosurface(c2, &v, 0.0, &o, &ms));
            PMT_CHECK(ms.num_triangles == m.num_triangles && ms.indices == NULL,
                      "%s: soup has %zu triangles, indexed %zu", what, ms.num_triangles,
                      m.num_triangles);
            size_t bad = 0;
            for (size_t q = 0; q < 3 * ms.num_triangles && ms.num_triangles == m.num_triangles;
                 q++) {
                uint32_t id = m.indices[q];
                bad += memcmp(ms.positions + 3 * q, m.positions + 3 * id, 12) != 0 ||
                       memcmp(ms.normals + 3 * q, m.normals + 3 * id, 12) != 0;
            }
            PMT_CHECK(bad == 0, "%s: %zu soup vertices differ from the indexed ones", what, bad);
            PMT_CHECK(m.active_cells > 0 && m.active_cells == ms.active_cells,
                      "%s: active cells %llu vs %llu", what, (unsigned long long)m.active_cells,
                      (unsigned long long)ms.active_cells);
            if (nm == PM_NORMALS_CENTRAL)
                printf("%s 64^3: %zu vertices, %zu triangles, chi %ld, volume %.5f (analytic "
                       "%.5f), area %.5f (%.5f)\n",
                       cases[cI].name, m.num_vertices, m.num_triangles, chi, vol, cases[cI].vol,
                       area, cases[cI].area);
            pm_mesh_free(c1, &m);
            pm_mesh_free(c2, &m2);
            pm_mesh_free(c2, &mn);
            pm_mesh_free(c2, &ms);
        }
        /* u8 with iso equal to sample values: still closed and oriented. */
        double *q = xmalloc(sizeof(double) * n * n * n);
        for (size_t p = 0; p < n * n * n; p++)
            q[p] = 100 + 100 * f[p];
        uint8_t *d8 = pmt_convert(q, n, n, n, PM_SAMPLE_U8, 0, 0);
        pm_volume v8 = {d8, PM_SAMPLE_U8, n, n, n, 0, 0, {0, 0, 0}, {0, 0, 0}};
        pm_mesh m8;
        PMT_OK(pm_isosurface(c2, &v8, 100.0, NULL, &m8));
        double vol, area;
        char what[64];
        snprintf(what, sizeof what, "%s u8 iso on samples", cases[cI].name);
        long chi = closed_check(&m8, what, &vol, &area);
        PMT_CHECK(chi == cases[cI].chi, "%s: chi %ld", what, chi);
        pm_mesh_free(c2, &m8);
        free(d8);
        free(q);
        free(d32);
        free(n32);
        free(neg);
        free(f);
    }
}

/* Empty meshes, truncation with caller buffers, argument errors. */
static void test_edges(pm_context *c)
{
    float vals[27];
    for (int p = 0; p < 27; p++)
        vals[p] = 3.0f;
    pm_volume v = {vals, PM_SAMPLE_F32, 3, 3, 3, 0, 0, {0, 0, 0}, {0, 0, 0}};
    for (int mode = 0; mode < 2; mode++) {
        pm_isosurface_options o;
        memset(&o, 0, sizeof o);
        o.mode = (pm_mesh_mode)mode;
        double isos[] = {3.0, 2.0, 4.0, -1e300};
        for (int q = 0; q < 4; q++) {
            pm_mesh m;
            PMT_OK(pm_isosurface(c, &v, isos[q], &o, &m));
            PMT_CHECK(m.num_vertices == 0 && m.num_triangles == 0 && m.active_cells == 0,
                      "constant volume at iso %g gave %zu triangles", isos[q], m.num_triangles);
            pm_mesh_free(c, &m);
        }
    }
    /* Truncation: the prefix that fits, the full counts, TRUNCATED. */
    const size_t n = 24;
    double *f = pmt_field_f64(PMT_FIELD_SPHERE, n, n, n, 0.5, 0);
    float *d = pmt_convert(f, n, n, n, PM_SAMPLE_F32, 0, 0);
    pm_volume s = {d, PM_SAMPLE_F32, n, n, n, 0, 0, {0, 0, 0}, {0, 0, 0}};
    for (int mode = 0; mode < 2; mode++) {
        pm_isosurface_options o;
        memset(&o, 0, sizeof o);
        o.mode = (pm_mesh_mode)mode;
        pm_mesh full, part;
        PMT_OK(pm_isosurface(c, &s, 0.0, &o, &full));
        size_t vc = full.num_vertices / 2, tc = full.num_triangles / 3;
        o.out_positions = xmalloc(12 * vc);
        o.out_normals = xmalloc(12 * vc);
        o.out_indices = xmalloc(12 * tc);
        o.vertex_capacity = vc;
        o.triangle_capacity = tc;
        pm_status st = pm_isosurface(c, &s, 0.0, &o, &part);
        PMT_CHECK(st == PM_STATUS_TRUNCATED, "%s truncation returned %s", mode ? "soup" : "indexed",
                  pm_status_string(st));
        PMT_CHECK(part.num_vertices == full.num_vertices &&
                      part.num_triangles == full.num_triangles && part.owns_arrays == 0,
                  "truncated mesh reports %zu/%zu, full %zu/%zu", part.num_vertices,
                  part.num_triangles, full.num_vertices, full.num_triangles);
        size_t vw = mode ? 3 * (tc < vc / 3 ? tc : vc / 3) : vc;
        PMT_CHECK(!memcmp(o.out_positions, full.positions, 12 * vw) &&
                      !memcmp(o.out_normals, full.normals, 12 * vw),
                  "truncated %s prefix differs", mode ? "soup" : "indexed");
        if (!mode)
            PMT_CHECK(!memcmp(o.out_indices, full.indices, 12 * tc), "truncated indices differ");
        /* Exactly enough room: OK and identical. */
        free(o.out_positions);
        free(o.out_normals);
        free(o.out_indices);
        o.out_positions = xmalloc(12 * full.num_vertices);
        o.out_normals = xmalloc(12 * full.num_vertices);
        o.out_indices = xmalloc(12 * full.num_triangles);
        o.vertex_capacity = full.num_vertices;
        o.triangle_capacity = full.num_triangles;
        PMT_OK(pm_isosurface(c, &s, 0.0, &o, &part));
        PMT_CHECK(part.positions == o.out_positions &&
                      !memcmp(o.out_positions, full.positions, 12 * full.num_vertices) &&
                      !memcmp(o.out_normals, full.normals, 12 * full.num_vertices) &&
                      (mode || !memcmp(o.out_indices, full.indices, 12 * full.num_triangles)),
                  "caller buffers with exact capacity differ");
        pm_mesh_free(c, &part);
        PMT_CHECK(o.out_positions != NULL, "pm_mesh_free must not free caller buffers");
        free(o.out_positions);
        free(o.out_normals);
        free(o.out_indices);
        pm_mesh_free(c, &full);
    }
    free(d);
    free(f);
    /* Bad arguments are statuses. */
    pm_mesh m;
    pm_volume bad = s;
    bad.nx = 1;
    PMT_CHECK(pm_isosurface(c, &bad, 0.0, NULL, &m) == PM_STATUS_INVALID_ARGUMENT, "nx 1");
    PMT_CHECK(pm_isosurface(c, &s, NAN, NULL, &m) == PM_STATUS_INVALID_ARGUMENT, "iso NaN");
    pm_isosurface_options bo;
    memset(&bo, 0, sizeof bo);
    bo.struct_size = sizeof bo;
    bo.inside = (pm_inside)7;
    PMT_CHECK(pm_isosurface(c, &s, 0.0, &bo, &m) == PM_STATUS_INVALID_ARGUMENT &&
                  strstr(pm_last_error(), "pm_isosurface: bad inside 7"),
              "inside 7: %s", pm_last_error());
    bo.inside = PM_INSIDE_DEFAULT;
    bo.normals = (pm_normals)42;
    PMT_CHECK(pm_isosurface(c, &s, 0.0, &bo, &m) == PM_STATUS_INVALID_ARGUMENT &&
                  strstr(pm_last_error(), "pm_isosurface: bad normals or mode"),
              "normals 42: %s", pm_last_error());
}

/* A misspelled hook is an error naming it, not a silent default (in a
 * build without hooks any value is an error, naming it too). */
static void test_bad_hook(pm_context *c)
{
    const char *e = getenv("PYRAMESH_TEST_HOOKS");
    char saved[256];
    snprintf(saved, sizeof saved, "%s", e ? e : "");
    float vals[8] = {0, 1, 0, 1, 0, 1, 0, 1};
    pm_volume v = {vals, PM_SAMPLE_F32, 2, 2, 2, 0, 0, {0, 0, 0}, {0, 0, 0}};
    setenv("PYRAMESH_TEST_HOOKS", "scalar,bogus", 1);
    pm_mesh m;
    pm_status st = pm_isosurface(c, &v, 0.5, NULL, &m);
    PMT_CHECK(st == PM_STATUS_INVALID_ARGUMENT && strstr(pm_last_error(), "bogus"),
              "PYRAMESH_TEST_HOOKS=scalar,bogus: %s (%s)", pm_status_string(st), pm_last_error());
    if (st == PM_STATUS_OK) pm_mesh_free(c, &m);
    if (e)
        setenv("PYRAMESH_TEST_HOOKS", saved, 1);
    else
        unsetenv("PYRAMESH_TEST_HOOKS");
    PMT_OK(pm_isosurface(c, &v, 0.5, NULL, &m));
    pm_mesh_free(c, &m);
}

/* Cayley at N = 256 (ANCHORS.md): the crossing count is table-independent
 * (153,984 edge crossings); the triangle count depends on the case table. */
static void test_cayley(pm_context *c)
{
    const size_t n = 256;
    float *d = pmt_cayley_f32(n);
    pm_volume v = {d, PM_SAMPLE_F32, n, n, n, 0, 0, {0, 0, 0}, {0, 0, 0}};
    pm_isosurface_options o;
    pm_isosurface_report rep;
    memset(&rep, 0, sizeof rep); /* timed is an input */
    memset(&o, 0, sizeof o);
    memset(&rep, 0, sizeof rep);
    o.normals = PM_NORMALS_NONE;
    o.report = &rep;
    rep.timed = 1;
    pm_mesh mi, ms;
    PMT_OK(pm_isosurface(c, &v, 0.0, &o, &mi));
    check_cpu_path(&rep, 0, "cayley 256 indexed");
    PMT_CHECK(path_has(&rep, hook_set("twopass") ? "extract=twopass" : "extract=slab"),
              "cayley 256: path \"%s\"", rep.path);
    PMT_CHECK(rep.stage_names[0] && rep.stage_names[1] && !rep.stage_names[2] &&
                  rep.stage_ms[0] >= 0 && rep.stage_ms[1] >= 0 &&
                  rep.stage_ms[0] + rep.stage_ms[1] > 0,
              "cayley 256: stages %s %.3f, %s %.3f", rep.stage_names[0] ? rep.stage_names[0] : "-",
              rep.stage_ms[0], rep.stage_names[1] ? rep.stage_names[1] : "-", rep.stage_ms[1]);
    o.mode = PM_MESH_SOUP;
    PMT_OK(pm_isosurface(c, &v, 0.0, &o, &ms));
    check_cpu_path(&rep, 1, "cayley 256 soup");
    PMT_CHECK(rep.stage_names[2] && !strcmp(rep.stage_names[2], "gather"),
              "cayley 256 soup: no gather stage");
    printf("cayley 256 soup: %s; %s %.2f ms, %s %.2f ms, %s %.2f ms\n", rep.path,
           rep.stage_names[0], rep.stage_ms[0], rep.stage_names[1], rep.stage_ms[1],
           rep.stage_names[2], rep.stage_ms[2]);
    printf("cayley 256: indexed %zu vertices, %zu triangles; soup %zu vertices; %llu active "
           "cells\n",
           mi.num_vertices, mi.num_triangles, ms.num_vertices, (unsigned long long)mi.active_cells);
    PMT_CHECK(mi.num_vertices == 153984, "cayley 256: %zu crossings, ANCHORS says 153,984",
              mi.num_vertices);
    PMT_CHECK(ms.num_vertices == 3 * mi.num_triangles, "soup vs indexed triangle counts");
    /* A surface with boundary: every edge in one or two triangles, each
     * directed edge once; boundary edges lie on the volume's faces. */
    size_t nt = mi.num_triangles, bad = 0, boundary = 0;
    uint64_t *e = xmalloc(sizeof(uint64_t) * 3 * nt);
    for (size_t t = 0; t < nt; t++)
        for (int q = 0; q < 3; q++)
            e[3 * t + q] = (uint64_t)mi.indices[3 * t + q] << 32 | mi.indices[3 * t + (q + 1) % 3];
    qsort(e, 3 * nt, sizeof *e, cmp_u64);
    for (size_t q = 0; q < 3 * nt; q++) {
        if (q && e[q] == e[q - 1]) bad++;
        uint64_t a = e[q] >> 32, b = e[q] & 0xffffffffu, rev = b << 32 | a;
        if (!bsearch(&rev, e, 3 * nt, sizeof *e, cmp_u64)) {
            boundary++;
            const float *pa = mi.positions + 3 * a, *pb = mi.positions + 3 * b;
            int on = 0;
            for (int ax = 0; ax < 3; ax++)
                on |= (pa[ax] == 0 && pb[ax] == 0) || (pa[ax] == 255 && pb[ax] == 255);
            bad += !on;
        }
    }
    PMT_CHECK(bad == 0, "cayley: %zu non-manifold or interior boundary edges", bad);
    PMT_CHECK(boundary > 0, "cayley surface should meet the volume boundary");
    free(e);
    pm_mesh_free(c, &mi);
    pm_mesh_free(c, &ms);
    free(d);
}

/* ------------------------------------------------------------------------ */
/* CUDA: the same mesh as the CPU, byte for byte                             */
/* ------------------------------------------------------------------------ */

static void cuda_compare(pm_context *gpu, pm_context *cpu, const pm_volume *hv, double iso,
                         const char *name)
{
    size_t es = pm_sample_size(hv->type);
    size_t rs = hv->row_stride ? hv->row_stride : hv->nx;
    size_t ss = hv->slice_stride ? hv->slice_stride : rs * hv->ny;
    size_t bytes = es * (ss * (hv->nz - 1) + rs * (hv->ny - 1) + hv->nx);
    pm_volume dv = *hv;
    dv.data = pmt_to_ctx(gpu, hv->data, bytes);
    for (int nm = PM_NORMALS_NONE; nm <= PM_NORMALS_SOBEL; nm++)
        for (int mode = 0; mode < 2; mode++)
            for (int above = 0; above < 2; above++)
                for (int inctx = 0; inctx < 3; inctx++) {
                    /* inctx: 0 host memory, 1 context memory allocated by
                     * the call, 2 the caller's context-memory buffers of
                     * exactly the mesh's size (the per-frame case). */
                    pm_isosurface_options o;
                    memset(&o, 0, sizeof o);
                    o.normals = (pm_normals)nm;
                    o.mode = (pm_mesh_mode)mode;
                    o.inside = (above) ? PM_INSIDE_ABOVE : PM_INSIDE_BELOW;
                    o.output_in_context_memory = inctx > 0;
                    pm_mesh a, b;
                    PMT_OK(pm_isosurface(cpu, hv, iso, &o, &a));
                    void *cb[3] = {NULL, NULL, NULL};
                    if (inctx == 2) {
                        PMT_OK(pm_alloc(gpu, 12 * a.num_vertices + 4, &cb[0]));
                        PMT_OK(pm_alloc(gpu, 12 * a.num_vertices + 4, &cb[1]));
                        PMT_OK(pm_alloc(gpu, 12 * a.num_triangles + 4, &cb[2]));
                        o.out_positions = cb[0];
                        o.out_normals = cb[1];
                        o.out_indices = cb[2];
                        o.vertex_capacity = a.num_vertices;
                        o.triangle_capacity = a.num_triangles;
                    }
                    pm_isosurface_report rep;
                    memset(&rep, 0, sizeof rep); /* timed is an input */
                    o.report = &rep;
                    PMT_OK(pm_isosurface(gpu, &dv, iso, &o, &b));
                    char what[160];
                    snprintf(what, sizeof what, "cuda %s normals %s %s above %d ctxmem %d", name,
                             normals_name[nm], mode ? "soup" : "indexed", above, inctx);
                    check_cuda_path(&rep, mode, what);
                    PMT_CHECK(a.num_vertices == b.num_vertices &&
                                  a.num_triangles == b.num_triangles &&
                                  a.active_cells == b.active_cells,
                              "%s: counts %zu/%zu vs cpu %zu/%zu", what, b.num_vertices,
                              b.num_triangles, a.num_vertices, a.num_triangles);
                    if (a.num_vertices == b.num_vertices && a.num_triangles == b.num_triangles) {
                        size_t vb = 12 * a.num_vertices, ib = 12 * a.num_triangles;
                        float *p =
                            b.in_context_memory ? pmt_to_host(gpu, b.positions, vb) : b.positions;
                        PMT_CHECK(!vb || !memcmp(p, a.positions, vb), "%s: positions differ", what);
                        if (p != b.positions) free(p);
                        if (a.normals) {
                            float *q =
                                b.in_context_memory ? pmt_to_host(gpu, b.normals, vb) : b.normals;
                            PMT_CHECK(!vb || (q && !memcmp(q, a.normals, vb)), "%s: normals differ",
                                      what);
                            if (q != b.normals) free(q);
                        }
                        if (a.indices) {
                            uint32_t *q =
                                b.in_context_memory ? pmt_to_host(gpu, b.indices, ib) : b.indices;
                            PMT_CHECK(!ib || (q && !memcmp(q, a.indices, ib)), "%s: indices differ",
                                      what);
                            if (q != b.indices) free(q);
                        }
                    }
                    pm_mesh_free(cpu, &a);
                    pm_mesh_free(gpu, &b);
                    for (int q = 0; q < 3; q++)
                        pm_free(gpu, cb[q]);
                }
    pm_free(gpu, (void *)dv.data);
}

/* Returns 0 when the CUDA backend has no isosurface yet (the test is then
 * skipped, not passed). */
static void test_cuda(pm_context *gpu)
{
    {
        float probe[8] = {0, 1, 0, 1, 0, 1, 0, 1};
        pm_volume pv = {NULL, PM_SAMPLE_F32, 2, 2, 2, 0, 0, {0, 0, 0}, {0, 0, 0}};
        pv.data = pmt_to_ctx(gpu, probe, sizeof probe);
        pm_mesh pm;
        pm_status st = pm_isosurface(gpu, &pv, 0.5, NULL, &pm);
        pm_free(gpu, (void *)pv.data);
        PMT_OK(st);
        pm_mesh_free(gpu, &pm);
    }
    pm_context *cpu = make_ctx(0);
    /* Random samples (floats with zeros and NaN), strided rows. The last
     * two volumes have rows of 16-byte multiples (the bits kernel's vector
     * loads), and for the streaming classification several 256-point
     * chunks per row (300: a partial one; 520: three, two full) and several
     * 31-row bands; almost every cell is active (full segments, a large
     * record pool). */
    static const size_t dims[][4] = {{2, 2, 2, 0},    {3, 5, 7, 0},    {31, 33, 17, 0},
                                     {97, 65, 33, 0}, {300, 70, 9, 1}, {520, 34, 5, 1}};
    for (size_t d = 0; d < sizeof dims / sizeof dims[0]; d++) {
        size_t nx = dims[d][0], ny = dims[d][1], nz = dims[d][2], n = nx * ny * nz;
        int aligned = (int)dims[d][3];
        double *src = xmalloc(sizeof(double) * n);
        for (int type = PM_SAMPLE_U8; type <= PM_SAMPLE_F64; type++) {
            int is_float = type >= PM_SAMPLE_F32;
            for (size_t p = 0; p < n; p++) {
                double u = pmt_uniform();
                src[p] = is_float ? (u < 0.05 ? 0.0 : 2 * u - 1) : floor(u * 21);
                if (is_float && pmt_uniform() < 0.01) src[p] = NAN;
            }
            size_t rs = aligned ? (nx + 15) & ~(size_t)15 : nx + 1,
                   ss = aligned ? rs * ny : rs * ny + 2;
            void *data = pmt_convert(src, nx, ny, nz, (pm_sample_type)type, rs, ss);
            pm_volume v = {data,
                           (pm_sample_type)type,
                           nx,
                           ny,
                           nz,
                           rs,
                           ss,
                           {0.5, 1.25, 2.0},
                           {-3.0, 1.5, 0.25}};
            char name[64];
            snprintf(name, sizeof name, "%s %zux%zux%zu %s", aligned ? "aligned random" : "random",
                     nx, ny, nz, pm_sample_type_string((pm_sample_type)type));
            cuda_compare(gpu, cpu, &v, is_float ? 0.0 : 10.0, name);
            free(data);
        }
        free(src);
    }
    float *cy = pmt_cayley_f32(128);
    pm_volume v = {cy, PM_SAMPLE_F32, 128, 128, 128, 0, 0, {0, 0, 0}, {0, 0, 0}};
    cuda_compare(gpu, cpu, &v, 0.0, "cayley 128");
    free(cy);
    pm_context_destroy(cpu);
}

int main(int argc, char **argv)
{
    pm_context *ctx;
    pm_device dev;
    if (!pmt_init(argc, argv, &ctx, &dev)) return PMT_SKIP;
    if (dev == PM_DEVICE_CUDA) {
        test_cuda(ctx);
    } else {
        pm_context *c1 = make_ctx(1), *c2 = make_ctx(2);
        clock_t t0 = clock();
        test_random(c1, c2);
        clock_t t1 = clock();
        test_closed(c1, c2);
        clock_t t2 = clock();
        test_edges(ctx);
        test_cayley(ctx);
        test_bad_hook(ctx);
        /* Without hooks both extractions ran: the slab walk, and the
         * two-pass extraction where the walk declined (the noisy volumes of
         * test_random pass its memory budget): by its sample, or under
         * hook walkfull once it passed the budget. */
        printf("extractions: %zu slab walks, %zu two-pass (%zu declined by the sample, %zu by "
               "the budget)\n",
               cpu_slab_runs, cpu_twopass_runs, cpu_declined_sample, cpu_declined_budget);
        if (!hook_set("twopass")) {
            PMT_CHECK(cpu_slab_runs > 0 && cpu_twopass_runs > 0,
                      "%zu slab walks, %zu two-pass extractions", cpu_slab_runs, cpu_twopass_runs);
            PMT_CHECK(hook_set("walkfull") ? cpu_declined_budget > 0 : cpu_declined_sample > 0,
                      "declined: %zu by the sample, %zu by the budget", cpu_declined_sample,
                      cpu_declined_budget);
        }
        clock_t t3 = clock();
        printf("cpu seconds: random %.2f, closed %.2f, edges+cayley %.2f\n",
               (double)(t1 - t0) / CLOCKS_PER_SEC, (double)(t2 - t1) / CLOCKS_PER_SEC,
               (double)(t3 - t2) / CLOCKS_PER_SEC);
        pm_context_destroy(c1);
        pm_context_destroy(c2);
    }
    pm_context_destroy(ctx);
    return pmt_finish("test_isosurface");
}
