/* Generates the 256-case marching cubes triangle table (Lorensen and Cline
 * 1987) from first principles instead of copying a published table:
 * segments on each cube face, chained into closed polygons, triangulated
 * without diagonals in the cell's high faces. The rules are face-local, so
 * neighbouring cells agree on every shared face and indexed meshes of closed
 * surfaces are watertight and manifold, also at ambiguous faces. */
#include <string.h>

#include "core/mc_tables.h"
#include "mc_tables_gen.h"

/* Corner position times 1 (0/1 per axis). */
static void corner_pos(int c, int p[3])
{
    p[0] = pmi_mc_corner[c][0];
    p[1] = pmi_mc_corner[c][1];
    p[2] = pmi_mc_corner[c][2];
}

/* Twice the midpoint of edge e (integers). */
static void edge_mid2(int e, int m[3])
{
    int a[3], b[3];
    corner_pos(pmi_mc_edge_corner[e][0], a);
    corner_pos(pmi_mc_edge_corner[e][1], b);
    for (int i = 0; i < 3; i++)
        m[i] = a[i] + b[i];
}

static void cross(const int a[3], const int b[3], int r[3])
{
    r[0] = a[1] * b[2] - a[2] * b[1];
    r[1] = a[2] * b[0] - a[0] * b[2];
    r[2] = a[0] * b[1] - a[1] * b[0];
}

/* Adds the directed segment between edges ea and eb on the face with
 * outward normal nf. nvec points (in the face plane) from the inside part
 * of the face to the outside part. The surface's boundary, walked with the
 * outward surface normal N as "up", keeps the surface (which lies inside
 * the cube, i.e. towards -nf) on its left: N x d = -nf, so d = N x nf. */
static int add_segment(int ea, int eb, const int nvec[3], const int nf[3], int next[12])
{
    int d[3], ma[3], mb[3];
    cross(nvec, nf, d);
    edge_mid2(ea, ma);
    edge_mid2(eb, mb);
    int dot = 0;
    for (int i = 0; i < 3; i++)
        dot += (mb[i] - ma[i]) * d[i];
    if (dot == 0) return -1;
    int from = dot > 0 ? ea : eb, to = dot > 0 ? eb : ea;
    if (next[from] != -1) return -1; /* two segments leave one edge point */
    next[from] = to;
    return 0;
}

/* Whether cube edges a and b lie on a common face of the cell's "high"
 * side (x = 1, y = 1 or z = 1). */
static int on_high_face(int a, int b)
{
    for (int axis = 0; axis < 3; axis++) {
        int ok = 1;
        for (int q = 0; q < 2; q++) {
            if (pmi_mc_corner[pmi_mc_edge_corner[a][q]][axis] != 1) ok = 0;
            if (pmi_mc_corner[pmi_mc_edge_corner[b][q]][axis] != 1) ok = 0;
        }
        if (ok) return 1;
    }
    return 0;
}

/* Triangulates the polygon v[0..n-1] (loop order) into out (3 per
 * triangle). A diagonal joining two vertices on one cube face lies in that
 * face, which the neighbouring cell shares; if both cells used the same
 * in-face diagonal, four triangles would meet at it (a non-manifold edge,
 * possible at ambiguous faces). So diagonals may lie in the cell's low
 * faces only, never in its high faces: of two cells sharing a face, only
 * the one for which it is the low face can use it. The first valid
 * triangulation in a fixed search order is taken: the triangle on side
 * v0-v1 with apex v2, v3, ..., then the two remaining parts recursively. */
static int triangulate(const int *v, int n, int8_t *out)
{
    if (n < 3) return 1;
    if (n == 3) {
        out[0] = (int8_t)v[0];
        out[1] = (int8_t)v[1];
        out[2] = (int8_t)v[2];
        return 1;
    }
    for (int m = 2; m < n; m++) {
        /* New diagonals: v1-vm (unless m == 2) and vm-v0 (unless m == n-1). */
        if (m > 2 && on_high_face(v[1], v[m])) continue;
        if (m < n - 1 && on_high_face(v[m], v[0])) continue;
        int8_t tmp[15];
        tmp[0] = (int8_t)v[0];
        tmp[1] = (int8_t)v[1];
        tmp[2] = (int8_t)v[m];
        int a[12], na = 0, b[12], nb = 0;
        for (int i = 1; i <= m; i++)
            a[na++] = v[i];
        for (int i = m; i < n; i++)
            b[nb++] = v[i];
        b[nb++] = v[0];
        if (!triangulate(a, na, tmp + 3)) continue;
        if (!triangulate(b, nb, tmp + 3 + 3 * (na >= 3 ? na - 2 : 0))) continue;
        memcpy(out, tmp, (size_t)(3 * (n - 2)));
        return 1;
    }
    return 0;
}

