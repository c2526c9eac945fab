/* Loop subdivision (Loop 1987) as a stream of triangles, adaptive by
 * filtering finished triangles out of the stream at each level (Horn 2005,
 * GPU Gems 2 ch. 36), closed by red-green triangulation (Seeger et al.
 * 2001). Every per-element step of the algorithm is here once, compiled by
 * gcc (src/cpu/subdivide.c) and nvcc (src/cuda/subdivide.cu), so the
 * backends compute the same bits (both build without contraction): the
 * backends only run pmi_loop_step over index ranges; the level loop is in
 * src/core/subdivide.c. docs/subdivide.md states the rules. Internal. */
#ifndef PM_CORE_LOOP_RULES_H
#define PM_CORE_LOOP_RULES_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include "core/atomics.h"

#ifdef __CUDACC__
#define PMI_LHD static __host__ __device__ __forceinline__
#else
#define PMI_LHD static inline
#endif
/* Before a loop whose body the GPU should hold once, not unrolled. */
#ifdef __CUDA_ARCH__
#define PMI_LOOP_ONCE _Pragma("unroll 1")
#else
#define PMI_LOOP_ONCE
#endif

/* Twin of a half-edge on the boundary; start corner of a vertex that
 * never moves (non-manifold, unused, or frozen by a finished triangle). */
#define PMI_LOOP_NONE 0xFFFFFFFFu
/* Twin of a half-edge whose neighbour triangle has left the stream. */
#define PMI_LOOP_FROZEN 0xFFFFFFFEu
/* The largest stream: its half-edge indices stay below PMI_LOOP_FROZEN. */
#define PMI_LOOP_MAX_TRIANGLES 1431655764u

/* The steps, each run over an index range by a backend's subdivide_step. */
enum pmi_loop_step_id {
    PMI_LOOP_CHECK_TRI = 0, /* per triangle: indices in range, no repeated vertex */
    PMI_LOOP_CSR_COUNT,     /* per triangle: count[v]++ for its corners */
    PMI_LOOP_CSR_FILL,      /* per corner: list[off[v] + cursor[v]++] = corner */
    PMI_LOOP_CSR_SORT,      /* per vertex: sort its corner list */
    PMI_LOOP_TWIN,          /* per vertex: sort its corner list, the twins
                               (and owner flags) of the half-edges leaving it */
    PMI_LOOP_VSTART,        /* per vertex: first corner, or NONE if not a disc */
    PMI_LOOP_CSR_NORMAL,    /* per vertex: normal over its corner list */
    PMI_LOOP_WALK_VERTEX,   /* per vertex: criterion normal, even move along it */
    PMI_LOOP_SPLIT,         /* per triangle: its half-edges' split and owner flags */
    PMI_LOOP_PROMOTE,       /* per triangle: its third edge split, then the chain;
                               the backend repeats its passes until one changes
                               no edge (the closure), or returns
                               PM_STATUS_UNSUPPORTED (then PROMOTE_PASS) */
    PMI_LOOP_MARK_ENDS,     /* per half-edge: a split edge's ends in vsplit */
    PMI_LOOP_CLASSIFY,      /* per triangle: emitted count and red flag */
    PMI_LOOP_EVEN,          /* per vertex: the even rule or a copy, next start corner */
    PMI_LOOP_ODD,           /* per half-edge that owns a split edge: the odd rule */
    PMI_LOOP_EMIT,          /* per triangle: finished/green output, red children */
    PMI_LOOP_COPY_U32,      /* per element: dst[i] = src[i] */
    PMI_LOOP_ZERO_U32,      /* per element: dst[i] = 0 */
    /* uniform subdivision (every edge splits; src/core/subdivide.c) */
    PMI_LOOP_EVEN_UNIFORM, /* per vertex: even rule or copy, next start corner
                              (and, with pos_out2, the position two levels on) */
    PMI_LOOP_RED_UNIFORM,  /* per triangle: odd rule on owned edges, children,
                              their twins and owner numbers */
    PMI_LOOP_NORMAL_OLD,   /* per vertex of the stream three levels before the
                              output (the input with one to three levels):
                              its output normal */
    PMI_LOOP_NORMAL_NEW,   /* per half-edge owning an edge: the output normal of
                              the vertex created on it */
    PMI_LOOP_EVEN_NEW,     /* per half-edge of the previous stream owning an edge:
                              the even rule for the vertex it created (and,
                              with pos_out2, its position two levels on) */
    PMI_LOOP_RED_LAST2,    /* per triangle of the previous stream: the last two
                              splits at once (output triangles, odd rule) */
    PMI_LOOP_NORMAL_PATCH, /* per triangle of the stream two levels before the
                              output: the normals of the vertices the last two
                              levels created in it and on the edges it owns */
    PMI_LOOP_PROMOTE_PASS, /* one pass of PROMOTE, setting changed[0] (the level
                              loop repeats it: a GPU without cooperative launch) */
    PMI_LOOP_NUM_STEPS
};

/* Everything a step reads or writes (context memory), by value. */
typedef struct pmi_loop_args {
    /* the working stream */
    uint32_t n;      /* triangles */
    uint32_t *tri;   /* 3n vertex indices */
    uint32_t *twin;  /* 3n twins (NONE, FROZEN) */
    uint8_t *split;  /* 3n */
    uint32_t *owner; /* 3n: owner flags, scanned in place into edge numbers */
    uint32_t *emit;  /* n: emitted triangles, scanned into offsets */
    uint32_t *red;   /* n: red flags, scanned in place into child
                        offsets / 4 */
    /* the next stream (uniform: twin_next, owner_next and vstart_new may
     * be NULL on the last level, nobody reads them, and vstart_new on the
     * level before RED_LAST2's, which walks no fan; adaptive: on the level
     * before the last tri_next points into the output and twin_next is
     * NULL, since the last stream goes out unchanged) */
    uint32_t *tri_next, *twin_next;
    uint32_t *owner_next; /* uniform: the next stream's owner numbers */
    /* output triangles of this level (3 indices each) */
    uint32_t *out_tri;
    /* vertices: nv now; the arrays for nv + edges (new) and the old ones */
    uint32_t nv;
    const float *pos;     /* 3nv, read */
    float *pos_new;       /* 3(nv + edges), every entry written by the level's
                             steps (nothing copied in) */
    float *nrm;           /* criterion normals 3(nv + edges) or NULL */
    double *evdev;        /* nv: the even rule's move along the normal, or NULL */
    float *weight;        /* 1 per vertex (nv + edges) or NULL */
    uint32_t *vstart;     /* nv: the corner each vertex is walked from (read;
                             uniform, first level: written, see vstart_lists) */
    uint32_t *vstart_new; /* nv + edges: the next stream's, every entry
                             written by the level's steps */
    uint8_t *vsplit;      /* nv: set when an edge at the vertex splits, or NULL
                             (not marked: EVEN walks every fan) */
    /* uniform: the stream before this one (its triangles, twins and owner
     * numbers) and its vertex count, for PMI_LOOP_EVEN_NEW; its start
     * corners for PMI_LOOP_NORMAL_OLD */
    const uint32_t *ptri, *ptwin, *powner, *pvstart;
    uint32_t pnv;
    /* uniform, from three levels: the twins, owner numbers and vertex count
     * of the stream three levels before the output, for the normals'
     * PMI_LOOP_NORMAL_NEW */
    const uint32_t *pptwin, *ppowner;
    uint32_t ppnv;
    /* uniform, the level before RED_LAST2's: the output's positions, where
     * PMI_LOOP_EVEN_UNIFORM and PMI_LOOP_EVEN_NEW also put the positions
     * their vertices take two levels on (NULL on other levels) */
    float *pos_out2;
    /* adaptive criteria: squared length limit (0 = off), angle limit,
     * deviation limit, and whether any criterion is set (then triangles
     * with 2 split edges are promoted to red); last: no split at this
     * level */
    double max_edge2;
    double max_angle; /* radians (0 = off) */
    double max_dev;   /* length (0 = off) */
    int adaptive;
    int last;
    uint32_t *changed; /* promotion: 2 words the backend's passes use */
    /* vertex -> corner lists */
    uint32_t *count, *offset, *list;
    /* uniform, first level: PMI_LOOP_EVEN_UNIFORM sets each vertex's start
     * corner from its corner list as PMI_LOOP_VSTART does, from the walk
     * its even rule takes anyway */
    int vstart_lists;
    /* the mesh whose normals PMI_LOOP_CSR_NORMAL, PMI_LOOP_NORMAL_OLD, NEW
     * and PATCH compute */
    const float *npos;
    const uint32_t *ntri;
    float *nout;
    /* uniform normals: the input's nv0 vertices use the input's corner
     * lists (count, offset, list), corner 3t + k becoming output triangle
     * tmul * t + tadd * k (tmul = 4^L, tadd = (4^L - 1) / 3); from four
     * levels the other vertices of the stream three levels before the
     * output walk their fans in the stream two levels up (ptri, ptwin,
     * pvstart) */
    uint32_t nv0;
    uint64_t tmul, tadd;
    /* PMI_LOOP_NORMAL_NEW: triangle T of the stream one level below the
     * one whose half-edges it takes has, at its corner x, output triangle
     * nmul T + nadd x */
    uint32_t nmul, nadd;
    /* from two levels: the normals of the corner triangles 16 t + 5 k of
     * the output patches (3 doubles each, at 9 t + 3 k), which
     * PMI_LOOP_NORMAL_PATCH writes and NORMAL_OLD and NEW read (every
     * output triangle they sum then is one); NULL with one level */
    double *cnorm;
    /* first failure: (kind << 56) | index, kept by atomic minimum */
    unsigned long long *error;
    /* copies */
    uint32_t *dst;
    const uint32_t *src;
} pmi_loop_args;

/* Failure kinds, in the order they are checked. */
#define PMI_LOOP_ERR_INDEX 1ull
#define PMI_LOOP_ERR_REPEAT 2ull
#define PMI_LOOP_ERR_NONMANIFOLD 3ull
#define PMI_LOOP_ERR_WALK 4ull
#define PMI_LOOP_ERR_NONE 0xFFFFFFFFFFFFFFFFull

/* Sets a word that many threads may set: loaded first, so only those that
 * find it clear store (a store per thread to one word serialises them). */
PMI_LHD void pmi_loop_atomic_set(uint32_t *p)
{
#ifdef __CUDA_ARCH__
    if (!*(volatile uint32_t *)p) atomicExch((unsigned int *)p, 1u);
#else
    if (!__atomic_load_n(p, __ATOMIC_RELAXED)) __atomic_store_n(p, 1u, __ATOMIC_RELAXED);
#endif
}

/* Whether half-edge h (twin tw) owns its edge: the lower half of an inner
 * edge; a boundary half-edge, and one whose twin has left the stream
 * (FROZEN, above every index), alone. */
PMI_LHD uint32_t pmi_loop_owns(uint32_t h, uint32_t tw) { return tw == PMI_LOOP_NONE || h < tw; }

/* Relaxed loads and stores of the split and owner flags, which the
 * threads of red promotion share while they follow chains. On CUDA at the
 * GPU's scope (ld/st.relaxed.gpu): volatile accesses are the system's
 * scope, and a chain step waits longer for them (measured:
 * bench/RESULTS-subdivide.md). */
PMI_LHD uint32_t pmi_loop_load_flag(const uint8_t *p)
{
#ifdef __CUDA_ARCH__
    uint32_t x;
    asm volatile("ld.relaxed.gpu.global.u8 %0, [%1];" : "=r"(x) : "l"(p) : "memory");
    return x;
#else
    return __atomic_load_n(p, __ATOMIC_RELAXED);
#endif
}

PMI_LHD void pmi_loop_store_flags(uint8_t *split, uint32_t *owner, uint32_t h, uint32_t own)
{
#ifdef __CUDA_ARCH__
    asm volatile("st.relaxed.gpu.global.u8 [%0], %1;" : : "l"(split + h), "r"(1u) : "memory");
    asm volatile("st.relaxed.gpu.global.u32 [%0], %1;" : : "l"(owner + h), "r"(own) : "memory");
#else
    __atomic_store_n(split + h, (uint8_t)1, __ATOMIC_RELAXED);
    __atomic_store_n(owner + h, own, __ATOMIC_RELAXED);
#endif
}

/* When h's edge splits, marks both its ends as having a split edge
 * (a->vsplit): the even rule then walks only their fans. */
PMI_LHD void pmi_loop_mark_ends(const pmi_loop_args *a, uint32_t h)
{
    if (!a->split[h]) return;
    const uint32_t u = a->tri[h], w = a->tri[3 * (h / 3) + (h % 3 + 1) % 3];
#ifdef __CUDA_ARCH__
    *(volatile uint8_t *)(a->vsplit + u) = 1;
    *(volatile uint8_t *)(a->vsplit + w) = 1;
#else
    __atomic_store_n(a->vsplit + u, (uint8_t)1, __ATOMIC_RELAXED);
    __atomic_store_n(a->vsplit + w, (uint8_t)1, __ATOMIC_RELAXED);
#endif
}

/* cos(x) for x in [0, pi] by its Taylor series in plain arithmetic (terms to
 * x^30, below 1e-17 at pi), so gcc and nvcc agree to the bit; the library
 * cos of each side may not. */
PMI_LHD double pmi_loop_cos(double x)
{
    double x2 = x * x, term = 1.0, sum = 1.0;
    for (int k = 1; k <= 15; k++) {
        term = -term * x2 / (double)((2 * k - 1) * (2 * k));
        sum += term;
    }
    return sum;
}

