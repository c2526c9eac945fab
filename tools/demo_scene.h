/* The demo's dam-break scene (`pyramesh demo`, docs/cli.md): a block of
 * fluid particles on a jittered lattice of spacing 2r against x = 0 and a
 * falling sphere of particles beside it, from a fixed-seed PRNG
 * (splitmix64), so every run and every program gives the same particles.
 * Shared by the CLI and the benchmarks and tests that mesh the same scene
 * (bench/bench_postprocess.c, bench/collide_inputs.h,
 * bench/subdivide_inputs.h). C and C++. */
#ifndef PM_TOOLS_DEMO_SCENE_H
#define PM_TOOLS_DEMO_SCENE_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>

/* The scene's parameters, stated here and in docs/cli.md. */
#define DEMO_RADIUS 0.025  /* particle radius r; lattice spacing 2r */
#define DEMO_SMOOTHING 2.0 /* l: support radius 2*l*r = 4r */
#define DEMO_CUBE 1.5      /* c: grid cell = 1.5*r (splashsurf canyon) */
#define DEMO_CUBE_STR "1.5"
#define DEMO_THRESHOLD 0.6        /* t */
#define DEMO_SPHERE_FRACTION 0.15 /* share of the particles in the sphere */
#define DEMO_JITTER 0.15          /* +- this fraction of the lattice spacing */
#define DEMO_SEED 0x5eed0f5eedULL

static inline uint64_t demo_splitmix64(uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* Uniform in [-1, 1), from the top 24 bits so float rounding is exact. */
static inline float demo_jitter(uint64_t *state)
{
    return (float)(demo_splitmix64(state) >> 40) / 8388608.0f - 1.0f;
}

/* About `target` particles: fills xyz (3 floats each; NULL to count only)
 * and returns the count. The block is m x m x 2m lattice points (x, y in
 * [0, (m-1)s], z in [0, (2m-1)s], s = 2r); *block_m receives m when not
 * NULL. `seed` DEMO_SEED gives the demo's scene. */
static inline size_t demo_scene(size_t target, uint64_t seed, float *xyz, size_t *block_m)
{
    const double s = 2.0 * DEMO_RADIUS;
    const float j = (float)(DEMO_JITTER * s);
    uint64_t rng = seed;
    size_t n = 0;
    double block = (1.0 - DEMO_SPHERE_FRACTION) * (double)target;
    size_t m = (size_t)floor(cbrt(block / 2.0));
    if (m < 2) m = 2;
    if (block_m) *block_m = m;
    for (size_t k = 0; k < 2 * m; k++)
        for (size_t jj = 0; jj < m; jj++)
            for (size_t i = 0; i < m; i++, n++)
                if (xyz) {
                    xyz[3 * n + 0] = (float)((double)i * s) + j * demo_jitter(&rng);
                    xyz[3 * n + 1] = (float)((double)jj * s) + j * demo_jitter(&rng);
                    xyz[3 * n + 2] = (float)((double)k * s) + j * demo_jitter(&rng);
                }
    /* The sphere: lattice points within R, R chosen for the sphere's share,
     * centred beside the column and above the floor, as if falling in. */
    double vol = DEMO_SPHERE_FRACTION * (double)target * s * s * s;
    double R = cbrt(3.0 * vol / (4.0 * 3.14159265358979323846));
    if (R < 2 * s) R = 2 * s;
    double width = (double)(m - 1) * s;
    double cx = width + 0.5 * width + R, cy = 0.5 * width, cz = (double)(2 * m) * s * 0.6 + R;
    long q = (long)ceil(R / s);
    for (long k = -q; k <= q; k++)
        for (long jj = -q; jj <= q; jj++)
            for (long i = -q; i <= q; i++) {
                double x = (double)i * s, y = (double)jj * s, z = (double)k * s;
                if (x * x + y * y + z * z > R * R) continue;
                if (xyz) {
                    xyz[3 * n + 0] = (float)(cx + x) + j * demo_jitter(&rng);
                    xyz[3 * n + 1] = (float)(cy + y) + j * demo_jitter(&rng);
                    xyz[3 * n + 2] = (float)(cz + z) + j * demo_jitter(&rng);
                }
                n++;
            }
    return n;
}

#endif
