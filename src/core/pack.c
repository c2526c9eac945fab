/* STUB: replaced by the real implementation (seed 004 / seed 000 packing). */
#include "pyramesh.h"
void pm_pack_f32_rgba8(const float *in, size_t n, uint8_t *out) { (void)in; (void)n; (void)out; }
void pm_unpack_rgba8_f32(const uint8_t *in, size_t n, float *out) { (void)in; (void)n; (void)out; }
void pm_pack_unorm_rgba8(const float *in, size_t n, uint8_t *out) { (void)in; (void)n; (void)out; }
void pm_unpack_unorm_rgba8(const uint8_t *in, size_t n, float *out) { (void)in; (void)n; (void)out; }