/* Loop's smooth vertex mask for valence n (Loop's original beta, as
 * OpenSubdiv's Sdc::Scheme<SCHEME_LOOP>): each neighbour
 * ew = (5/8 - (3/8 + cos(2 pi / n) / 4)^2) / n, the vertex 1 - n ew;
 * exactly 1/16 and 5/8 at n = 6. */
PMI_LHD void pmi_loop_weights(uint32_t n, double *vw, double *ew)
{
    if (n == 6) {
        *ew = 0.0625;
        *vw = 0.625;
        return;
    }
    const double dn = (double)n;
    const double inv = 1.0 / dn;
    const double c = pmi_loop_cos(6.283185307179586476925 * inv);
    const double b = 0.25 * c + 0.375;
    *ew = (0.625 - b * b) * inv;
    *vw = 1.0 - *ew * dn;
}

/* |d . n| / |n|: the length of d along n (|d| when n vanishes). */
PMI_LHD double pmi_loop_along(const double d[3], const double n[3])
{
    double l2 = n[0] * n[0] + n[1] * n[1] + n[2] * n[2];
    if (!(l2 > 0.0)) return sqrt(d[0] * d[0] + d[1] * d[1] + d[2] * d[2]);
    return fabs(d[0] * n[0] + d[1] * n[1] + d[2] * n[2]) / sqrt(l2);
}

/* The corner of triangle t holding vertex v (the caller knows it is there). */
PMI_LHD uint32_t pmi_loop_corner(const uint32_t *tri, uint32_t t, uint32_t v)
{
    return tri[3 * t] == v ? 0u : (tri[3 * t + 1] == v ? 1u : 2u);
}

/* Area-weighted normal of the triangle (p0, p1, p2), positions widened
 * to double (exactly). */
PMI_LHD void pmi_loop_face_normal_of(const double *p0, const double *p1, const double *p2,
                                     double n[3])
{
    double e1[3], e2[3];
    for (int a = 0; a < 3; a++) {
        e1[a] = p1[a] - p0[a];
        e2[a] = p2[a] - p0[a];
    }
    n[0] = e1[1] * e2[2] - e1[2] * e2[1];
    n[1] = e1[2] * e2[0] - e1[0] * e2[2];
    n[2] = e1[0] * e2[1] - e1[1] * e2[0];
}

/* Area-weighted normal of triangle t (its own winding), in double. */
PMI_LHD void pmi_loop_face_normal(const float *pos, const uint32_t *tri, uint64_t t, double n[3])
{
    double p[3][3];
    for (int c = 0; c < 3; c++)
        for (int a = 0; a < 3; a++)
            p[c][a] = (double)pos[3 * (size_t)tri[3 * t + c] + a];
    pmi_loop_face_normal_of(p[0], p[1], p[2], n);
}

/* Normalises a double vector into floats (0 stays 0). */
PMI_LHD void pmi_loop_store_unit(const double s[3], float *out)
{
    double len2 = s[0] * s[0] + s[1] * s[1] + s[2] * s[2];
    if (len2 > 0.0) {
        double inv = 1.0 / sqrt(len2);
        for (int a = 0; a < 3; a++)
            out[a] = (float)(s[a] * inv);
    } else {
        out[0] = out[1] = out[2] = 0.0f;
    }
}

/* The far end of half-edge h from vertex v. */
PMI_LHD uint32_t pmi_loop_far(const uint32_t *tri, uint32_t h, uint32_t v)
{
    uint32_t t = h / 3, k = h % 3;
    uint32_t a = tri[h], b = tri[3 * t + (k + 1) % 3];
    return a == v ? b : a;
}

/* The other half-edge at vertex v in the triangle of half-edge h. */
PMI_LHD uint32_t pmi_loop_other_at(const uint32_t *tri, uint32_t h, uint32_t v)
{
    uint32_t t = h / 3, k = pmi_loop_corner(tri, t, v);
    uint32_t out = 3 * t + k, in = 3 * t + (k + 2) % 3;
    return h == out ? in : out;
}

/* What a walk around a vertex's fan found. */
typedef struct pmi_loop_ring {
    uint32_t faces; /* triangles visited */
    uint32_t neighbours;
    int boundary;     /* the fan is open (two boundary edges) */
    int frozen;       /* the fan leaves the stream: the vertex stays */
    int any_split;    /* an incident edge splits */
    uint32_t b0, b1;  /* boundary neighbours */
    double sum[3];    /* neighbours' positions, in walk order */
    double normal[3]; /* face normals, in walk order */
    double sum2[3];   /* PMI_LOOP_WALK_AHEAD: the next level's neighbours'
                         positions (their odd rules), in its walk's order */
} pmi_loop_ring;

/* A walk's ring before its first step, around vertex v. */
PMI_LHD void pmi_loop_ring_start(pmi_loop_ring *r, uint32_t v)
{
    r->faces = r->neighbours = 0;
    r->boundary = r->frozen = r->any_split = 0;
    r->b0 = r->b1 = v;
    for (int i = 0; i < 3; i++)
        r->sum[i] = r->normal[i] = r->sum2[i] = 0.0;
}

/* How a walk reads its fan: PLAIN, the stream's, neighbours at the far
 * ends; NORMALS, the same with face normals summed; MIDS (uniform), the
 * previous stream's (ptri, ptwin), neighbours the vertices created on its
 * edges (pnv + powner). */
#define PMI_LOOP_WALK_PLAIN 0
#define PMI_LOOP_WALK_NORMALS 1
#define PMI_LOOP_WALK_MIDS 2
/* Or'ed with PLAIN or MIDS (uniform): also the sums the next level's walk
 * of the same vertex will take (pmi_loop_walk). */
#define PMI_LOOP_WALK_AHEAD 4

/* The vertex a uniform level created on the edge of half-edge h of the
 * previous stream. */
PMI_LHD uint32_t pmi_loop_prev_mid(const pmi_loop_args *a, uint32_t h)
{
    const uint32_t tw = a->ptwin[h];
    return a->pnv + a->powner[pmi_loop_owns(h, tw) ? h : tw];
}

/* A walk's neighbour across half-edge h at vertex v (pmi_loop_walk's
 * modes): its far end, or the vertex created on its edge (MIDS). */
PMI_LHD uint32_t pmi_loop_walk_neighbour(const pmi_loop_args *a, const uint32_t *tri, uint32_t h,
                                         uint32_t v, int mode)
{
    if (mode == PMI_LOOP_WALK_MIDS) return pmi_loop_prev_mid(a, h);
    return pmi_loop_far(tri, h, v);
}

/* Whether half-edge h of the previous stream owns its edge. */
PMI_LHD uint32_t pmi_loop_prev_own(const pmi_loop_args *a, uint32_t h)
{
    const uint32_t tw = a->ptwin[h];
    return pmi_loop_owns(h, tw);
}

/* (double)x for a float x just rounded from a double. GCC 12's SLP
 * vectorizer (-O3, x86-64) drops the rounding when both conversions meet
 * in its vector code, so the empty asm hands it a float it cannot see
 * through (on the GPU nvcc rounds as written). */
PMI_LHD double pmi_loop_widen(float x)
{
#if defined(__GNUC__) && !defined(__CUDA_ARCH__)
    __asm__("" : "+r"(x));
#endif
    return (double)x;
}

/* The odd rule for the edge (u, w) with opposite vertices c and d:
 * interior 3/8 (u + w) + 1/8 (c + d), boundary (u + w) / 2 (the same bits
 * for either order of u, w and of c, d), in double from the floats
 * (converted exactly), rounded to float once. pmi_loop_odd_dd is one
 * coordinate of the interior case; pmi_loop_odd_ids the position by the
 * points' ids into q[0..2], pmi_loop_odd_d from positions already
 * converted, pmi_loop_odd_to for the split edge owned by h (twin tw). */
PMI_LHD float pmi_loop_odd_dd(double u, double w, double c, double d)
{
    return (float)(0.375 * (u + w) + 0.125 * (c + d));
}

PMI_LHD void pmi_loop_odd_ids(const float *pos, uint32_t u, uint32_t w, uint32_t c, uint32_t d,
                              int boundary, float *q)
{
    const float *pu = pos + 3 * (size_t)u, *pw = pos + 3 * (size_t)w;
    const float *pc = pos + 3 * (size_t)c, *pd = pos + 3 * (size_t)d;
    if (boundary) {
        for (int i = 0; i < 3; i++)
            q[i] = (float)(0.5 * ((double)pu[i] + (double)pw[i]));
    } else {
        for (int i = 0; i < 3; i++)
            q[i] = pmi_loop_odd_dd((double)pu[i], (double)pw[i], (double)pc[i], (double)pd[i]);
    }
}

/* Walks the fan of the vertex at corner c: first across the edge entering
 * the corner, triangle by triangle, until it closes or meets the boundary,
 * then (open fans) the other way from c. Orientation-agnostic: each step
 * finds the vertex in the next triangle. Face normals are summed only in
 * mode PMI_LOOP_WALK_NORMALS (r->normal stays 0 otherwise). In mode
 * PMI_LOOP_WALK_MIDS, c is a corner of the previous uniform stream and the
 * walk is the one of this stream from the corner of c's child at the same
 * vertex: that child's fan has one child per triangle of c's, in the same
 * order, and its neighbours are the vertices created on c's fan's edges.
 * With PMI_LOOP_WALK_AHEAD (a uniform stream, every edge split) a closed
 * fan also gives r->sum2 (an open fan leaves it partial: the boundary
 * rule does not read it), the sum the next level's walk of the vertex
 * takes: there its i-th neighbour is the vertex created on the edge to
 * y_i, this walk's i-th, whose triangles on either side have third
 * corners y_(i-1) and y_(i+1) (y_(-1) across the first edge A0, which is
 * the last neighbour), so the odd rule over pos gives its position with
 * the bits that level stores, summed in the same order. Returns 0 when
 * the walk exceeds `cap` steps (a corrupt structure). */
PMI_LHD int pmi_loop_walk(const pmi_loop_args *a, const float *pos, const uint8_t *split,
                          uint32_t c, uint32_t cap, int mode, pmi_loop_ring *r)
{
    const int ahead = (mode & PMI_LOOP_WALK_AHEAD) != 0;
    mode &= ~PMI_LOOP_WALK_AHEAD;
    const int normals = mode == PMI_LOOP_WALK_NORMALS, mids = mode == PMI_LOOP_WALK_MIDS;
    const uint32_t *tri = mids ? a->ptri : a->tri;
    const uint32_t *twin = mids ? a->ptwin : a->twin;
    const uint32_t t0 = c / 3, k0 = c % 3, v = tri[c];
    const uint32_t A0 = c, B0 = 3 * t0 + (k0 + 2) % 3;
    pmi_loop_ring_start(r, v);
    if (split) r->any_split = split[A0];
    uint32_t B = B0, t = t0;
    /* ahead: the positions of v, of the two neighbours before the current
     * one (the first: across A0) and of the first, as doubles (exact) */
    double pv[3] = {0, 0, 0}, pp[3] = {0, 0, 0}, pc[3] = {0, 0, 0}, pf[3] = {0, 0, 0};
    if (ahead) {
        const uint32_t x = pmi_loop_walk_neighbour(a, tri, A0, v, mode);
        for (int i = 0; i < 3; i++) {
            pv[i] = (double)pos[3 * (size_t)v + i];
            pp[i] = (double)pos[3 * (size_t)x + i];
        }
    }
    for (uint32_t steps = 0;; steps++) {
        if (steps > cap) return 0;
        if (normals) {
            double fn[3];
            pmi_loop_face_normal(pos, tri, t, fn);
            for (int i = 0; i < 3; i++)
                r->normal[i] += fn[i];
        }
        uint32_t y = pmi_loop_walk_neighbour(a, tri, B, v, mode);
        double py[3];
        for (int i = 0; i < 3; i++) {
            py[i] = (double)pos[3 * (size_t)y + i];
            r->sum[i] += py[i];
        }
        if (ahead) {
            for (int i = 0; i < 3; i++) {
                if (r->faces == 0) {
                    pf[i] = py[i];
                } else {
                    r->sum2[i] += pmi_loop_widen(pmi_loop_odd_dd(pv[i], pc[i], pp[i], py[i]));
                    pp[i] = pc[i];
                }
                pc[i] = py[i];
            }
        }
        r->faces++;
        r->neighbours++;
        if (split && split[B]) r->any_split = 1;
        uint32_t tw = twin[B];
        if (tw == PMI_LOOP_FROZEN) {
            r->frozen = 1;
            return 1;
        }
        if (tw == PMI_LOOP_NONE) {
            r->b1 = y;
            r->boundary = 1;
            break;
        }
        if (tw == A0) { /* closed */
            if (ahead)
                for (int i = 0; i < 3; i++)
                    r->sum2[i] += pmi_loop_widen(pmi_loop_odd_dd(pv[i], pc[i], pp[i], pf[i]));
            return 1;
        }
        B = pmi_loop_other_at(tri, tw, v);
        t = tw / 3;
    }
    /* Open fan: the neighbour on A0, then on across A edges. */
    uint32_t A = A0;
    uint32_t x = pmi_loop_walk_neighbour(a, tri, A0, v, mode);
    for (int i = 0; i < 3; i++)
        r->sum[i] += (double)pos[3 * (size_t)x + i];
    r->neighbours++;
    for (uint32_t steps = 0;; steps++) {
        if (steps > cap) return 0;
        uint32_t tw = twin[A];
        if (tw == PMI_LOOP_FROZEN) {
            r->frozen = 1;
            return 1;
        }
        if (tw == PMI_LOOP_NONE) {
            r->b0 = pmi_loop_walk_neighbour(a, tri, A, v, mode);
            return 1;
        }
        A = pmi_loop_other_at(tri, tw, v);
        t = tw / 3;
        if (normals) {
            double fn[3];
            pmi_loop_face_normal(pos, tri, t, fn);
            for (int i = 0; i < 3; i++)
                r->normal[i] += fn[i];
        }
        uint32_t y = pmi_loop_walk_neighbour(a, tri, A, v, mode);
        for (int i = 0; i < 3; i++)
            r->sum[i] += (double)pos[3 * (size_t)y + i];
        r->faces++;
        r->neighbours++;
        if (split && split[A]) r->any_split = 1;
    }
}

