/* The AVX2 kernels of the CPU marching cubes' slab walk (picked at run time
 * on CPUs that have AVX2): the inside bits of a lattice row, and the
 * vertices with central-difference normals eight at a time. Each computes
 * the same bits as the portable kernels of isosurface_kernel.h. */
#include "core/mc_math.h"
#include "core/mc_tables.h"
#include "cpu/isosurface_internal.h"

#if MC_AVX2
#include <immintrin.h>

/* bits_row_f32 with 8 compares at a time: the same ordered compares, so
 * the same bits. */
__attribute__((target("avx2"))) static void mc_bits_row_f32_avx2(const mc_job *J, size_t L,
                                                                 uint64_t *out)
{
    const float thr = J->fthr;
    const float *row = (const float *)J->data + (L % J->ny) * J->rs + (L / J->ny) * J->ss;
    const __m256 vt = _mm256_set1_ps(J->sg < 0 ? -thr : thr);
    const int above = J->sg < 0;
    for (size_t x = 0; x < J->nx; x += 64) {
        size_t cnt = J->nx - x < 64 ? J->nx - x : 64, t = 0;
        const float *s = row + x;
        uint64_t w = 0;
        if (above)
            for (; t + 8 <= cnt; t += 8)
                w |= (uint64_t)(unsigned)_mm256_movemask_ps(
                         _mm256_cmp_ps(_mm256_loadu_ps(s + t), vt, _CMP_GT_OQ))
                     << t;
        else
            for (; t + 8 <= cnt; t += 8)
                w |= (uint64_t)(unsigned)_mm256_movemask_ps(
                         _mm256_cmp_ps(_mm256_loadu_ps(s + t), vt, _CMP_LT_OQ))
                     << t;
        for (; t < cnt; t++)
            w |= (uint64_t)((float)J->sg * s[t] < thr) << t;
        out[x >> 6] = w;
    }
}

/* Integer samples: sg * v < siso in double is v <= A (inside below iso,
 * A = ceil(iso) - 1) or v >= B (inside above, B = floor(iso) + 1), exact
 * for integers; *none / *all when the bound is outside the type's range. */
static void mc_int_bounds(const mc_job *J, double lo, double hi, int *bound, int *none, int *all)
{
    double b = J->sg > 0 ? ceil(J->iso) - 1.0 : floor(J->iso) + 1.0;
    *none = J->sg > 0 ? b < lo : b > hi;
    *all = J->sg > 0 ? b >= hi : b <= lo;
    *bound = *none || *all ? 0 : (int)b;
}

/* The tail of a row (fewer than a vector): the scalar rule. */
static inline uint64_t mc_bits_tail(const mc_job *J, size_t row, size_t x, size_t t, size_t cnt)
{
    uint64_t w = 0;
    for (; t < cnt; t++)
        w |= (uint64_t)pmi_mc_inside(J->sg, J->siso, mc_sample(J, row + x + t)) << t;
    return w;
}

__attribute__((target("avx2"))) static void mc_bits_row_u8_avx2(const mc_job *J, size_t L,
                                                                uint64_t *out)
{
    size_t row = (L % J->ny) * J->rs + (L / J->ny) * J->ss;
    const uint8_t *d = (const uint8_t *)J->data + row;
    int bound, none, all;
    mc_int_bounds(J, 0, 255, &bound, &none, &all);
    const __m256i vb = _mm256_set1_epi8((char)(unsigned char)bound);
    for (size_t x = 0; x < J->nx; x += 64) {
        size_t cnt = J->nx - x < 64 ? J->nx - x : 64, t = 0;
        uint64_t w = 0;
        if (none || all) {
            out[x >> 6] = all ? mc_low(cnt) : 0;
            continue;
        }
        for (; t + 32 <= cnt; t += 32) {
            __m256i v = _mm256_loadu_si256((const __m256i *)(d + x + t));
            __m256i m = J->sg > 0 ? _mm256_cmpeq_epi8(_mm256_min_epu8(v, vb), v)
                                  : _mm256_cmpeq_epi8(_mm256_max_epu8(v, vb), v);
            w |= (uint64_t)(uint32_t)_mm256_movemask_epi8(m) << t;
        }
        out[x >> 6] = w | mc_bits_tail(J, row, x, t, cnt);
    }
}

/* 16 compare results (0 / 0xffff per lane) of a and b into 32 bits, in order. */
__attribute__((target("avx2"))) static inline uint32_t mc_mask16x2(__m256i a, __m256i b)
{
    __m256i p = _mm256_permute4x64_epi64(_mm256_packs_epi16(a, b), 0xd8);
    return (uint32_t)_mm256_movemask_epi8(p);
}

/* 16-bit samples; i16 is compared as u16 after flipping the sign bit
 * (flip = 0x8000), which keeps the order. */
__attribute__((target("avx2"))) static void mc_bits_row_16_avx2(const mc_job *J, size_t L,
                                                                uint64_t *out, int is_signed)
{
    size_t row = (L % J->ny) * J->rs + (L / J->ny) * J->ss;
    const uint16_t *d = (const uint16_t *)J->data + row;
    const unsigned short flip = is_signed ? 0x8000 : 0;
    int bound, none, all;
    mc_int_bounds(J, is_signed ? -32768 : 0, is_signed ? 32767 : 65535, &bound, &none, &all);
    const __m256i vb = _mm256_set1_epi16((short)((unsigned short)bound ^ flip));
    const __m256i vf = _mm256_set1_epi16((short)flip);
    for (size_t x = 0; x < J->nx; x += 64) {
        size_t cnt = J->nx - x < 64 ? J->nx - x : 64, t = 0;
        uint64_t w = 0;
        if (none || all) {
            out[x >> 6] = all ? mc_low(cnt) : 0;
            continue;
        }
        for (; t + 32 <= cnt; t += 32) {
            __m256i m[2];
            for (int h = 0; h < 2; h++) {
                __m256i v =
                    _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)(d + x + t + 16 * h)), vf);
                m[h] = J->sg > 0 ? _mm256_cmpeq_epi16(_mm256_min_epu16(v, vb), v)
                                 : _mm256_cmpeq_epi16(_mm256_max_epu16(v, vb), v);
            }
            w |= (uint64_t)mc_mask16x2(m[0], m[1]) << t;
        }
        out[x >> 6] = w | mc_bits_tail(J, row, x, t, cnt);
    }
}

__attribute__((target("avx2"))) static void mc_bits_row_u16_avx2(const mc_job *J, size_t L,
                                                                 uint64_t *out)
{
    mc_bits_row_16_avx2(J, L, out, 0);
}

