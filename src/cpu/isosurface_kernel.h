/* Marching cubes kernels for one sample type, included by isosurface.c once
 * per type with MC_T (the C type) and MC_SUF (a name suffix) defined, so the
 * inner loops compare samples without a switch per sample. Their arithmetic
 * (what is inside, how a vertex and its normal are computed) is that of
 * core/mc_math.h, which the CUDA backend compiles too; this file holds the
 * loads and the loops around it. */
#include "core/mc_math.h"

#define MC_CAT2(a, b) a##_##b
#define MC_CAT(a, b) MC_CAT2(a, b)
#define MC_FN(name) MC_CAT(name, MC_SUF)

static inline double MC_FN(val)(const mc_job *J, size_t i, size_t j, size_t k)
{
    return (double)((const MC_T *)J->data)[i + j * J->rs + k * J->ss];
}

/* The inside bits of the cnt <= 64 samples s[0..cnt) (bit t for s[t]). The
 * compare runs in MC_CT (float for every type but f64) against a threshold
 * that makes it exactly equal to the double compare of pmi_mc_inside (see
 * pmi_mc_float_threshold). */
static inline uint64_t MC_FN(bits_run)(const mc_job *J, const MC_T *s, size_t cnt)
{
    const MC_CT sgc = (MC_CT)J->sg, thr = (MC_CT)MC_THR(J);
    uint64_t w = 0;
    size_t t = 0;
#if MC_SSE_F32
    /* Four samples per compare; v > -thr is exactly -v < thr. */
    const __m128 vt = _mm_set1_ps(J->sg < 0 ? -thr : thr);
    if (J->sg < 0)
        for (; t + 4 <= cnt; t += 4)
            w |= (uint64_t)_mm_movemask_ps(_mm_cmpgt_ps(_mm_loadu_ps(s + t), vt)) << t;
    else
        for (; t + 4 <= cnt; t += 4)
            w |= (uint64_t)_mm_movemask_ps(_mm_cmplt_ps(_mm_loadu_ps(s + t), vt)) << t;
#endif
    for (; t < cnt; t++)
        w |= (uint64_t)(sgc * (MC_CT)s[t] < thr) << t;
    return w;
}

/* Pass 1 of the two-pass path: the inside bit of every lattice point, 64
 * per word in logical order p = i + nx (j + ny k), for words [q0, q1). */
static void MC_FN(bits_words)(const mc_job *J, uint64_t *B, size_t q0, size_t q1)
{
    size_t p = 64 * q0, L = p / J->nx, i = p % J->nx;
    const MC_T *row = (const MC_T *)J->data + (L % J->ny) * J->rs + (L / J->ny) * J->ss;
    for (size_t q = q0; q < q1; q++) {
        uint64_t w = 0;
        unsigned b = 0;
        while (b < 64 && p < J->P) {
            size_t cnt = J->nx - i;
            if (cnt > 64 - b) cnt = 64 - b;
            if (cnt > J->P - p) cnt = J->P - p;
            w |= MC_FN(bits_run)(J, row + i, cnt) << b;
            b += (unsigned)cnt;
            i += cnt;
            p += cnt;
            if (i == J->nx) {
                i = 0;
                L++;
                if (p < J->P)
                    row = (const MC_T *)J->data + (L % J->ny) * J->rs + (L / J->ny) * J->ss;
            }
        }
        B[q] = w;
    }
}

/* The inside bits of lattice row L, row-aligned: bit x of out[x / 64] for
 * x < nx, zero padding up to the next whole word. */
static void MC_FN(bits_row)(const mc_job *J, size_t L, uint64_t *out)
{
    const MC_T *row = (const MC_T *)J->data + (L % J->ny) * J->rs + (L / J->ny) * J->ss;
    for (size_t x = 0; x < J->nx; x += 64)
        out[x >> 6] = MC_FN(bits_run)(J, row + x, J->nx - x < 64 ? J->nx - x : 64);
}

/* Gradient of the field at lattice point (i,j,k), per unit length (the
 * differences of core/mc_math.h). Sobel: the 3x3x3 Sobel kernel
 * (derivative -1 0 1 along the axis, smoothing 1 2 1 across it), indices
 * clamped to the volume. */
static void MC_FN(gradient)(const mc_job *J, size_t i, size_t j, size_t k, double g[3])
{
    size_t p[3] = {i, j, k}, n[3] = {J->nx, J->ny, J->nz};
    for (int a = 0; a < 3; a++) {
        size_t ip = PMI_MC_DIFF_HI(p[a], n[a]);
        size_t im = J->normals == PM_NORMALS_FORWARD ? PMI_MC_DIFF_LO_FORWARD(p[a], n[a])
                                                     : PMI_MC_DIFF_LO_CENTRAL(p[a]);
        if (J->normals != PM_NORMALS_SOBEL) {
            const MC_T *c = (const MC_T *)J->data + i + j * J->rs + k * J->ss;
            size_t st = a == 0 ? 1 : a == 1 ? J->rs : J->ss;
            g[a] = pmi_mc_diff_w((double)c[(ip - p[a]) * st], (double)*(c - (p[a] - im) * st),
                                 J->gw[ip - im][a]);
            continue;
        }
        /* The two axes across a, b < c; c is the outer loop. */
        int b = a == 0 ? 1 : 0, c = a == 2 ? 1 : 2;
        double s = 0.0;
        for (int dc = -1; dc <= 1; dc++) {
            size_t qc = PMI_MC_SOBEL_STEP(p[c], dc, n[c]);
            for (int db = -1; db <= 1; db++) {
                size_t qb = PMI_MC_SOBEL_STEP(p[b], db, n[b]);
                size_t qp[3], qm[3];
                qp[a] = ip;
                qm[a] = im;
                qp[b] = qm[b] = qb;
                qp[c] = qm[c] = qc;
                s = pmi_mc_sobel_add(s, db, dc, MC_FN(val)(J, qp[0], qp[1], qp[2]),
                                     MC_FN(val)(J, qm[0], qm[1], qm[2]));
            }
        }
        g[a] = pmi_mc_sobel_grad(s, (double)(ip - im), J->h[a]);
    }
}