/* How far Loop's masks would move the surface at half-edge h = (u -> w),
 * along the normal: the odd vertex from the edge's midpoint,
 * |(c + d - u - w) / 8 . n_edge| with n_edge the sum of the two triangles'
 * area-weighted normals (0 on the boundary, where the odd vertex is the
 * midpoint), and each end's even move (evdev, from PMI_LOOP_WALK_VERTEX);
 * the largest. The same for h and its twin (sums in either order agree). */
PMI_LHD double pmi_loop_deviation(const pmi_loop_args *a, uint32_t h, uint32_t u, uint32_t w)
{
    double dev = a->evdev[u] > a->evdev[w] ? a->evdev[u] : a->evdev[w];
    const uint32_t tw = a->twin[h];
    if (tw == PMI_LOOP_NONE || tw == PMI_LOOP_FROZEN) return dev;
    const uint32_t t = h / 3, t2 = tw / 3;
    const uint32_t c = a->tri[3 * t + (h % 3 + 2) % 3], d = a->tri[3 * t2 + (tw % 3 + 2) % 3];
    double f1[3], f2[3], n[3], m[3];
    pmi_loop_face_normal(a->pos, a->tri, t, f1);
    pmi_loop_face_normal(a->pos, a->tri, t2, f2);
    for (int i = 0; i < 3; i++) {
        const double pu = a->pos[3 * (size_t)u + i], pw = a->pos[3 * (size_t)w + i];
        const double pc = a->pos[3 * (size_t)c + i], pd = a->pos[3 * (size_t)d + i];
        n[i] = f1[i] + f2[i];
        m[i] = 0.125 * ((pc + pd) - (pu + pw));
    }
    const double odd = pmi_loop_along(m, n);
    return odd > dev ? odd : dev;
}

/* Whether half-edge h = (u -> w) meets the split criterion (pu, pw: the
 * ends' positions, read when max_edge is set; nu, nw: their criterion
 * normals, read when max_angle is): with no criterion set every edge
 * splits; else the larger of the two vertex weights w_e (1 without
 * weights) must be > 0 and, with no length, angle or deviation limit, the
 * edge splits; otherwise it splits when |u - w| * w_e > max_edge, when the
 * angle between the ends' normals times w_e exceeds max_angle, or when the
 * deviation times w_e exceeds max_dev. */
PMI_LHD int pmi_loop_wants_split(const pmi_loop_args *a, uint32_t h, uint32_t u, uint32_t w,
                                 const float *pu, const float *pw, const float *nu, const float *nw)
{
    if (!a->adaptive) return 1;
    double we = 1.0;
    if (a->weight) {
        double wu = (double)a->weight[u], ww = (double)a->weight[w];
        we = wu > ww ? wu : ww;
        if (!(we > 0.0)) return 0;
    }
    if (a->max_edge2 == 0.0 && a->max_angle == 0.0 && a->max_dev == 0.0) return 1;
    if (a->max_edge2 > 0.0) {
        double d2 = 0.0;
        for (int i = 0; i < 3; i++) {
            double d = (double)pu[i] - (double)pw[i];
            d2 += d * d;
        }
        if (d2 * (we * we) > a->max_edge2) return 1;
    }
    if (a->max_angle > 0.0 && a->nrm) {
        double lim = a->max_angle / we; /* the angle above which the edge splits */
        if (lim < 3.141592653589793) {
            double dot = 0.0;
            for (int i = 0; i < 3; i++)
                dot += (double)nu[i] * (double)nw[i];
            if (dot < pmi_loop_cos(lim)) return 1;
        }
    }
    if (a->max_dev > 0.0 && a->evdev && pmi_loop_deviation(a, h, u, w) * we > a->max_dev) return 1;
    return 0;
}

/* ---- the steps --------------------------------------------------------- */

PMI_LHD void pmi_loop_check_tri(const pmi_loop_args *a, uint32_t t)
{
    uint32_t v0 = a->tri[3 * t], v1 = a->tri[3 * t + 1], v2 = a->tri[3 * t + 2];
    if (v0 >= a->nv || v1 >= a->nv || v2 >= a->nv) {
        pmi_atomic_min(a->error, (PMI_LOOP_ERR_INDEX << 56) | t);
        /* a corner at a bad index is in no vertex's list, so TWIN leaves
         * its half-edge's twin and owner flag to this step (none, 0), for
         * the steps that read them before the host reads this verdict */
        for (uint32_t k = 0; k < 3; k++)
            if (a->tri[3 * t + k] >= a->nv) {
                if (a->twin) a->twin[3 * t + k] = PMI_LOOP_NONE;
                if (a->owner) a->owner[3 * t + k] = 0;
            }
    } else if (v0 == v1 || v1 == v2 || v0 == v2)
        pmi_atomic_min(a->error, (PMI_LOOP_ERR_REPEAT << 56) | t);
}

/* The twin of half-edge h = (u -> w): the other half-edge on {u, w} found in
 * u's corner list; two or more others make the edge non-manifold. With
 * a->owner, h's owner flag too: whether h owns its edge, the flag of uniform
 * subdivision, where every edge splits (the adaptive path's SPLIT writes
 * the flags again from its decisions). */
PMI_LHD void pmi_loop_twin_of(const pmi_loop_args *a, uint32_t h)
{
    const uint32_t *tri = a->tri;
    const uint32_t t = h / 3, k = h % 3;
    const uint32_t u = tri[h], w = tri[3 * t + (k + 1) % 3];
    uint32_t found = PMI_LOOP_NONE, matches = 0;
    for (uint32_t i = a->offset[u], e = a->offset[u] + a->count[u]; i < e; i++) {
        uint32_t c = a->list[i], t2 = c / 3, k2 = c % 3;
        if (t2 == t) continue;
        if (tri[3 * t2 + (k2 + 1) % 3] == w) {
            found = c; /* u -> w */
            matches++;
        } else if (tri[3 * t2 + (k2 + 2) % 3] == w) {
            found = 3 * t2 + (k2 + 2) % 3; /* w -> u */
            matches++;
        }
    }
    found = matches == 1 ? found : PMI_LOOP_NONE;
    a->twin[h] = found;
    if (a->owner) a->owner[h] = pmi_loop_owns(h, found);
    if (matches > 1) pmi_atomic_min(a->error, (PMI_LOOP_ERR_NONMANIFOLD << 56) | h);
}

/* Sorts a few numbers in place (insertion sort): output triangle
 * numbers, a vertex's corner list. */
PMI_LHD void pmi_loop_sort_small(uint32_t *x, uint32_t n)
{
    for (uint32_t i = 1; i < n; i++) {
        uint32_t y = x[i], j = i;
        while (j > 0 && x[j - 1] > y) {
            x[j] = x[j - 1];
            j--;
        }
        x[j] = y;
    }
}

PMI_LHD void pmi_loop_csr_sort(const pmi_loop_args *a, uint32_t v)
{
    pmi_loop_sort_small(a->list + a->offset[v], a->count[v]);
}

/* Entry i of a vertex's corner list of n entries, held as filled (in no
 * order) in c, with the other two corners of its triangle in nx and pv:
 * it goes to its place in the sorted list, sorted[its rank] (a list's
 * corners are distinct), and, when nx is given, its half-edge (u -> nx)
 * gets pmi_loop_twin_of's result, found in the arrays: the triangles of
 * u's other corners are the only ones that can hold (u, w) or (w, u). The
 * CPU runs the entries of a vertex in turn from the stack, CUDA one a
 * thread from shared memory. */
PMI_LHD void pmi_loop_list_entry(const pmi_loop_args *a, uint32_t *sorted, const uint32_t *c,
                                 const uint32_t *nx, const uint32_t *pv, uint32_t n, uint32_t i)
{
    const uint32_t ci = c[i];
    uint32_t rank = 0;
    if (!nx) {
        for (uint32_t j = 0; j < n; j++)
            rank += c[j] < ci;
        sorted[rank] = ci;
        return;
    }
    const uint32_t t = ci / 3, w = nx[i];
    uint32_t found = PMI_LOOP_NONE, matches = 0;
    /* without branches: the lanes of a warp take the same path */
    for (uint32_t j = 0; j < n; j++) {
        const uint32_t cj = c[j], t2 = cj / 3;
        rank += cj < ci;
        const uint32_t other = t2 != t, out = other & (nx[j] == w),
                       in = other & !out & (pv[j] == w);
        /* u -> w at cj; w -> u at the corner before cj in its triangle */
        const uint32_t back = cj - 3 * t2 == 0 ? cj + 2 : cj - 1;
        found = out ? cj : in ? back : found;
        matches += out + in;
    }
    sorted[rank] = ci;
    found = matches == 1 ? found : PMI_LOOP_NONE;
    a->twin[ci] = found;
    if (a->owner) a->owner[ci] = pmi_loop_owns(ci, found);
    if (matches > 1) pmi_atomic_min(a->error, (PMI_LOOP_ERR_NONMANIFOLD << 56) | ci);
}

/* The other two corners of corner c's triangle, as pmi_loop_list_entry
 * reads them. */
PMI_LHD void pmi_loop_list_corners(const pmi_loop_args *a, uint32_t c, uint32_t *nx, uint32_t *pv)
{
    const uint32_t t = c / 3, k = c % 3;
    *nx = a->tri[3 * t + (k + 1) % 3];
    *pv = a->tri[3 * t + (k + 2) % 3];
}

/* Vertex u's corner list sorted in place and the twins of the half-edges
 * leaving it, searched per half-edge in the list: the way for a list too
 * long for pmi_loop_list_entry's arrays. */
PMI_LHD void pmi_loop_twin_global(const pmi_loop_args *a, uint32_t u)
{
    pmi_loop_csr_sort(a, u);
    const uint32_t *l = a->list + a->offset[u];
    for (uint32_t i = 0, n = a->count[u]; i < n; i++)
        pmi_loop_twin_of(a, l[i]);
}

/* PMI_LOOP_TWIN on the CPU: a list of at most PMI_LOOP_TWIN_LOCAL corners
 * is read once onto the stack with its triangles' other corners, where
 * pmi_loop_list_entry sorts it and finds its twins; a longer one (a vertex
 * of higher valence) takes pmi_loop_twin_global. */
#define PMI_LOOP_TWIN_LOCAL 16
PMI_LHD void pmi_loop_twin(const pmi_loop_args *a, uint32_t u)
{
    const uint32_t n = a->count[u];
    if (n > PMI_LOOP_TWIN_LOCAL) {
        pmi_loop_twin_global(a, u);
        return;
    }
    uint32_t *l = a->list + a->offset[u];
    uint32_t c[PMI_LOOP_TWIN_LOCAL], nx[PMI_LOOP_TWIN_LOCAL], pv[PMI_LOOP_TWIN_LOCAL];
    for (uint32_t i = 0; i < n; i++) {
        c[i] = l[i];
        pmi_loop_list_corners(a, c[i], nx + i, pv + i);
    }
    for (uint32_t i = 0; i < n; i++)
        pmi_loop_list_entry(a, l, c, nx, pv, n, i);
}

/* A vertex starts from its first corner; a vertex whose fan does not cover
 * all its corners (two fans meeting at it) never moves, as unused ones. */
PMI_LHD void pmi_loop_vstart(const pmi_loop_args *a, uint32_t v)
{
    uint32_t deg = a->count[v];
    if (deg == 0) {
        a->vstart[v] = PMI_LOOP_NONE;
        return;
    }
    uint32_t c = a->list[a->offset[v]];
    pmi_loop_ring r;
    if (!pmi_loop_walk(a, a->pos, NULL, c, deg + 1, PMI_LOOP_WALK_PLAIN, &r) || r.faces != deg) {
        a->vstart[v] = PMI_LOOP_NONE;
        return;
    }
    a->vstart[v] = c;
}

/* The output normal: the normalised sum of the area-weighted normals of
 * the vertex's triangles in increasing triangle order. */
PMI_LHD void pmi_loop_csr_normal(const pmi_loop_args *a, uint32_t v)
{
    double s[3] = {0.0, 0.0, 0.0};
    for (uint32_t i = a->offset[v], e = a->offset[v] + a->count[v]; i < e; i++) {
        double fn[3];
        pmi_loop_face_normal(a->npos, a->ntri, a->list[i] / 3, fn);
        for (int j = 0; j < 3; j++)
            s[j] += fn[j];
    }
    pmi_loop_store_unit(s, a->nout + 3 * (size_t)v);
}

/* Per vertex whose whole fan is in the stream, from one walk: the
 * criterion normal (nrm, when set) and how far its even rule would move it
 * along the fan's area-weighted normal (evdev, when set): interior
 * |beta (sum - n v) . n|, boundary |(b0 + b1 - 2 v) / 8 . n|; 0 for a
 * vertex that never moves again (fan not whole, non-manifold, unused). */