__attribute__((target("avx2"))) static void mc_bits_row_i16_avx2(const mc_job *J, size_t L,
                                                                 uint64_t *out)
{
    mc_bits_row_16_avx2(J, L, out, 1);
}

/* f64: sg * v < siso as v < siso or v > -siso (exact negation). */
__attribute__((target("avx2"))) static void mc_bits_row_f64_avx2(const mc_job *J, size_t L,
                                                                 uint64_t *out)
{
    size_t row = (L % J->ny) * J->rs + (L / J->ny) * J->ss;
    const double *d = (const double *)J->data + row;
    const __m256d vt = _mm256_set1_pd(J->sg < 0 ? -J->siso : J->siso);
    for (size_t x = 0; x < J->nx; x += 64) {
        size_t cnt = J->nx - x < 64 ? J->nx - x : 64, t = 0;
        uint64_t w = 0;
        if (J->sg < 0)
            for (; t + 4 <= cnt; t += 4)
                w |= (uint64_t)(unsigned)_mm256_movemask_pd(
                         _mm256_cmp_pd(_mm256_loadu_pd(d + x + t), vt, _CMP_GT_OQ))
                     << t;
        else
            for (; t + 4 <= cnt; t += 4)
                w |= (uint64_t)(unsigned)_mm256_movemask_pd(
                         _mm256_cmp_pd(_mm256_loadu_pd(d + x + t), vt, _CMP_LT_OQ))
                     << t;
        out[x >> 6] = w | mc_bits_tail(J, row, x, t, cnt);
    }
}

const mc_bits_row_fn pmi_mc_bits_row_avx2[5] = {mc_bits_row_u8_avx2, mc_bits_row_u16_avx2,
                                                mc_bits_row_i16_avx2, mc_bits_row_f32_avx2,
                                                mc_bits_row_f64_avx2};

/* The operands of 4 vertices with central normals, lane l for V[l]: the
 * edge's two samples, the lattice coordinates of its lower end, and for
 * each end e and axis a the weighted difference g = (high sample - low
 * sample) * weight (pmi_mc_diff_w), as gradient_central reads and computes
 * it; the difference is taken where the samples are loaded, so 6 vectors
 * per group live until the arithmetic instead of 18. Built in registers:
 * vectors loaded from scalars just stored to the stack wait for the store
 * forwarding to fail. */
typedef struct mc_v4 {
    __m256d lo, hi, q[3], g[2][3];
} mc_v4;

/* The lattice coordinates of 4 vertices as doubles, converted as signed
 * integers (one instruction each; coordinates are far below 2^63): lanes
 * of one lattice row (vertices come in row order, so the first and last
 * share it) get j and k broadcast. */
__attribute__((target("avx2"))) static inline void mc_lattice4(const mc_pending *V, __m256d q[3])
{
#define MC_D(v) ((double)(int64_t)(v))
    q[0] = _mm256_set_pd(MC_D(V[3].i), MC_D(V[2].i), MC_D(V[1].i), MC_D(V[0].i));
    if (V[0].j == V[3].j && V[0].k == V[3].k) {
        q[1] = _mm256_set1_pd(MC_D(V[0].j));
        q[2] = _mm256_set1_pd(MC_D(V[0].k));
    } else {
        q[1] = _mm256_set_pd(MC_D(V[3].j), MC_D(V[2].j), MC_D(V[1].j), MC_D(V[0].j));
        q[2] = _mm256_set_pd(MC_D(V[3].k), MC_D(V[2].k), MC_D(V[1].k), MC_D(V[0].k));
    }
#undef MC_D
}

/* The samples of 4 edges whose ends c0[l] and c1[l] (offsets from d) and
 * their neighbours lie inside the volume: central differences (span 2)
 * along strides st[0..2]; d - st[a] must still point into the volume.
 * The neighbours are read through the shifted bases d + st[a] and d -
 * st[a] at the ends' own offsets, so the 8 offsets stay in registers and
 * every load is one addressing mode (no offset arithmetic per lane). */
#define MC_LOAD_CENTRAL(LOAD4, T, d, c0, c1, st, gw, o)                                            \
    do {                                                                                           \
        (o)->lo = LOAD4(d, c0[0], c0[1], c0[2], c0[3]);                                            \
        (o)->hi = LOAD4(d, c1[0], c1[1], c1[2], c1[3]);                                            \
        for (int a_ = 0; a_ < 3; a_++) {                                                           \
            const ptrdiff_t s_ = (ptrdiff_t)st[a_];                                                \
            const __m256d w_ = _mm256_set1_pd((gw)[a_]);                                           \
            const T *dh_ = (d) + s_, *dl_ = (d)-s_;                                                \
            (o)->g[0][a_] = _mm256_mul_pd(_mm256_sub_pd(LOAD4(dh_, c0[0], c0[1], c0[2], c0[3]),    \
                                                        LOAD4(dl_, c0[0], c0[1], c0[2], c0[3])),   \
                                          w_);                                                     \
            (o)->g[1][a_] = _mm256_mul_pd(_mm256_sub_pd(LOAD4(dh_, c1[0], c1[1], c1[2], c1[3]),    \
                                                        LOAD4(dl_, c1[0], c1[1], c1[2], c1[3])),   \
                                          w_);                                                     \
        }                                                                                          \
    } while (0)

/* The fast gather: every lane's two ends lie inside the volume, so the
 * differences are central (span 2) at fixed offsets. Returns 0, with
 * nothing read, when a lane has an end on the volume's border. */
#define MC_GATHER4_FAST(T, SUF, LOAD4)                                                             \
    __attribute__((target("avx2"))) static inline int mc_gather4_fast_##SUF(                       \
        const mc_job *J, const mc_pending *V, mc_v4 *o)                                            \
    {                                                                                              \
        const size_t st[3] = {1, J->rs, J->ss};                                                    \
        ptrdiff_t c0[4], c1[4];                                                                    \
        for (int l = 0; l < 4; l++) {                                                              \
            const mc_pending *v = &V[l];                                                           \
            const int ax = v->axis;                                                                \
            if (!v->i || !v->j || !v->k || v->i + 2 + (ax == 0) > J->nx ||                         \
                v->j + 2 + (ax == 1) > J->ny || v->k + 2 + (ax == 2) > J->nz)                      \
                return 0;                                                                          \
            /* From one slice on (k >= 1), so that d - st[a] is inside. */                         \
            c0[l] = (ptrdiff_t)(v->i + v->j * J->rs + (v->k - 1) * J->ss);                         \
            c1[l] = c0[l] + (ptrdiff_t)st[ax];                                                     \
        }                                                                                          \
        mc_lattice4(V, o->q);                                                                      \
        const T *d = (const T *)J->data + J->ss;                                                   \
        MC_LOAD_CENTRAL(LOAD4, T, d, c0, c1, st, J->gw[2], o);                                     \
        return 1;                                                                                  \
    }

