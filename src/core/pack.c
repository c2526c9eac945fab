/* Float <-> RGBA8 packing: the exact IEEE-754 bit layout, and the
 * fixed-point [0,1) encoding of a GPGPU count readback (the base-255 scheme
 * of Aras Pranckevicius, "Encoding floats to RGBA - the final?"). */
#include <string.h>

#include "pyramesh.h"

/* The bytes are taken from the float's bit pattern with shifts, not from its
 * memory bytes, so the layout is the same on any endianness:
 * r = bits 0-7, g = bits 8-15, b = bits 16-23 (bit 7 of b is the lowest
 * exponent bit), a = bits 24-31 (sign and the seven high exponent bits). */
void pm_pack_f32_rgba8(const float *in, size_t n, uint8_t *out_rgba)
{
    for (size_t i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, &in[i], sizeof u);
        out_rgba[4 * i + 0] = (uint8_t)(u & 0xffu);
        out_rgba[4 * i + 1] = (uint8_t)((u >> 8) & 0xffu);
        out_rgba[4 * i + 2] = (uint8_t)((u >> 16) & 0xffu);
        out_rgba[4 * i + 3] = (uint8_t)(u >> 24);
    }
}

void pm_unpack_rgba8_f32(const uint8_t *in_rgba, size_t n, float *out)
{
    for (size_t i = 0; i < n; i++) {
        const uint8_t *p = in_rgba + 4 * i;
        uint32_t u =
            (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
        memcpy(&out[i], &u, sizeof u);
    }
}

/* The readback shader computes enc = fract(v * (1, 255, 255^2, 255^3)) and
 * subtracts enc.yzww / 255, which leaves in each channel one base-255 digit
 * of v: v ~ r/255 + g/255^2 + b/255^3 + a/255^4, r the most significant.
 * Here the digits come from the integer N = round(v * 255^4), computed
 * exactly (the float's 24-bit significand times 255^4 fits 64 bits), with
 * ties rounded up, and N capped at 255^4 - 1; every byte is 0..254.
 * Decoding is N / 255^4 rounded to the nearest float, so a round trip is
 * off by at most 0.5 / 255^4 (~1.2e-10) plus half a float ulp, and exact
 * for v >= 2^-8. Values below 0 and NaN encode as 0, values >= 1 as the
 * largest code (254, 254, 254, 254), which decodes to 1.0f: 1 - 1/255^4
 * rounds to 1 as a float, so decoded values lie in [0, 1]. */
#define B4 4228250625ull /* 255^4 */

static uint64_t unorm_code(float v)
{
    if (!(v > 0.0f)) return 0; /* also NaN and -0 */
    if (v >= 1.0f) return B4 - 1;
    uint32_t u;
    memcpy(&u, &v, sizeof u);
    uint32_t e = (u >> 23) & 0xffu;
    uint64_t m = u & 0x7fffffu;
    if (e)
        m |= 0x800000u;
    else
        e = 1; /* denormal: same scale as the smallest normal */
    /* v = m * 2^(e - 150); v < 1 means e <= 126, so shift >= 24. */
    unsigned shift = 150u - e;
    if (shift >= 64) return 0;
    uint64_t p = m * B4;
    uint64_t code = (p + ((uint64_t)1 << (shift - 1))) >> shift;
    return code < B4 ? code : B4 - 1;
}

void pm_pack_unorm_rgba8(const float *in, size_t n, uint8_t *out_rgba)
{
    for (size_t i = 0; i < n; i++) {
        uint64_t c = unorm_code(in[i]);
        out_rgba[4 * i + 0] = (uint8_t)(c / (255u * 255u * 255u));
        out_rgba[4 * i + 1] = (uint8_t)(c / (255u * 255u) % 255u);
        out_rgba[4 * i + 2] = (uint8_t)(c / 255u % 255u);
        out_rgba[4 * i + 3] = (uint8_t)(c % 255u);
    }
}

/* The shader's decode, dot(rgba / 255, (1, 1/255, 1/255^2, 1/255^3)), done as
 * one exact integer and one division in double. Bytes of 255 (never written
 * by the encoder) decode by the same formula and may give values >= 1. */
void pm_unpack_unorm_rgba8(const uint8_t *in_rgba, size_t n, float *out)
{
    for (size_t i = 0; i < n; i++) {
        const uint8_t *p = in_rgba + 4 * i;
        uint64_t c = (((uint64_t)p[0] * 255u + p[1]) * 255u + p[2]) * 255u + p[3];
        out[i] = (float)((double)c / (double)B4);
    }
}