PMI_LHD void pmi_loop_walk_vertex(const pmi_loop_args *a, uint32_t v)
{
    const uint32_t c = a->vstart[v];
    pmi_loop_ring r;
    r.frozen = 1;
    if (c != PMI_LOOP_NONE &&
        !pmi_loop_walk(a, a->pos, NULL, c, 3 * a->n, PMI_LOOP_WALK_NORMALS, &r)) {
        pmi_atomic_min(a->error, (PMI_LOOP_ERR_WALK << 56) | c);
        r.frozen = 1;
    }
    if (a->nrm && !r.frozen) pmi_loop_store_unit(r.normal, a->nrm + 3 * (size_t)v);
    if (!a->evdev) return;
    double dev = 0.0;
    if (!r.frozen) {
        const float *p = a->pos + 3 * (size_t)v;
        double d[3];
        if (r.boundary) {
            const float *p0 = a->pos + 3 * (size_t)r.b0, *p1 = a->pos + 3 * (size_t)r.b1;
            for (int i = 0; i < 3; i++)
                d[i] = 0.125 * (((double)p0[i] + (double)p1[i]) - 2.0 * (double)p[i]);
        } else {
            double vw, ew;
            pmi_loop_weights(r.neighbours, &vw, &ew);
            for (int i = 0; i < 3; i++)
                d[i] = ew * (r.sum[i] - (double)r.neighbours * (double)p[i]);
        }
        dev = pmi_loop_along(d, r.normal);
    }
    a->evdev[v] = dev;
}

/* One of x0, x1, x2 by k (selects, which a GPU thread keeps in
 * registers, where an index into an array would put it in local memory);
 * pmi_loop_pick3f for floats. */
PMI_LHD uint32_t pmi_loop_pick3(uint32_t x0, uint32_t x1, uint32_t x2, uint32_t k)
{
    return k == 0 ? x0 : k == 1 ? x1 : x2;
}

PMI_LHD float pmi_loop_pick3f(float x0, float x1, float x2, uint32_t k)
{
    return k == 0 ? x0 : k == 1 ? x1 : x2;
}

/* Split flags of triangle t's half-edges 3 t + k (v_k -> v_(k+1)): the
 * criterion, never on the last level nor across the stream's edge; and
 * owner flags (the lower half-edge of a split edge numbers it). Each
 * corner's position and criterion normal is read once for its two edges,
 * and all before any flag is stored (a GPU thread then has its loads in
 * flight together). */
PMI_LHD void pmi_loop_split(const pmi_loop_args *a, uint32_t t)
{
    uint32_t v[3], w[3];
    for (uint32_t k = 0; k < 3; k++) {
        v[k] = a->tri[3 * t + k];
        w[k] = a->twin[3 * t + k];
    }
    const int look = a->adaptive && !a->last;
    const int lp = look && a->max_edge2 > 0.0, ln = look && a->max_angle > 0.0 && a->nrm;
    float p[3][3], nr[3][3];
    for (uint32_t k = 0; k < 3; k++)
        for (int i = 0; i < 3; i++) {
            p[k][i] = lp ? a->pos[3 * (size_t)v[k] + i] : 0.0f;
            nr[k][i] = ln ? a->nrm[3 * (size_t)v[k] + i] : 0.0f;
        }
    /* one copy of the criterion's code, its inputs picked by k (the GPU
     * keeps them in registers) */
    PMI_LOOP_ONCE
    for (uint32_t k = 0; k < 3; k++) {
        const uint32_t h = 3 * t + k;
        const uint32_t u = pmi_loop_pick3(v[0], v[1], v[2], k);
        const uint32_t x = pmi_loop_pick3(v[1], v[2], v[0], k);
        const uint32_t tw = pmi_loop_pick3(w[0], w[1], w[2], k);
        float pu[3], px[3], nu[3], nx[3];
        for (int i = 0; i < 3; i++) {
            pu[i] = pmi_loop_pick3f(p[0][i], p[1][i], p[2][i], k);
            px[i] = pmi_loop_pick3f(p[1][i], p[2][i], p[0][i], k);
            nu[i] = pmi_loop_pick3f(nr[0][i], nr[1][i], nr[2][i], k);
            nx[i] = pmi_loop_pick3f(nr[1][i], nr[2][i], nr[0][i], k);
        }
        const int s =
            !a->last && tw != PMI_LOOP_FROZEN && pmi_loop_wants_split(a, h, u, x, pu, px, nu, nx);
        a->split[h] = (uint8_t)s;
        a->owner[h] = (uint32_t)(s && pmi_loop_owns(h, tw));
    }
}

/* Red promotion (a pass, repeated by the backend, or on a GPU that cannot
 * launch a cooperative grid by the level loop, until one changes no
 * edge): an edge splits when a triangle on it has exactly 2 split edges,
 * unless its other side has left the stream (FROZEN). In a pass each
 * triangle with exactly 2 split edges splits its third, and its thread
 * follows the chain that starts: the triangle across a promoted edge may
 * now have exactly 2 split edges, so its third splits at once, and so on.
 * The rule only adds splits, and a thread that reads a flag late sees
 * fewer splits, never more, so every split it makes is in the least
 * closure; the pass that changes nothing proves the closure reached. So
 * any order, any thread count and any backend end at the same flags, in
 * a few passes, where applying the rule once per pass would take one pass
 * per triangle of a strip. Threads share the flags (relaxed atomic loads
 * and stores); both halves of an edge get the same split flag and their
 * owner flags. */
PMI_LHD void pmi_loop_split_edge(const pmi_loop_args *a, uint32_t h, uint32_t tw)
{
    pmi_loop_store_flags(a->split, a->owner, h, pmi_loop_owns(h, tw));
    if (tw != PMI_LOOP_NONE) pmi_loop_store_flags(a->split, a->owner, tw, (uint32_t)(tw < h));
}

/* One step of a chain at triangle t, entered across its edge e (e = 3 at
 * the chain's start): when t has exactly 2 split edges and its third can
 * split, splits it (*split = 1) and returns its twin tw (the chain's next
 * triangle tw / 3, entered across its edge tw % 3), PMI_LOOP_NONE across a
 * boundary; else PMI_LOOP_NONE. The entry edge is split (the
 * previous step split it, and flags only get set), so its flag is not
 * loaded. The twins are loaded with the flags, so a step waits for one
 * round of loads. */
PMI_LHD uint32_t pmi_loop_promote_step(const pmi_loop_args *a, uint32_t t, uint32_t e,
                                       uint32_t *split)
{
    const uint8_t *f = a->split + 3 * (size_t)t;
    const uint32_t *w = a->twin + 3 * (size_t)t;
    const uint32_t w0 = w[0], w1 = w[1], w2 = w[2];
    const uint32_t f0 = e == 0 ? 1u : pmi_loop_load_flag(f),
                   f1 = e == 1 ? 1u : pmi_loop_load_flag(f + 1),
                   f2 = e == 2 ? 1u : pmi_loop_load_flag(f + 2);
#ifdef __CUDA_ARCH__
    /* the twins wanted here, after the flags' loads: else nvcc moves their
     * loads past the flags' test, a second round of loads a step */
    asm volatile("" : : "r"(w0), "r"(w1), "r"(w2));
#endif
    if (f0 + f1 + f2 != 2u) return PMI_LOOP_NONE;
    const uint32_t h = 3 * t + (!f0 ? 0u : !f1 ? 1u : 2u);
    const uint32_t tw = !f0 ? w0 : !f1 ? w1 : w2;
    if (tw == PMI_LOOP_FROZEN) return PMI_LOOP_NONE;
    pmi_loop_split_edge(a, h, tw);
    *split = 1;
    return tw;
}

/* From triangle t: while it has exactly 2 split edges and its third can
 * split, split it and go on across it. Each step splits an edge this
 * thread saw unsplit, so the walk ends within the edge count. Returns
 * whether it split an edge. */
PMI_LHD uint32_t pmi_loop_promote_from(const pmi_loop_args *a, uint32_t t)
{
    uint32_t any = 0, e = 3;
    for (uint64_t steps = 0; steps <= 3 * (uint64_t)a->n && t != PMI_LOOP_NONE; steps++) {
        const uint32_t tw = pmi_loop_promote_step(a, t, e, &any);
        t = tw == PMI_LOOP_NONE ? PMI_LOOP_NONE : tw / 3;
        e = tw % 3;
    }
    return any;
}

/* Whether triangle t has exactly 2 split edges: a chain starts there. */
PMI_LHD int pmi_loop_promote_starts(const pmi_loop_args *a, uint32_t t)
{
    const uint8_t *f = a->split + 3 * (size_t)t;
    return pmi_loop_load_flag(f) + pmi_loop_load_flag(f + 1) + pmi_loop_load_flag(f + 2) == 2u;
}

/* The triangle's own step: when it has exactly 2 split edges its third
 * splits and the chain goes on (the twins loaded only then). Returns
 * whether it split an edge; the caller then sets a changed word, only
 * when still clear (the CPU: per such triangle, CUDA: once per block). */
PMI_LHD uint32_t pmi_loop_promote(const pmi_loop_args *a, uint32_t t)
{
    return pmi_loop_promote_starts(a, t) ? pmi_loop_promote_from(a, t) : 0;
}

/* 0 split edges: finished (1 emitted); 3: red (4 children stay); 1 or 2:
 * green, closed by 2 or 3 emitted triangles. */
PMI_LHD void pmi_loop_classify(const pmi_loop_args *a, uint32_t t)
{
    uint32_t s =
        a->last ? 0u : (uint32_t)a->split[3 * t] + a->split[3 * t + 1] + a->split[3 * t + 2];
    a->red[t] = s == 3;
    a->emit[t] = s == 3 ? 0u : s + 1u;
}

/* The even rule's position for the vertex at p from its walk (boundary:
 * its boundary neighbours at p0 and p1), into q[0..2]; pmi_loop_even_to:
 * vertex v of a stream, its neighbours by the walk's ids. */
PMI_LHD void pmi_loop_even_at(const float *p, const pmi_loop_ring *r, const float *p0,
                              const float *p1, float *q)
{
    if (r->boundary) {
        for (int i = 0; i < 3; i++)
            q[i] = (float)(0.75 * (double)p[i] +
                           0.125 * (pmi_loop_widen(p0[i]) + pmi_loop_widen(p1[i])));
    } else {
        double vw, ew;
        pmi_loop_weights(r->neighbours, &vw, &ew);
        for (int i = 0; i < 3; i++)
            q[i] = (float)(vw * (double)p[i] + ew * r->sum[i]);
    }
}

PMI_LHD void pmi_loop_even_to(const pmi_loop_args *a, uint32_t v, const pmi_loop_ring *r, float *q)
{
    pmi_loop_even_at(a->pos + 3 * (size_t)v, r, a->pos + 3 * (size_t)r->b0,
                     a->pos + 3 * (size_t)r->b1, q);
}

PMI_LHD int pmi_loop_is_red(const pmi_loop_args *a, uint32_t t)
{
    return a->split[3 * t] && a->split[3 * t + 1] && a->split[3 * t + 2];
}

/* The next stream's start corner of the vertex started at corner c = 3t +
 * k of this one: corner k of child k when t is red (the children start at
 * 4 red[t]), none when t leaves the stream; mid: of the vertex created on
 * the edge t owns at corner k, corner k of the centre child. */
PMI_LHD uint32_t pmi_loop_next_start(const pmi_loop_args *a, uint32_t c, int mid)
{
    const uint32_t t = c / 3, k = c % 3;
    if (!pmi_loop_is_red(a, t)) return PMI_LOOP_NONE;
    return 3 * (4 * a->red[t] + (mid ? 3u : k)) + k;
}

/* Vertex v's position and start corner in the next level (every vertex
 * of this one, so neither array is copied first). Started at corner c =
 * vstart[v] of the stream (none: v is in no triangle of it, or never
 * moves): when its fan is whole in the stream and an incident edge
 * splits, the even rule (interior, Loop's smooth mask over the
 * neighbours in walk order; boundary, 3/4 v + 1/8 (b0 + b1)); else it
 * stays. */
PMI_LHD void pmi_loop_even(const pmi_loop_args *a, uint32_t v)
{
    const uint32_t c = a->vstart[v];
    float *q = a->pos_new + 3 * (size_t)v;
    a->vstart_new[v] = c == PMI_LOOP_NONE ? c : pmi_loop_next_start(a, c, 0);
    /* vsplit: no edge at an unmarked vertex splits */
    if (c != PMI_LOOP_NONE && (!a->vsplit || a->vsplit[v])) {
        pmi_loop_ring r;
        if (!pmi_loop_walk(a, a->pos, a->split, c, 3 * a->n, PMI_LOOP_WALK_PLAIN, &r)) {
            pmi_atomic_min(a->error, (PMI_LOOP_ERR_WALK << 56) | c);
        } else if (!r.frozen && r.any_split) {
            pmi_loop_even_to(a, v, &r, q);
            return;
        }
    }
    for (int i = 0; i < 3; i++)
        q[i] = a->pos[3 * (size_t)v + i];
}

/* pmi_loop_odd_ids from positions already converted to double: the same
 * sums, so the same bytes; a step that uses a vertex in several odd rules
 * converts it once. */
PMI_LHD void pmi_loop_odd_d(const double *pu, const double *pw, const double *pc, const double *pd,
                            int boundary, float *q)
{
    if (boundary) {
        for (int i = 0; i < 3; i++)
            q[i] = (float)(0.5 * (pu[i] + pw[i]));
    } else {
        for (int i = 0; i < 3; i++)
            q[i] = pmi_loop_odd_dd(pu[i], pw[i], pc[i], pd[i]);
    }
}