/* Four samples as doubles, lane l from d[o_l]. */
#define MC_LOAD4_F32(d, o0, o1, o2, o3) _mm256_cvtps_pd(_mm_set_ps(d[o3], d[o2], d[o1], d[o0]))
#define MC_LOAD4_ANY(d, o0, o1, o2, o3)                                                            \
    _mm256_set_pd((double)d[o3], (double)d[o2], (double)d[o1], (double)d[o0])
/* M(T, SUF, LOAD4) for each sample type: the gathers' instantiations. */
#define MC_SAMPLE_TYPES(M)                                                                         \
    M(uint8_t, u8, MC_LOAD4_ANY)                                                                   \
    M(uint16_t, u16, MC_LOAD4_ANY)                                                                 \
    M(int16_t, i16, MC_LOAD4_ANY)                                                                  \
    M(float, f32, MC_LOAD4_F32)                                                                    \
    M(double, f64, MC_LOAD4_ANY)

/* The general gather, any lane on the border included: the clamped
 * differences of gradient_central (ip - p is 1 below the last point and 0
 * on it, p - im is 1 above the first point and 0 on it, so ip - im is
 * their sum), through arrays. */
#define MC_GATHER4(T, SUF, LOAD4_UNUSED)                                                           \
    __attribute__((target("avx2"))) static void mc_gather4_##SUF(const mc_job *J,                  \
                                                                 const mc_pending *V, mc_v4 *o)    \
    {                                                                                              \
        _Alignas(32) double lo[4], hi[4], q[3][4], g[2][3][4];                                     \
        const T *d = (const T *)J->data;                                                           \
        const size_t n[3] = {J->nx, J->ny, J->nz}, st[3] = {1, J->rs, J->ss};                      \
        for (int l = 0; l < 4; l++) {                                                              \
            const mc_pending *v = &V[l];                                                           \
            const size_t p[3] = {v->i, v->j, v->k};                                                \
            const int ax = v->axis;                                                                \
            const T *c0 = d + v->i + v->j * J->rs + v->k * J->ss, *c1 = c0 + st[ax];               \
            lo[l] = (double)*c0;                                                                   \
            hi[l] = (double)*c1;                                                                   \
            for (int a = 0; a < 3; a++) {                                                          \
                q[a][l] = (double)(int64_t)p[a];                                                   \
                for (int e = 0; e < 2; e++) {                                                      \
                    const size_t pa = p[a] + (size_t)(e && a == ax);                               \
                    const size_t up = pa + 1 < n[a], dn = pa > 0;                                  \
                    const T *c = e ? c1 : c0;                                                      \
                    g[e][a][l] = pmi_mc_diff_w((double)c[up * st[a]], (double)*(c - dn * st[a]),   \
                                               J->gw[up + dn][a]);                                 \
                }                                                                                  \
            }                                                                                      \
        }                                                                                          \
        o->lo = _mm256_load_pd(lo);                                                                \
        o->hi = _mm256_load_pd(hi);                                                                \
        for (int a = 0; a < 3; a++) {                                                              \
            o->q[a] = _mm256_load_pd(q[a]);                                                        \
            for (int e = 0; e < 2; e++)                                                            \
                o->g[e][a] = _mm256_load_pd(g[e][a]);                                              \
        }                                                                                          \
    }
MC_SAMPLE_TYPES(MC_GATHER4_FAST)
MC_SAMPLE_TYPES(MC_GATHER4)
#undef MC_GATHER4
#undef MC_GATHER4_FAST

/* The bits of a 64-bit word as 64 bytes of 0 or -1, bit b in byte b of
 * half b / 32: each byte lane picks its word byte (shuffle) and tests its
 * bit. */
static const char mc_byte_of_lane[2][32] = {{0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1,
                                             2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3},
                                            {4, 4, 4, 4, 4, 4, 4, 4, 5, 5, 5, 5, 5, 5, 5, 5,
                                             6, 6, 6, 6, 6, 6, 6, 6, 7, 7, 7, 7, 7, 7, 7, 7}};

__attribute__((target("avx2"))) static inline void mc_bit_bytes(uint64_t w, __m256i out[2])
{
    const __m256i sel = _mm256_set1_epi64x(0x8040201008040201ll);
    const __m256i v = _mm256_set1_epi64x((long long)w);
    for (int h = 0; h < 2; h++) {
        const __m256i ctl = _mm256_loadu_si256((const __m256i *)mc_byte_of_lane[h]);
        out[h] = _mm256_cmpeq_epi8(_mm256_and_si256(_mm256_shuffle_epi8(v, ctl), sel), sel);
    }
}

/* 8 bytes of b (from byte 8 q on) plus id, as 8 words, to o. */
__attribute__((target("avx2"))) static inline void mc_store_ids8(__m256i b, int q, __m256i id,
                                                                 uint32_t *o)
{
    __m128i h = q < 2 ? _mm256_castsi256_si128(b) : _mm256_extracti128_si256(b, 1);
    if (q & 1) h = _mm_srli_si128(h, 8);
    _mm256_storeu_si256((__m256i *)o, _mm256_add_epi32(_mm256_cvtepu8_epi32(h), id));
}

__attribute__((target("avx2"))) void pmi_mc_ids64_avx2(const uint64_t m[3], uint32_t id,
                                                       uint32_t *o, size_t row)
{
    /* Crossings per point (0-3), then their exclusive prefix sum (at most
     * 189, a byte): in 16-byte lanes by shifts, then the lanes' totals
     * carried up. */
    __m256i bx[2], by[2], bz[2], ex[2];
    mc_bit_bytes(m[0], bx);
    mc_bit_bytes(m[1], by);
    mc_bit_bytes(m[2], bz);
    __m256i carry = _mm256_setzero_si256();
    for (int h = 0; h < 2; h++) {
        const __m256i c = _mm256_sub_epi8(_mm256_setzero_si256(),
                                          _mm256_add_epi8(_mm256_add_epi8(bx[h], by[h]), bz[h]));
        __m256i s = c;
        s = _mm256_add_epi8(s, _mm256_slli_si256(s, 1));
        s = _mm256_add_epi8(s, _mm256_slli_si256(s, 2));
        s = _mm256_add_epi8(s, _mm256_slli_si256(s, 4));
        s = _mm256_add_epi8(s, _mm256_slli_si256(s, 8));
        /* Each 16-byte lane's total in all its bytes; lane 0's to lane 1. */
        const __m256i tot = _mm256_shuffle_epi8(s, _mm256_set1_epi8(15));
        s = _mm256_add_epi8(s, _mm256_permute2x128_si256(tot, tot, 0x08));
        s = _mm256_add_epi8(s, carry);
        carry = _mm256_permute4x64_epi64(_mm256_shuffle_epi8(s, _mm256_set1_epi8(15)), 0xff);
        ex[h] = _mm256_sub_epi8(s, c);
    }
    const __m256i vid = _mm256_set1_epi32((int)id);
    for (int h = 0; h < 2; h++) {
        const __m256i ey = _mm256_sub_epi8(ex[h], bx[h]), ez = _mm256_sub_epi8(ey, by[h]);
        for (int q = 0; q < 4; q++) {
            uint32_t *p = o + 32 * h + 8 * q;
            mc_store_ids8(ex[h], q, vid, p);
            mc_store_ids8(ey, q, vid, p + row);
            mc_store_ids8(ez, q, vid, p + 2 * row);
        }
    }
}

