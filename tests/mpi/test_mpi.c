/* The MPI layer (include/pyramesh_mpi.h), run by CTest under
 * `mpirun -n 1..4 --oversubscribe`: for volumes whose surface crosses
 * every slab boundary, in several decompositions (even slabs, a
 * one-slice slab, a rank with no slices), the gathered mesh is byte for
 * byte the single-process pm_isosurface mesh (soup and indexed; normals
 * none, central, Sobel; u8, u16, f32), the distributed parts merged by
 * their global ids give the same mesh, and a rank with a bad slab makes
 * every rank fail with that rank's message. Particle sets split over the
 * ranks (contiguous, by position, one rank empty) give pm_reconstruct's
 * mesh of the concatenated set, byte for byte. The seed comes from rank 0
 * (PYRAMESH_TEST_SEED) so every rank builds the same volumes. With the
 * argument `cuda` every rank meshes on its GPU (rank modulo the GPUs; exit
 * 77, a skip, without one) and the references stay on the CPU: the MPI
 * mesh of GPU ranks is the CPU's single-process mesh. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pyramesh_mpi.h"
#include "test_common.h"

static int rank, ranks;
static pm_context *ref_ctx; /* the single-process references: CPU, 1 thread */

/* A field of a few random spheres and planes plus noise, so the surface
 * crosses every slab boundary and has many components. */
static void *make_volume(pm_sample_type type, size_t nx, size_t ny, size_t nz)
{
    size_t n = nx * ny * nz, ss = pm_sample_size(type);
    unsigned char *v = malloc(n * ss);
    double c[4][4];
    for (int s = 0; s < 4; s++) {
        c[s][0] = pmt_uniform() * (double)nx;
        c[s][1] = pmt_uniform() * (double)ny;
        c[s][2] = pmt_uniform() * (double)nz;
        c[s][3] = 2.0 + pmt_uniform() * (double)nz * 0.4;
    }
    for (size_t k = 0; k < nz; k++)
        for (size_t j = 0; j < ny; j++)
            for (size_t i = 0; i < nx; i++) {
                double f = 0;
                for (int s = 0; s < 4; s++) {
                    double dx = (double)i - c[s][0], dy = (double)j - c[s][1],
                           dz = (double)k - c[s][2];
                    double d = sqrt(dx * dx + dy * dy + dz * dz) / c[s][3];
                    f += exp(-d * d);
                }
                f = 0.8 * f + 0.1 * pmt_uniform(); /* in [0, ~3.3] */
                size_t at = i + nx * (j + ny * k);
                if (type == PM_SAMPLE_U8) v[at] = (unsigned char)(f > 3.0 ? 255 : f * 85.0);
                else if (type == PM_SAMPLE_U16) {
                    uint16_t u = (uint16_t)(f > 3.0 ? 65535 : f * 21845.0);
                    memcpy(v + 2 * at, &u, 2);
                } else {
                    float x = (float)f;
                    memcpy(v + 4 * at, &x, 4);
                }
            }
    return v;
}

static int same_mesh(const pm_mesh *a, const pm_mesh *b)
{
    if (a->num_vertices != b->num_vertices || a->num_triangles != b->num_triangles) return 0;
    if (a->num_vertices == 0) return 1;
    if (memcmp(a->positions, b->positions, 12 * a->num_vertices)) return 0;
    if (!a->normals != !b->normals) return 0;
    if (a->normals && memcmp(a->normals, b->normals, 12 * a->num_vertices)) return 0;
    if (!a->indices != !b->indices) return 0;
    if (a->indices && memcmp(a->indices, b->indices, 12 * a->num_triangles)) return 0;
    return 1;
}