PMI_LHD void pmi_loop_load_d(const float *pos, uint32_t v, double *p)
{
    for (int i = 0; i < 3; i++)
        p[i] = (double)pos[3 * (size_t)v + i];
}

PMI_LHD void pmi_loop_odd_to(const pmi_loop_args *a, uint32_t h, uint32_t tw, float *q)
{
    const uint32_t t = h / 3, k = h % 3;
    const uint32_t u = a->tri[h], w = a->tri[3 * t + (k + 1) % 3];
    uint32_t c = u, d = u;
    if (tw != PMI_LOOP_NONE) {
        c = a->tri[3 * t + (k + 2) % 3];
        d = a->tri[3 * (tw / 3) + (tw % 3 + 2) % 3];
    }
    pmi_loop_odd_ids(a->pos, u, w, c, d, tw == PMI_LOOP_NONE, q);
}

/* The odd rule for the split edge owned by h = (u -> w) in triangle t:
 * interior 3/8 (u + w) + 1/8 (c + d), c and d opposite in the two
 * triangles; boundary (u + w) / 2. Also the new vertex's weight (mean of
 * the ends) and starting normal (normalised sum of the ends'). */
PMI_LHD void pmi_loop_odd(const pmi_loop_args *a, uint32_t h)
{
    const uint32_t t = h / 3, k = h % 3, tw = a->twin[h];
    if (!a->split[h] || !pmi_loop_owns(h, tw)) return;
    const uint32_t u = a->tri[h], w = a->tri[3 * t + (k + 1) % 3];
    const uint32_t m = a->nv + a->owner[h];
    a->vstart_new[m] = pmi_loop_next_start(a, h, 1);
    pmi_loop_odd_to(a, h, tw, a->pos_new + 3 * (size_t)m);
    if (a->weight) a->weight[m] = 0.5f * (a->weight[u] + a->weight[w]);
    if (a->nrm) {
        double s[3];
        for (int i = 0; i < 3; i++)
            s[i] = (double)a->nrm[3 * (size_t)u + i] + (double)a->nrm[3 * (size_t)w + i];
        pmi_loop_store_unit(s, a->nrm + 3 * (size_t)m);
    }
}

/* The vertex on the split edge of half-edge h (its owner's number). */
PMI_LHD uint32_t pmi_loop_mid(const pmi_loop_args *a, uint32_t h)
{
    uint32_t tw = a->twin[h];
    uint32_t o = pmi_loop_owns(h, tw) ? h : tw;
    return a->nv + a->owner[o];
}

PMI_LHD double pmi_loop_dist2(const float *pos, uint32_t u, uint32_t w)
{
    double s = 0.0;
    for (int i = 0; i < 3; i++) {
        double d = (double)pos[3 * (size_t)u + i] - (double)pos[3 * (size_t)w + i];
        s += d * d;
    }
    return s;
}

PMI_LHD void pmi_loop_put(uint32_t *o, uint32_t x, uint32_t y, uint32_t z)
{
    o[0] = x;
    o[1] = y;
    o[2] = z;
}

/* Four triangles' 12 words (a red triangle's children) at o; on the GPU
 * o must be 16-byte aligned (it is RED_LAST2's staged rows in shared
 * memory, the only device caller) and takes three 16-byte stores. */
PMI_LHD void pmi_loop_put12(uint32_t *o, const uint32_t w[12])
{
#ifdef __CUDA_ARCH__
    uint4 *q = (uint4 *)o;
    q[0] = make_uint4(w[0], w[1], w[2], w[3]);
    q[1] = make_uint4(w[4], w[5], w[6], w[7]);
    q[2] = make_uint4(w[8], w[9], w[10], w[11]);
#else
    for (int i = 0; i < 12; i++)
        o[i] = w[i];
#endif
}

/* The twins of the interior half-edges of a red triangle's children
 * (child c's corner j at half-edge base + 3c + j: 1 - 11, 5 - 9, 6 - 10),
 * into tw[0..11]. */
PMI_LHD void pmi_loop_inner_twins(uint32_t *tw, uint32_t base)
{
    tw[1] = base + 11;
    tw[11] = base + 1;
    tw[5] = base + 9;
    tw[9] = base + 5;
    tw[6] = base + 10;
    tw[10] = base + 6;
}

/* The children of red triangle t (its children start at 4 * red[t] in the
 * next stream): corners (v0 m0 m2), (m0 v1 m1), (m2 m1 v2), centre
 * (m0 m1 m2), into o (12 words); their twins from the parent's (the
 * halves of the twin edge when its triangle is red too, FROZEN when it
 * leaves the stream) into tw (12 words). The vertices' start corners in
 * the children are written by EVEN and ODD (pmi_loop_next_start). */
PMI_LHD void pmi_loop_red_into(const pmi_loop_args *a, uint32_t t, uint32_t *o, uint32_t *tw)
{
    const uint32_t *v = a->tri + 3 * (size_t)t;
    const uint32_t co = 4 * a->red[t];
    uint32_t m[3];
    for (uint32_t k = 0; k < 3; k++)
        m[k] = pmi_loop_mid(a, 3 * t + k);
    pmi_loop_put(o, v[0], m[0], m[2]);
    pmi_loop_put(o + 3, m[0], v[1], m[1]);
    pmi_loop_put(o + 6, m[2], m[1], v[2]);
    pmi_loop_put(o + 9, m[0], m[1], m[2]);
    /* Half-edges of the children: the first half of parent edge k (from
     * v[k]) is child half-edge first[k], the second half second[k]. */
    const uint32_t base = 3 * co;
    const uint32_t first[3] = {0, 4, 8}, second[3] = {3, 7, 2};
    pmi_loop_inner_twins(tw, base);
    for (uint32_t k = 0; k < 3; k++) {
        const uint32_t h = 3 * t + k, p = a->twin[h];
        uint32_t f = p, s = p; /* NONE and FROZEN carry over */
        if (p != PMI_LOOP_NONE && p != PMI_LOOP_FROZEN) {
            const uint32_t t2 = p / 3, k2 = p % 3;
            if (!pmi_loop_is_red(a, t2)) {
                f = s = PMI_LOOP_FROZEN;
            } else {
                const uint32_t b2 = 12 * a->red[t2];
                if (a->tri[p] == v[k]) { /* same direction (misoriented pair) */
                    f = b2 + first[k2];
                    s = b2 + second[k2];
                } else {
                    f = b2 + second[k2];
                    s = b2 + first[k2];
                }
            }
        }
        tw[first[k]] = f;
        tw[second[k]] = s;
    }
}

/* Per triangle: a finished triangle is copied out; a green one is closed by
 * 2 triangles (one split edge: from the midpoint to the opposite vertex) or
 * 3 (two split edges: the corner at the shared vertex, then the quad
 * across its shorter diagonal, the first one on a tie); a red one makes
 * its children. Every output keeps the parent's winding. This is the
 * finished or green triangle's part (t not red): its 1 to 3 triangles into
 * o; pmi_loop_emit routes a red one to pmi_loop_red_into. */
PMI_LHD void pmi_loop_emit_into(const pmi_loop_args *a, uint32_t t, uint32_t *o)
{
    const uint32_t *v = a->tri + 3 * (size_t)t;
    const uint32_t ns =
        a->last ? 0u : (uint32_t)a->split[3 * t] + a->split[3 * t + 1] + a->split[3 * t + 2];
    if (ns == 0) {
        pmi_loop_put(o, v[0], v[1], v[2]);
    } else if (ns == 1) {
        const uint32_t k = a->split[3 * t] ? 0u : (a->split[3 * t + 1] ? 1u : 2u);
        const uint32_t m = pmi_loop_mid(a, 3 * t + k);
        pmi_loop_put(o, v[k], m, v[(k + 2) % 3]);
        pmi_loop_put(o + 3, m, v[(k + 1) % 3], v[(k + 2) % 3]);
    } else {
        /* unsplit edge j = (pa -> pb), c opposite; m1 on (pb, c), m2 on (c, pa) */
        const uint32_t j = !a->split[3 * t] ? 0u : (!a->split[3 * t + 1] ? 1u : 2u);
        const uint32_t pa = v[j], pb = v[(j + 1) % 3], c = v[(j + 2) % 3];
        const uint32_t m1 = pmi_loop_mid(a, 3 * t + (j + 1) % 3);
        const uint32_t m2 = pmi_loop_mid(a, 3 * t + (j + 2) % 3);
        pmi_loop_put(o, m1, c, m2);
        if (pmi_loop_dist2(a->pos_new, pb, m2) < pmi_loop_dist2(a->pos_new, pa, m1)) {
            pmi_loop_put(o + 3, pb, m1, m2);
            pmi_loop_put(o + 6, pa, pb, m2);
        } else {
            pmi_loop_put(o + 3, pa, pb, m1);
            pmi_loop_put(o + 6, pa, m1, m2);
        }
    }
}

/* pmi_loop_emit_into writing in place: the emitted triangles at emit[t],
 * a red triangle's children and their twins at 12 red[t] (the twins only
 * where twin_next is set: not on the level before the last, whose
 * children go to the output; the GPU stages a block's in shared memory to
 * store them contiguously). */
PMI_LHD void pmi_loop_emit(const pmi_loop_args *a, uint32_t t)
{
    if (!a->last && pmi_loop_is_red(a, t)) {
        const size_t c = 12 * (size_t)a->red[t];
        uint32_t tw[12]; /* twins not stored: the children are the output's */
        pmi_loop_red_into(a, t, a->tri_next + c, a->twin_next ? a->twin_next + c : tw);
    } else {
        pmi_loop_emit_into(a, t, a->out_tri + 3 * (size_t)a->emit[t]);
    }
}

/* ---- uniform subdivision ----------------------------------------------
 * Every edge splits, so a level needs no split flags, classification or
 * scans: triangle t's children are 4t..4t+3 in the next stream, and the
 * next stream's owner numbers follow from this one's (below). These steps
 * compute what the general steps compute for an all-split level (the same
 * helpers and arithmetic, so the same bytes; test_subdivide compares them
 * with an all-split adaptive run). */

/* The even rule two levels on for a vertex whose walk (r, PMI_LOOP_WALK_AHEAD,
 * over pos, where the vertex is at index v) moved it to q: the next level's
 * sums are r->sum2 (interior) or the odd rules of the boundary edges to
 * r->b0 and r->b1; into q2 with the bits the next level's walk gives. */
PMI_LHD void pmi_loop_even_ahead(const float *pos, uint32_t v, pmi_loop_ring *r, const float *q,
                                 float *q2)
{
    float b[6];
    if (r->boundary) {
        pmi_loop_odd_ids(pos, v, r->b0, v, v, 1, b);
        pmi_loop_odd_ids(pos, v, r->b1, v, v, 1, b + 3);
    } else {
        for (int i = 0; i < 3; i++)
            r->sum[i] = r->sum2[i];
    }
    pmi_loop_even_at(q, r, b, b + 3, q2);
}

/* Per vertex v of the stream: the even rule (its fan is whole in a uniform
 * stream) or, for a vertex that never moves (non-manifold, unused), a
 * copy; and its start corner in the next stream, corner k of child k of
 * its start triangle. After the first level it runs only over the
 * previous stream's vertices (PMI_LOOP_EVEN_NEW moves the others). With q2
 * (the level before RED_LAST2's) also its position two levels on, from
 * the same walk (PMI_LOOP_WALK_AHEAD): RED_LAST2's level then walks no
 * fan. */
PMI_LHD void pmi_loop_even_uniform_into(const pmi_loop_args *a, uint32_t v, float *q, float *q2)
{
    uint32_t c = a->vstart_lists ? PMI_LOOP_NONE : a->vstart[v];
    pmi_loop_ring r;
    int moved = 0;
    const int ahead = q2 ? PMI_LOOP_WALK_AHEAD : 0;
    if (a->vstart_lists) {
        /* the input level: PMI_LOOP_VSTART's walk from the first corner,
         * whose ring is the one the even rule would walk from it (the walk
         * ends within deg + 1 steps; the input has no FROZEN twins) */
        const uint32_t deg = a->count[v];
        if (deg) {
            const uint32_t c0 = a->list[a->offset[v]];
            if (pmi_loop_walk(a, a->pos, NULL, c0, deg + 1, PMI_LOOP_WALK_PLAIN | ahead, &r) &&
                r.faces == deg) {
                c = c0;
                moved = !r.frozen;
            }
        }
        a->vstart[v] = c;
    } else if (c != PMI_LOOP_NONE) {
        /* with the previous stream at hand (every level but the first; v is
         * one of its vertices), its fan is walked: 4 times fewer triangles
         * to read than this stream's; c is corner c % 3 of child c % 3 of
         * triangle c / 12 there */
        const int prev = a->ptri != NULL;
        const uint32_t cw = prev ? 3 * (c / 12) + c % 3 : c;
        const int mode = (prev ? PMI_LOOP_WALK_MIDS : PMI_LOOP_WALK_PLAIN) | ahead;
        if (!pmi_loop_walk(a, a->pos, NULL, cw, 3 * a->n, mode, &r))
            pmi_atomic_min(a->error, (PMI_LOOP_ERR_WALK << 56) | c);
        else if (!r.frozen)
            moved = 1;
    }
    if (moved) {
        pmi_loop_even_to(a, v, &r, q);
        if (q2) pmi_loop_even_ahead(a->pos, v, &r, q, q2);
    } else {
        const float *p = a->pos + 3 * (size_t)v;
        q[0] = p[0], q[1] = p[1], q[2] = p[2];
        if (q2) q2[0] = p[0], q2[1] = p[1], q2[2] = p[2];
    }
    if (a->vstart_new)
        a->vstart_new[v] = c == PMI_LOOP_NONE ? c : 3 * (4 * (c / 3) + c % 3) + c % 3;
}