/* Bit k of case byte b is bit b of corner word w[order[k]] (mc_case): per
 * corner, from the highest bit down, each byte lane picks its word byte
 * (shuffle), tests its bit and doubles the sum so far plus the bit. */
__attribute__((target("avx2"))) void pmi_mc_cases64_avx2(const uint64_t w[8], uint8_t cs[64])
{
    static const int order[8] = {0, 4, 5, 1, 2, 6, 7, 3};
    const __m256i sel = _mm256_set1_epi64x(0x8040201008040201ll);
    const __m256i ctl[2] = {_mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2,
                                             2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3),
                            _mm256_setr_epi8(4, 4, 4, 4, 4, 4, 4, 4, 5, 5, 5, 5, 5, 5, 5, 5, 6, 6,
                                             6, 6, 6, 6, 6, 6, 7, 7, 7, 7, 7, 7, 7, 7)};
    __m256i acc[2] = {_mm256_setzero_si256(), _mm256_setzero_si256()};
    for (int k = 7; k >= 0; k--) {
        const __m256i v = _mm256_set1_epi64x((long long)w[order[k]]);
        for (int h = 0; h < 2; h++) {
            __m256i m =
                _mm256_cmpeq_epi8(_mm256_and_si256(_mm256_shuffle_epi8(v, ctl[h]), sel), sel);
            acc[h] = _mm256_sub_epi8(_mm256_add_epi8(acc[h], acc[h]), m);
        }
    }
    _mm256_storeu_si256((__m256i *)cs, acc[0]);
    _mm256_storeu_si256((__m256i *)(cs + 32), acc[1]);
}

/* Groups of 8 cells with at least this many active ones take the
 * transposed ids in pmi_mc_tris64_avx2 (sparser ones the gathers). */
#define MC_TRIS_DENSE 4

/* r[l] := lane l of r[0..7] (an 8 x 8 transpose of 32-bit lanes). */
__attribute__((target("avx2"))) static inline void mc_transpose8(__m256i r[8])
{
    const __m256i t0 = _mm256_unpacklo_epi32(r[0], r[1]), t1 = _mm256_unpackhi_epi32(r[0], r[1]);
    const __m256i t2 = _mm256_unpacklo_epi32(r[2], r[3]), t3 = _mm256_unpackhi_epi32(r[2], r[3]);
    const __m256i t4 = _mm256_unpacklo_epi32(r[4], r[5]), t5 = _mm256_unpackhi_epi32(r[4], r[5]);
    const __m256i t6 = _mm256_unpacklo_epi32(r[6], r[7]), t7 = _mm256_unpackhi_epi32(r[6], r[7]);
    const __m256i u0 = _mm256_unpacklo_epi64(t0, t2), u1 = _mm256_unpackhi_epi64(t0, t2);
    const __m256i u2 = _mm256_unpacklo_epi64(t1, t3), u3 = _mm256_unpackhi_epi64(t1, t3);
    const __m256i u4 = _mm256_unpacklo_epi64(t4, t6), u5 = _mm256_unpackhi_epi64(t4, t6);
    const __m256i u6 = _mm256_unpacklo_epi64(t5, t7), u7 = _mm256_unpackhi_epi64(t5, t7);
    r[0] = _mm256_permute2x128_si256(u0, u4, 0x20);
    r[1] = _mm256_permute2x128_si256(u1, u5, 0x20);
    r[2] = _mm256_permute2x128_si256(u2, u6, 0x20);
    r[3] = _mm256_permute2x128_si256(u3, u7, 0x20);
    r[4] = _mm256_permute2x128_si256(u0, u4, 0x31);
    r[5] = _mm256_permute2x128_si256(u1, u5, 0x31);
    r[6] = _mm256_permute2x128_si256(u2, u6, 0x31);
    r[7] = _mm256_permute2x128_si256(u3, u7, 0x31);
}

