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

/* Pass 1: first and last x-edge crossing of one lattice row (the Flying
 * Edges trim, Schroeder et al. 2015). Uniform rows store lo == hi. */
static void MC_FN(trim_row)(const mc_job *J, size_t L, uint32_t *tr)
{
    size_t j = L % J->ny, k = L / J->ny, nx = J->nx;
    const MC_T *row = (const MC_T *)J->data + j * J->rs + k * J->ss;
    uint32_t in0 = (uint32_t)MC_IN(row[0]);
    size_t i = 1;
    while (i < nx && (uint32_t)MC_IN(row[i]) == in0) i++;
    if (i == nx) {
        tr[0] = in0 << 31;
        tr[1] = in0 << 31;
        return;
    }
    size_t lo = i - 1;
    uint32_t inl = (uint32_t)MC_IN(row[nx - 1]);
    size_t r = nx - 2;
    while ((uint32_t)MC_IN(row[r]) == inl) r--;
    tr[0] = (uint32_t)lo | (in0 << 31);
    tr[1] = (uint32_t)(r + 1) | (inl << 31);
}

/* The 4 corner bits of column i of a cell row: bit 0 row (j,k), bit 1 row
 * (j+1,k), bit 2 row (j,k+1), bit 3 row (j+1,k+1). */
#define MC_COL(i)                                                                           \
    ((unsigned)MC_IN(r00[i]) | ((unsigned)MC_IN(r10[i]) << 1) |                             \
     ((unsigned)MC_IN(r01[i]) << 2) | ((unsigned)MC_IN(r11[i]) << 3))

#define MC_ROWS(j, k)                                                                       \
    const MC_T *r00 = (const MC_T *)J->data + (j) * J->rs + (k) * J->ss;                     \
    const MC_T *r10 = r00 + J->rs, *r01 = r00 + J->ss, *r11 = r01 + J->rs

/* Pass 2: triangles and active cells of cell rows [r0, r1). */
static void MC_FN(count_cells)(const mc_job *J, size_t r0, size_t r1, uint64_t *tris,
                               uint64_t *active)
{
    uint64_t nt = 0, na = 0;
    for (size_t r = r0; r < r1; r++) {
        size_t j = r % (J->ny - 1), k = r / (J->ny - 1), a, b;
        if (!mc_cell_range(J, j, k, &a, &b)) continue;
        MC_ROWS(j, k);
        unsigned prev = MC_COL(a);
        for (size_t i = a; i < b; i++) {
            unsigned next = MC_COL(i + 1);
            unsigned cs = mc_left_bits[prev] | mc_right_bits[next];
            nt += pmi_mc_tri_count[cs];
            na += (cs != 0 && cs != 255);
            prev = next;
        }
    }
    *tris = nt;
    *active = na;
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
            size_t qp[3] = {i, j, k}, qm[3] = {i, j, k};
            qp[a] = ip;
            qm[a] = im;
            double d = MC_FN(val)(J, qp[0], qp[1], qp[2]) - MC_FN(val)(J, qm[0], qm[1], qm[2]);
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
                double d =
                    MC_FN(val)(J, qp[0], qp[1], qp[2]) - MC_FN(val)(J, qm[0], qm[1], qm[2]);
                s = s + w * d;
            }
        }
        g[a] = s / ((16.0 * (double)(ip - im)) * J->h[a]);
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
    for (int c = 0; c < 3; c++) pos[c] = (float)(J->origin[c] + J->h[c] * q[c]);
    if (!nrm) return;
    double g0[3], g1[3], n[3];
    MC_FN(gradient)(J, i, j, k, g0);
    MC_FN(gradient)(J, i + (axis == 0), j + (axis == 1), k + (axis == 2), g1);
    for (int c = 0; c < 3; c++) n[c] = (1.0 - t) * g0[c] + t * g1[c];
    /* Out of the inside region: +gradient when inside is below iso. */
    for (int c = 0; c < 3; c++) n[c] = J->sg * n[c];
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

/* Owned edges of lattice row L = (j,k): point i owns its +x, +y and +z
 * edges. Walks the points that can have a crossing, in order, and either
 * counts the crossings (out == NULL, ids == NULL), writes their vertices
 * from slot `first` on (out != NULL), or records for each point the id of
 * its x, y and z vertex (ids != NULL, points below `stop` only). */