/* Rank r's slab [z0, z0 + nz) for decomposition d of nz_total slices. */
static void slab_of(int d, int r, size_t nz_total, size_t *z0, size_t *nz)
{
    if (d == 0) { /* even */
        *z0 = nz_total * (size_t)r / (size_t)ranks;
        *nz = nz_total * (size_t)(r + 1) / (size_t)ranks - *z0;
        return;
    }
    if (d == 1) { /* rank 0 one slice, the rest even */
        if (r == 0) {
            *z0 = 0;
            *nz = ranks > 1 ? 1 : nz_total;
            return;
        }
        size_t rest = nz_total - 1;
        *z0 = 1 + rest * (size_t)(r - 1) / (size_t)(ranks - 1);
        *nz = 1 + rest * (size_t)r / (size_t)(ranks - 1) - *z0;
        return;
    }
    /* d == 2: the last rank holds nothing, the middle ones one slice each
     * where there are enough ranks, rank 0 the rest. */
    if (ranks == 1) {
        *z0 = 0;
        *nz = nz_total;
        return;
    }
    size_t ones = (size_t)(ranks - 2);
    if (r == ranks - 1) {
        *z0 = nz_total;
        *nz = 0;
    } else if (r == 0) {
        *z0 = 0;
        *nz = nz_total - ones;
    } else {
        *z0 = nz_total - ones + (size_t)(r - 1);
        *nz = 1;
    }
}

typedef struct keyed {
    uint64_t key;
    float p[3], n[3];
} keyed;

static int cmp_keyed(const void *x, const void *y)
{
    uint64_t a = ((const keyed *)x)->key, b = ((const keyed *)y)->key;
    return a < b ? -1 : a > b;
}