__attribute__((target("avx2"))) size_t pmi_mc_tris64_avx2(const uint32_t *ids,
                                                          const int32_t off[16], uint64_t act,
                                                          const uint8_t cs[64], size_t x,
                                                          uint32_t *out)
{
    /* Lane v's edge e picks off[e]: lanes 0-7 of lo for e < 8 (and for the
     * -1 that pads a list, a valid address whose id nobody keeps), of hi
     * for e >= 8. */
    const __m256i lo = _mm256_loadu_si256((const __m256i *)off);
    const __m256i hi = _mm256_loadu_si256((const __m256i *)(off + 8));
    const __m256i seven = _mm256_set1_epi32(7);
    size_t nv = 0;
    while (act) {
        /* Groups of 8 cells with 4 or more active: the ids of their 12
         * edges loaded as 12 rows of 8 cells and transposed, so that a
         * cell's corners are permutes of its own ids, no gather. */
        const unsigned g0 = (unsigned)__builtin_ctzll(act) & ~7u;
        const unsigned gm = (unsigned)(act >> g0) & 0xffu;
        if (__builtin_popcount(gm) >= MC_TRIS_DENSE) {
            __m256i r[8], h[8];
            const uint32_t *base = ids + x + g0;
            for (int e = 0; e < 8; e++)
                r[e] = _mm256_loadu_si256((const __m256i *)(base + off[e]));
            mc_transpose8(r);
            {
                const __m256i v8 = _mm256_loadu_si256((const __m256i *)(base + off[8]));
                const __m256i v9 = _mm256_loadu_si256((const __m256i *)(base + off[9]));
                const __m256i v10 = _mm256_loadu_si256((const __m256i *)(base + off[10]));
                const __m256i v11 = _mm256_loadu_si256((const __m256i *)(base + off[11]));
                const __m256i t0 = _mm256_unpacklo_epi32(v8, v9),
                              t1 = _mm256_unpackhi_epi32(v8, v9);
                const __m256i t2 = _mm256_unpacklo_epi32(v10, v11),
                              t3 = _mm256_unpackhi_epi32(v10, v11);
                h[0] = _mm256_unpacklo_epi64(t0, t2); /* cells 0 | 4 */
                h[1] = _mm256_unpackhi_epi64(t0, t2); /* cells 1 | 5 */
                h[2] = _mm256_unpacklo_epi64(t1, t3); /* cells 2 | 6 */
                h[3] = _mm256_unpackhi_epi64(t1, t3); /* cells 3 | 7 */
                /* h[l]: cell l's ids of edges 8-11 in lanes 0-3, so that
                 * the edge number itself is the permute's index. */
                for (int q = 0; q < 4; q++)
                    h[4 + q] = _mm256_permute2x128_si256(h[q], h[q], 0x11);
            }
            for (unsigned m = gm; m; m &= m - 1) {
                const unsigned l = (unsigned)__builtin_ctz(m), c = cs[g0 + l];
                const __m128i tab = _mm_loadu_si128((const __m128i *)pmi_mc_tri_table[c]);
                const unsigned n = 3u * pmi_mc_tri_count[c];
                for (unsigned hh = 0; hh < (n > 8 ? 2u : 1u); hh++) {
                    const __m256i e = _mm256_cvtepi8_epi32(hh ? _mm_srli_si128(tab, 8) : tab);
                    const __m256i v = _mm256_blendv_epi8(_mm256_permutevar8x32_epi32(r[l], e),
                                                         _mm256_permutevar8x32_epi32(h[l], e),
                                                         _mm256_cmpgt_epi32(e, seven));
                    _mm256_storeu_si256((__m256i *)(out + nv + 8 * hh), v);
                }
                nv += n;
            }
            act &= ~((uint64_t)0xff << g0);
            continue;
        }
        const unsigned b = (unsigned)__builtin_ctzll(act), c = cs[b];
        act &= act - 1;
        const __m128i tab = _mm_loadu_si128((const __m128i *)pmi_mc_tri_table[c]);
        const __m256i i = _mm256_set1_epi32((int)(x + b));
        const unsigned n = 3u * pmi_mc_tri_count[c];
        for (unsigned h = 0; h < (n > 8 ? 2u : 1u); h++) {
            const __m256i e = _mm256_cvtepi8_epi32(h ? _mm_srli_si128(tab, 8) : tab);
            const __m256i o = _mm256_blendv_epi8(_mm256_permutevar8x32_epi32(lo, e),
                                                 _mm256_permutevar8x32_epi32(hi, e),
                                                 _mm256_cmpgt_epi32(e, seven));
            _mm256_storeu_si256(
                (__m256i *)(out + nv + 8 * h),
                _mm256_i32gather_epi32((const int *)ids, _mm256_add_epi32(o, i), 4));
        }
        nv += n;
    }
    return nv;
}

/* Stream bit s = 3 i + a of pmi_mc_queue64_bmi2 as the queue word's low
 * bits: i << 2 | a. */
static const uint16_t mc_stream_slot[192] = {
#define MC_S3(i) (i) << 2, (i) << 2 | 1, (i) << 2 | 2
#define MC_S12(i) MC_S3(i), MC_S3(i + 1), MC_S3(i + 2), MC_S3(i + 3)
    MC_S12(0),  MC_S12(4),  MC_S12(8),  MC_S12(12), MC_S12(16), MC_S12(20),
    MC_S12(24), MC_S12(28), MC_S12(32), MC_S12(36), MC_S12(40), MC_S12(44),
    MC_S12(48), MC_S12(52), MC_S12(56), MC_S12(60)
#undef MC_S12
#undef MC_S3
};

__attribute__((target("bmi,bmi2"))) size_t pmi_mc_queue64_bmi2(const uint64_t m[3], size_t x,
                                                               uint64_t *out)
{
    /* Bits 0, 3, ..., 63 (22), 1, ..., 61 and 2, ..., 62 (21 each). Word
     * w of the stream holds bits 64 w to 64 w + 63: points 0-21 of x
     * edges and 0-20 of y and z edges in word 0, then x 22-42, y 21-42,
     * z 21-41, then x 43-63, y 43-63, z 42-63. */
    const uint64_t A = 0x9249249249249249ull, B = A << 1, C = A << 2;
    const uint64_t w[3] = {
        _pdep_u64(m[0], A) | _pdep_u64(m[1], B) | _pdep_u64(m[2], C),
        _pdep_u64(m[0] >> 22, C) | _pdep_u64(m[1] >> 21, A) | _pdep_u64(m[2] >> 21, B),
        _pdep_u64(m[0] >> 43, B) | _pdep_u64(m[1] >> 43, C) | _pdep_u64(m[2] >> 42, A)};
    const uint64_t xe = (uint64_t)x << 2;
    size_t n = 0;
    for (int q = 0; q < 3; q++)
        for (uint64_t b = w[q]; b; b = _blsr_u64(b))
            out[n++] = xe + mc_stream_slot[64 * q + (int)_tzcnt_u64(b)];
    return n;
}

/* x[l], y[l], z[l] of 4 lanes to o[3 l + 0..2]. */
__attribute__((target("avx2"))) static inline void mc_store_xyz4(float *o, __m128 x, __m128 y,
                                                                 __m128 z)
{
    const __m128 xy_lo = _mm_unpacklo_ps(x, y), xy_hi = _mm_unpackhi_ps(x, y);   /* x0 y0 x1 y1 */
    const __m128 zx_lo = _mm_unpacklo_ps(z, x), zx_hi = _mm_unpackhi_ps(z, x);   /* z0 x0 z1 x1 */
    const __m128 yz_lo = _mm_unpacklo_ps(y, z), yz_hi = _mm_unpackhi_ps(y, z);   /* y0 z0 y1 z1 */
    _mm_storeu_ps(o, _mm_shuffle_ps(xy_lo, zx_lo, _MM_SHUFFLE(3, 0, 1, 0)));     /* x0 y0 z0 x1 */
    _mm_storeu_ps(o + 4, _mm_shuffle_ps(yz_lo, xy_hi, _MM_SHUFFLE(1, 0, 3, 2))); /* y1 z1 x2 y2 */
    _mm_storeu_ps(o + 8, _mm_shuffle_ps(zx_hi, yz_hi, _MM_SHUFFLE(3, 2, 3, 0))); /* z2 x3 y3 z3 */
}