static int generate_case(int cs, int8_t out[16], uint8_t *count)
{
    int next[12];
    for (int e = 0; e < 12; e++)
        next[e] = -1;
    memset(out, -1, 16);
    *count = 0;
    for (int axis = 0; axis < 3; axis++) {
        for (int side = 0; side < 2; side++) {
            int nf[3] = {0, 0, 0};
            nf[axis] = side ? 1 : -1;
            int corners[4], nc = 0, edges[4], ne = 0;
            for (int c = 0; c < 8; c++)
                if (pmi_mc_corner[c][axis] == side) corners[nc++] = c;
            for (int e = 0; e < 12; e++) {
                int c0 = pmi_mc_edge_corner[e][0], c1 = pmi_mc_edge_corner[e][1];
                if (pmi_mc_corner[c0][axis] != side || pmi_mc_corner[c1][axis] != side) continue;
                if (((cs >> c0) & 1) != ((cs >> c1) & 1)) edges[ne++] = e;
            }
            if (ne == 0) continue;
            if (ne == 2) {
                /* N ~ mean(outside corners) - mean(inside corners), scaled
                 * by the counts to stay in integers. */
                int nin = 0, nout = 0, sin[3] = {0, 0, 0}, sout[3] = {0, 0, 0};
                for (int q = 0; q < 4; q++) {
                    int p[3];
                    corner_pos(corners[q], p);
                    int in = (cs >> corners[q]) & 1;
                    for (int i = 0; i < 3; i++) {
                        if (in)
                            sin[i] += p[i];
                        else
                            sout[i] += p[i];
                    }
                    if (in)
                        nin++;
                    else
                        nout++;
                }
                int nvec[3];
                for (int i = 0; i < 3; i++)
                    nvec[i] = nin * sout[i] - nout * sin[i];
                nvec[axis] = 0;
                if (add_segment(edges[0], edges[1], nvec, nf, next)) return -1;
            } else if (ne == 4) {
                /* Ambiguous face (diagonal corners inside): always separate
                 * the inside corners, each cut off by its own segment
                 * joining its two face edges. */
                for (int q = 0; q < 4; q++) {
                    int c = corners[q];
                    if (!((cs >> c) & 1)) continue;
                    int pair[2], np = 0;
                    for (int k = 0; k < 4; k++)
                        if (pmi_mc_edge_corner[edges[k]][0] == c ||
                            pmi_mc_edge_corner[edges[k]][1] == c)
                            pair[np++] = edges[k];
                    if (np != 2) return -1;
                    int p[3], nvec[3];
                    corner_pos(c, p);
                    /* Twice (face centre - corner) in the face plane. */
                    for (int i = 0; i < 3; i++)
                        nvec[i] = 1 - 2 * p[i];
                    nvec[axis] = 0;
                    if (add_segment(pair[0], pair[1], nvec, nf, next)) return -1;
                }
            } else {
                return -1;
            }
        }
    }
    /* Every crossing edge must have exactly one successor and predecessor. */
    int indeg[12] = {0};
    for (int e = 0; e < 12; e++)
        if (next[e] >= 0) indeg[next[e]]++;
    for (int e = 0; e < 12; e++)
        if ((next[e] >= 0) != (indeg[e] == 1) || indeg[e] > 1) return -1;
    /* Polygons in order of their smallest edge, each triangulated as below,
     * following the loop direction (which keeps the orientation). */
    int used[12] = {0}, nt = 0;
    for (int e = 0; e < 12; e++) {
        if (next[e] < 0 || used[e]) continue;
        int loop[12], n = 0, cur = e;
        do {
            if (n >= 12) return -1;
            loop[n++] = cur;
            used[cur] = 1;
            cur = next[cur];
        } while (cur != e);
        if (n < 3 || nt + n - 2 > 5) return -1;
        if (!triangulate(loop, n, out + 3 * nt)) return -1;
        nt += n - 2;
    }
    *count = (uint8_t)nt;
    return 0;
}

int mc_generate_tables(int8_t tri[256][16], uint8_t count[256])
{
    for (int cs = 0; cs < 256; cs++)
        if (generate_case(cs, tri[cs], &count[cs])) return -1;
    return 0;
}
