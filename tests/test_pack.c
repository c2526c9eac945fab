/* Float packing (seeds 004 and 000): the exact IEEE-754 <-> RGBA8 layout,
 * checked byte by byte against the header's field description and for
 * bit-exact round trips over random bit patterns and special values; the
 * base-255 unorm encoding against an exact long-double reference, its
 * round-trip error bound, clamping and the seed's decode formula. These are
 * host functions: the cuda run checks the same host code. */
#include <float.h>
#include <math.h>

#include "test_common.h"

#define B4 4228250625.0L /* 255^4 */

static uint32_t bits_of(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static float float_of(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* The header's description, field by field: r = mantissa bits 0-7,
 * g = 8-15, b = exponent bit 0 in bit 7 plus mantissa 16-22,
 * a = sign in bit 7 plus exponent bits 1-7. */
static void expected_rgba(uint32_t u, uint8_t e[4])
{
    uint32_t sign = u >> 31, exp = (u >> 23) & 0xff, mant = u & 0x7fffff;
    e[0] = (uint8_t)(mant & 0xff);
    e[1] = (uint8_t)((mant >> 8) & 0xff);
    e[2] = (uint8_t)(((exp & 1) << 7) | (mant >> 16));
    e[3] = (uint8_t)((sign << 7) | (exp >> 1));
}

static void check_f32(void)
{
    size_t n = 1000000 + 16;
    uint32_t *u = malloc(n * sizeof *u);
    const uint32_t special[] = {0x00000000u, 0x80000000u,                           /* +-0 */
                                0x00000001u, 0x807fffffu, 0x00400000u,              /* denormals */
                                0x7f800000u, 0xff800000u,                           /* +-inf */
                                0x7fc00000u, 0xffc00001u, 0x7f800001u, 0x7fbfffffu, /* NaNs */
                                0x3f800000u, 0x00800000u, 0x7f7fffffu, 0xbf800000u, 0x3eaaaaabu};
    for (size_t i = 0; i < 16; i++)
        u[i] = special[i];
    for (size_t i = 16; i < n; i++)
        u[i] = (uint32_t)(pmt_rand() >> 17);
    float *f = malloc(n * sizeof *f);
    for (size_t i = 0; i < n; i++)
        f[i] = float_of(u[i]);
    uint8_t *rgba = malloc(4 * n);
    pm_pack_f32_rgba8(f, n, rgba);
    size_t bad = 0;
    for (size_t i = 0; i < n; i++) {
        uint8_t e[4];
        expected_rgba(u[i], e);
        if (memcmp(e, rgba + 4 * i, 4) != 0 && bad++ < 3)
            PMT_CHECK(0, "pack of 0x%08x: %02x %02x %02x %02x, want %02x %02x %02x %02x", u[i],
                      rgba[4 * i], rgba[4 * i + 1], rgba[4 * i + 2], rgba[4 * i + 3], e[0], e[1],
                      e[2], e[3]);
    }
    /* 1.0f = 0x3f800000: r = g = 0, b = 0x80 (exponent bit 0), a = 0x3f. */
    PMT_CHECK(rgba[44] == 0 && rgba[45] == 0 && rgba[46] == 0x80 && rgba[47] == 0x3f,
              "1.0f packs as %02x %02x %02x %02x", rgba[44], rgba[45], rgba[46], rgba[47]);
    float *back = malloc(n * sizeof *back);
    pm_unpack_rgba8_f32(rgba, n, back);
    for (size_t i = 0; i < n; i++)
        if (bits_of(back[i]) != u[i] && bad++ < 3)
            PMT_CHECK(0, "round trip of 0x%08x gives 0x%08x", u[i], bits_of(back[i]));
    /* Every byte pattern unpacks and packs back to itself too. */
    for (size_t i = 0; i < 4 * n; i++)
        rgba[i] = (uint8_t)pmt_rand();
    pm_unpack_rgba8_f32(rgba, n, back);
    uint8_t *again = malloc(4 * n);
    pm_pack_f32_rgba8(back, n, again);
    PMT_CHECK(memcmp(rgba, again, 4 * n) == 0, "bytes -> float -> bytes is not the identity");
    pm_pack_f32_rgba8(f, 0, NULL); /* n = 0 touches nothing */
    pm_unpack_rgba8_f32(NULL, 0, NULL);
    free(again);
    free(back);
    free(rgba);
    free(f);
    free(u);
}

/* Exact reference code: round(v * 255^4), ties up, in long double (the
 * product of a 24-bit significand and 255^4 is exact in 64 bits). */
static uint64_t ref_code(float v)
{
    if (!(v > 0)) return 0;
    if (v >= 1) return 4228250624u;
    long double x = (long double)v * B4;
    uint64_t c = (uint64_t)floorl(x + 0.5L);
    return c > 4228250624u ? 4228250624u : c;
}

static void check_unorm(void)
{
    size_t n = 1000000;
    float *v = malloc(n * sizeof *v);
    const float special[] = {0.0f,      -0.0f,  1.0f,          2.0f,        INFINITY,
                             -INFINITY, NAN,    -0.5f,         0.5f,        1.0f - FLT_EPSILON / 2,
                             FLT_MIN,   1e-45f, 1.0f / 255.0f, 0.00390625f, 0.25f,
                             0.999f};
    size_t ns = sizeof special / sizeof *special;
    for (size_t i = 0; i < ns; i++)
        v[i] = special[i];
    for (size_t i = ns; i < n; i++) {
        /* Half uniform in [0,1), half spread over the exponents. */
        if (i % 2)
            v[i] = (float)pmt_uniform();
        else
            v[i] = ldexpf((float)(0.5 + 0.5 * pmt_uniform()), -(int)(pmt_rand() % 40));
        if (v[i] >= 1.0f) v[i] = 0.5f;
    }
    uint8_t *rgba = malloc(4 * n);
    float *back = malloc(n * sizeof *back);
    pm_pack_unorm_rgba8(v, n, rgba);
    pm_unpack_unorm_rgba8(rgba, n, back);
    size_t bad = 0;
    for (size_t i = 0; i < n; i++) {
        const uint8_t *p = rgba + 4 * i;
        uint64_t code = (((uint64_t)p[0] * 255 + p[1]) * 255 + p[2]) * 255 + p[3];
        uint64_t want = ref_code(v[i]);
        int bytes_ok = p[0] < 255 && p[1] < 255 && p[2] < 255 && p[3] < 255;
        if ((code != want || !bytes_ok) && bad++ < 3)
            PMT_CHECK(0, "unorm pack of %a: code %" PRIu64 " want %" PRIu64, (double)v[i], code,
                      want);
        /* The seed's decode: dot(rgba / 255, (1, 1/255, 1/255^2, 1/255^3)). */
        double seed = p[0] / 255.0 + p[1] / 65025.0 + p[2] / 16581375.0 + p[3] / 4228250625.0;
        if (fabs((double)back[i] - seed) > 1e-7 * seed + 1e-30 && bad++ < 3)
            PMT_CHECK(0, "unorm decode of %a: %a, seed's formula gives %a", (double)v[i],
                      (double)back[i], seed);
        if (v[i] >= 0 && v[i] < 1) {
            /* Round trip: within half a code step plus half a float ulp;
             * exact from 2^-8 up. */
            double err = fabs((double)back[i] - (double)v[i]);
            double bound = 0.5 / 4228250625.0 + 0.5 * (double)FLT_EPSILON * (double)v[i];
            if (err > bound * (1 + 1e-9) && bad++ < 3)
                PMT_CHECK(0, "unorm round trip of %a gives %a (error %g > %g)", (double)v[i],
                          (double)back[i], err, bound);
            if (v[i] >= 0.00390625f && back[i] != v[i] && bad++ < 3)
                PMT_CHECK(0, "unorm round trip of %a gives %a, not exact", (double)v[i],
                          (double)back[i]);
        }
    }
    /* Clamping: the top code (255^4 - 1) / 255^4 rounds to 1.0f as a float.
     * 0, -0, negatives, -inf and NaN give code 0; >= 1 the top. */
    PMT_CHECK(back[0] == 0 && back[1] == 0 && back[5] == 0 && back[6] == 0 && back[7] == 0,
              "values <= 0 and NaN must decode to 0");
    for (size_t i = 2; i <= 4; i++)
        PMT_CHECK(rgba[4 * i] == 254 && rgba[4 * i + 1] == 254 && rgba[4 * i + 2] == 254 &&
                      rgba[4 * i + 3] == 254 && back[i] == 1.0f,
                  "%g must clamp to 254,254,254,254", (double)v[i]);
    PMT_CHECK(back[8] == 0.5f, "0.5 round trip gives %a", (double)back[8]);
    /* Monotone: larger values never get smaller codes. */
    float mono[5] = {0.1f, 0.10000001f, 0.2f, 0.7f, 0.99999994f};
    uint8_t mb[20];
    pm_pack_unorm_rgba8(mono, 5, mb);
    for (int i = 1; i < 5; i++)
        PMT_CHECK(memcmp(mb + 4 * (i - 1), mb + 4 * i, 4) < 0, "unorm codes not increasing at %d",
                  i);
    free(back);
    free(rgba);
    free(v);
}

int main(int argc, char **argv)
{
    pm_context *ctx;
    pm_device dev;
    if (!pmt_init(argc, argv, &ctx, &dev)) return PMT_SKIP;
    check_f32();
    check_unorm();
    pm_context_destroy(ctx);
    return pmt_finish("test_pack");
}