/* The positions and normals of 8 vertices as floats, group g's axis a
 * in p[g][a] and n[g][a] (lane l: vertex 4 g + l). */
typedef struct mc_f4 {
    __m128 p[2][3], n[2][3];
} mc_f4;

/* The arithmetic of 8 vertices whose samples are in o[0..1] (lane l of
 * group g is vertex 4 g + l, on the axis in lane l of axis[g]): positions
 * to f->p[g][a] and normals to f->n[g][a] as floats (lane l); returns the lanes
 * whose normal is valid (bit 4 g + l). The operations of core/mc_math.h
 * (pmi_mc_edge_t, pmi_mc_position, pmi_mc_diff_w, pmi_mc_normal) in the
 * same order, 4 lanes wide (division and square root are correctly
 * rounded in both; no fused multiply-add in this target), so the same bits
 * as 8 calls of vertex_<type>. Two groups of 4 lanes go through each step
 * together: one group's chain of division, square root and division would
 * otherwise leave the core waiting. A normal whose squared length is
 * positive and finite has finite components (each at most the length), so
 * that test is pmi_mc_normal's finiteness test. */
__attribute__((target("avx2"), always_inline)) static inline int
mc_compute8(const mc_job *J, const mc_v4 o[2], const __m256i axis[2], mc_f4 *f)
{
    const __m256d one = _mm256_set1_pd(1.0), zero = _mm256_setzero_pd();
    __m256d t[2], n[2][3], l2[2], inv[2];
    int okm = 0;
    for (int g = 0; g < 2; g++) {
        t[g] = _mm256_div_pd(_mm256_sub_pd(_mm256_set1_pd(J->iso), o[g].lo),
                             _mm256_sub_pd(o[g].hi, o[g].lo));
        __m256d ok_t = _mm256_and_pd(_mm256_cmp_pd(t[g], zero, _CMP_GE_OQ),
                                     _mm256_cmp_pd(t[g], one, _CMP_LE_OQ));
        t[g] = _mm256_blendv_pd(_mm256_set1_pd(0.5), t[g], ok_t);
    }
    for (int g = 0; g < 2; g++) {
        /* t added to the coordinate along each lane's axis; the others get
         * + 0.0, which leaves a coordinate (>= +0) as it is. */
        for (int a = 0; a < 3; a++) {
            __m256d on = _mm256_castsi256_pd(_mm256_cmpeq_epi64(axis[g], _mm256_set1_epi64x(a)));
            __m256d qa = _mm256_add_pd(o[g].q[a], _mm256_and_pd(on, t[g]));
            __m256d pa = _mm256_add_pd(_mm256_set1_pd(J->origin[a]),
                                       _mm256_mul_pd(_mm256_set1_pd(J->h[a]), qa));
            f->p[g][a] = _mm256_cvtpd_ps(pa);
            const __m256d g0 = o[g].g[0][a], g1 = o[g].g[1][a];
            __m256d na =
                _mm256_add_pd(_mm256_mul_pd(_mm256_sub_pd(one, t[g]), g0), _mm256_mul_pd(t[g], g1));
            n[g][a] = _mm256_mul_pd(_mm256_set1_pd(J->sg), na);
        }
    }
    for (int g = 0; g < 2; g++) {
        l2[g] = _mm256_add_pd(
            _mm256_add_pd(_mm256_mul_pd(n[g][0], n[g][0]), _mm256_mul_pd(n[g][1], n[g][1])),
            _mm256_mul_pd(n[g][2], n[g][2]));
        const __m256d ok = _mm256_and_pd(_mm256_cmp_pd(l2[g], zero, _CMP_GT_OQ),
                                         _mm256_cmp_pd(l2[g], _mm256_set1_pd(DBL_MAX), _CMP_LE_OQ));
        okm |= _mm256_movemask_pd(ok) << 4 * g;
        inv[g] = _mm256_div_pd(one, _mm256_sqrt_pd(l2[g]));
    }
    for (int g = 0; g < 2; g++)
        for (int a = 0; a < 3; a++)
            f->n[g][a] = _mm256_cvtpd_ps(_mm256_mul_pd(n[g][a], inv[g]));
    return okm;
}

/* Vertex l of group g of mc_compute8 to vp and vn, one lane: without a
 * valid normal, pmi_mc_normal's fallback (the edge direction, inside to
 * outside). */
__attribute__((target("avx2"))) static void mc_store_lane(const mc_job *J, const mc_v4 *o, int ax,
                                                          const __m128 p[3], const __m128 n[3],
                                                          int l, int ok, float *vp, float *vn)
{
    _Alignas(16) float pf[3][4], nf[3][4];
    for (int a = 0; a < 3; a++) {
        _mm_store_ps(pf[a], p[a]);
        _mm_store_ps(nf[a], n[a]);
        vp[a] = pf[a][l];
    }
    if (ok) {
        for (int a = 0; a < 3; a++)
            vn[a] = nf[a][l];
        return;
    }
    _Alignas(32) double lo[4];
    _mm256_store_pd(lo, o->lo);
    float sgn = pmi_mc_inside(J->sg, J->siso, lo[l]) ? 1.0f : -1.0f;
    vn[0] = vn[1] = vn[2] = 0.0f;
    vn[ax] = sgn;
}

/* Group g's 4 vertices of mc_compute8 (valid normals okm) to consecutive
 * slots from vp and vn: x, y, z of the 4 lanes interleaved into 12
 * floats, three stores each. */
__attribute__((target("avx2"), always_inline)) static inline void
mc_store4(const mc_job *J, const mc_v4 *o, __m256i axis, const __m128 p[3], const __m128 n[3],
          int okm, float *vp, float *vn)
{
    if (okm == 15) {
        mc_store_xyz4(vp, p[0], p[1], p[2]);
        mc_store_xyz4(vn, n[0], n[1], n[2]);
        return;
    }
    _Alignas(32) int64_t ax[4];
    _mm256_store_si256((__m256i *)ax, axis);
    for (int l = 0; l < 4; l++)
        mc_store_lane(J, o, (int)ax[l], p, n, l, okm >> l & 1, vp + 3 * l, vn + 3 * l);
}

/* vertex() with central normals for 8 vertices at once, any sample type
 * (mc_compute8). */