static uint64_t index_of(const keyed *v, uint64_t n, uint64_t key)
{
    uint64_t lo = 0, hi = n;
    while (lo < hi) {
        uint64_t mid = (lo + hi) / 2;
        if (v[mid].key < key) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

/* The distributed parts (this rank's: part, ids; freed here), sent to rank
 * 0 and merged there by their global ids (equal ids: one vertex, with the
 * same bytes on every rank that has it; triangles in rank order), must be
 * the gathered mesh `want`. */
static void check_parts(pm_context *ctx, pm_mesh *part_in, uint64_t *ids, const pm_mesh *want)
{
    pm_mesh part = *part_in;
    uint64_t nv = part.num_vertices, nt = part.num_triangles;
    PMT_CHECK(part.indices != NULL || nt == 0, "the local part is indexed");
    keyed *mine = calloc((size_t)nv + 1, sizeof *mine);
    uint64_t *tri = malloc((size_t)(3 * nt + 1) * 8);
    for (uint64_t v = 0; v < nv; v++) {
        mine[v].key = ids[v];
        memcpy(mine[v].p, part.positions + 3 * v, 12);
        if (part.normals) memcpy(mine[v].n, part.normals + 3 * v, 12);
    }
    for (uint64_t t = 0; t < 3 * nt; t++) tri[t] = ids[part.indices[t]];
    uint64_t counts[2] = {nv, nt};
    uint64_t *all = malloc(2 * (size_t)ranks * 8);
    MPI_Gather(counts, 2, MPI_UINT64_T, all, 2, MPI_UINT64_T, 0, MPI_COMM_WORLD);
    if (rank != 0) {
        MPI_Send(mine, (int)(nv * sizeof *mine), MPI_BYTE, 0, 1, MPI_COMM_WORLD);
        MPI_Send(tri, (int)(3 * nt), MPI_UINT64_T, 0, 2, MPI_COMM_WORLD);
    } else {
        uint64_t tv = 0, tt = 0;
        for (int r = 0; r < ranks; r++) {
            tv += all[2 * r];
            tt += all[2 * r + 1];
        }
        keyed *v = malloc((size_t)(tv + 1) * sizeof *v);
        uint64_t *t = malloc((size_t)(3 * tt + 1) * 8);
        uint64_t ov = 0, ot = 0;
        for (int r = 0; r < ranks; r++) {
            if (r == 0) {
                memcpy(v, mine, (size_t)nv * sizeof *mine);
                memcpy(t, tri, (size_t)(3 * nt) * 8);
            } else {
                MPI_Recv(v + ov, (int)(all[2 * r] * sizeof *v), MPI_BYTE, r, 1, MPI_COMM_WORLD,
                         MPI_STATUS_IGNORE);
                MPI_Recv(t + ot, (int)(3 * all[2 * r + 1]), MPI_UINT64_T, r, 2, MPI_COMM_WORLD,
                         MPI_STATUS_IGNORE);
            }
            ov += all[2 * r];
            ot += 3 * all[2 * r + 1];
        }
        qsort(v, (size_t)tv, sizeof *v, cmp_keyed);
        uint64_t u = 0;
        int same = 1;
        for (uint64_t i = 0; i < tv; i++) {
            if (u && v[u - 1].key == v[i].key) {
                same &= memcmp(v[u - 1].p, v[i].p, 12) == 0 && memcmp(v[u - 1].n, v[i].n, 12) == 0;
                continue;
            }
            v[u++] = v[i];
        }
        PMT_CHECK(same, "a vertex shared by two parts has the same bytes in both");
        PMT_CHECK(u == want->num_vertices && tt == want->num_triangles,
                  "parts: %llu vertices, %llu triangles; gathered %zu, %zu", (unsigned long long)u,
                  (unsigned long long)tt, want->num_vertices, want->num_triangles);
        if (u == want->num_vertices && tt == want->num_triangles) {
            int pos = 1, nor = 1, idx = 1;
            for (uint64_t i = 0; i < u; i++) {
                pos &= memcmp(v[i].p, want->positions + 3 * i, 12) == 0;
                if (want->normals) nor &= memcmp(v[i].n, want->normals + 3 * i, 12) == 0;
            }
            for (uint64_t i = 0; i < 3 * tt; i++)
                idx &= index_of(v, u, t[i]) == want->indices[i];
            PMT_CHECK(pos && nor && idx, "parts merged by id = gathered mesh (positions %d, "
                      "normals %d, indices %d)", pos, nor, idx);
        }
        free(v);
        free(t);
    }
    free(all);
    free(mine);
    free(tri);
    pm_mesh_free(ctx, &part);
    free(ids);
}

static void check_local(pm_context *ctx, const pm_lattice *lat, const pm_volume *slab, size_t z0,
                        double iso, const pm_isosurface_options *o, const pm_mesh *want)
{
    pm_mesh part;
    uint64_t *ids = NULL;
    PMT_OK(pm_mpi_isosurface_local(ctx, MPI_COMM_WORLD, lat, slab, z0, iso, o, &part, &ids, NULL));
    check_parts(ctx, &part, ids, want);
}

/* Particles: two jittered balls and a loose sheet, about 2500 in all;
 * the same on every rank (same seed). */
static float *make_particles(size_t *count)
{
    const double s = 0.1;
    size_t cap = 8192, n = 0;
    float *xyz = malloc(cap * 3 * sizeof *xyz);
    double c[2][4] = {{0.4 + pmt_uniform(), 0.3, 0.5, 0.45}, {1.5, 0.9 + pmt_uniform(), 1.1, 0.35}};
    for (int b = 0; b < 2; b++)
        for (int k = -6; k <= 6; k++)
            for (int j = -6; j <= 6; j++)
                for (int i = -6; i <= 6; i++) {
                    double x = i * s, y = j * s, z = k * s;
                    if (x * x + y * y + z * z > c[b][3] * c[b][3] || n >= cap) continue;
                    xyz[3 * n] = (float)(c[b][0] + x + 0.02 * (pmt_uniform() - 0.5));
                    xyz[3 * n + 1] = (float)(c[b][1] + y + 0.02 * (pmt_uniform() - 0.5));
                    xyz[3 * n + 2] = (float)(c[b][2] + z + 0.02 * (pmt_uniform() - 0.5));
                    n++;
                }
    for (int i = 0; i < 300 && n < cap; i++, n++) { /* a sheet at z ~ 2 */
        xyz[3 * n] = (float)(2.0 * pmt_uniform());
        xyz[3 * n + 1] = (float)(2.0 * pmt_uniform());
        xyz[3 * n + 2] = (float)(2.0 + 0.05 * pmt_uniform());
    }
    *count = n;
    return xyz;
}

/* pm_mpi_reconstruct against pm_reconstruct of the concatenated set, for
 * three splits: contiguous chunks, chunks by position (each rank the
 * particles of a z band, so ghosts cross ranks), and one rank empty. */
static int check_particles(pm_context *ctx)
{
    size_t n;
    float *all = make_particles(&n);
    int cases = 0;
    for (int d = 0; d < 3; d++) {
        /* The split: indices of rank r, in the order the rank holds them. */
        size_t *owner = malloc(n * sizeof *owner);
        for (size_t i = 0; i < n; i++) {
            if (d == 0) owner[i] = i * (size_t)ranks / n;
            else if (d == 1) {
                double z = all[3 * i + 2];
                int r = (int)(z / 2.2 * ranks);
                owner[i] = (size_t)(r < 0 ? 0 : r >= ranks ? ranks - 1 : r);
            } else
                owner[i] = ranks > 1 ? (i * (size_t)(ranks - 1) / n) : 0; /* last rank empty */
        }
        /* The whole set in rank order, and this rank's part. */
        float *cat = malloc(n * 3 * sizeof *cat), *mine = malloc(n * 3 * sizeof *mine + 4);
        size_t nc = 0, nm = 0;
        for (int r = 0; r < ranks; r++)
            for (size_t i = 0; i < n; i++)
                if (owner[i] == (size_t)r) {
                    memcpy(cat + 3 * nc++, all + 3 * i, 12);
                    if (r == rank) memcpy(mine + 3 * nm++, all + 3 * i, 12);
                }
        for (int variant = 0; variant < 2; variant++) {
            pm_field_params fp;
            memset(&fp, 0, sizeof fp);
            fp.struct_size = sizeof fp;
            fp.radius = 0.05;
            fp.cube_size = variant ? 0.75 : 0.5;
            if (variant) {
                fp.use_aabb = 1;
                for (int a = 0; a < 3; a++) {
                    fp.aabb_min[a] = -1.0;
                    fp.aabb_max[a] = 1.9;
                }
            }
            pm_reconstruct_options ro;
            memset(&ro, 0, sizeof ro);
            ro.struct_size = sizeof ro;
            ro.brick_points = variant ? 0 : 8;
            pm_isosurface_options io;
            memset(&io, 0, sizeof io);
            io.struct_size = sizeof io;
            io.normals = variant ? PM_NORMALS_SOBEL : PM_NORMALS_CENTRAL;
            io.mode = variant ? PM_MESH_SOUP : PM_MESH_INDEXED;
            pm_mesh ref, got;
            pm_reconstruct_report rr;
            PMT_OK(pm_reconstruct(ref_ctx, cat, nc, &fp, NULL, &io, &ref, &rr));
            int root = (d + variant) % ranks;
            pm_mpi_report rep;
            PMT_OK(pm_mpi_reconstruct(ctx, MPI_COMM_WORLD, mine, nm, &fp, &ro, &io, root, &got,
                                      &rep));
            if (rank == root)
                PMT_CHECK(ref.num_triangles > 0 && same_mesh(&ref, &got),
                          "particles, split %d, variant %d: mpi mesh (%zu v, %zu t) = "
                          "pm_reconstruct (%zu v, %zu t)",
                          d, variant, got.num_vertices, got.num_triangles, ref.num_vertices,
                          ref.num_triangles);
            /* Every rank's report: the single-process lattice and counts. */
            PMT_CHECK(rep.particles_used == rr.particles_used &&
                          rep.particles_dropped == rr.particles_dropped &&
                          memcmp(rep.lattice.dims, rr.lattice.dims, sizeof rr.lattice.dims) == 0 &&
                          memcmp(rep.lattice.origin, rr.lattice.origin, sizeof rr.lattice.origin) == 0,
                      "particles, split %d, variant %d: report lattice and counts", d, variant);
            /* The distributed parts, merged by id: the indexed mesh, on
             * every rank (rank 0 compares). */
            {
                pm_isosurface_options ii = io;
                ii.mode = PM_MESH_INDEXED;
                pm_mesh want, part;
                uint64_t *ids = NULL;
                PMT_OK(pm_reconstruct(ref_ctx, cat, nc, &fp, NULL, &ii, &want, NULL));
                PMT_OK(pm_mpi_reconstruct_local(ctx, MPI_COMM_WORLD, mine, nm, &fp, &ro, &io,
                                                &part, &ids, NULL));
                check_parts(ctx, &part, ids, &want);
                pm_mesh_free(ref_ctx, &want);
            }
            pm_mesh_free(ref_ctx, &ref);
            pm_mesh_free(ctx, &got);
            cases++;
        }
        free(owner);
        free(cat);
        free(mine);
    }
    /* A non-finite coordinate on one rank: every rank fails with its message. */
    {
        float bad[3] = {0.f, NAN, 0.f};
        int who = ranks - 1;
        pm_field_params fp;
        memset(&fp, 0, sizeof fp);
        fp.struct_size = sizeof fp;
        fp.radius = 0.05;
        pm_mesh got;
        pm_status st = pm_mpi_reconstruct(ctx, MPI_COMM_WORLD, rank == who ? bad : all,
                                          rank == who ? 1 : 100, &fp, NULL, NULL, 0, &got, NULL);
        char want[32];
        snprintf(want, sizeof want, "rank %d: ", who);
        PMT_CHECK(st == PM_STATUS_INVALID_ARGUMENT &&
                      strncmp(pm_last_error(), want, strlen(want)) == 0 &&
                      strstr(pm_last_error(), "non-finite"),
                  "a NaN on rank %d: %s, '%s'", who, pm_status_string(st), pm_last_error());
    }
    free(all);
    return cases;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &ranks);
    pmt_seed_init();
    MPI_Bcast(&pmt_seed, 1, MPI_UINT64_T, 0, MPI_COMM_WORLD);
    pmt_state = pmt_seed;
    const int cuda = argc > 1 && strcmp(argv[1], "cuda") == 0;
    if (cuda && !pm_cuda_available()) {
        if (rank == 0) printf("test_mpi cuda: no usable GPU, skipped\n");
        MPI_Finalize();
        return PMT_SKIP;
    }
    pm_context *ctx = NULL;
    pm_context_desc desc;
    memset(&desc, 0, sizeof desc);
    desc.device = PM_DEVICE_CPU;
    desc.num_threads = 1;
    PMT_OK(pm_context_create(&desc, &ref_ctx));
    if (cuda) {
        desc.device = PM_DEVICE_CUDA;
        desc.cuda_device = rank % pm_cuda_device_count();
    }
    PMT_OK(pm_context_create(&desc, &ctx));
    if (rank == 0)
        printf("test_mpi: %d ranks on %s, seed %llu\n", ranks, cuda ? "cuda" : "cpu",
               (unsigned long long)pmt_seed);

    static const pm_sample_type types[3] = {PM_SAMPLE_F32, PM_SAMPLE_U16, PM_SAMPLE_U8};
    static const pm_normals normals[3] = {PM_NORMALS_CENTRAL, PM_NORMALS_NONE, PM_NORMALS_SOBEL};
    static const double isos[3] = {0.7, 0.7 * 21845.0, 0.7 * 85.0};
    int cases = 0;
    for (int ti = 0; ti < 3; ti++) {
        size_t nx = 11 + (size_t)(pmt_rand() % 9), ny = 9 + (size_t)(pmt_rand() % 9),
               nz = 12 + (size_t)(pmt_rand() % 10);
        void *data = make_volume(types[ti], nx, ny, nz);
        size_t ss = pm_sample_size(types[ti]);
        pm_lattice lat;
        memset(&lat, 0, sizeof lat);
        lat.dims[0] = nx;
        lat.dims[1] = ny;
        lat.dims[2] = nz;
        for (int a = 0; a < 3; a++) {
            lat.origin[a] = -1.0 + 0.25 * a;
            lat.spacing[a] = 0.5 + 0.125 * a;
        }
        pm_volume whole;
        memset(&whole, 0, sizeof whole);
        whole.data = data;
        whole.type = types[ti];
        whole.nx = nx;
        whole.ny = ny;
        whole.nz = nz;
        for (int a = 0; a < 3; a++) {
            whole.origin[a] = lat.origin[a];
            whole.spacing[a] = lat.spacing[a];
        }
        for (int ni = 0; ni < 3; ni++)
            for (int mode = 0; mode < 2; mode++)
                for (int d = 0; d < 3; d++) {
                    pm_isosurface_options o;
                    memset(&o, 0, sizeof o);
                    o.struct_size = sizeof o;
                    o.normals = normals[ni];
                    o.mode = mode ? PM_MESH_SOUP : PM_MESH_INDEXED;
                    pm_mesh ref, got;
                    PMT_OK(pm_isosurface(ref_ctx, &whole, isos[ti], &o, &ref));
                    size_t z0, snz;
                    slab_of(d, rank, nz, &z0, &snz);
                    pm_volume slab = whole;
                    slab.nz = snz;
                    slab.data = snz ? (const unsigned char *)data + z0 * nx * ny * ss : NULL;
                    int root = (int)((unsigned)(d + ti) % (unsigned)ranks);
                    PMT_OK(pm_mpi_isosurface(ctx, MPI_COMM_WORLD, &lat, &slab, z0, isos[ti], &o,
                                             root, &got, NULL));
                    if (rank == root)
                        PMT_CHECK(same_mesh(&ref, &got),
                                  "%s, normals %d, %s, decomposition %d: gathered mesh (%zu v, "
                                  "%zu t) = pm_isosurface (%zu v, %zu t)",
                                  pm_sample_type_string(types[ti]), (int)normals[ni],
                                  mode ? "soup" : "indexed", d, got.num_vertices,
                                  got.num_triangles, ref.num_vertices, ref.num_triangles);
                    else
                        PMT_CHECK(got.num_triangles == 0, "non-root ranks get no mesh");
                    /* The distributed form against the gathered indexed mesh. */
                    if (!mode) {
                        pm_mesh want;
                        memset(&want, 0, sizeof want);
                        PMT_OK(pm_mpi_isosurface(ctx, MPI_COMM_WORLD, &lat, &slab, z0, isos[ti],
                                                 &o, 0, &want, NULL));
                        check_local(ctx, &lat, &slab, z0, isos[ti], &o, &want);
                        pm_mesh_free(ctx, &want);
                    }
                    pm_mesh_free(ref_ctx, &ref);
                    pm_mesh_free(ctx, &got);
                    cases++;
                }
        /* A rank with a bad slab (wrong row count): every rank fails with
         * that rank's message. */
        {
            size_t z0, snz;
            slab_of(0, rank, nz, &z0, &snz);
            pm_volume slab = whole;
            slab.nz = snz;
            slab.data = snz ? (const unsigned char *)data + z0 * nx * ny * ss : NULL;
            int bad = ranks - 1;
            if (rank == bad) slab.ny = ny + 1;
            pm_mesh got;
            pm_status s = pm_mpi_isosurface(ctx, MPI_COMM_WORLD, &lat, &slab, z0, 0.5, NULL, 0,
                                            &got, NULL);
            char want[32];
            snprintf(want, sizeof want, "rank %d: ", bad);
            PMT_CHECK(s == PM_STATUS_INVALID_ARGUMENT && strncmp(pm_last_error(), want,
                                                                 strlen(want)) == 0,
                      "bad slab on rank %d: %s, '%s'", bad, pm_status_string(s), pm_last_error());
            /* Slabs that do not tile the volume. */
            slab = whole;
            slab.nz = snz;
            slab.data = snz ? (const unsigned char *)data + z0 * nx * ny * ss : NULL;
            size_t z0b = rank == 0 && snz > 1 ? z0 + 1 : z0;
            if (rank == 0 && snz > 1) slab.nz = snz - 1;
            s = pm_mpi_isosurface(ctx, MPI_COMM_WORLD, &lat, &slab, z0b, 0.5, NULL, 0, &got, NULL);
            PMT_CHECK(s == PM_STATUS_INVALID_ARGUMENT && strstr(pm_last_error(), "tiling"),
                      "a gap in the slabs is refused: %s, '%s'", pm_status_string(s),
                      pm_last_error());
        }
        free(data);
    }
    cases += check_particles(ctx);
    pm_context_destroy(ctx);
    pm_context_destroy(ref_ctx);
    int fails = pmt_failures, total = 0;
    MPI_Allreduce(&fails, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0)
        printf("test_mpi: %d ranks, %d cases, %s\n", ranks, cases, total ? "FAILED" : "ok");
    MPI_Finalize();
    return total ? 1 : 0;
}
