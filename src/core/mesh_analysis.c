/* Mesh analysis: soups welded by exact position (open-addressing hash, first
 * occurrence wins), undirected edges by a counting sort on the lower vertex
 * (compressed rows, no O(n^2)), union-find (Tarjan 1975) for components and
 * for the triangle fans around each vertex, area, and the enclosed volume by
 * the divergence theorem (sum of signed tetrahedra). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/util.h"

/* ------------------------------------------------------------------------ */
/* Union-find with path halving; deterministic (union by index).            */
/* ------------------------------------------------------------------------ */

static uint32_t uf_find(uint32_t *p, uint32_t x)
{
    while (p[x] != x) {
        p[x] = p[p[x]];
        x = p[x];
    }
    return x;
}

static void uf_union(uint32_t *p, uint32_t a, uint32_t b)
{
    a = uf_find(p, a);
    b = uf_find(p, b);
    /* The smaller index becomes the root: the result does not depend on
     * the order of the unions. */
    if (a < b)
        p[b] = a;
    else if (b < a)
        p[a] = b;
}

/* ------------------------------------------------------------------------ */
/* Welding                                                                   */
/* ------------------------------------------------------------------------ */

/* Bit pattern of a coordinate with -0 folded onto +0 (equal positions must
 * weld); NaNs weld only with the identical pattern. */
static uint32_t coord_bits(float f)
{
    if (f == 0.0f) f = 0.0f;
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

/* MurmurHash3's 64-bit finaliser: every input bit reaches the high bits. */
static uint64_t fmix64(uint64_t h)
{
    h ^= h >> 33;
    h *= 0xFF51AFD7ED558CCDull;
    h ^= h >> 33;
    h *= 0xC4CEB9FE1A85EC53ull;
    h ^= h >> 33;
    return h;
}

static uint64_t hash3(const uint32_t k[3])
{
    return fmix64(((uint64_t)k[0] << 32 | k[1]) ^ fmix64(k[2] + 0x9E3779B97F4A7C15ull));
}

/* Maps every vertex of an n-vertex soup to the id of the first vertex at
 * the same position (ids numbered in order of first appearance). */
static pm_status weld(const float *pos, size_t n, uint32_t *id, size_t *unique)
{
    size_t cap = 1024;
    int bits = 10;
    while (cap < 2 * n) {
        cap *= 2;
        bits++;
    }
    uint32_t *slot = calloc(cap, sizeof *slot); /* 1 + unique id; 0 = empty */
    uint32_t *first = malloc((n ? n : 1) * sizeof *first);
    if (!slot || !first) {
        free(slot);
        free(first);
        return pmi_error(PM_STATUS_OUT_OF_MEMORY, "pm_mesh_analyze: cannot allocate %zu bytes",
                         cap * sizeof *slot + n * sizeof *first);
    }
    size_t u = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t k[3] = {coord_bits(pos[3 * i]), coord_bits(pos[3 * i + 1]),
                         coord_bits(pos[3 * i + 2])};
        size_t h = (size_t)(hash3(k) >> (64 - bits)); /* the best-mixed bits */
        for (;;) {
            uint32_t s = slot[h];
            if (s == 0) {
                slot[h] = (uint32_t)(u + 1);
                first[u] = (uint32_t)i;
                id[i] = (uint32_t)u++;
                break;
            }
            const float *q = pos + 3 * (size_t)first[s - 1];
            if (coord_bits(q[0]) == k[0] && coord_bits(q[1]) == k[1] && coord_bits(q[2]) == k[2]) {
                id[i] = s - 1;
                break;
            }
            h = (h + 1) & (cap - 1);
        }
    }
    free(slot);
    free(first);
    *unique = u;
    return PM_STATUS_OK;
}

/* ------------------------------------------------------------------------ */
/* Analysis                                                                  */
/* ------------------------------------------------------------------------ */

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* Sorts a bucket of (other vertex << 32 | half-edge) keys. */
static void sort_bucket(uint64_t *e, size_t n)
{
    if (n > 24) {
        qsort(e, n, sizeof *e, cmp_u64);
        return;
    }
    for (size_t i = 1; i < n; i++) {
        uint64_t x = e[i];
        size_t j = i;
        for (; j > 0 && e[j - 1] > x; j--)
            e[j] = e[j - 1];
        e[j] = x;
    }
}

/* Corner of vertex v in the triangle of half-edge he (he = 3t + c runs from
 * corner c to corner c+1 mod 3). */
static uint32_t corner_of(const uint32_t *tri, uint32_t he, uint32_t v)
{
    uint32_t t3 = he - he % 3, c = he % 3;
    return tri[he] == v ? he : t3 + (c + 1) % 3;
}