/* gradient() for PM_NORMALS_CENTRAL, the default: the same expressions,
 * without the per-axis mode tests, so the compiler can keep it inline. */
static inline void MC_FN(gradient_central)(const mc_job *J, size_t i, size_t j, size_t k,
                                           double g[3])
{
    const MC_T *c = (const MC_T *)J->data + i + j * J->rs + k * J->ss;
    const size_t p[3] = {i, j, k}, n[3] = {J->nx, J->ny, J->nz}, st[3] = {1, J->rs, J->ss};
    for (int a = 0; a < 3; a++) {
        size_t ip = PMI_MC_DIFF_HI(p[a], n[a]);
        size_t im = PMI_MC_DIFF_LO_CENTRAL(p[a]);
        g[a] = pmi_mc_diff_w((double)c[(ip - p[a]) * st[a]], (double)*(c - (p[a] - im) * st[a]),
                             J->gw[ip - im][a]);
    }
}

/* The vertex on the lattice edge from (i,j,k) along `axis` (the lower end).
 * Writes 3 floats to pos and, when nrm is non-NULL, 3 to nrm. */
static void MC_FN(vertex)(const mc_job *J, size_t i, size_t j, size_t k, int axis, float *pos,
                          float *nrm)
{
    size_t st = axis == 0 ? 1 : axis == 1 ? J->rs : J->ss;
    size_t idx = i + j * J->rs + k * J->ss;
    const MC_T *d = (const MC_T *)J->data;
    double vlo = (double)d[idx], vhi = (double)d[idx + st];
    double t = pmi_mc_edge_t(J->iso, vlo, vhi);
    pmi_mc_position(J->origin, J->h, (long long)i, (long long)j, (long long)k, axis, t, pos);
    if (!nrm) return;
    double g0[3], g1[3];
    if (J->normals == PM_NORMALS_CENTRAL) {
        MC_FN(gradient_central)(J, i, j, k, g0);
        MC_FN(gradient_central)(J, i + (axis == 0), j + (axis == 1), k + (axis == 2), g1);
    } else {
        MC_FN(gradient)(J, i, j, k, g0);
        MC_FN(gradient)(J, i + (axis == 0), j + (axis == 1), k + (axis == 2), g1);
    }
    pmi_mc_normal(t, J->sg, J->siso, vlo, axis, g0, g1, nrm);
}

/* vertex() with central normals for the 8 vertices V[0..7] (same
 * expressions, the same bits), in steps over the 8 lanes: their divisions
 * and square roots are independent, so they overlap instead of waiting on
 * one another as one vertex after another would. The samples of the
 * central differences are read as gradient_central reads them: ip - p is 1
 * below the last point and 0 on it, p - im is 1 above the first and 0 on
 * it, so ip - im is their sum. */
static void MC_FN(vertex8_central)(const mc_job *J, const mc_pending *V)
{
    const MC_T *d = (const MC_T *)J->data;
    const size_t n[3] = {J->nx, J->ny, J->nz}, st[3] = {1, J->rs, J->ss};
    double vlo[8], vhi[8], t[8], g[2][8][3];
    for (int l = 0; l < 8; l++) {
        const mc_pending *v = &V[l];
        const size_t p[3] = {v->i, v->j, v->k};
        const MC_T *c0 = d + v->i + v->j * J->rs + v->k * J->ss, *c1 = c0 + st[v->axis];
        vlo[l] = (double)*c0;
        vhi[l] = (double)*c1;
        for (int e = 0; e < 2; e++)
            for (int a = 0; a < 3; a++) {
                const size_t pa = p[a] + (size_t)(e && a == v->axis);
                const size_t up = pa + 1 < n[a], dn = pa > 0;
                const MC_T *c = e ? c1 : c0;
                g[e][l][a] = pmi_mc_diff_w((double)c[up * st[a]], (double)*(c - dn * st[a]),
                                           J->gw[up + dn][a]);
            }
    }
    for (int l = 0; l < 8; l++)
        t[l] = pmi_mc_edge_t(J->iso, vlo[l], vhi[l]);
    for (int l = 0; l < 8; l++) {
        const mc_pending *v = &V[l];
        pmi_mc_position(J->origin, J->h, (long long)v->i, (long long)v->j, (long long)v->k, v->axis,
                        t[l], v->pos);
        pmi_mc_normal(t[l], J->sg, J->siso, vlo[l], v->axis, g[0][l], g[1][l], v->nrm);
    }
}

/* mc_vertex_row_fn by vertex8_central. */
static void MC_FN(vertex_row_central)(const mc_job *J, size_t j, size_t k, const uint64_t *e,
                                      size_t n, float *pos, float *nrm)
{
    for (size_t q = 0; q < n; q += 8) {
        mc_pending V[8];
        for (int l = 0; l < 8; l++) {
            V[l].i = (size_t)(e[q + l] >> 2);
            V[l].j = j;
            V[l].k = k;
            V[l].axis = (int)(e[q + l] & 3);
            V[l].pos = pos + 3 * (q + l);
            V[l].nrm = nrm + 3 * (q + l);
        }
        MC_FN(vertex8_central)(J, V);
    }
}

#undef MC_FN
#undef MC_CAT
#undef MC_CAT2