__attribute__((target("avx2"))) void pmi_mc_vertex8_central(const mc_job *J, const mc_pending *V)
{
    mc_v4 o[2];
#define MC_GATHER(SUF)                                                                             \
    for (int g = 0; g < 2; g++)                                                                    \
        if (!mc_gather4_fast_##SUF(J, V + 4 * g, &o[g])) mc_gather4_##SUF(J, V + 4 * g, &o[g]);
    switch (J->type) {
    case PM_SAMPLE_U8: MC_GATHER(u8); break;
    case PM_SAMPLE_U16: MC_GATHER(u16); break;
    case PM_SAMPLE_I16: MC_GATHER(i16); break;
    case PM_SAMPLE_F32: MC_GATHER(f32); break;
    default: MC_GATHER(f64); break;
    }
#undef MC_GATHER
    __m256i axis[2];
    for (int g = 0; g < 2; g++) {
        const mc_pending *W = V + 4 * g;
        axis[g] = _mm256_set_epi64x(W[3].axis, W[2].axis, W[1].axis, W[0].axis);
    }
    mc_f4 f;
    const int okm = mc_compute8(J, o, axis, &f);
    for (int g = 0; g < 2; g++) {
        const mc_pending *W = V + 4 * g;
        if (W[1].pos == W[0].pos + 3 && W[2].pos == W[0].pos + 6 && W[3].pos == W[0].pos + 9 &&
            W[1].nrm == W[0].nrm + 3 && W[2].nrm == W[0].nrm + 6 && W[3].nrm == W[0].nrm + 9) {
            mc_store4(J, &o[g], axis[g], f.p[g], f.n[g], okm >> 4 * g & 15, W[0].pos, W[0].nrm);
            continue;
        }
        for (int l = 0; l < 4; l++)
            mc_store_lane(J, &o[g], W[l].axis, f.p[g], f.n[g], l, okm >> (4 * g + l) & 1, W[l].pos,
                          W[l].nrm);
    }
}

/* The lanes of 4 queue words e[l] = i << 2 | axis: *I = i, *AX = axis
 * and *C1 = the offset of the edge's far end in its row, i + stv[axis]
 * (stv: the strides {1, rs, ss, 0} as 64-bit lanes). */
__attribute__((target("avx2"))) static inline void
mc_row_lanes(const uint64_t *e, __m256i stv, __m256i *I, __m256i *AX, __m256i *C1)
{
    const __m256i E = _mm256_loadu_si256((const __m256i *)e);
    *I = _mm256_srli_epi64(E, 2);
    *AX = _mm256_and_si256(E, _mm256_set1_epi64x(3));
    /* stv's lane AX: 32-bit elements 2 AX and 2 AX + 1. */
    const __m256i a2 = _mm256_slli_epi64(*AX, 1);
    const __m256i idx =
        _mm256_or_si256(a2, _mm256_slli_epi64(_mm256_add_epi64(a2, _mm256_set1_epi64x(1)), 32));
    *C1 = _mm256_add_epi64(*I, _mm256_permutevar8x32_epi32(stv, idx));
}

/* i (below 2^52) as a double, exactly: the bits of 2^52 + i, less 2^52. */
__attribute__((target("avx2"))) static inline __m256d mc_coord4(__m256i I)
{
    return _mm256_sub_pd(
        _mm256_castsi256_pd(_mm256_or_si256(I, _mm256_set1_epi64x(0x4330000000000000ll))),
        _mm256_set1_pd(4503599627370496.0));
}

/* The fast gather of 4 vertices of one interior lattice row (its j and k
 * at least 1 and at most n - 3, so no lane's samples leave the volume in
 * y or z; nx below 2^52): e[l] = i << 2 | axis, rb the row's first sample,
 * stv the strides as in mc_row_lanes and st the same as an array, nxv nx
 * in every lane, qj and qk the row's j and k. Returns 0, with nothing
 * read, when a lane has an end on the volume's border in x. The lanes'
 * offsets and bounds are computed 4 wide. */
#define MC_GATHER4_ROW(T, SUF, LOAD4)                                                              \
    __attribute__((target("avx2"))) static inline int mc_gather4_row_##SUF(                        \
        const uint64_t *e, const T *rb, __m256i stv, const ptrdiff_t st[3], __m256i nxv,           \
        __m256d qj, __m256d qk, const double *gw, mc_v4 *o)                                        \
    {                                                                                              \
        __m256i I, AX, C1;                                                                         \
        mc_row_lanes(e, stv, &I, &AX, &C1);                                                        \
        const __m256i zero = _mm256_setzero_si256();                                               \
        /* The edge's last point in x, plus one more for the difference:                           \
         * i + 2, and i + 3 on x edges; it must be at most nx. */                                  \
        const __m256i end = _mm256_sub_epi64(_mm256_add_epi64(I, _mm256_set1_epi64x(2)),           \
                                             _mm256_cmpeq_epi64(AX, zero));                        \
        const __m256i bad =                                                                        \
            _mm256_or_si256(_mm256_cmpeq_epi64(I, zero), _mm256_cmpgt_epi64(end, nxv));            \
        if (!_mm256_testz_si256(bad, bad)) return 0;                                               \
        _Alignas(32) ptrdiff_t c0[4], c1[4];                                                       \
        _mm256_store_si256((__m256i *)c0, I);                                                      \
        _mm256_store_si256((__m256i *)c1, C1);                                                     \
        o->q[0] = mc_coord4(I);                                                                    \
        o->q[1] = qj;                                                                              \
        o->q[2] = qk;                                                                              \
        MC_LOAD_CENTRAL(LOAD4, T, rb, c0, c1, st, gw, o);                                          \
        return 1;                                                                                  \
    }
/* The same for the groups that the fast gather declines (a lane's end
 * on the volume's first or last point in x): x differences clamped per
 * lane, as in gradient_central (one-sided at the ends, weight gw[span]),
 * y and z central. */