/* pmi_loop_even_uniform_into writing pos_new[v] (and pos_out2[v]) in place
 * (the GPU stages a block's positions in shared memory to store them
 * contiguously). */
PMI_LHD void pmi_loop_even_uniform(const pmi_loop_args *a, uint32_t v)
{
    pmi_loop_even_uniform_into(a, v, a->pos_new + 3 * (size_t)v,
                               a->pos_out2 ? a->pos_out2 + 3 * (size_t)v : NULL);
}

/* Across the previous stream's half-edge with twin tw (triangle t2) from
 * vertex u to w: the vertices created on t2's other two edges, x1 on the
 * one at u and x2 on the one at w. They are t2's edges k2 + 1 and k2 + 2
 * when t2 runs w -> u along the shared edge, the reverse when the pair is
 * misoriented (u -> w in both). */
PMI_LHD void pmi_loop_twin_mids(const pmi_loop_args *a, uint32_t tw, uint32_t u, uint32_t *x1,
                                uint32_t *x2)
{
    const uint32_t t2 = tw / 3, k2 = tw % 3;
    const int same = a->ptri[tw] == u;
    *x1 = pmi_loop_prev_mid(a, 3 * t2 + (k2 + (same ? 2 : 1)) % 3);
    *x2 = pmi_loop_prev_mid(a, 3 * t2 + (k2 + (same ? 1 : 2)) % 3);
}

/* A ring of vertex m found without a walk (uniform levels): six faces
 * and neighbours, an edge split, no sums yet; boundary and ends set by the
 * caller when the fan is open. */
PMI_LHD void pmi_loop_ring_six(pmi_loop_ring *r, uint32_t m)
{
    r->faces = r->neighbours = 6;
    r->boundary = r->frozen = 0;
    r->any_split = 1;
    r->b0 = r->b1 = m;
    for (int i = 0; i < 3; i++)
        r->sum[i] = r->normal[i] = r->sum2[i] = 0.0;
}

/* The even rule for a vertex the previous uniform level created, without a
 * walk: its fan is known from the previous stream. Half-edge h = (u -> w)
 * of triangle t in the previous stream (ptri, ptwin, powner) owns its edge
 * and created vertex m = pnv + powner[h]; in this stream m is corner k of
 * t's centre child 4t + 3 (its start corner, 3 (4t + 3) + k), whose
 * corners are t's three new vertices m_0 m_1 m_2 (m = m_k; all three are
 * read from the previous stream, so this stream's triangles need not
 * exist, see PMI_LOOP_RED_LAST2). The walk from
 * that corner visits the centre child, t's child at u, the two children of
 * the twin's triangle t2 at m, t2's centre child between them, t's child
 * at w; so the ring in walk order is m_{k+2}, u, t2's new vertex on its
 * edge at u, t2's new vertex on its edge at w, w, m_{k+1}: the same sum as
 * pmi_loop_even_uniform's walk, the same bytes. On the boundary (no twin)
 * the walk's ends are b0 = w and b1 = u. The position goes to q, the next
 * stream's start corner of m to *vs when vstart_new is set, and with q2
 * (the level before RED_LAST2's) m's position two levels on to q2, as
 * pmi_loop_even_uniform_into's. */
PMI_LHD void pmi_loop_even_new_into(const pmi_loop_args *a, uint32_t h, float *q, uint32_t *vs,
                                    float *q2)
{
    const uint32_t t = h / 3, k = h % 3, tw = a->ptwin[h];
    const uint32_t u = a->ptri[h], w = a->ptri[3 * t + (k + 1) % 3];
    uint32_t c3[3]; /* h owns its edge: its vertex without the twin's test */
    for (uint32_t j = 0; j < 3; j++)
        c3[j] = j == k ? a->pnv + a->powner[h] : pmi_loop_prev_mid(a, 3 * t + j);
    const uint32_t m = c3[k];
    pmi_loop_ring r;
    pmi_loop_ring_six(&r, m);
    uint32_t ring[6] = {c3[(k + 2) % 3], u, m, m, w, c3[(k + 1) % 3]};
    if (tw == PMI_LOOP_NONE) {
        r.boundary = 1;
        r.b0 = w;
        r.b1 = u;
    } else {
        pmi_loop_twin_mids(a, tw, u, &ring[2], &ring[3]);
        for (int j = 0; j < 6; j++)
            for (int i = 0; i < 3; i++)
                r.sum[i] += (double)a->pos[3 * (size_t)ring[j] + i];
    }
    pmi_loop_even_to(a, m, &r, q);
    if (q2) {
        /* two levels on: m's neighbours are the vertices created on the
         * edges to its ring, each between ring[j - 1] and ring[j + 1]; the
         * odd rules of pmi_loop_odd_ids a coordinate at a time, each point
         * converted once (a GPU thread holds 7 doubles, not 21) */
        if (!r.boundary)
            for (int i = 0; i < 3; i++) {
                const double dm = (double)a->pos[3 * (size_t)m + i];
                double d[6];
                for (int j = 0; j < 6; j++)
                    d[j] = (double)a->pos[3 * (size_t)ring[j] + i];
                for (int j = 0; j < 6; j++)
                    r.sum2[i] +=
                        pmi_loop_widen(pmi_loop_odd_dd(dm, d[j], d[(j + 5) % 6], d[(j + 1) % 6]));
            }
        pmi_loop_even_ahead(a->pos, m, &r, q, q2);
    }
    if (a->vstart_new && vs) {
        const uint32_t c = 3 * (4 * t + 3) + k;
        *vs = 3 * (4 * (c / 3) + c % 3) + c % 3;
    }
}

/* pmi_loop_even_new_into for half-edge h, in place (nothing when h does
 * not own its edge). */
PMI_LHD void pmi_loop_even_new(const pmi_loop_args *a, uint32_t h)
{
    const uint32_t tw = a->ptwin[h];
    if (!pmi_loop_owns(h, tw)) return;
    const size_t m = (size_t)a->pnv + a->powner[h];
    pmi_loop_even_new_into(a, h, a->pos_new + 3 * m, a->vstart_new ? a->vstart_new + m : NULL,
                           a->pos_out2 ? a->pos_out2 + 3 * m : NULL);
}

/* Which of the 12 half-edges of uniform triangle t's children (child c's
 * corner j at bit 3c + j) own their edges, from own[0..2], whether t's
 * half-edges own theirs (pmi_loop_red_uniform_into says why). */
PMI_LHD uint32_t pmi_loop_child_owners(const uint32_t own[3])
{
    return own[0] | 1u << 1 | own[2] << 2 | own[0] << 3 | own[1] << 4 | 1u << 5 | 1u << 6 |
           own[1] << 7 | own[2] << 8;
}

/* The owner numbers of those 12 half-edges in the next stream, from t's
 * own: owner_t the owners before t. A half-edge that does not own its
 * edge gets the number of the next one that does. */
PMI_LHD void pmi_loop_child_numbers(uint32_t t, uint32_t owner_t, const uint32_t own[3],
                                    uint32_t num[12])
{
    const uint32_t fl = pmi_loop_child_owners(own);
    uint32_t run = 3 * t + 2 * owner_t;
    for (uint32_t j = 0; j < 12; j++) {
        num[j] = run;
        run += fl >> j & 1u;
    }
}

/* Entry j of pmi_loop_child_numbers alone: the owners before j counted in
 * the mask. */
PMI_LHD uint32_t pmi_loop_child_number(uint32_t t, uint32_t owner_t, const uint32_t own[3],
                                       uint32_t j)
{
    uint32_t x = pmi_loop_child_owners(own) & ((1u << j) - 1u);
#ifdef __CUDA_ARCH__
    x = (uint32_t)__popc(x);
#else
    x = (uint32_t)__builtin_popcount(x);
#endif
    return 3 * t + 2 * owner_t + x;
}

/* The twins, in the next stream, of the two halves of uniform triangle t's
 * edge k (from v_k: f, then s) when that edge's twin is half-edge p with
 * ptri_p = its first vertex: the halves of p, in the children of p's
 * triangle, the same way round when the pair is misoriented. */
PMI_LHD void pmi_loop_half_twins(uint32_t p, uint32_t ptri_p, uint32_t v_k, uint32_t *f,
                                 uint32_t *s)
{
    const uint32_t first[3] = {0, 4, 8}, second[3] = {3, 7, 2};
    const uint32_t k2 = p % 3, b2 = 12 * (p / 3);
    const int same = ptri_p == v_k;
    *f = b2 + (same ? first[k2] : second[k2]);
    *s = b2 + (same ? second[k2] : first[k2]);
}

/* Per triangle t: the odd rule on the edges t owns, its children (as
 * pmi_loop_red with every triangle red: children at 4t), their twins, the
 * new vertices' start corners, and the next stream's owner numbers. A
 * child half-edge on parent edge k owns its edge exactly when the parent
 * half-edge does (its twin is in the children of the parent's twin's
 * triangle); of the interior ones 1, 5 and 6 own theirs (twins 11, 9, 10).
 * So the owners before child block t number 3t + 2 * owner[3t] (owner[3t]:
 * the owners before triangle t), and within the block they follow in
 * half-edge order: the exclusive scan of the next stream's owner flags,
 * without a scan. The 12 words of each array for t's children go to o,
 * tn (twins) and on (owner numbers); tn and on may be NULL (last level).
 * The new vertex nv + e (e an owner number) gets its position at
 * pn + 3 (e - elo) and its start corner at vn[e - elo] (vn NULL on the
 * last level and the one before RED_LAST2's). The GPU stages all of them
 * in shared memory to store a block's words contiguously (a block's owner
 * numbers are consecutive). */
PMI_LHD void pmi_loop_red_uniform_into(const pmi_loop_args *a, uint32_t t, uint32_t *o,
                                       uint32_t *tn, uint32_t *on, float *pn, uint32_t *vn,
                                       uint32_t elo)
{
    const uint32_t *v = a->tri + 3 * (size_t)t;
    uint32_t m[3] = {0, 0, 0}, tw[3], own[3];
    for (uint32_t k = 0; k < 3; k++) {
        const uint32_t h = 3 * t + k;
        tw[k] = a->twin[h];
        own[k] = pmi_loop_owns(h, tw[k]);
        if (!own[k] && !o) continue; /* only the children need its vertex */
        const uint32_t e = a->owner[own[k] ? h : tw[k]];
        m[k] = a->nv + e;
        if (own[k]) {
            pmi_loop_odd_to(a, h, tw[k], pn + 3 * (size_t)(e - elo));
            if (vn) vn[e - elo] = 3 * (4 * t + 3) + k;
        }
    }
    if (o) {
        pmi_loop_put(o, v[0], m[0], m[2]);
        pmi_loop_put(o + 3, m[0], v[1], m[1]);
        pmi_loop_put(o + 6, m[2], m[1], v[2]);
        pmi_loop_put(o + 9, m[0], m[1], m[2]);
    }
    const uint32_t base = 12 * t;
    if (tn) {
        const uint32_t first[3] = {0, 4, 8}, second[3] = {3, 7, 2};
        pmi_loop_inner_twins(tn, base);
        for (uint32_t k = 0; k < 3; k++) {
            const uint32_t p = tw[k];
            uint32_t f = p, s = p; /* NONE carries over */
            if (p != PMI_LOOP_NONE && p != PMI_LOOP_FROZEN)
                pmi_loop_half_twins(p, a->tri[p], v[k], &f, &s);
            tn[first[k]] = f;
            tn[second[k]] = s;
        }
    }
    if (on) pmi_loop_child_numbers(t, a->owner[3 * t], own, on);
}

/* pmi_loop_red_uniform_into writing the next stream's arrays in place. */
PMI_LHD void pmi_loop_red_uniform(const pmi_loop_args *a, uint32_t t)
{
    const size_t base = 12 * (size_t)t;
    pmi_loop_red_uniform_into(
        a, t, a->tri_next ? a->tri_next + base : NULL, a->twin_next ? a->twin_next + base : NULL,
        a->owner_next ? a->owner_next + base : NULL, a->pos_new + 3 * (size_t)a->nv,
        a->vstart_new ? a->vstart_new + a->nv : NULL, 0);
}

/* RED_LAST2's start for triangle t (pmi_loop_red_last2): its
 * corners v, twins tw, whether it owns its edges, the vertices m the
 * level before created on them, and the owner numbers num of its
 * children's half-edges (those on the edges t does not own are t's own
 * count here: the triangles take the twin's, the positions skip them). */
PMI_LHD void pmi_loop_last2_start(const pmi_loop_args *a, uint32_t t, uint32_t v[3], uint32_t tw[3],
                                  uint32_t own[3], uint32_t m[3], uint32_t num[12])
{
    for (uint32_t k = 0; k < 3; k++) {
        const uint32_t h = 3 * t + k;
        v[k] = a->ptri[h];
        tw[k] = a->ptwin[h];
        own[k] = pmi_loop_owns(h, tw[k]);
        m[k] = a->pnv + a->powner[own[k] ? h : tw[k]];
    }
    pmi_loop_child_numbers(t, a->powner[3 * t], own, num);
    num[11] = num[1], num[9] = num[5], num[10] = num[6];
}