static uint64_t MC_FN(row_edges)(const mc_job *J, size_t L, uint64_t first, const mc_dest *out,
                                 uint32_t *ids, size_t stop)
{
    size_t j = L % J->ny, k = L / J->ny, a, b;
    if (!mc_point_range(J, j, k, &a, &b)) return 0;
    if (ids && b > stop) b = stop;
    const MC_T *row = (const MC_T *)J->data + j * J->rs + k * J->ss;
    const MC_T *ry = j + 1 < J->ny ? row + J->rs : NULL;
    const MC_T *rz = k + 1 < J->nz ? row + J->ss : NULL;
    uint64_t id = first;
    unsigned cur = (unsigned)MC_IN(row[a]);
    for (size_t i = a; i < b; i++) {
        unsigned nxt = i + 1 < J->nx ? (unsigned)MC_IN(row[i + 1]) : cur;
        unsigned xc = nxt != cur;
        unsigned yc = ry ? (unsigned)MC_IN(ry[i]) != cur : 0;
        unsigned zc = rz ? (unsigned)MC_IN(rz[i]) != cur : 0;
        if (ids) {
            ids[3 * i] = (uint32_t)id;
            ids[3 * i + 1] = (uint32_t)(id + xc);
            ids[3 * i + 2] = (uint32_t)(id + xc + yc);
        } else if (out) {
            /* Slots past the caller's capacity are skipped (TRUNCATED). */
            uint64_t s = id;
            if (xc && s < out->vertex_limit)
                MC_FN(vertex)(J, i, j, k, 0, out->positions + 3 * s,
                              out->normals ? out->normals + 3 * s : NULL);
            s += xc;
            if (yc && s < out->vertex_limit)
                MC_FN(vertex)(J, i, j, k, 1, out->positions + 3 * s,
                              out->normals ? out->normals + 3 * s : NULL);
            s += yc;
            if (zc && s < out->vertex_limit)
                MC_FN(vertex)(J, i, j, k, 2, out->positions + 3 * s,
                              out->normals ? out->normals + 3 * s : NULL);
        }
        id += xc + yc + zc;
        cur = nxt;
    }
    return id - first;
}

/* Pass 3: the triangles of cell rows [r0, r1), the first being number t0.
 * Soup: vertices 3t..3t+2 computed per cell (each crossing edge once).
 * Indexed: indices into the vertices of the 4 lattice rows around the cell
 * row, from their row offsets voff. scratch: 12 * nx uint32 (indexed). */
static void MC_FN(write_cells)(const mc_job *J, size_t r0, size_t r1, uint64_t t0,
                               const mc_dest *D, uint32_t *scratch)
{
    uint64_t t = t0;
    float cp[12][3], cn[12][3];
    for (size_t r = r0; r < r1; r++) {
        size_t j = r % (J->ny - 1), k = r / (J->ny - 1), a, b;
        if (!mc_cell_range(J, j, k, &a, &b)) continue;
        if (t >= D->tri_limit) return;
        MC_ROWS(j, k);
        uint32_t *ids[4];
        if (D->indexed) {
            for (int q = 0; q < 4; q++) {
                size_t L = (j + (q & 1)) + (k + (q >> 1)) * J->ny;
                ids[q] = scratch + (size_t)q * 3 * J->nx;
                MC_FN(row_edges)(J, L, D->voff[L], NULL, ids[q], b + 1);
            }
        }
        unsigned prev = MC_COL(a);
        for (size_t i = a; i < b; i++) {
            unsigned next = MC_COL(i + 1);
            unsigned cs = mc_left_bits[prev] | mc_right_bits[next];
            prev = next;
            unsigned n = pmi_mc_tri_count[cs];
            if (!n) continue;
            const int8_t *tab = pmi_mc_tri_table[cs];
            if (D->indexed) {
                for (unsigned v = 0; v < 3 * n; v++) {
                    if (t + v / 3 >= D->tri_limit) return;
                    int e = tab[v];
                    D->indices[3 * t + v] =
                        ids[mc_edge_row[e]][3 * (i + mc_edge_dx[e]) + pmi_mc_edge_axis[e]];
                }
                t += n;
                continue;
            }
            /* Soup: the crossing edges' vertices once, then copies. */
            for (int e = 0; e < 12; e++) {
                unsigned c0 = pmi_mc_edge_corner[e][0], c1 = pmi_mc_edge_corner[e][1];
                if (((cs >> c0) & 1) == ((cs >> c1) & 1)) continue;
                MC_FN(vertex)(J, i + pmi_mc_corner[c0][0], j + pmi_mc_corner[c0][1],
                              k + pmi_mc_corner[c0][2], pmi_mc_edge_axis[e], cp[e],
                              D->normals ? cn[e] : NULL);
            }
            for (unsigned v = 0; v < 3 * n; v++) {
                if (t + v / 3 >= D->tri_limit) return;
                int e = tab[v];
                memcpy(D->positions + 3 * (3 * t + v), cp[e], sizeof cp[e]);
                if (D->normals) memcpy(D->normals + 3 * (3 * t + v), cn[e], sizeof cn[e]);
            }
            t += n;
        }
    }
}

#undef MC_COL
#undef MC_ROWS
#undef MC_IN
#undef MC_FN
#undef MC_CAT
#undef MC_CAT2
