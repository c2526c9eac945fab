/* random_volume TYPE NX NY NZ SEED OUT [closed] [sample|half]
 *
 * Writes a raw little-endian volume (x fastest; TYPE u8, u16, i16 or f32)
 * of a smooth random field for the CLI tests, the same bytes for the same
 * arguments: a sum of plane sinusoids and gaussian blobs mapped onto a
 * random part of the type's range, then, by chance, the awkward samples of
 * real data: flat boxes (some exactly at the iso value), isolated spikes
 * to the type's limits and, for f32, samples exactly at the iso value (-0.0
 * when it is 0) and sometimes a whole row of them.
 *
 * Prints an iso value on stdout (%.17g, which reads back as the same
 * double) strictly between the smallest and the largest sample where they
 * differ, so the surface is never empty: `sample` takes it from a sample
 * value, `half` (integer types) is such a value + 0.5; by default the seed
 * chooses (f32: a sample value, 0 or a random value).
 *
 * `closed` fades the field to its minimum towards the volume's faces and
 * sets the outer shell of samples to the minimum, so that with --inside
 * above every surface is closed. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PI 3.14159265358979323846
#define NTERMS 6

enum { T_U8, T_U16, T_I16, T_F32 };

static uint64_t rng_state;

/* splitmix64 (Steele, Lea and Flood 2014). */
static uint64_t rnext(void)
{
    uint64_t z = (rng_state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
static double runif(void) { return (double)(rnext() >> 11) * (1.0 / 9007199254740992.0); }
static double rrange(double a, double b) { return a + (b - a) * runif(); }
static size_t rpick(size_t n) { return (size_t)(rnext() % n); }

/* Each term is separable: a sinusoid sin(kx x + ky y + kz z + phase) is
 * evaluated from per-axis sines and cosines, a blob as a product of
 * per-axis gaussians, so a row costs a few multiplications per term. */
typedef struct {
    int blob;
    double amp;
    double *s[3], *c[3]; /* per axis: sin and cos of k_a * i (+ phase on x), or the gaussian */
} term;

static term terms[NTERMS];
static size_t dims[3];

static double *table(size_t n)
{
    double *t = malloc(n * sizeof *t);
    if (!t) {
        fprintf(stderr, "random_volume: out of memory\n");
        exit(1);
    }
    return t;
}

static void make_terms(void)
{
    const double maxdim = (double)(dims[0] > dims[1] ? (dims[0] > dims[2] ? dims[0] : dims[2])
                                                     : (dims[1] > dims[2] ? dims[1] : dims[2]));
    /* 0.5 to a few cycles over the largest axis: fewer on large volumes,
     * whose meshes would otherwise outgrow the test's disk. */
    const double maxcyc = maxdim > 300 ? 2.5 : maxdim > 100 ? 4.0 : 3.0;
    for (int t = 0; t < NTERMS; t++) {
        term *T = &terms[t];
        T->blob = runif() < 0.5;
        T->amp = rrange(0.3, 1.0) * (runif() < 0.5 ? -1.0 : 1.0);
        double d[3], len = 1e-9, cyc = rrange(0.5, maxcyc), phase = rrange(0, 2 * PI);
        for (int a = 0; a < 3; a++) {
            d[a] = rrange(-1, 1);
            len += d[a] * d[a];
        }
        for (int a = 0; a < 3; a++) {
            double k = 2 * PI * cyc / maxdim * d[a] / sqrt(len);
            double centre = rrange(-0.1, 1.1) * (double)dims[a];
            double sigma = rrange(0.05, 0.3) * (double)(dims[a] > 4 ? dims[a] : 4);
            T->s[a] = table(dims[a]);
            T->c[a] = table(dims[a]);
            for (size_t i = 0; i < dims[a]; i++) {
                double arg = k * (double)i + (a == 0 ? phase : 0.0), e = (double)i - centre;
                T->s[a][i] = T->blob ? exp(-e * e / (2 * sigma * sigma)) : sin(arg);
                T->c[a][i] = T->blob ? 0.0 : cos(arg);
            }
        }
    }
}

/* One row (y, z) of the field before scaling. */
static void field_row(size_t y, size_t z, double *row)
{
    for (size_t x = 0; x < dims[0]; x++)
        row[x] = 0.0;
    for (int t = 0; t < NTERMS; t++) {
        const term *T = &terms[t];
        if (T->blob) {
            double f = T->amp * T->s[1][y] * T->s[2][z];
            for (size_t x = 0; x < dims[0]; x++)
                row[x] += f * T->s[0][x];
        } else { /* sin(a + b) = sin a cos b + cos a sin b, b from y and z */
            double sb = T->s[1][y] * T->c[2][z] + T->c[1][y] * T->s[2][z];
            double cb = T->c[1][y] * T->c[2][z] - T->s[1][y] * T->s[2][z];
            for (size_t x = 0; x < dims[0]; x++)
                row[x] += T->amp * (T->s[0][x] * cb + T->c[0][x] * sb);
        }
    }
}

static int type, esize;
static unsigned char *buf;

static double get(size_t i)
{
    const unsigned char *p = buf + i * (size_t)esize;
    uint32_t u = 0;
    for (int b = 0; b < esize; b++)
        u |= (uint32_t)p[b] << (8 * b);
    float f;
    memcpy(&f, &u, 4);
    if (type == T_I16) return (double)u - (u >= 32768 ? 65536.0 : 0.0);
    return type == T_F32 ? f : (double)u;
}

/* v is a value of the type (integers: already rounded and in range). */
static void set(size_t i, double v)
{
    uint32_t u;
    if (type == T_F32) {
        float f = (float)v;
        memcpy(&u, &f, 4);
    } else {
        u = (uint32_t)(int32_t)v;
    }
    for (int b = 0; b < esize; b++)
        buf[i * (size_t)esize + (size_t)b] = (unsigned char)(u >> (8 * b));
}

int main(int argc, char **argv)
{
    static const char *names[] = {"u8", "u16", "i16", "f32"};
    int closed = 0, iso_mode = 0; /* 0 seed's choice, 1 sample, 2 half */
    type = -1;
    for (int t = 0; argc >= 7 && t < 4; t++)
        if (!strcmp(argv[1], names[t])) type = t;
    for (int a = 7; a < argc; a++) {
        if (!strcmp(argv[a], "closed"))
            closed = 1;
        else if (!strcmp(argv[a], "sample"))
            iso_mode = 1;
        else if (!strcmp(argv[a], "half") && type != T_F32)
            iso_mode = 2;
        else
            type = -1;
    }
    if (type < 0) {
        fprintf(stderr, "usage: random_volume u8|u16|i16|f32 NX NY NZ SEED OUT [closed] "
                        "[sample|half (not f32)]\n");
        return 2;
    }
    for (int a = 0; a < 3; a++)
        dims[a] = strtoull(argv[2 + a], NULL, 10);
    const uint64_t seed = strtoull(argv[5], NULL, 10);
    if (!dims[0] || !dims[1] || !dims[2]) {
        fprintf(stderr, "random_volume: every dimension must be at least 1\n");
        return 2;
    }
    const size_t nx = dims[0], ny = dims[1], nz = dims[2], n = nx * ny * nz;
    esize = type == T_U8 ? 1 : type == T_F32 ? 4 : 2;
    rng_state = seed * 0x2545F4914F6CDD1Dull + (uint64_t)type;
    make_terms();

    /* closed: per-axis fades, 0 on the faces, 1 beyond 15% of the axis. */
    double *fade[3];
    for (int a = 0; a < 3; a++) {
        double m = 0.15 * (double)dims[a] < 2 ? 2 : 0.15 * (double)dims[a];
        fade[a] = table(dims[a]);
        for (size_t i = 0; i < dims[a]; i++) {
            double t = fmin(1.0, (double)(i < dims[a] - 1 - i ? i : dims[a] - 1 - i) / m);
            fade[a][i] = closed ? t * t * (3 - 2 * t) : 1.0;
        }
    }

    /* The target range: parts of the type's range as CT, MR and
     * simulation data use it; f32 over scales from 1e-3 to 1e3. */
    double lo, hi;
    if (type == T_U8) {
        lo = floor(rrange(0, 60)), hi = floor(rrange(190, 256));
    } else if (type == T_U16) {
        int ct = runif() < 0.5;
        lo = floor(ct ? rrange(0, 200) : rrange(0, 2000));
        hi = floor(ct ? rrange(800, 4096) : rrange(60000, 65536));
    } else if (type == T_I16) {
        int ct = runif() < 0.5;
        lo = ct ? -1024 : floor(rrange(-32768, -30000));
        hi = floor(ct ? rrange(1000, 3072) : rrange(30000, 32768));
    } else {
        double scale = pow(10.0, floor(rrange(-3, 4)));
        double off = runif() < 0.5 ? 0.0 : rrange(-2, 2) * scale;
        lo = off - scale * rrange(0.5, 1.5);
        hi = off + scale * rrange(0.5, 1.5);
    }
    const double tmin = type == T_I16 ? -32768 : 0;
    const double tmax = type == T_U8 ? 255 : type == T_U16 ? 65535 : 32767;

    /* Two passes over the rows: the field's range, then the samples. */
    double *row = table(nx), fmin_ = INFINITY, fmax_ = -INFINITY;
    for (size_t z = 0; z < nz; z++)
        for (size_t y = 0; y < ny; y++) {
            field_row(y, z, row);
            for (size_t x = 0; x < nx; x++)
                fmin_ = fmin(fmin_, row[x]), fmax_ = fmax(fmax_, row[x]);
        }
    if (!(fmax_ > fmin_)) fmax_ = fmin_ + 1.0;
    buf = malloc(n * (size_t)esize);
    if (!buf) {
        fprintf(stderr, "random_volume: out of memory (%zu bytes)\n", n * (size_t)esize);
        return 1;
    }
    double vmin = INFINITY, vmax = -INFINITY;
    for (size_t z = 0, i = 0; z < nz; z++)
        for (size_t y = 0; y < ny; y++) {
            field_row(y, z, row);
            for (size_t x = 0; x < nx; x++, i++) {
                double u =
                    (row[x] - fmin_) / (fmax_ - fmin_) * fade[0][x] * fade[1][y] * fade[2][z];
                double v = lo + (hi - lo) * u;
                v = type == T_F32 ? (double)(float)v : fmin(tmax, fmax(tmin, floor(v + 0.5)));
                set(i, v);
                vmin = fmin(vmin, v), vmax = fmax(vmax, v);
            }
        }

    /* The iso value, strictly inside (vmin, vmax) where the range allows. */
    double iso = 0.5 * (vmin + vmax);
    int from_sample = 0;
    for (int tries = 0; tries < 64 && !from_sample; tries++) {
        double v = get(rpick(n));
        if (v > vmin && v < vmax) iso = v, from_sample = 1;
    }
    const double pick = runif();
    if (type != T_F32) {
        iso = floor(iso);
        if ((iso_mode == 2 || (iso_mode == 0 && pick < 0.5)) && iso + 1 <= vmax) iso += 0.5;
        if (iso <= vmin && vmax - vmin >= 1) iso = vmin + 0.5;
    } else if (iso_mode == 0 && pick >= 0.3) {
        if (pick < 0.6 && vmin < 0 && vmax > 0)
            iso = 0.0;
        else
            iso = (float)rrange(vmin + 0.1 * (vmax - vmin), vmax - 0.1 * (vmax - vmin));
    }

    /* The awkward samples, each kind with probability 0.4. */
    int nflat = 0, nspike = 0, nexact = 0;
    if (runif() < 0.4) {
        nflat = 1 + (int)rpick(3);
        for (int f = 0; f < nflat; f++) {
            size_t b0[3], b1[3];
            for (int a = 0; a < 3; a++) {
                b0[a] = rpick(dims[a]);
                b1[a] = b0[a] + 1 + rpick(dims[a] / 4 + 1);
                if (b1[a] > dims[a]) b1[a] = dims[a];
            }
            double r = runif(), v = r < 0.4 ? floor(iso) : r < 0.7 ? vmin : vmax;
            if (type == T_F32 && r < 0.4) v = iso;
            for (size_t z = b0[2]; z < b1[2]; z++)
                for (size_t y = b0[1]; y < b1[1]; y++)
                    for (size_t x = b0[0]; x < b1[0]; x++)
                        set((z * ny + y) * nx + x, v);
        }
    }
    if (runif() < 0.4) {
        nspike = 1 + (int)rpick(40);
        for (int s = 0; s < nspike; s++) {
            int up = runif() < 0.5;
            double far = 3 * (vmax - vmin) + 1;
            double v = type != T_F32 ? (up ? tmax : tmin) : up ? vmax + far : vmin - far;
            if (runif() < 0.3) v = up ? vmax : vmin;
            set(rpick(n), v);
        }
    }
    if (type == T_F32 && runif() < 0.4) {
        nexact = 1 + (int)rpick(200);
        for (int s = 0; s < nexact; s++)
            set(rpick(n), iso == 0.0 && runif() < 0.5 ? -0.0 : iso);
        if (runif() < 0.3) {
            size_t y = rpick(ny), z = rpick(nz);
            for (size_t x = 0; x < nx; x++)
                set((z * ny + y) * nx + x, iso);
        }
    }
    if (closed) { /* the fades made vmin the samples' value at the faces */
        for (size_t z = 0; z < nz; z++)
            for (size_t y = 0; y < ny; y++)
                for (size_t x = 0; x < nx; x++)
                    if (!x || !y || !z || x == nx - 1 || y == ny - 1 || z == nz - 1)
                        set((z * ny + y) * nx + x, vmin);
    }

    FILE *fp = fopen(argv[6], "wb");
    if (!fp || fwrite(buf, (size_t)esize, n, fp) != n || fclose(fp) != 0) {
        fprintf(stderr, "random_volume: cannot write '%s'\n", argv[6]);
        return 1;
    }
    fprintf(stderr,
            "random_volume: %s %zux%zux%zu seed %llu range [%g, %g] iso %.17g flats %d spikes %d "
            "exact %d\n",
            names[type], nx, ny, nz, (unsigned long long)seed, vmin, vmax, iso, nflat, nspike,
            nexact);
    printf("%.17g\n", iso);
    return 0;
}