#define MC_GATHER4_ROWX(T, SUF, LOAD4)                                                             \
    __attribute__((target("avx2"), noinline)) static void mc_gather4_rowx_##SUF(                   \
        const uint64_t *e, const T *rb, __m256i stv, const ptrdiff_t st[3], __m256i nxv,           \
        __m256d qj, __m256d qk, const double(*gw)[3], mc_v4 *o)                                    \
    {                                                                                              \
        __m256i I, AX, C[2];                                                                       \
        mc_row_lanes(e, stv, &I, &AX, &C[1]);                                                      \
        C[0] = I;                                                                                  \
        const __m256i zero = _mm256_setzero_si256(), one = _mm256_set1_epi64x(1);                  \
        /* The ends' x: i, and i + 1 on x edges. */                                                \
        const __m256i X[2] = {I, _mm256_sub_epi64(I, _mm256_cmpeq_epi64(AX, zero))};               \
        _Alignas(32) ptrdiff_t c[2][4], xp[2][4], xm[2][4];                                        \
        __m256d w[2];                                                                              \
        for (int e_ = 0; e_ < 2; e_++) {                                                           \
            const __m256i up =                                                                     \
                _mm256_and_si256(_mm256_cmpgt_epi64(nxv, _mm256_add_epi64(X[e_], one)), one);      \
            const __m256i dn = _mm256_and_si256(_mm256_cmpgt_epi64(X[e_], zero), one);             \
            const __m256i span = _mm256_add_epi64(up, dn);                                         \
            _mm256_store_si256((__m256i *)c[e_], C[e_]);                                           \
            _mm256_store_si256((__m256i *)xp[e_], _mm256_add_epi64(C[e_], up));                    \
            _mm256_store_si256((__m256i *)xm[e_], _mm256_sub_epi64(C[e_], dn));                    \
            const __m256d w1 =                                                                     \
                _mm256_blendv_pd(_mm256_set1_pd(gw[0][0]), _mm256_set1_pd(gw[1][0]),               \
                                 _mm256_castsi256_pd(_mm256_cmpeq_epi64(span, one)));              \
            w[e_] = _mm256_blendv_pd(                                                              \
                w1, _mm256_set1_pd(gw[2][0]),                                                      \
                _mm256_castsi256_pd(_mm256_cmpeq_epi64(span, _mm256_set1_epi64x(2))));             \
        }                                                                                          \
        o->lo = LOAD4(rb, c[0][0], c[0][1], c[0][2], c[0][3]);                                     \
        o->hi = LOAD4(rb, c[1][0], c[1][1], c[1][2], c[1][3]);                                     \
        for (int e_ = 0; e_ < 2; e_++) {                                                           \
            o->g[e_][0] = _mm256_mul_pd(                                                           \
                _mm256_sub_pd(LOAD4(rb, xp[e_][0], xp[e_][1], xp[e_][2], xp[e_][3]),               \
                              LOAD4(rb, xm[e_][0], xm[e_][1], xm[e_][2], xm[e_][3])),              \
                w[e_]);                                                                            \
            for (int a_ = 1; a_ < 3; a_++) {                                                       \
                const T *dh_ = rb + st[a_], *dl_ = rb - st[a_];                                    \
                o->g[e_][a_] = _mm256_mul_pd(                                                      \
                    _mm256_sub_pd(LOAD4(dh_, c[e_][0], c[e_][1], c[e_][2], c[e_][3]),              \
                                  LOAD4(dl_, c[e_][0], c[e_][1], c[e_][2], c[e_][3])),             \
                    _mm256_set1_pd(gw[2][a_]));                                                    \
            }                                                                                      \
        }                                                                                          \
        o->q[0] = mc_coord4(I);                                                                    \
        o->q[1] = qj;                                                                              \
        o->q[2] = qk;                                                                              \
    }
MC_SAMPLE_TYPES(MC_GATHER4_ROWX)
MC_SAMPLE_TYPES(MC_GATHER4_ROW)
#undef MC_GATHER4_ROWX
#undef MC_GATHER4_ROW
#undef MC_SAMPLE_TYPES
#undef MC_LOAD_CENTRAL

/* mc_vertex_row_fn: the n vertices (a multiple of 8) of lattice row
 * (j,k), e[l] = i << 2 | axis, written to consecutive slots from pos and
 * nrm, 8 at a time (mc_compute8, mc_store4). Rows on the volume's faces
 * in y or z take the gathers of pmi_mc_vertex8_central; in the others, a
 * group with an end on the first or last point in x takes the clamped row
 * gather. */
__attribute__((target("avx2"))) void pmi_mc_vertex_row_central(const mc_job *J, size_t j, size_t k,
                                                               const uint64_t *e, size_t n,
                                                               float *pos, float *nrm)
{
    const int inner =
        j >= 1 && k >= 1 && j + 3 <= J->ny && k + 3 <= J->nz && J->nx < ((size_t)1 << 52);
    const size_t rb = j * J->rs + k * J->ss;
    const __m256i stv = _mm256_set_epi64x(0, (long long)J->ss, (long long)J->rs, 1);
    const ptrdiff_t st[3] = {1, (ptrdiff_t)J->rs, (ptrdiff_t)J->ss};
    const __m256i nxv = _mm256_set1_epi64x((long long)J->nx);
    const __m256d qj = _mm256_set1_pd((double)(int64_t)j), qk = _mm256_set1_pd((double)(int64_t)k);
#define MC_GATHER(T, SUF)                                                                          \
    for (size_t q = 0; q < n; q += 8) {                                                            \
        mc_v4 o[2];                                                                                \
        for (int g = 0; g < 2; g++) {                                                              \
            const uint64_t *eg = e + q + 4 * g;                                                    \
            if (inner) {                                                                           \
                const T *d = (const T *)J->data + rb;                                              \
                if (!mc_gather4_row_##SUF(eg, d, stv, st, nxv, qj, qk, J->gw[2], &o[g]))           \
                    mc_gather4_rowx_##SUF(eg, d, stv, st, nxv, qj, qk, J->gw, &o[g]);              \
                continue;                                                                          \
            }                                                                                      \
            mc_pending W[4];                                                                       \
            for (int l = 0; l < 4; l++) {                                                          \
                W[l].i = (size_t)(eg[l] >> 2);                                                     \
                W[l].j = j;                                                                        \
                W[l].k = k;                                                                        \
                W[l].axis = (int)(eg[l] & 3);                                                      \
            }                                                                                      \
            if (!mc_gather4_fast_##SUF(J, W, &o[g])) mc_gather4_##SUF(J, W, &o[g]);                \
        }                                                                                          \
        __m256i axis[2];                                                                           \
        for (int g = 0; g < 2; g++)                                                                \
            axis[g] = _mm256_and_si256(_mm256_loadu_si256((const __m256i *)(e + q + 4 * g)),       \
                                       _mm256_set1_epi64x(3));                                     \
        mc_f4 f;                                                                                   \
        const int okm = mc_compute8(J, o, axis, &f);                                               \
        for (int g = 0; g < 2; g++)                                                                \
            mc_store4(J, &o[g], axis[g], f.p[g], f.n[g], okm >> 4 * g & 15, pos + 3 * (q + 4 * g), \
                      nrm + 3 * (q + 4 * g));                                                      \
    }
    switch (J->type) {
    case PM_SAMPLE_U8: MC_GATHER(uint8_t, u8); break;
    case PM_SAMPLE_U16: MC_GATHER(uint16_t, u16); break;
    case PM_SAMPLE_I16: MC_GATHER(int16_t, i16); break;
    case PM_SAMPLE_F32: MC_GATHER(float, f32); break;
    default: MC_GATHER(double, f64); break;
    }
#undef MC_GATHER
}

#else
typedef int mc_no_avx2; /* ISO C wants a declaration in every file */
#endif
