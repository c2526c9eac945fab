/* Marching cubes kernels for one sample type, included by isosurface.c once
 * per type with MC_T (the C type) and MC_SUF (a name suffix) defined, so the
 * inner loops compare samples without a switch per sample. The rules (what
 * is inside, how a vertex and its normal are computed, in which order) are
 * the reference the CUDA backend reproduces bit for bit: see
 * docs/isosurface.md before changing any expression here. */

#define MC_CAT2(a, b) a##_##b
#define MC_CAT(a, b) MC_CAT2(a, b)
#define MC_FN(name) MC_CAT(name, MC_SUF)

/* Inside test, in double (exact for every sample type): sg = +1 makes
 * "value < iso" inside, sg = -1 makes "value > iso" inside (-v < -iso is
 * exactly v > iso). NaN is never inside. */
#define MC_IN(v) (J->sg * (double)(v) < J->siso)

static inline double MC_FN(val)(const mc_job *J, size_t i, size_t j, size_t k)
{
    return (double)((const MC_T *)J->data)[i + j * J->rs + k * J->ss];
}

/* The inside bits of the cnt <= 64 samples s[0..cnt) (bit t for s[t]). The
 * compare runs in MC_CT (float for every type but f64) against a threshold
 * that makes it exactly equal to the double compare of MC_IN (see
 * mc_float_threshold). */
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

/* Gradient of the field at lattice point (i,j,k), per unit length. Central
 * and forward differences share one formula with different neighbours:
 * (v[ip] - v[im]) / ((ip - im) * h). Sobel: the 3x3x3 Sobel kernel
 * (derivative -1 0 1 along the axis, smoothing 1 2 1 across it), indices
 * clamped to the volume, divided by 16 * (ip - im) * h. */
static void MC_FN(gradient)(const mc_job *J, size_t i, size_t j, size_t k, double g[3])
{
    size_t p[3] = {i, j, k}, n[3] = {J->nx, J->ny, J->nz};
    for (int a = 0; a < 3; a++) {
        size_t ip, im;
        if (J->normals == PM_NORMALS_FORWARD) {
            ip = p[a] + 1 < n[a] ? p[a] + 1 : p[a];
            im = p[a] + 1 < n[a] ? p[a] : p[a] - 1;
        } else {
            ip = p[a] + 1 < n[a] ? p[a] + 1 : p[a];
            im = p[a] > 0 ? p[a] - 1 : 0;
        }
        if (J->normals != PM_NORMALS_SOBEL) {
            const MC_T *c = (const MC_T *)J->data + i + j * J->rs + k * J->ss;
            size_t st = a == 0 ? 1 : a == 1 ? J->rs : J->ss;
            double d = (double)c[(ip - p[a]) * st] - (double)*(c - (p[a] - im) * st);
            g[a] = d / ((double)(ip - im) * J->h[a]);
            continue;
        }
        /* The two axes across a, b < c; c is the outer loop. */
        int b = a == 0 ? 1 : 0, c = a == 2 ? 1 : 2;
        double s = 0.0;
        for (int dc = -1; dc <= 1; dc++) {
            size_t qc = p[c];
            if (dc < 0 && qc > 0) qc--;
            if (dc > 0 && qc + 1 < n[c]) qc++;
            for (int db = -1; db <= 1; db++) {
                size_t qb = p[b];
                if (db < 0 && qb > 0) qb--;
                if (db > 0 && qb + 1 < n[b]) qb++;
                size_t qp[3], qm[3];
                qp[a] = ip;
                qm[a] = im;
                qp[b] = qm[b] = qb;
                qp[c] = qm[c] = qc;
                double w = (double)((2 - (db < 0 ? -db : db)) * (2 - (dc < 0 ? -dc : dc)));
                double d = MC_FN(val)(J, qp[0], qp[1], qp[2]) - MC_FN(val)(J, qm[0], qm[1], qm[2]);
                s = s + w * d;
            }
        }
        g[a] = s / ((16.0 * (double)(ip - im)) * J->h[a]);
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
        size_t ip = p[a] + 1 < n[a] ? p[a] + 1 : p[a];
        size_t im = p[a] > 0 ? p[a] - 1 : 0;
        double d = (double)c[(ip - p[a]) * st[a]] - (double)*(c - (p[a] - im) * st[a]);
        g[a] = d / ((double)(ip - im) * J->h[a]);
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
    double t = (J->iso - vlo) / (vhi - vlo);
    /* Only non-finite samples can leave [0, 1] (or give NaN). */
    if (!(t >= 0.0 && t <= 1.0)) t = 0.5;
    double q[3] = {(double)i, (double)j, (double)k};
    q[axis] = q[axis] + t;
    for (int c = 0; c < 3; c++)
        pos[c] = (float)(J->origin[c] + J->h[c] * q[c]);
    if (!nrm) return;
    double g0[3], g1[3], n[3];
    if (J->normals == PM_NORMALS_CENTRAL) {
        MC_FN(gradient_central)(J, i, j, k, g0);
        MC_FN(gradient_central)(J, i + (axis == 0), j + (axis == 1), k + (axis == 2), g1);
    } else {
        MC_FN(gradient)(J, i, j, k, g0);
        MC_FN(gradient)(J, i + (axis == 0), j + (axis == 1), k + (axis == 2), g1);
    }
    for (int c = 0; c < 3; c++)
        n[c] = (1.0 - t) * g0[c] + t * g1[c];
    /* Out of the inside region: +gradient when inside is below iso. */
    for (int c = 0; c < 3; c++)
        n[c] = J->sg * n[c];
    double l2 = n[0] * n[0] + n[1] * n[1] + n[2] * n[2];
    if (l2 > 0.0 && l2 <= DBL_MAX) {
        double inv = 1.0 / sqrt(l2);
        double m0 = n[0] * inv, m1 = n[1] * inv, m2 = n[2] * inv;
        if (m0 - m0 == 0.0 && m1 - m1 == 0.0 && m2 - m2 == 0.0) {
            nrm[0] = (float)m0;
            nrm[1] = (float)m1;
            nrm[2] = (float)m2;
            return;
        }
    }
    /* Vanishing or non-finite gradient: the edge direction from its inside
     * end to its outside end. */
    float s = MC_IN(d[idx]) ? 1.0f : -1.0f;
    nrm[0] = nrm[1] = nrm[2] = 0.0f;
    nrm[axis] = s;
}

#undef MC_IN
#undef MC_FN
#undef MC_CAT
#undef MC_CAT2