pm_status pm_mesh_analyze(const pm_mesh *mesh, pm_mesh_report *rep)
{
    pmi_clear_error();
    if (!mesh || !rep)
        return pmi_error(PM_STATUS_INVALID_ARGUMENT, "pm_mesh_analyze: NULL argument");
    memset(rep, 0, sizeof *rep);
    if (mesh->in_context_memory)
        return pmi_error(PM_STATUS_INVALID_ARGUMENT,
                         "pm_mesh_analyze: the mesh is in context memory; download it first");
    const size_t nv = mesh->num_vertices, nt = mesh->num_triangles;
    size_t n3;
    if (!pmi_mul_size(nt, 3, &n3) || n3 > UINT32_MAX)
        return pmi_error(PM_STATUS_OVERFLOW,
                         "pm_mesh_analyze: %zu triangles: more than 2^32 corners are not supported",
                         nt);
    if (nv > UINT32_MAX)
        return pmi_error(PM_STATUS_OVERFLOW,
                         "pm_mesh_analyze: %zu vertices: more than 2^32 are not supported", nv);
    if (nv && !mesh->positions)
        return pmi_error(PM_STATUS_INVALID_ARGUMENT, "pm_mesh_analyze: positions are NULL");
    if (!mesh->indices && nv != n3)
        return pmi_error(PM_STATUS_INVALID_ARGUMENT,
                         "pm_mesh_analyze: a soup (indices NULL) needs 3 vertices per triangle, "
                         "got %zu vertices for %zu triangles",
                         nv, nt);
    if (mesh->indices)
        for (size_t i = 0; i < n3; i++)
            if (mesh->indices[i] >= nv)
                return pmi_error(PM_STATUS_INVALID_ARGUMENT,
                                 "pm_mesh_analyze: triangle %zu refers to vertex %u of %zu", i / 3,
                                 mesh->indices[i], nv);
    rep->num_triangles = nt;

    /* Bounding box of all vertices. */
    for (int a = 0; a < 3; a++) {
        rep->bbox_min[a] = nv ? INFINITY : 0;
        rep->bbox_max[a] = nv ? -INFINITY : 0;
    }
    for (size_t i = 0; i < nv; i++)
        for (int a = 0; a < 3; a++) {
            double x = mesh->positions[3 * i + (size_t)a];
            if (x < rep->bbox_min[a]) rep->bbox_min[a] = x;
            if (x > rep->bbox_max[a]) rep->bbox_max[a] = x;
        }

    pm_status s = PM_STATUS_OK;
    uint32_t *welded = NULL, *parent = NULL, *cp = NULL;
    size_t *row = NULL;
    uint64_t *ent = NULL;
    uint8_t *flags = NULL;
    const uint32_t *tri = mesh->indices;
    size_t V = nv;
    if (!tri) {
        welded = malloc((n3 ? n3 : 1) * sizeof *welded);
        if (!welded) {
            s = pmi_error(PM_STATUS_OUT_OF_MEMORY, "pm_mesh_analyze: cannot allocate");
            goto done;
        }
        if ((s = weld(mesh->positions, n3, welded, &V)) != PM_STATUS_OK) goto done;
        tri = welded;
    }

    /* Geometry, relative to the box centre (keeps the volume sum accurate
     * far from the origin), and degenerate triangles. Triangles with a
     * repeated vertex carry no edges: they are left out of the topology. */
    double c0[3];
    for (int a = 0; a < 3; a++)
        c0[a] = nv ? 0.5 * (rep->bbox_min[a] + rep->bbox_max[a]) : 0;
    flags = calloc(nt + V + 1, 1); /* per triangle: 1 = repeated vertex; then per vertex */
    parent = malloc((V ? V : 1) * sizeof *parent);
    cp = malloc((n3 ? n3 : 1) * sizeof *cp);
    row = calloc(V + 1, sizeof *row);
    if (!flags || !parent || !cp || !row) {
        s = pmi_error(PM_STATUS_OUT_OF_MEMORY, "pm_mesh_analyze: cannot allocate");
        goto done;
    }
    uint8_t *bad_tri = flags, *vflag = flags + nt; /* vflag: 1 used, 2 more than one fan */
    double area = 0, vol = 0;
    size_t F = 0;
    for (size_t t = 0; t < nt; t++) {
        const uint32_t *v = tri + 3 * t;
        double p[3][3];
        for (int c = 0; c < 3; c++) {
            size_t src = mesh->indices ? v[c] : 3 * t + (size_t)c;
            for (int a = 0; a < 3; a++)
                p[c][a] = (double)mesh->positions[3 * src + (size_t)a] - c0[a];
        }
        double e1[3] = {p[1][0] - p[0][0], p[1][1] - p[0][1], p[1][2] - p[0][2]};
        double e2[3] = {p[2][0] - p[0][0], p[2][1] - p[0][1], p[2][2] - p[0][2]};
        double n[3] = {e1[1] * e2[2] - e1[2] * e2[1], e1[2] * e2[0] - e1[0] * e2[2],
                       e1[0] * e2[1] - e1[1] * e2[0]};
        double nn = sqrt(n[0] * n[0] + n[1] * n[1] + n[2] * n[2]);
        int repeated = v[0] == v[1] || v[1] == v[2] || v[0] == v[2];
        if (repeated || nn == 0) rep->degenerate_triangles++;
        if (repeated) {
            bad_tri[t] = 1;
            continue;
        }
        F++;
        area += 0.5 * nn;
        /* p0 . (p1 x p2) / 6 */
        vol += (p[0][0] * (p[1][1] * p[2][2] - p[1][2] * p[2][1]) +
                p[0][1] * (p[1][2] * p[2][0] - p[1][0] * p[2][2]) +
                p[0][2] * (p[1][0] * p[2][1] - p[1][1] * p[2][0])) /
               6.0;
        for (int c = 0; c < 3; c++) {
            vflag[v[c]] = 1;
            uint32_t lo = v[c] < v[(c + 1) % 3] ? v[c] : v[(c + 1) % 3];
            row[lo + 1]++;
        }
    }
    rep->area = area;
    rep->volume = vol;

    /* Components: union-find over the vertices of the kept triangles. */
    for (size_t i = 0; i < V; i++)
        parent[i] = (uint32_t)i;
    for (size_t t = 0; t < nt; t++)
        if (!bad_tri[t]) {
            uf_union(parent, tri[3 * t], tri[3 * t + 1]);
            uf_union(parent, tri[3 * t], tri[3 * t + 2]);
        }
    size_t used = 0;
    for (size_t i = 0; i < V; i++)
        if (vflag[i]) {
            used++;
            if (uf_find(parent, (uint32_t)i) == i) rep->components++;
        }

    /* Undirected edges: half-edges bucketed by their lower vertex (counting
     * sort), each bucket sorted by (upper vertex, half-edge). */
    for (size_t i = 0; i < V; i++)
        row[i + 1] += row[i];
    size_t nhe = row[V];
    ent = malloc((nhe ? nhe : 1) * sizeof *ent);
    if (!ent) {
        s = pmi_error(PM_STATUS_OUT_OF_MEMORY, "pm_mesh_analyze: cannot allocate %zu bytes",
                      nhe * sizeof *ent);
        goto done;
    }
    for (size_t t = 0; t < nt; t++) {
        if (bad_tri[t]) continue;
        for (int c = 0; c < 3; c++) {
            uint32_t a = tri[3 * t + (size_t)c], b = tri[3 * t + (size_t)(c + 1) % 3];
            uint32_t lo = a < b ? a : b, hi = a < b ? b : a;
            ent[row[lo]++] = (uint64_t)hi << 32 | (uint32_t)(3 * t + (size_t)c);
        }
    }
    /* row[i] now holds the end of bucket i; shift back to starts. */
    for (size_t i = V; i > 0; i--)
        row[i] = row[i - 1];
    row[0] = 0;
    for (size_t i = 0; i < n3; i++)
        cp[i] = (uint32_t)i;
    for (size_t u = 0; u < V; u++) {
        uint64_t *e = ent + row[u];
        size_t n = row[u + 1] - row[u];
        sort_bucket(e, n);
        for (size_t g = 0; g < n;) {
            size_t h = g + 1;
            while (h < n && e[h] >> 32 == e[g] >> 32)
                h++;
            size_t k = h - g;
            rep->num_edges++;
            if (k == 1) {
                rep->boundary_edges++;
            } else if (k > 2) {
                rep->nonmanifold_edges++;
            } else {
                uint32_t h1 = (uint32_t)e[g], h2 = (uint32_t)e[g + 1];
                uint32_t w = (uint32_t)(e[g] >> 32);
                /* Consistently oriented neighbours traverse the edge in
                 * opposite directions. */
                if ((tri[h1] == u) == (tri[h2] == u)) rep->misoriented_edges++;
                uf_union(cp, corner_of(tri, h1, (uint32_t)u), corner_of(tri, h2, (uint32_t)u));
                uf_union(cp, corner_of(tri, h1, w), corner_of(tri, h2, w));
            }
            g = h;
        }
    }
    /* Each root corner is one fan (disc or half-disc) around its vertex;
     * a second one makes the vertex non-manifold. */
    for (size_t t = 0; t < nt; t++) {
        if (bad_tri[t]) continue;
        for (int c = 0; c < 3; c++) {
            uint32_t i = (uint32_t)(3 * t + (size_t)c);
            if (uf_find(cp, i) != i) continue;
            uint8_t *f = &vflag[tri[i]];
            if (*f == 2) rep->nonmanifold_vertices++;
            if (*f < 3) (*f)++;
        }
    }
    rep->num_vertices = used;
    rep->euler = (long long)used - (long long)rep->num_edges + (long long)F;
    rep->closed = F > 0 && rep->boundary_edges == 0 && rep->nonmanifold_edges == 0;
    rep->manifold = rep->nonmanifold_edges == 0 && rep->nonmanifold_vertices == 0;
    rep->oriented = rep->misoriented_edges == 0;
done:
    free(welded);
    free(parent);
    free(cp);
    free(row);
    free(ent);
    free(flags);
    return s;
}