/* RED_LAST2's triangles: t's 16 output triangles (child c's children at
 * 12c words) to o. */
PMI_LHD void pmi_loop_red_last2_tri(const pmi_loop_args *a, uint32_t t, uint32_t *o)
{
    const uint32_t first[3] = {0, 4, 8}, second[3] = {3, 7, 2};
    uint32_t v[3], m[3], own[3], tw[3], num[12];
    pmi_loop_last2_start(a, t, v, tw, own, m, num);
    for (uint32_t k = 0; k < 3; k++) {
        if (tw[k] == PMI_LOOP_NONE || own[k]) continue;
        /* the halves' twins in t2's children, and those half-edges' owner
         * numbers */
        const uint32_t t2 = tw[k] / 3, o2 = a->powner[3 * t2];
        uint32_t own2[3], f, s2;
        for (uint32_t j = 0; j < 3; j++)
            own2[j] = pmi_loop_prev_own(a, 3 * t2 + j);
        pmi_loop_half_twins(tw[k], a->ptri[tw[k]], v[k], &f, &s2);
        num[first[k]] = pmi_loop_child_number(t2, o2, own2, f - 12 * t2);
        num[second[k]] = pmi_loop_child_number(t2, o2, own2, s2 - 12 * t2);
    }
    const uint32_t ch[4][3] = {
        {v[0], m[0], m[2]}, {m[0], v[1], m[1]}, {m[2], m[1], v[2]}, {m[0], m[1], m[2]}};
    for (uint32_t c = 0; c < 4; c++) {
        const uint32_t M0 = a->nv + num[3 * c], M1 = a->nv + num[3 * c + 1],
                       M2 = a->nv + num[3 * c + 2];
        const uint32_t w[12] = {ch[c][0], M0, M2, M0, ch[c][1], M1, M2, M1, ch[c][2], M0, M1, M2};
        pmi_loop_put12(o + 12 * c, w);
    }
}

/* RED_LAST2's positions: the odd rules of the vertices created on the
 * edges t's children own, at pn + 3 (e - elo), and the even rules of the
 * vertices on the edges t owns, at pos_new + 3 m. */
PMI_LHD void pmi_loop_red_last2_pos(const pmi_loop_args *a, uint32_t t, float *pn, uint32_t elo)
{
    const uint32_t first[3] = {0, 4, 8}, second[3] = {3, 7, 2};
    uint32_t v[3], m[3], own[3], tw[3], x1[3], x2[3], num[12];
    pmi_loop_last2_start(a, t, v, tw, own, m, num);
    for (uint32_t k = 0; k < 3; k++) {
        x1[k] = x2[k] = v[k];
        if (tw[k] != PMI_LOOP_NONE && own[k]) pmi_loop_twin_mids(a, tw[k], v[k], &x1[k], &x2[k]);
    }
    /* the odd rule on the edges t's children own: the interior ones
     * (half-edges 1, 5, 6; opposite in the centre child m1, m2, m0), then
     * the halves of t's own edges (opposite m_{k+2} or m_{k+1} in t's
     * child, x1 or x2 in t2's) */
    /* t's corners and new vertices are read and converted once (each is
     * in up to 7 of the 9 rules) */
    double pv[3][3], pm[3][3], px[3];
    for (uint32_t k = 0; k < 3; k++) {
        pmi_loop_load_d(a->pos, v[k], pv[k]);
        pmi_loop_load_d(a->pos, m[k], pm[k]);
    }
    /* x1 and x2 of every edge read before any rule (v_k when t does not
     * own edge k: read, not used), so a GPU thread has all its loads in
     * flight at once */
    float fx[3][2][3];
    for (uint32_t k = 0; k < 3; k++)
        for (int i = 0; i < 3; i++) {
            fx[k][0][i] = a->pos[3 * (size_t)x1[k] + i];
            fx[k][1][i] = a->pos[3 * (size_t)x2[k] + i];
        }
    pmi_loop_odd_d(pm[0], pm[2], pv[0], pm[1], 0, pn + 3 * (size_t)(num[1] - elo));
    pmi_loop_odd_d(pm[1], pm[0], pv[1], pm[2], 0, pn + 3 * (size_t)(num[5] - elo));
    pmi_loop_odd_d(pm[2], pm[1], pv[2], pm[0], 0, pn + 3 * (size_t)(num[6] - elo));
    /* the even rules' results are stored after the loop: no global store
     * sits between the loop's loads (pos and pos_new may alias for all
     * the compiler knows), so a GPU thread has them all in flight */
    float qe[3][3];
    for (uint32_t k = 0; k < 3; k++) {
        if (!own[k]) continue;
        const uint32_t k1 = (k + 1) % 3, k2 = (k + 2) % 3;
        const int b = tw[k] == PMI_LOOP_NONE;
        /* and m_k's even rule (PMI_LOOP_EVEN_NEW's ring m_{k+2}, v_k, x1,
         * x2, v_{k+1}, m_{k+1}, summed in that order from 0) to pos_new */
        pmi_loop_ring r;
        pmi_loop_ring_six(&r, m[k]);
        for (int i = 0; i < 3; i++)
            r.sum[i] = r.sum[i] + pm[k2][i] + pv[k][i];
        for (int i = 0; i < 3; i++)
            px[i] = (double)fx[k][0][i];
        pmi_loop_odd_d(pv[k], pm[k], pm[k2], px, b, pn + 3 * (size_t)(num[first[k]] - elo));
        for (int i = 0; i < 3; i++)
            r.sum[i] += px[i];
        for (int i = 0; i < 3; i++)
            px[i] = (double)fx[k][1][i];
        pmi_loop_odd_d(pm[k], pv[k1], pm[k1], px, b, pn + 3 * (size_t)(num[second[k]] - elo));
        for (int i = 0; i < 3; i++)
            r.sum[i] = r.sum[i] + px[i] + pv[k1][i] + pm[k1][i];
        r.boundary = b;
        /* the positions it reads, from the registers (exact: each double
         * holds a float) */
        float fm[3], f0[3], f1[3];
        for (int i = 0; i < 3; i++) {
            fm[i] = (float)pm[k][i];
            f0[i] = (float)pv[k1][i];
            f1[i] = (float)pv[k][i];
        }
        pmi_loop_even_at(fm, &r, f0, f1, qe[k]);
    }
    for (uint32_t k = 0; k < 3; k++)
        if (own[k])
            for (int i = 0; i < 3; i++)
                a->pos_new[3 * (size_t)m[k] + i] = qe[k][i];
}

/* Per triangle t of the stream two levels before the output (ptri, ptwin,
 * powner, pnv; pos and nv are the level between, whose triangles, twins and
 * owner numbers are never stored): the last two uniform splits at once,
 * the same bytes as pmi_loop_red_uniform_into twice. The children of t
 * (v0 m0 m2), (m0 v1 m1), (m2 m1 v2), (m0 m1 m2), their half-edges'
 * twins and owner numbers are those pmi_loop_red_uniform_into would have
 * stored (the owner numbers of a half on an edge t does not own are its
 * twin's, in the children of the twin's triangle t2); the odd rule's
 * opposite vertices across t's edges are t2's new vertices x1, x2
 * (pmi_loop_twin_mids). pmi_loop_red_last2_tri writes t's 16 output
 * triangles (child c's children at 12c words) to o;
 * pmi_loop_red_last2_pos the positions of the vertices created on the
 * edges t's children own (owner numbers e, consecutive over t) at
 * pn + 3 (e - elo), and, for each edge t owns, the even rule of the
 * vertex m the level before created on it, at pos_new + 3 m:
 * PMI_LOOP_EVEN_NEW's sums from the positions the odd rules read anyway,
 * so that level runs no EVEN_NEW. Here both in place, one after the
 * other; the GPU stages each in shared memory and runs them as two
 * kernels. */
PMI_LHD void pmi_loop_red_last2(const pmi_loop_args *a, uint32_t t)
{
    pmi_loop_red_last2_tri(a, t, a->out_tri + 48 * (size_t)t);
    pmi_loop_red_last2_pos(a, t, a->pos_new + 3 * (size_t)a->nv, 0);
}

/* Adds output triangle T's normal to s: PMI_LOOP_NORMAL_PATCH's when cnorm
 * is set (T is then a patch's corner triangle 16 t + 5 k), else from the
 * output. Callers test cnorm outside their loops and pass `stored` (the
 * compiler then keeps each loop's loads in flight). */
PMI_LHD void pmi_loop_add_out_normal(const pmi_loop_args *a, int stored, uint64_t T, double s[3])
{
    double n[3];
    if (stored) {
        const double *q = a->cnorm + 3 * (3 * (size_t)(T / 16) + (size_t)(T % 16) / 5);
        for (int c = 0; c < 3; c++)
            n[c] = q[c];
    } else {
        pmi_loop_face_normal(a->npos, a->ntri, T, n);
    }
    for (int c = 0; c < 3; c++)
        s[c] += n[c];
}

/* The output normal of a vertex from its output triangles in increasing
 * order: as pmi_loop_csr_normal, without the corner lists. */
PMI_LHD void pmi_loop_normal_sum(const pmi_loop_args *a, const uint32_t *T, uint32_t n, double s[3])
{
    if (a->cnorm)
        for (uint32_t i = 0; i < n; i++)
            pmi_loop_add_out_normal(a, 1, T[i], s);
    else
        for (uint32_t i = 0; i < n; i++)
            pmi_loop_add_out_normal(a, 0, T[i], s);
}

/* The sum over the input corners list[i0..e) of their output triangles'
 * normals (corner 3 t + k: output triangle tmul t + tadd k), in order. */
PMI_LHD void pmi_loop_corner_sum(const pmi_loop_args *a, int stored, uint32_t i0, uint32_t e,
                                 double s[3])
{
    for (uint32_t i = i0; i < e; i++) {
        const uint32_t c = a->list[i];
        pmi_loop_add_out_normal(a, stored,
                                a->tmul * (uint64_t)(c / 3) + a->tadd * (uint64_t)(c % 3), s);
    }
}

/* The most triangles around a vertex that a uniform level created (6). */
#define PMI_LOOP_FAN_CAP 8u

/* The output triangles (mul t + add k: t a triangle of the fan, k the
 * vertex's corner in it) around the vertex at corner c of the uniform
 * stream (tri, twin), in walk order; 0 when the fan has more than `cap`
 * triangles or leaves the stream (not in a uniform stream). A corner's
 * child at the next level is 4t + k, and the vertex stays corner k. */
PMI_LHD uint32_t pmi_loop_fan_children(const uint32_t *tri, const uint32_t *twin, uint32_t c,
                                       uint32_t cap, uint32_t mul, uint32_t add, uint32_t *out)
{
    const uint32_t t0 = c / 3, k0 = c % 3, v = tri[c];
    const uint32_t A0 = c;
    uint32_t B = 3 * t0 + (k0 + 2) % 3, t = t0, n = 0;
    for (;;) {
        if (n >= cap) return 0;
        out[n++] = mul * t + add * pmi_loop_corner(tri, t, v);
        const uint32_t tw = twin[B];
        if (tw == PMI_LOOP_FROZEN) return 0;
        if (tw == PMI_LOOP_NONE) break;
        if (tw == A0) return n; /* closed */
        B = pmi_loop_other_at(tri, tw, v);
        t = tw / 3;
    }
    uint32_t A = A0;
    for (;;) {
        const uint32_t tw = twin[A];
        if (tw == PMI_LOOP_FROZEN) return 0;
        if (tw == PMI_LOOP_NONE) return n;
        A = pmi_loop_other_at(tri, tw, v);
        t = tw / 3;
        if (n >= cap) return 0;
        out[n++] = mul * t + add * pmi_loop_corner(tri, t, v);
    }
}

/* Per vertex v of the stream three levels before the output (of the input
 * when one to three levels split; npos, ntri: the output): its output
 * normal, the sum over its output triangles in increasing order. An input
 * vertex's triangles are its corners' corner children, level after level
 * (its corner list is sorted, and the map keeps the order); a vertex made
 * by a later level (from four levels) has at most 6 triangles in the
 * stream two levels before the output (ptri, ptwin, pvstart), whose corner
 * children two levels down are its output triangles (16 t + 5 k). The
 * vertices the last two levels created are PMI_LOOP_NORMAL_PATCH's
 * (PMI_LOOP_NORMAL_NEW's when one level splits), those the level before
 * created PMI_LOOP_NORMAL_NEW's. */
PMI_LHD void pmi_loop_normal_old(const pmi_loop_args *a, uint32_t v)
{
    double s[3] = {0.0, 0.0, 0.0};
    if (v < a->nv0) {
        const uint32_t i0 = a->offset[v], e = a->offset[v] + a->count[v];
        if (a->cnorm)
            pmi_loop_corner_sum(a, 1, i0, e, s);
        else
            pmi_loop_corner_sum(a, 0, i0, e, s);
    } else {
        uint32_t T[PMI_LOOP_FAN_CAP], n = 0;
        const uint32_t c = a->pvstart[v];
        if (c != PMI_LOOP_NONE)
            n = pmi_loop_fan_children(a->ptri, a->ptwin, c, PMI_LOOP_FAN_CAP, 16u, 5u, T);
        if (n == 0) {
            pmi_atomic_min(a->error, (PMI_LOOP_ERR_WALK << 56) | c);
        } else {
            pmi_loop_sort_small(T, n);
            pmi_loop_normal_sum(a, T, n, s);
        }
    }
    pmi_loop_store_unit(s, a->nout + 3 * (size_t)v);
}

/* A triangle t split twice: its output triangles 16 t + j (j = 4 c + c',
 * child c's child c'; children (v0 m0 m2), (m0 v1 m1), (m2 m1 v2),
 * (m0 m1 m2)) over a lattice of 15 points (w0, w1, w2), barycentric
 * weights in quarters, numbered w0 then w1 decreasing: 0 (4,0,0),
 * 1 (3,1,0), 2 (3,0,1), 3 (2,2,0), 4 (2,1,1), 5 (2,0,2), 6 (1,3,0),
 * 7 (1,2,1), 8 (1,1,2), 9 (1,0,3), 10 (0,4,0), 11 (0,3,1), 12 (0,2,2),
 * 13 (0,1,3), 14 (0,0,4); 4, 7 and 8 are inside t. Seen from edge k
 * (corner k to corner k + 1), a point is at row w_(k+2) and place
 * w_(k+1) (0-4 along the edge). The tables follow from the children rule
 * applied twice, packed into words so that device code indexes no array
 * in memory. */

/* The point at row `row` and place `pos` of edge k. */
PMI_LHD uint32_t pmi_loop_patch_at(uint32_t k, uint32_t row, uint32_t pos)
{
    uint32_t w[3];
    w[k] = 4 - row - pos;
    w[(k + 1) % 3] = pos;
    w[(k + 2) % 3] = row;
    return (4 - w[0]) * (5 - w[0]) / 2 + 4 - w[0] - w[1];
}

/* The word of t's 48 output words (3 j + corner) holding point x's vertex. */
PMI_LHD uint32_t pmi_loop_patch_src(uint32_t x)
{
    return x < 10 ? (uint32_t)(0x069938d205102040ull >> (6 * x)) & 63u
                  : (uint32_t)(0x0000000020754450ull >> (6 * (x - 10))) & 63u;
}

/* The output triangles at point x (bit j). */
PMI_LHD uint32_t pmi_loop_patch_mask(uint32_t x)
{
    const uint64_t w = x < 4    ? 0x1012000d000b0001ull
                       : x < 8  ? 0xb0d000b04104d00eull
                       : x < 12 ? 0x00e000200d00eb00ull
                                : 0x000004000e002240ull;
    return (uint32_t)(w >> (16 * (x % 4))) & 0xffffu;
}

/* The point at corner c of output triangle j, in its stored order. */
PMI_LHD uint32_t pmi_loop_patch_corner(uint32_t j, uint32_t c)
{
    const uint64_t w = j < 5    ? 0x0763241542431210ull
                       : j < 10 ? 0x0dc89857b6cb7ba6ull
                       : j < 15 ? 0x05848c74739d8ed9ull
                                : 0x0000000000000487ull;
    return (uint32_t)(w >> (12 * (j % 5) + 4 * c)) & 15u;
}

/* The lowest set bit of m != 0. */
PMI_LHD uint32_t pmi_loop_ctz(uint32_t m)
{
#ifdef __CUDA_ARCH__
    return (uint32_t)__ffs((int)m) - 1u;
#else
    return (uint32_t)__builtin_ctz(m);
#endif
}

/* Point x of t's patch (o: t's 48 output words) into p. */
PMI_LHD void pmi_loop_patch_load(const pmi_loop_args *a, const uint32_t *o, uint32_t x, float *p)
{
    const float *q = a->npos + 3 * (size_t)o[pmi_loop_patch_src(x)];
    for (int c = 0; c < 3; c++)
        p[c] = q[c];
}

/* Output triangle j's normal from the 15 points' positions (p: 3 floats a
 * point, widened here: exactly), in its stored order: the bits of
 * pmi_loop_face_normal. The GPU keeps the points in shared memory as
 * floats, half the wavefronts of doubles. */
PMI_LHD void pmi_loop_patch_face(const float *p, uint32_t j, double n[3])
{
    double c[3][3];
    for (uint32_t i = 0; i < 3; i++)
        for (int d = 0; d < 3; d++)
            c[i][d] = (double)p[3 * pmi_loop_patch_corner(j, i) + d];
    pmi_loop_face_normal_of(c[0], c[1], c[2], n);
}

/* Stores corner triangle 16 t + 5 k's normal n for PMI_LOOP_NORMAL_OLD and
 * NEW (pmi_loop_add_out_normal). */
PMI_LHD void pmi_loop_patch_corner_normal(const pmi_loop_args *a, uint32_t t, uint32_t k,
                                          const double n[3])
{
    double *q = a->cnorm + 3 * (3 * (size_t)t + k);
    for (int c = 0; c < 3; c++)
        q[c] = n[c];
}

/* Task q (0-11) of triangle t of the stream two levels before the output
 * (ptwin): the twin of its edge's half-edge (NONE inside t or on the
 * boundary), or FROZEN (a uniform stream has none) when t does not own
 * the edge and the task has nothing to do. Tasks 0-2 are the points
 * inside t (4, 7, 8: the nibbles of 0x874), task 3 + 3 k + r - 1 point r
 * (1-3) of edge k. */
PMI_LHD uint32_t pmi_loop_patch_twin(const pmi_loop_args *a, uint32_t t, uint32_t q)
{
    if (q < 3) return PMI_LOOP_NONE;
    const uint32_t h = 3 * t + (q - 3) / 3, tw = a->ptwin[h];
    return pmi_loop_owns(h, tw) ? tw : PMI_LOOP_FROZEN;
}

/* Task q of triangle t (o: t's 48 output words; fn: t's 16 output
 * triangle normals; tw: pmi_loop_patch_twin's, c2: the twin's first
 * vertex ptri[tw] when tw is a half-edge): the output normal of a vertex
 * the last two levels created, the same sum in the same order as a corner
 * list of the output gives. The points inside t have their 6 triangles in
 * t's 16; a point of an edge t owns has 3 there and 3 in the twin's 16,
 * which follow t's (h < twin): those at the twin's point r or 4 - r of
 * its edge, by whether that edge runs from t's corner k (c2 is corner k's
 * vertex) or from corner k + 1. The triangles go by their bits, lowest
 * first (on the GPU a warp's lanes then take 3 or 6 steps, not 16). */
PMI_LHD void pmi_loop_patch_vertex(const pmi_loop_args *a, const uint32_t *o, uint32_t q,
                                   const double (*fn)[3], uint32_t tw, uint32_t c2)
{
    if (tw == PMI_LOOP_FROZEN) return;
    const uint32_t k = q < 3 ? 0 : (q - 3) / 3, r = q < 3 ? 0 : (q - 3) % 3 + 1;
    const uint32_t x = q < 3 ? (0x874u >> (4 * q)) & 15u : pmi_loop_patch_at(k, 0, r);
    double s[3] = {0.0, 0.0, 0.0};
    for (uint32_t m = pmi_loop_patch_mask(x); m; m &= m - 1) {
        const uint32_t j = pmi_loop_ctz(m);
        for (int c = 0; c < 3; c++)
            s[c] += fn[j][c];
    }
    if (tw != PMI_LOOP_NONE) {
        const uint32_t rev = c2 == o[pmi_loop_patch_src(pmi_loop_patch_at(k, 0, 4))];
        for (uint32_t m = pmi_loop_patch_mask(pmi_loop_patch_at(tw % 3, 0, rev ? 4 - r : r)); m;
             m &= m - 1) {
            double g[3];
            pmi_loop_face_normal(a->npos, a->ntri, 16 * (uint64_t)(tw / 3) + pmi_loop_ctz(m), g);
            for (int c = 0; c < 3; c++)
                s[c] += g[c];
        }
    }
    pmi_loop_store_unit(s, a->nout + 3 * (size_t)o[pmi_loop_patch_src(x)]);
}

/* Per triangle t of the stream two levels before the output (2 levels or
 * more): the output normals of the vertices the last two levels created
 * inside t and on the edges t owns (t's corners are PMI_LOOP_NORMAL_OLD's),
 * each of t's 16 output triangle normals computed once. */
PMI_LHD void pmi_loop_normal_patch(const pmi_loop_args *a, uint32_t t)
{
    const uint32_t *o = a->ntri + 48 * (size_t)t;
    float p[45];
    double fn[16][3];
    for (uint32_t x = 0; x < 15; x++)
        pmi_loop_patch_load(a, o, x, p + 3 * x);
    for (uint32_t j = 0; j < 16; j++)
        pmi_loop_patch_face(p, j, fn[j]);
    for (uint32_t k = 0; k < 3; k++)
        pmi_loop_patch_corner_normal(a, t, k, fn[5 * k]);
    for (uint32_t q = 0; q < 12; q++) {
        const uint32_t tw = pmi_loop_patch_twin(a, t, q);
        pmi_loop_patch_vertex(a, o, q, (const double(*)[3])fn, tw,
                              tw < PMI_LOOP_FROZEN ? a->ptri[tw] : 0);
    }
}

/* The output triangles of the vertex created on edge k of triangle t
 * (nmul, nadd: pmi_loop_args's): its triangles one level down are t's
 * children k (the vertex at corner k + 1), k + 1 and 3 (at corner k). */
PMI_LHD void pmi_loop_new_fan(const pmi_loop_args *a, uint32_t t, uint32_t k, uint32_t *T)
{
    const uint32_t k1 = (k + 1) % 3;
    T[0] = a->nmul * (4 * t + k) + a->nadd * k1;
    T[1] = a->nmul * (4 * t + k1) + a->nadd * k;
    T[2] = a->nmul * (4 * t + 3) + a->nadd * k;
}

/* Per half-edge h of a stream that owns its edge: the output normal of
 * the edge's new vertex (nv + owner[h]), from the 3 triangles of each
 * triangle on the edge one level down (pmi_loop_new_fan), which its
 * triangles in the output descend from: the last stream's when one level
 * splits (nmul 1, nadd 0), the stream three levels before the output's
 * from three (nmul 16, nadd 5: corner children two levels down). */
PMI_LHD void pmi_loop_normal_new(const pmi_loop_args *a, uint32_t h)
{
    const uint32_t tw = a->twin[h];
    if (!pmi_loop_owns(h, tw)) return;
    uint32_t T[6], n = 3;
    pmi_loop_new_fan(a, h / 3, h % 3, T);
    if (tw != PMI_LOOP_NONE) {
        pmi_loop_new_fan(a, tw / 3, tw % 3, T + 3);
        n = 6;
    }
    pmi_loop_sort_small(T, n);
    double s[3] = {0.0, 0.0, 0.0};
    pmi_loop_normal_sum(a, T, n, s);
    pmi_loop_store_unit(s, a->nout + 3 * (size_t)(a->nv + a->owner[h]));
}

/* One step for element i (the backends' loops call this). */
PMI_LHD void pmi_loop_step(int step, uint32_t i, const pmi_loop_args *a)
{
    switch (step) {
    case PMI_LOOP_CHECK_TRI: pmi_loop_check_tri(a, i); break;
    /* Corners at an index out of range are left out of the lists: the
     * input's lists are built before the host reads CHECK_TRI's verdict. */
    case PMI_LOOP_CSR_COUNT:
        for (uint32_t k = 0; k < 3; k++) {
            const uint32_t v = a->ntri[3 * (size_t)i + k];
            if (v < a->nv) pmi_atomic_inc(a->count + v);
        }
        break;
    case PMI_LOOP_CSR_FILL: {
        const uint32_t v = a->ntri[i];
        if (v < a->nv) a->list[a->offset[v] + pmi_atomic_inc(a->count + v)] = i;
        break;
    }
    case PMI_LOOP_CSR_SORT: pmi_loop_csr_sort(a, i); break;
    case PMI_LOOP_TWIN: pmi_loop_twin(a, i); break;
    case PMI_LOOP_VSTART: pmi_loop_vstart(a, i); break;
    case PMI_LOOP_CSR_NORMAL: pmi_loop_csr_normal(a, i); break;
    case PMI_LOOP_WALK_VERTEX: pmi_loop_walk_vertex(a, i); break;
    case PMI_LOOP_SPLIT: pmi_loop_split(a, i); break;
    case PMI_LOOP_MARK_ENDS: pmi_loop_mark_ends(a, i); break;
    case PMI_LOOP_PROMOTE_PASS:
        if (pmi_loop_promote(a, i)) pmi_loop_atomic_set(a->changed);
        break;
    case PMI_LOOP_CLASSIFY: pmi_loop_classify(a, i); break;
    case PMI_LOOP_EVEN: pmi_loop_even(a, i); break;
    case PMI_LOOP_ODD: pmi_loop_odd(a, i); break;
    case PMI_LOOP_EMIT: pmi_loop_emit(a, i); break;
    case PMI_LOOP_COPY_U32: a->dst[i] = a->src[i]; break;
    case PMI_LOOP_ZERO_U32: a->dst[i] = 0; break;
    case PMI_LOOP_EVEN_UNIFORM: pmi_loop_even_uniform(a, i); break;
    case PMI_LOOP_RED_UNIFORM: pmi_loop_red_uniform(a, i); break;
    case PMI_LOOP_NORMAL_OLD: pmi_loop_normal_old(a, i); break;
    case PMI_LOOP_NORMAL_NEW: pmi_loop_normal_new(a, i); break;
    case PMI_LOOP_EVEN_NEW: pmi_loop_even_new(a, i); break;
    case PMI_LOOP_RED_LAST2: pmi_loop_red_last2(a, i); break;
    case PMI_LOOP_NORMAL_PATCH: pmi_loop_normal_patch(a, i); break;
    default: break;
    }
}

#endif
