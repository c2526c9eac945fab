/* Sparse reconstruction and mesh pieces (docs/scale.md) against the dense
 * path: brick fields bit for bit equal to pm_field_compute's; pieces of
 * random tilings of random volumes, merged in shuffled order, byte for
 * byte pm_isosurface's mesh (every sample type, normal mode, inside side,
 * soup and indexed); pm_reconstruct's sparse meshes byte for byte its
 * dense ones on random particle sets at several brick sizes, with
 * surfaces crossing brick faces, edges and corners, empty bricks, a
 * particle exactly on a brick boundary, 1 and 2 threads; the merge's
 * errors. `cuda`: pm_isosurface_piece on the GPU against the CPU, byte for
 * byte (windows in device memory, padded or not, random boxes touching the
 * borders, one point thick or empty, every sample type, normal mode and
 * inside side, a piece of several chunks), CUDA pieces of random tilings
 * merged into pm_isosurface's mesh; pm_reconstruct's sparse path on the
 * GPU byte for byte the CPU's dense mesh (every normals mode, soup and
 * indexed, the GPU's default brick and small ones, particles on brick
 * corners and faces). */
#include <math.h>

#include "test_common.h"
#include "core/sparse.h"
#include "cpu/density.h"
#include "cpu/sparse.h"

static pm_context *cpu1, *cpu2, *cpu3;

static void check_same_mesh(const pm_mesh *a, const pm_mesh *b, const char *what)
{
    PMT_CHECK(a->num_vertices == b->num_vertices && a->num_triangles == b->num_triangles,
              "%s: %zu/%zu vertices, %zu/%zu triangles", what, a->num_vertices, b->num_vertices,
              a->num_triangles, b->num_triangles);
    if (a->num_vertices != b->num_vertices || a->num_triangles != b->num_triangles) return;
    PMT_CHECK(a->active_cells == b->active_cells, "%s: active cells %llu / %llu", what,
              (unsigned long long)a->active_cells, (unsigned long long)b->active_cells);
    PMT_CHECK(!memcmp(a->positions, b->positions, a->num_vertices * 12), "%s: positions", what);
    PMT_CHECK(!a->normals == !b->normals, "%s: normals present in one only", what);
    if (a->normals && b->normals)
        PMT_CHECK(!memcmp(a->normals, b->normals, a->num_vertices * 12), "%s: normals", what);
    PMT_CHECK(!a->indices == !b->indices, "%s: indices present in one only", what);
    if (a->indices && b->indices)
        PMT_CHECK(!memcmp(a->indices, b->indices, a->num_triangles * 12), "%s: indices", what);
}

static void free_copy(pm_mesh *h)
{
    free(h->positions);
    free(h->normals);
    free(h->indices);
}

/* ---- pieces of volumes ---- */

static double sample_value(pm_sample_type t, double v)
{
    switch (t) {
    case PM_SAMPLE_U8: return floor(v * 255.0);
    case PM_SAMPLE_U16: return floor(v * 60000.0);
    case PM_SAMPLE_I16: return floor(v * 60000.0 - 30000.0);
    default: return v;
    }
}

static void put_sample(void *data, pm_sample_type t, size_t i, double v)
{
    switch (t) {
    case PM_SAMPLE_U8: ((uint8_t *)data)[i] = (uint8_t)v; break;
    case PM_SAMPLE_U16: ((uint16_t *)data)[i] = (uint16_t)v; break;
    case PM_SAMPLE_I16: ((int16_t *)data)[i] = (int16_t)v; break;
    case PM_SAMPLE_F32: ((float *)data)[i] = (float)v; break;
    default: ((double *)data)[i] = v;
    }
}

/* Random cuts of [0, n): at least one piece, sizes 1 and up. */
static size_t random_cuts(size_t n, size_t *cut, size_t maxc)
{
    size_t k = 0;
    cut[k++] = 0;
    while (k < maxc - 1) {
        size_t step = 1 + (size_t)(pmt_rand() % (n / 2 + 2));
        if (cut[k - 1] + step >= n) break;
        cut[k] = cut[k - 1] + step;
        k++;
    }
    cut[k] = n;
    return k; /* pieces */
}

/* A random volume of type t: blobs plus noise, and an iso value between
 * sample values or, one time in four, equal to some. With specials, a few
 * NaN and infinite samples (f32 and f64). */
static unsigned char *random_volume(size_t nx, size_t ny, size_t nz, pm_sample_type t, int specials,
                                    double *iso)
{
    const size_t es = pm_sample_size(t), n = nx * ny * nz;
    unsigned char *data = malloc(n * es);
    double cx = pmt_uniform() * (double)nx, cy = pmt_uniform() * (double)ny,
           cz = pmt_uniform() * (double)nz, rad = 0.3 * (double)(nx + ny + nz) / 3.0 + 1.0;
    for (size_t k = 0; k < nz; k++)
        for (size_t j = 0; j < ny; j++)
            for (size_t i = 0; i < nx; i++) {
                double d =
                    sqrt(((double)i - cx) * ((double)i - cx) + ((double)j - cy) * ((double)j - cy) +
                         ((double)k - cz) * ((double)k - cz));
                double v = 0.5 + 0.4 * sin(d / rad * 3.0) + 0.1 * pmt_uniform();
                if (v < 0) v = 0;
                if (v > 0.999) v = 0.999;
                put_sample(data, t, i + nx * (j + ny * k), sample_value(t, v));
            }
    if (specials && (t == PM_SAMPLE_F32 || t == PM_SAMPLE_F64))
        for (size_t q = 0; q < 1 + n / 50; q++) {
            static const double sp[3] = {NAN, INFINITY, -INFINITY};
            put_sample(data, t, (size_t)(pmt_rand() % n), sp[pmt_rand() % 3]);
        }
    *iso = sample_value(t, 0.5) + (t == PM_SAMPLE_F32 || t == PM_SAMPLE_F64 ? 0.0 : 0.5);
    if (pmt_rand() % 4 == 0) *iso = sample_value(t, 0.5); /* samples equal to iso */
    return data;
}

/* One volume: blobs plus noise; its whole-volume mesh against the merge
 * of its pieces over a random tiling, in shuffled order. */
static void piece_case(pm_context *ctx, size_t nx, size_t ny, size_t nz, pm_sample_type t,
                       pm_normals normals, pm_inside inside, pm_mesh_mode mode)
{
    const size_t es = pm_sample_size(t);
    double iso;
    unsigned char *data = random_volume(nx, ny, nz, t, 0, &iso);
    pm_volume vol;
    memset(&vol, 0, sizeof vol);
    vol.data = data;
    vol.type = t;
    vol.nx = nx, vol.ny = ny, vol.nz = nz;
    for (int a = 0; a < 3; a++) {
        vol.spacing[a] = 0.5 + pmt_uniform();
        vol.origin[a] = pmt_uniform() * 10.0 - 5.0;
    }
    pm_isosurface_options opt;
    memset(&opt, 0, sizeof opt);
    opt.struct_size = sizeof opt;
    opt.normals = normals;
    opt.inside = inside;
    opt.mode = mode;
    pm_mesh dense;
    PMT_OK(pm_isosurface(ctx, &vol, iso, &opt, &dense));

    pm_lattice lat;
    const size_t dims[3] = {nx, ny, nz};
    for (int a = 0; a < 3; a++) {
        lat.origin[a] = vol.origin[a];
        lat.spacing[a] = vol.spacing[a];
        lat.dims[a] = dims[a];
    }
    size_t cut[3][12], np[3];
    for (int a = 0; a < 3; a++)
        np[a] = random_cuts(dims[a], cut[a], 12);
    size_t count = np[0] * np[1] * np[2], q = 0;
    pm_mesh_piece *pieces = calloc(count, sizeof *pieces);
    const int nrm = normals != PM_NORMALS_NONE;
    for (size_t bz = 0; bz < np[2]; bz++)
        for (size_t by = 0; by < np[1]; by++)
            for (size_t bx = 0; bx < np[0]; bx++) {
                const size_t b[3] = {bx, by, bz};
                pm_lattice_box own;
                uint64_t wlo[3], whi[3];
                for (int a = 0; a < 3; a++) {
                    own.lo[a] = cut[a][b[a]];
                    own.dims[a] = cut[a][b[a] + 1] - cut[a][b[a]];
                    /* The smallest window the ghost rule allows. */
                    wlo[a] = nrm && own.lo[a] > 0 ? own.lo[a] - 1 : own.lo[a];
                    whi[a] = own.lo[a] + own.dims[a] + (nrm ? 2 : 1);
                    if (whi[a] > dims[a]) whi[a] = dims[a];
                }
                /* A copy of the window, so that nothing outside it is read. */
                size_t wn[3] = {whi[0] - wlo[0], whi[1] - wlo[1], whi[2] - wlo[2]};
                unsigned char *w = malloc(wn[0] * wn[1] * wn[2] * es);
                for (size_t k = 0; k < wn[2]; k++)
                    for (size_t j = 0; j < wn[1]; j++)
                        memcpy(w + ((k * wn[1] + j) * wn[0]) * es,
                               data + (((wlo[2] + k) * ny + wlo[1] + j) * nx + wlo[0]) * es,
                               wn[0] * es);
                pm_volume win;
                memset(&win, 0, sizeof win);
                win.data = w;
                win.type = t;
                win.nx = wn[0], win.ny = wn[1], win.nz = wn[2];
                PMT_OK(pm_isosurface_piece(ctx, &win, wlo, &lat, &own, iso, &opt, &pieces[q++]));
                free(w);
            }
    /* Shuffled. */
    for (size_t i = count; i > 1; i--) {
        size_t j = (size_t)(pmt_rand() % i);
        pm_mesh_piece x = pieces[i - 1];
        pieces[i - 1] = pieces[j];
        pieces[j] = x;
    }
    pm_mesh merged;
    PMT_OK(pm_mesh_pieces_merge(ctx, pieces, count, &opt, &merged));
    char what[160];
    snprintf(what, sizeof what, "pieces %zux%zux%zu %s normals %d inside %d mode %d (%zu pieces)",
             nx, ny, nz, pm_sample_type_string(t), (int)normals, (int)inside, (int)mode, count);
    check_same_mesh(&merged, &dense, what);
    pm_mesh_free(ctx, &merged);

    /* A piece left out: a triangle names a missing vertex, or fewer
     * triangles (when the piece held no vertex others need). */
    if (count > 1) {
        pm_status s = pm_mesh_pieces_merge(ctx, pieces + 1, count - 1, &opt, &merged);
        PMT_CHECK(s == PM_STATUS_INVALID_ARGUMENT ||
                      (s == PM_STATUS_OK &&
                       merged.num_triangles + pieces[0].num_triangles == dense.num_triangles),
                  "%s: merge without piece 0: %s", what, pm_status_string(s));
        pm_mesh_free(ctx, &merged);
    }
    /* A piece twice. */
    if (pieces[0].num_vertices) {
        pm_mesh_piece *twice = malloc((count + 1) * sizeof *twice);
        memcpy(twice, pieces, count * sizeof *twice);
        twice[count] = pieces[0];
        pm_status s = pm_mesh_pieces_merge(ctx, twice, count + 1, &opt, &merged);
        PMT_CHECK(s == PM_STATUS_INVALID_ARGUMENT, "%s: a piece twice: %s", what,
                  pm_status_string(s));
        pm_mesh_free(ctx, &merged);
        free(twice);
    }
    for (size_t i = 0; i < count; i++)
        pm_mesh_piece_free(&pieces[i]);
    free(pieces);
    pm_mesh_free(ctx, &dense);
    free(data);
}

static void piece_errors(pm_context *ctx)
{
    float data[64] = {0};
    data[21] = 1.0f; /* point (1, 1, 1) of the window: global (2, 2, 2) */
    void *wd = pmt_to_ctx(ctx, data, sizeof data); /* context memory, as the contract says */
    pm_volume win;
    memset(&win, 0, sizeof win);
    win.data = wd;
    win.type = PM_SAMPLE_F32;
    win.nx = win.ny = win.nz = 4;
    pm_lattice lat = {{0, 0, 0}, {1, 1, 1}, {8, 8, 8}};
    pm_lattice_box own = {{2, 2, 2}, {1, 1, 1}};
    uint64_t wlo[3] = {2, 2, 2};
    pm_mesh_piece pc;
    /* Central normals need the point below: the window starts too high. */
    pm_status s = pm_isosurface_piece(ctx, &win, wlo, &lat, &own, 0.5, NULL, &pc);
    PMT_CHECK(s == PM_STATUS_INVALID_ARGUMENT && strstr(pm_last_error(), "ghost rule"),
              "window without ghosts: %s: %s", pm_status_string(s), pm_last_error());
    wlo[0] = wlo[1] = wlo[2] = 1;
    PMT_OK(pm_isosurface_piece(ctx, &win, wlo, &lat, &own, 0.5, NULL, &pc));
    PMT_CHECK(pc.num_vertices == 3 && pc.num_triangles == 1,
              "one inside point: %llu vertices %llu triangles (its 3 edges, its cell's corner)",
              (unsigned long long)pc.num_vertices, (unsigned long long)pc.num_triangles);
    pm_mesh_piece_free(&pc);
    own.lo[0] = 8;
    s = pm_isosurface_piece(ctx, &win, wlo, &lat, &own, 0.5, NULL, &pc);
    PMT_CHECK(s == PM_STATUS_INVALID_ARGUMENT, "owned box outside: %s", pm_status_string(s));
    /* Pieces of different lattices. */
    own.lo[0] = 2;
    pm_mesh_piece two[2];
    PMT_OK(pm_isosurface_piece(ctx, &win, wlo, &lat, &own, 0.5, NULL, &two[0]));
    lat.dims[2] = 9;
    PMT_OK(pm_isosurface_piece(ctx, &win, wlo, &lat, &own, 0.5, NULL, &two[1]));
    pm_mesh m;
    s = pm_mesh_pieces_merge(ctx, two, 2, NULL, &m);
    PMT_CHECK(s == PM_STATUS_INVALID_ARGUMENT && strstr(pm_last_error(), "lattice"),
              "lattices differ: %s: %s", pm_status_string(s), pm_last_error());
    pm_mesh_piece_free(&two[0]);
    pm_mesh_piece_free(&two[1]);
    /* No pieces: an empty mesh. */
    PMT_OK(pm_mesh_pieces_merge(ctx, NULL, 0, NULL, &m));
    PMT_CHECK(m.num_vertices == 0 && m.num_triangles == 0, "no pieces: not empty");
    pm_mesh_free(ctx, &m);
    pm_free(ctx, wd);
}

/* ---- a backend's pieces against the CPU's ---- */

static size_t pieces_compared, tilings_merged;

static void check_same_piece(const pm_mesh_piece *a, const pm_mesh_piece *b, const char *what)
{
    PMT_CHECK(!memcmp(a->lattice_dims, b->lattice_dims, sizeof a->lattice_dims) &&
                  !memcmp(&a->owned, &b->owned, sizeof a->owned),
              "%s: lattice or owned box differ", what);
    PMT_CHECK(a->num_vertices == b->num_vertices && a->num_triangles == b->num_triangles &&
                  a->active_cells == b->active_cells,
              "%s: %llu/%llu vertices, %llu/%llu triangles, %llu/%llu active cells", what,
              (unsigned long long)a->num_vertices, (unsigned long long)b->num_vertices,
              (unsigned long long)a->num_triangles, (unsigned long long)b->num_triangles,
              (unsigned long long)a->active_cells, (unsigned long long)b->active_cells);
    if (a->num_vertices != b->num_vertices || a->num_triangles != b->num_triangles) return;
    const size_t nv = (size_t)a->num_vertices, nt = (size_t)a->num_triangles;
    PMT_CHECK(!nv || !memcmp(a->vertex_keys, b->vertex_keys, nv * 8), "%s: vertex keys", what);
    PMT_CHECK(!nv || !memcmp(a->positions, b->positions, nv * 12), "%s: positions", what);
    PMT_CHECK(!a->normals == !b->normals, "%s: normals in one piece only", what);
    if (a->normals && b->normals)
        PMT_CHECK(!memcmp(a->normals, b->normals, nv * 12), "%s: normals", what);
    PMT_CHECK(!nt || !memcmp(a->triangles, b->triangles, nt * 24), "%s: triangles", what);
    PMT_CHECK(!nt || !memcmp(a->cell_keys, b->cell_keys, nt * 8), "%s: cell keys", what);
    pieces_compared++;
}

/* The piece of `own` on ctx from a window in ctx's memory, compared byte
 * for byte with the CPU's from the same window in host memory. The window
 * is the ghost rule's, or (grow) up to 2 points wider each way, clipped;
 * its rows and slices are sometimes padded (the padding holds samples the
 * extraction must never read). */
static void backend_piece(pm_context *ctx, const unsigned char *data, const size_t dims[3],
                          pm_sample_type t, const pm_lattice *lat, const pm_lattice_box *own,
                          double iso, const pm_isosurface_options *opt, int grow,
                          pm_mesh_piece *out, const char *what)
{
    const size_t es = pm_sample_size(t);
    const int nrm = opt->normals != PM_NORMALS_NONE;
    uint64_t wlo[3], whi[3];
    size_t wn[3];
    for (int a = 0; a < 3; a++) {
        const uint64_t lo = own->lo[a], d = own->dims[a], n = dims[a];
        if (!d) { /* an empty box: any window of the lattice */
            wlo[a] = lo < n ? lo : n - 1;
            whi[a] = wlo[a] + 1;
        } else {
            wlo[a] = nrm && lo > 0 ? lo - 1 : lo;
            whi[a] = lo + d + (nrm ? 2 : 1);
            if (grow) {
                uint64_t gl = pmt_rand() % 3, gh = pmt_rand() % 3;
                wlo[a] = wlo[a] > gl ? wlo[a] - gl : 0;
                whi[a] += gh;
            }
            if (whi[a] > n) whi[a] = n;
        }
        wn[a] = (size_t)(whi[a] - wlo[a]);
    }
    const size_t rs = wn[0] + (pmt_rand() % 3 == 0 ? (size_t)(pmt_rand() % 5) : 0);
    const size_t ss = rs * wn[1] + (pmt_rand() % 3 == 0 ? (size_t)(pmt_rand() % 7) : 0);
    const size_t bytes = (ss * (wn[2] - 1) + rs * (wn[1] - 1) + wn[0]) * es;
    unsigned char *w = malloc(bytes);
    for (size_t b = 0; b < bytes; b++)
        w[b] = (unsigned char)pmt_rand(); /* padding: arbitrary samples */
    for (size_t k = 0; k < wn[2]; k++)
        for (size_t j = 0; j < wn[1]; j++)
            memcpy(w + (k * ss + j * rs) * es,
                   data + (((wlo[2] + k) * dims[1] + wlo[1] + j) * dims[0] + wlo[0]) * es,
                   wn[0] * es);
    pm_volume win;
    memset(&win, 0, sizeof win);
    win.data = w;
    win.type = t;
    win.nx = wn[0], win.ny = wn[1], win.nz = wn[2];
    win.row_stride = rs;
    win.slice_stride = ss;
    pm_mesh_piece ref;
    PMT_OK(pm_isosurface_piece(cpu1, &win, wlo, lat, own, iso, opt, &ref));
    void *wd = pmt_to_ctx(ctx, w, bytes);
    win.data = wd;
    PMT_OK(pm_isosurface_piece(ctx, &win, wlo, lat, own, iso, opt, out));
    char msg[320];
    snprintf(msg, sizeof msg,
             "%s: box (%llu,%llu,%llu)+(%llu,%llu,%llu), window (%llu,%llu,%llu)+(%zu,%zu,%zu) "
             "strides %zu %zu",
             what, (unsigned long long)own->lo[0], (unsigned long long)own->lo[1],
             (unsigned long long)own->lo[2], (unsigned long long)own->dims[0],
             (unsigned long long)own->dims[1], (unsigned long long)own->dims[2],
             (unsigned long long)wlo[0], (unsigned long long)wlo[1], (unsigned long long)wlo[2],
             wn[0], wn[1], wn[2], rs, ss);
    check_same_piece(out, &ref, msg);
    pm_mesh_piece_free(&ref);
    pm_free(ctx, wd);
    free(w);
}

/* A random span of [0, n) on one axis: touching the lower or the upper
 * border, one point thick, the whole axis, anywhere; empty now and then. */
static void random_span(uint64_t n, uint64_t *lo, uint64_t *d)
{
    switch (pmt_rand() % 6) {
    case 0: *lo = 0, *d = 1 + pmt_rand() % n; break;
    case 1: *d = 1 + pmt_rand() % n, *lo = n - *d; break;
    case 2: *lo = pmt_rand() % n, *d = 1; break;
    case 3: *lo = 0, *d = n; break;
    default: *lo = pmt_rand() % n, *d = 1 + pmt_rand() % (n - *lo);
    }
    if (pmt_rand() % 25 == 0) *lo = pmt_rand() % (n + 1), *d = 0;
}

static pm_lattice random_lattice(const size_t dims[3])
{
    pm_lattice lat;
    for (int a = 0; a < 3; a++) {
        lat.origin[a] = pmt_uniform() * 10.0 - 5.0;
        lat.spacing[a] = 0.5 + pmt_uniform();
        lat.dims[a] = dims[a];
    }
    return lat;
}

/* ctx's pieces of random boxes against the CPU's, for one volume and
 * every normal mode and inside side. */
static void backend_boxes(pm_context *ctx, const size_t dims[3], pm_sample_type t, int boxes)
{
    double iso;
    unsigned char *data = random_volume(dims[0], dims[1], dims[2], t, 1, &iso);
    pm_lattice lat = random_lattice(dims);
    for (int nm = PM_NORMALS_NONE; nm <= PM_NORMALS_SOBEL; nm++)
        for (int in = 0; in < 2; in++) {
            pm_isosurface_options opt;
            memset(&opt, 0, sizeof opt);
            opt.struct_size = sizeof opt;
            opt.normals = (pm_normals)nm;
            opt.inside = in ? PM_INSIDE_BELOW : PM_INSIDE_ABOVE;
            for (int b = 0; b < boxes; b++) {
                pm_lattice_box own;
                for (int a = 0; a < 3; a++)
                    random_span(dims[a], &own.lo[a], &own.dims[a]);
                char what[160];
                snprintf(what, sizeof what, "box %zux%zux%zu %s normals %d inside %d", dims[0],
                         dims[1], dims[2], pm_sample_type_string(t), nm, (int)opt.inside);
                pm_mesh_piece pc;
                backend_piece(ctx, data, dims, t, &lat, &own, iso, &opt, (int)(pmt_rand() % 2), &pc,
                              what);
                pm_mesh_piece_free(&pc);
            }
        }
    free(data);
}

/* ctx's pieces of a random tiling (each also against the CPU's), merged on
 * ctx in shuffled order, against the CPU's pm_isosurface of the volume. */
static void backend_tiling(pm_context *ctx, const size_t dims[3], pm_sample_type t,
                           pm_normals normals, pm_inside inside, pm_mesh_mode mode, size_t maxcuts,
                           int z_slabs_in_order)
{
    double iso;
    unsigned char *data = random_volume(dims[0], dims[1], dims[2], t, 0, &iso);
    pm_lattice lat = random_lattice(dims);
    pm_volume vol;
    memset(&vol, 0, sizeof vol);
    vol.data = data;
    vol.type = t;
    vol.nx = dims[0], vol.ny = dims[1], vol.nz = dims[2];
    for (int a = 0; a < 3; a++) {
        vol.origin[a] = lat.origin[a];
        vol.spacing[a] = lat.spacing[a];
    }
    pm_isosurface_options opt;
    memset(&opt, 0, sizeof opt);
    opt.struct_size = sizeof opt;
    opt.normals = normals;
    opt.inside = inside;
    opt.mode = mode;
    pm_mesh dense;
    PMT_OK(pm_isosurface(cpu1, &vol, iso, &opt, &dense));
    char what[160];
    snprintf(what, sizeof what, "tiling %zux%zux%zu %s normals %d inside %d mode %d", dims[0],
             dims[1], dims[2], pm_sample_type_string(t), (int)normals, (int)inside, (int)mode);
    size_t cut[3][12], np[3];
    for (int a = 0; a < 3; a++)
        np[a] = random_cuts(dims[a], cut[a], z_slabs_in_order && a < 2 ? 1 : maxcuts);
    size_t count = np[0] * np[1] * np[2], q = 0;
    pm_mesh_piece *pieces = calloc(count, sizeof *pieces);
    for (size_t bz = 0; bz < np[2]; bz++)
        for (size_t by = 0; by < np[1]; by++)
            for (size_t bx = 0; bx < np[0]; bx++) {
                const size_t b[3] = {bx, by, bz};
                pm_lattice_box own;
                for (int a = 0; a < 3; a++) {
                    own.lo[a] = cut[a][b[a]];
                    own.dims[a] = cut[a][b[a] + 1] - cut[a][b[a]];
                }
                backend_piece(ctx, data, dims, t, &lat, &own, iso, &opt, (int)(pmt_rand() % 2),
                              &pieces[q++], what);
            }
    /* z slabs in order take the merge's ordered path (no sorts). */
    for (size_t i = count; i > 1 && !z_slabs_in_order; i--) {
        size_t j = (size_t)(pmt_rand() % i);
        pm_mesh_piece x = pieces[i - 1];
        pieces[i - 1] = pieces[j];
        pieces[j] = x;
    }
    pm_mesh merged;
    PMT_OK(pm_mesh_pieces_merge(ctx, pieces, count, &opt, &merged));
    check_same_mesh(&merged, &dense, what);
    tilings_merged++;
    pm_mesh_free(ctx, &merged);
    for (size_t i = 0; i < count; i++)
        pm_mesh_piece_free(&pieces[i]);
    free(pieces);
    pm_mesh_free(cpu1, &dense);
    free(data);
}

/* Everything above on ctx: random boxes and tilings of every sample type,
 * normal mode and inside side, and one piece of more than 2^22 points
 * (CUDA: several chunks, one boundary inside a row). */
static void backend_pieces(pm_context *ctx, int big_cases)
{
    static const size_t vd[][3] = {{2, 2, 2},    {3, 5, 7},  {17, 9, 33},
                                   {31, 33, 17}, {40, 3, 2}, {65, 20, 11}};
    const size_t nvd = sizeof vd / sizeof vd[0];
    for (size_t v = 0; v < nvd; v++)
        for (int t = 0; t < 5; t++)
            backend_boxes(ctx, vd[v], (pm_sample_type)t, 3);
    for (size_t v = 0; v < nvd; v++)
        for (int t = 0; t < 5; t++)
            for (int nm = PM_NORMALS_NONE; nm <= PM_NORMALS_SOBEL; nm++)
                for (int zs = 0; zs < 2; zs++)
                    backend_tiling(ctx, vd[v], (pm_sample_type)t, (pm_normals)nm,
                                   (t + nm + (int)v) % 2 ? PM_INSIDE_BELOW : PM_INSIDE_ABOVE,
                                   (v + (size_t)nm) % 2 ? PM_MESH_SOUP : PM_MESH_INDEXED, 6, zs);
    if (!big_cases) return;
    /* 300 x 217 x 70 = 4.56 M points: 2^22 = 13981 rows and 4 points. */
    static const size_t big[3] = {300, 217, 70};
    backend_tiling(ctx, big, PM_SAMPLE_F32, PM_NORMALS_CENTRAL, PM_INSIDE_ABOVE, PM_MESH_INDEXED,
                   2, 0);
    backend_tiling(ctx, big, PM_SAMPLE_U16, PM_NORMALS_SOBEL, PM_INSIDE_BELOW, PM_MESH_INDEXED, 3,
                   1);
}

/* ---- particles ---- */

typedef struct scene {
    float *xyz;
    size_t n, cap;
} scene;

static void add(scene *S, double x, double y, double z)
{
    if (S->n == S->cap) {
        S->cap = S->cap ? 2 * S->cap : 1024;
        S->xyz = realloc(S->xyz, S->cap * 3 * sizeof(float));
    }
    S->xyz[3 * S->n] = (float)x;
    S->xyz[3 * S->n + 1] = (float)y;
    S->xyz[3 * S->n + 2] = (float)z;
    S->n++;
}

/* A ball of particles on a jittered lattice of spacing 2r. */
static void ball(scene *S, double cx, double cy, double cz, double rad, double r, double jitter)
{
    double d = 2.0 * r;
    int m = (int)ceil(rad / d);
    for (int k = -m; k <= m; k++)
        for (int j = -m; j <= m; j++)
            for (int i = -m; i <= m; i++) {
                double x = i * d, y = j * d, z = k * d;
                if (x * x + y * y + z * z > rad * rad) continue;
                add(S, cx + x + jitter * d * (pmt_uniform() - 0.5),
                    cy + y + jitter * d * (pmt_uniform() - 0.5),
                    cz + z + jitter * d * (pmt_uniform() - 0.5));
            }
}

static void params_of(pm_field_params *p, double r, double l, double c, double t)
{
    memset(p, 0, sizeof *p);
    p->struct_size = sizeof *p;
    p->radius = r;
    p->smoothing_length = l;
    p->cube_size = c;
    p->iso = t;
}

/* Every brick's window field equals the dense field there, bit for bit. */
static void brick_fields(pm_context *ctx, const scene *S, const pm_field_params *p, size_t brick,
                         const char *what)
{
    pm_field field;
    PMT_OK(pm_field_compute(ctx, S->xyz, S->n, p, &field));
    pm_field_params rp = *p;
    if (rp.iso == 0) rp.iso = 0.6;
    rp.rest_density = 1000.0;
    rp.max_memory_bytes = (size_t)1 << 34;
    pmi_sparse_plan plan;
    memset(&plan, 0, sizeof plan);
    PMT_OK(pmi_cpu_sparse_plan(ctx, S->xyz, S->n, &rp, brick, PM_NORMALS_CENTRAL, &plan));
    const pmi_sparse_geom *G = &plan.G;
    PMT_CHECK(G->dims[0] == field.volume.nx && G->dims[1] == field.volume.ny &&
                  G->dims[2] == field.volume.nz,
              "%s: sparse lattice differs", what);
    const float *dense = field.volume.data;
    size_t bad = 0, checked = 0;
    float *win = malloc((size_t)(G->brick + 3) * (G->brick + 3) * (G->brick + 3) * sizeof *win);
    for (size_t q = 0; q < plan.nbricks; q++) {
        uint64_t w0[3], w1[3];
        PMT_OK(pmi_cpu_sparse_brick_field(ctx, &plan, q, win, w0, w1));
        size_t wx = (size_t)(w1[0] - w0[0]), wy = (size_t)(w1[1] - w0[1]);
        for (uint64_t k = w0[2]; k < w1[2]; k++)
            for (uint64_t j = w0[1]; j < w1[1]; j++)
                for (uint64_t i = w0[0]; i < w1[0]; i++) {
                    float a = win[((k - w0[2]) * wy + (j - w0[1])) * wx + (i - w0[0])];
                    float b = dense[(k * field.volume.ny + j) * field.volume.nx + i];
                    checked++;
                    if (memcmp(&a, &b, sizeof a) != 0 && bad++ < 3)
                        fprintf(stderr, "%s: point (%llu %llu %llu): sparse %.9g dense %.9g\n",
                                what, (unsigned long long)i, (unsigned long long)j,
                                (unsigned long long)k, a, b);
                }
    }
    PMT_CHECK(bad == 0, "%s: %zu of %zu brick field values differ", what, bad, checked);
    printf("%s: brick %llu: %zu bricks, %zu window values equal to the dense field\n", what,
           (unsigned long long)G->brick, plan.nbricks, checked);
    /* Every point of the grid with a non-zero value lies in some brick. */
    size_t nonzero = 0, covered = 0;
    const size_t nx = field.volume.nx, ny = field.volume.ny;
    for (size_t k = 0; k < field.volume.nz; k++)
        for (size_t j = 0; j < ny; j++)
            for (size_t i = 0; i < nx; i++) {
                if (dense[(k * ny + j) * nx + i] == 0.0f) continue;
                nonzero++;
                uint64_t b[3] = {i / G->brick, j / G->brick, k / G->brick};
                uint64_t key = pmi_brick_key(G, b);
                size_t lo = 0, hi = plan.nbricks;
                while (lo < hi) {
                    size_t mid = (lo + hi) / 2;
                    if (plan.bricks[mid] < key)
                        lo = mid + 1;
                    else
                        hi = mid;
                }
                covered += lo < plan.nbricks && plan.bricks[lo] == key;
            }
    PMT_CHECK(covered == nonzero, "%s: %zu of %zu non-zero points outside the bricks", what,
              nonzero - covered, nonzero);
    free(win);
    pmi_cpu_sparse_plan_free(ctx, &plan);
    pm_field_free(ctx, &field);
}

/* pm_reconstruct sparse == dense, for the modes and brick sizes given. */
/* PM_OUTPUT_ANY: the mesh stays where it is made (a sparse merge's on
 * the host, a GPU's dense extraction in its memory, a CPU's on the host),
 * the same bytes as ref. */
static void output_any(pm_context *ctx, const scene *S, const pm_field_params *p,
                       pm_reconstruct_options ro, pm_isosurface_options io, const pm_mesh *ref,
                       const char *what)
{
    io.output_in_context_memory = PM_OUTPUT_ANY;
    const int gpu = pm_context_device(ctx) == PM_DEVICE_CUDA;
    for (int sparse = 0; sparse < 2; sparse++) {
        ro.grid = sparse ? PM_GRID_SPARSE : PM_GRID_DENSE;
        pm_mesh m;
        PMT_OK(pm_reconstruct(ctx, S->xyz, S->n, p, &ro, &io, &m, NULL));
        char w[200];
        snprintf(w, sizeof w, "%s: PM_OUTPUT_ANY, %s grid", what, sparse ? "sparse" : "dense");
        PMT_CHECK(m.in_context_memory == (gpu && !sparse), "%s: in_context_memory %d", w,
                  m.in_context_memory);
        if (m.in_context_memory) {
            pm_mesh h = pmt_mesh_to_host(ctx, &m);
            check_same_mesh(&h, ref, w);
            free_copy(&h);
        } else {
            check_same_mesh(&m, ref, w);
        }
        pm_mesh_free(ctx, &m);
    }
}

static void sparse_vs_dense(const scene *S, const pm_field_params *p, const size_t *bricks,
                            int nbricks, const char *what)
{
    static const pm_normals modes[4] = {PM_NORMALS_NONE, PM_NORMALS_CENTRAL, PM_NORMALS_SOBEL,
                                        PM_NORMALS_FORWARD};
    for (int mi = 0; mi < 4; mi++)
        for (int soup = 0; soup < 2; soup++) {
            pm_isosurface_options io;
            memset(&io, 0, sizeof io);
            io.struct_size = sizeof io;
            io.normals = modes[mi];
            io.mode = soup ? PM_MESH_SOUP : PM_MESH_INDEXED;
            pm_reconstruct_options ro;
            memset(&ro, 0, sizeof ro);
            ro.struct_size = sizeof ro;
            ro.grid = PM_GRID_DENSE;
            pm_mesh dense;
            pm_reconstruct_report rd;
            PMT_OK(pm_reconstruct(cpu2, S->xyz, S->n, p, &ro, &io, &dense, &rd));
            PMT_CHECK(!rd.sparse, "%s: dense ran sparse", what);
            PMT_CHECK(dense.num_triangles > 0, "%s: no surface to compare", what);
            if (mi == 1 && !soup)
                printf("%s: grid %llu x %llu x %llu, %zu vertices, %zu triangles\n", what,
                       (unsigned long long)rd.lattice.dims[0],
                       (unsigned long long)rd.lattice.dims[1],
                       (unsigned long long)rd.lattice.dims[2], dense.num_vertices,
                       dense.num_triangles);
            {
                /* Several contexts: the bricks shared out, the same mesh. */
                pm_context *two[3] = {cpu2, cpu1, cpu3};
                ro.grid = PM_GRID_SPARSE;
                ro.brick_points = bricks[0];
                for (int nc = 2; nc <= 3; nc++) {
                    pm_mesh mm;
                    pm_reconstruct_report rm;
                    PMT_OK(pm_reconstruct_multi(two, nc, S->xyz, S->n, p, &ro, &io, &mm, &rm));
                    char w[200];
                    snprintf(w, sizeof w, "%s: normals %d soup %d: %d contexts", what,
                             (int)modes[mi], soup, nc);
                    PMT_CHECK(rm.sparse, "%s: multi ran dense", w);
                    check_same_mesh(&mm, &dense, w);
                    pm_mesh_free(cpu2, &mm);
                }
                ro.grid = PM_GRID_DENSE;
            }
            for (int b = 0; b < nbricks; b++)
                for (int th = 0; th < 2; th++) {
                    ro.grid = PM_GRID_SPARSE;
                    ro.brick_points = bricks[b];
                    pm_mesh sp;
                    pm_reconstruct_report rs;
                    PMT_OK(pm_reconstruct(th ? cpu2 : cpu1, S->xyz, S->n, p, &ro, &io, &sp, &rs));
                    char w[200];
                    snprintf(w, sizeof w, "%s: normals %d soup %d brick %zu (%llu) threads %d",
                             what, (int)modes[mi], soup, bricks[b],
                             (unsigned long long)rs.brick_points, th ? 2 : 1);
                    PMT_CHECK(rs.sparse && rs.bricks_occupied > 0 &&
                                  rs.bricks_occupied <= rs.bricks_total,
                              "%s: report: sparse %d bricks %llu of %llu", w, rs.sparse,
                              (unsigned long long)rs.bricks_occupied,
                              (unsigned long long)rs.bricks_total);
                    PMT_CHECK(
                        !memcmp(rs.lattice.dims, rd.lattice.dims, sizeof rd.lattice.dims) &&
                            !memcmp(rs.lattice.origin, rd.lattice.origin, sizeof rd.lattice.origin),
                        "%s: lattices differ", w);
                    check_same_mesh(&sp, &dense, w);
                    pm_mesh_free(cpu1, &sp);
                }
            if (mi == 1) output_any(cpu2, S, p, ro, io, &dense, what);
            pm_mesh_free(cpu2, &dense);
        }
}

/* The lattice of a scene whose particles lie in [lo, hi]. */
static pm_field_grid grid_of(const pm_field_params *p, double lo, double hi)
{
    double bmin[3] = {lo, lo, lo}, bmax[3] = {hi, hi, hi};
    pm_field_grid g;
    PMT_OK(pm_field_grid_for_box(p, bmin, bmax, &g));
    return g;
}

/* Surfaces across brick faces, edges and corners, and a particle exactly
 * on a brick boundary: blobs centred on lattice points that are corners of
 * bricks of `brick` points (anchors at the box corners), and a slab
 * crossing a whole brick layer. */
static void corners_scene(scene *S, pm_field_params *p, size_t brick)
{
    const double r = 0.025;
    params_of(p, r, 2.0, 0.5, 0.6);
    const double L = 3.0;
    pm_field_grid g = grid_of(p, 0.0, L);
    const double s = 0.5 * r;
    add(S, 0, 0, 0);
    add(S, L, L, L);
    /* Brick corners near the middle. */
    for (int c = 0; c < 8; c++) {
        int64_t gi = ((int64_t)(g.dims[0] / 2) / (int64_t)brick) * (int64_t)brick +
                     (c & 1) * (int64_t)brick * 3;
        int64_t gj = ((int64_t)(g.dims[1] / 3) / (int64_t)brick) * (int64_t)brick +
                     (c >> 1 & 1) * (int64_t)brick * 4;
        int64_t gk = ((int64_t)(g.dims[2] / 4) / (int64_t)brick) * (int64_t)brick +
                     (c >> 2 & 1) * (int64_t)brick * 5;
        double x = (double)(g.lo[0] + gi) * s, y = (double)(g.lo[1] + gj) * s,
               z = (double)(g.lo[2] + gk) * s;
        if (c == 0)
            add(S, x, y, z); /* one particle exactly on the corner point */
        else if (c == 1)
            add(S, x, y + 0.3 * s, z + 0.7 * s); /* on a brick face plane (x) */
        else
            ball(S, x, y, z, (2.0 + c) * r, r, 0.3);
    }
    /* A slab crossing a whole brick layer (faces along x). */
    for (double y = 1.0; y < 1.3; y += 2 * r)
        for (double z = 1.0; z < 1.3; z += 2 * r)
            for (double x = 0.3; x < 2.7; x += 2 * r)
                add(S, x, y, z);
}

/* pm_reconstruct's sparse path on the GPU against the CPU's dense mesh:
 * every normals mode, soup and indexed, the bricks given (0: the GPU's
 * default, checked to be its own). Returns the meshes compared. */
static int cuda_sparse_vs_cpu(pm_context *ctx, const scene *S, const pm_field_params *p,
                              const size_t *bricks, int nb, const char *what)
{
    static const pm_normals modes[4] = {PM_NORMALS_NONE, PM_NORMALS_CENTRAL, PM_NORMALS_SOBEL,
                                        PM_NORMALS_FORWARD};
    int runs = 0;
    for (int mi = 0; mi < 4; mi++)
        for (int soup = 0; soup < 2; soup++) {
            pm_isosurface_options io;
            memset(&io, 0, sizeof io);
            io.struct_size = sizeof io;
            io.normals = modes[mi];
            io.mode = soup ? PM_MESH_SOUP : PM_MESH_INDEXED;
            pm_reconstruct_options ro = {sizeof ro, PM_GRID_DENSE, 0};
            pm_mesh ref;
            PMT_OK(pm_reconstruct(cpu1, S->xyz, S->n, p, &ro, &io, &ref, NULL));
            PMT_CHECK(ref.num_triangles > 0, "%s: no surface to compare", what);
            for (int b = 0; b < nb; b++) {
                ro.grid = PM_GRID_SPARSE;
                ro.brick_points = bricks[b];
                pm_mesh m;
                pm_reconstruct_report rs;
                PMT_OK(pm_reconstruct(ctx, S->xyz, S->n, p, &ro, &io, &m, &rs));
                char w[200];
                snprintf(w, sizeof w, "%s: cuda sparse vs cpu dense: normals %d soup %d brick %zu",
                         what, (int)modes[mi], soup, bricks[b]);
                PMT_CHECK(rs.sparse && rs.bricks_occupied > 0, "%s: ran sparse", w);
                if (!bricks[b])
                    PMT_CHECK(rs.brick_points >= 128, "%s: default brick %llu, not the GPU's",
                              w, (unsigned long long)rs.brick_points);
                check_same_mesh(&m, &ref, w);
                pm_mesh_free(ctx, &m);
                runs++;
            }
            if (mi == 1) output_any(ctx, S, p, ro, io, &ref, what);
            pm_mesh_free(cpu1, &ref);
        }
    return runs;
}

/* The GPU's plan (src/cuda/sparse.cu) against the CPU's: the same report
 * (kept and dropped particles, occupied cells and bricks) and mesh, with
 * particles dropped by an aabb (their keys sort last), particles already
 * in device memory (read in place), a non-finite particle refused naming
 * its index, and a memory limit the sort does not fit. */
static void gpu_plan_cases(pm_context *ctx, double r)
{
    scene S = {0};
    ball(&S, 0.1, 0.2, 0.3, 6 * r, r, 0.5);
    ball(&S, 3.0, 0.2, 0.3, 4 * r, r, 0.5);
    ball(&S, 1.5, 1.2, 0.3, 5 * r, r, 0.5);
    pm_field_params p;
    params_of(&p, r, 2.0, 0.5, 0.6);
    pm_reconstruct_options ro = {sizeof ro, PM_GRID_SPARSE, 9};
    float *dev = NULL;
    const size_t bytes = S.n * 3 * sizeof(float);
    PMT_OK(pm_alloc(ctx, bytes, (void **)&dev));
    PMT_OK(pm_upload(ctx, dev, S.xyz, bytes));
    for (int c = 0; c < 3; c++) {
        pm_field_params q = p;
        if (c == 1) { /* the third ball and half the first outside */
            q.use_aabb = 1;
            q.aabb_min[0] = 0.1, q.aabb_min[1] = -1.0, q.aabb_min[2] = -1.0;
            q.aabb_max[0] = 3.5, q.aabb_max[1] = 0.8, q.aabb_max[2] = 1.0;
        }
        pm_mesh ref, m;
        pm_reconstruct_report rc, rg;
        PMT_OK(pm_reconstruct(cpu1, S.xyz, S.n, &q, &ro, NULL, &ref, &rc));
        PMT_OK(pm_reconstruct(ctx, c == 2 ? dev : S.xyz, S.n, &q, &ro, NULL, &m, &rg));
        char w[120];
        snprintf(w, sizeof w, "gpu plan: %s",
                 c == 0 ? "host particles" : c == 1 ? "aabb" : "device particles");
        PMT_CHECK(rg.sparse && rc.sparse, "%s: both sparse", w);
        PMT_CHECK(rg.particles_used == rc.particles_used &&
                      rg.particles_dropped == rc.particles_dropped &&
                      rg.occupied_cells == rc.occupied_cells &&
                      rg.bricks_occupied == rc.bricks_occupied,
                  "%s: kept %zu/%zu dropped %zu/%zu cells %llu/%llu bricks %llu/%llu", w,
                  rg.particles_used, rc.particles_used, rg.particles_dropped,
                  rc.particles_dropped, (unsigned long long)rg.occupied_cells,
                  (unsigned long long)rc.occupied_cells, (unsigned long long)rg.bricks_occupied,
                  (unsigned long long)rc.bricks_occupied);
        if (c == 1)
            PMT_CHECK(rg.particles_dropped > 0 && rg.particles_used > 0, "%s: some dropped", w);
        check_same_mesh(&m, &ref, w);
        pm_mesh_free(ctx, &m);
        pm_mesh_free(cpu1, &ref);
    }
    /* A NaN at index 7: refused, named, on host and device input. */
    S.xyz[3 * 7 + 1] = NAN;
    PMT_OK(pm_upload(ctx, dev, S.xyz, bytes));
    for (int c = 0; c < 2; c++) {
        pm_mesh m;
        pm_status s = pm_reconstruct(ctx, c ? dev : S.xyz, S.n, &p, &ro, NULL, &m, NULL);
        PMT_CHECK(s == PM_STATUS_INVALID_ARGUMENT && strstr(pm_last_error(), "particle 7 "),
                  "gpu plan: NaN (%s particles): %s: %s", c ? "device" : "host",
                  pm_status_string(s), pm_last_error());
    }
    /* A memory limit the sort does not fit: refused with the figure. */
    S.xyz[3 * 7 + 1] = 0.2f;
    {
        pm_field_params q = p;
        q.max_memory_bytes = 32 * S.n;
        pm_mesh m;
        pm_status s = pm_reconstruct(ctx, S.xyz, S.n, &q, &ro, NULL, &m, NULL);
        PMT_CHECK(s == PM_STATUS_OUT_OF_MEMORY && strstr(pm_last_error(), "memory limit"),
                  "gpu plan: a small memory limit: %s: %s", pm_status_string(s), pm_last_error());
    }
    pm_free(ctx, dev);
    free(S.xyz);
    printf("gpu plan: aabb, device particles, a NaN and a small memory limit as the CPU's plan\n");
}

int main(int argc, char **argv)
{
    pm_context *ctx;
    pm_device dev;
    if (!pmt_init(argc, argv, &ctx, &dev)) return PMT_SKIP;
    if (dev == PM_DEVICE_CUDA) {
        pm_context_desc dc = {sizeof dc, PM_DEVICE_CPU, 0, 1, NULL};
        PMT_OK(pm_context_create(&dc, &cpu1));
        /* Mesh pieces: every CUDA piece byte for byte the CPU's, tilings
         * merged into pm_isosurface's mesh, the errors, and a window in
         * host memory refused before any kernel reads it. */
        backend_pieces(ctx, 1);
        piece_errors(ctx);
        {
            float host[8] = {0, 1, 0, 1, 0, 1, 0, 1};
            pm_volume win;
            memset(&win, 0, sizeof win);
            win.data = host;
            win.type = PM_SAMPLE_F32;
            win.nx = win.ny = win.nz = 2;
            pm_lattice lat = {{0, 0, 0}, {1, 1, 1}, {2, 2, 2}};
            pm_lattice_box own = {{0, 0, 0}, {2, 2, 2}};
            const uint64_t wlo[3] = {0, 0, 0};
            pm_mesh_piece pc;
            pm_status s = pm_isosurface_piece(ctx, &win, wlo, &lat, &own, 0.5, NULL, &pc);
            PMT_CHECK(s == PM_STATUS_INVALID_ARGUMENT && strstr(pm_last_error(), "host memory"),
                      "host window on cuda: %s: %s", pm_status_string(s), pm_last_error());
        }
        printf("pieces: %zu CUDA pieces byte for byte the CPU's, %zu tilings merged byte for byte "
               "into pm_isosurface's mesh\n",
               pieces_compared, tilings_merged);

        /* The sparse reconstruction on the GPU: the CPU's dense mesh, byte
         * for byte, for every normals mode, soup and indexed, the GPU's
         * default brick and bricks small enough that block edges cross the
         * surface on every face, edge and corner; a particle exactly on a
         * brick corner and one on a brick face; empty bricks. */
        scene S = {0};
        const double r = 0.03;
        ball(&S, 0.1, 0.2, 0.3, 6 * r, r, 0.5);
        ball(&S, 3.0, 0.2, 0.3, 4 * r, r, 0.5);
        pm_field_params p;
        params_of(&p, r, 2.0, 0.5, 0.6);
        static const size_t b1[3] = {0, 9, 33};
        int runs = cuda_sparse_vs_cpu(ctx, &S, &p, b1, 3, "two balls");
        free(S.xyz);
        scene C = {0};
        corners_scene(&C, &p, 16);
        static const size_t b2[2] = {16, 0};
        runs += cuda_sparse_vs_cpu(ctx, &C, &p, b2, 2, "brick corners");
        free(C.xyz);
        printf("sparse reconstruction: %d CUDA meshes are the CPU's dense mesh\n", runs);
        gpu_plan_cases(ctx, r);
        {
            /* Two GPU contexts (two GPUs where the machine has them, else
             * two streams of one): the bricks shared out, the same mesh;
             * a CPU context beside a GPU one is refused. */
            pm_context *g2;
            pm_context_desc dg = {sizeof dg, PM_DEVICE_CUDA, pm_cuda_device_count() > 1 ? 1 : 0, 0,
                                  NULL};
            PMT_OK(pm_context_create(&dg, &g2));
            pm_context *two[2] = {ctx, g2};
            scene S2 = {0};
            ball(&S2, 0.1, 0.2, 0.3, 6 * r, r, 0.5);
            ball(&S2, 3.0, 0.2, 0.3, 4 * r, r, 0.5);
            pm_reconstruct_options ro = {sizeof ro, PM_GRID_SPARSE, 9};
            pm_mesh mm, ref;
            PMT_OK(pm_reconstruct_multi(two, 2, S2.xyz, S2.n, &p, &ro, NULL, &mm, NULL));
            ro.grid = PM_GRID_DENSE;
            PMT_OK(pm_reconstruct(cpu1, S2.xyz, S2.n, &p, &ro, NULL, &ref, NULL));
            check_same_mesh(&mm, &ref, "pm_reconstruct_multi on two GPU contexts");
            pm_mesh_free(ctx, &mm);
            pm_mesh_free(cpu1, &ref);
            pm_context *mixed[2] = {ctx, cpu1};
            pm_status s = pm_reconstruct_multi(mixed, 2, S2.xyz, S2.n, &p, NULL, NULL, &mm, NULL);
            PMT_CHECK(s == PM_STATUS_INVALID_ARGUMENT && strstr(pm_last_error(), "one kind"),
                      "a GPU and a CPU context: %s: %s", pm_status_string(s), pm_last_error());
            printf("pm_reconstruct_multi: two GPU contexts (devices 0 and %d) give the mesh\n",
                   dg.cuda_device);
            free(S2.xyz);
            pm_context_destroy(g2);
        }
        pm_context_destroy(cpu1);
        pm_context_destroy(ctx);
        return pmt_finish("test_sparse cuda");
    }
    pm_context_desc d1 = {sizeof d1, PM_DEVICE_CPU, 0, 1, NULL};
    pm_context_desc d2 = {sizeof d2, PM_DEVICE_CPU, 0, 2, NULL};
    PMT_OK(pm_context_create(&d1, &cpu1));
    PMT_OK(pm_context_create(&d2, &cpu2));
    PMT_OK(pm_context_create(&d2, &cpu3));

    /* Pieces of volumes: every sample type, normal mode, inside, mode. */
    static const size_t vd[][3] = {{2, 2, 2}, {3, 5, 7}, {17, 9, 33}, {31, 33, 17}, {40, 3, 2}};
    for (size_t v = 0; v < sizeof vd / sizeof vd[0]; v++)
        for (int t = 0; t < 5; t++)
            for (int nm = PM_NORMALS_NONE; nm <= PM_NORMALS_SOBEL; nm++)
                piece_case(v % 2 ? cpu2 : cpu1, vd[v][0], vd[v][1], vd[v][2], (pm_sample_type)t,
                           (pm_normals)nm, (t + nm) % 2 ? PM_INSIDE_BELOW : PM_INSIDE_ABOVE,
                           (v + (size_t)nm) % 2 ? PM_MESH_SOUP : PM_MESH_INDEXED);
    piece_case(cpu2, 70, 61, 45, PM_SAMPLE_F32, PM_NORMALS_CENTRAL, PM_INSIDE_ABOVE,
               PM_MESH_INDEXED);
    piece_errors(cpu1);
    /* The backend comparison of the cuda mode, CPU (2 threads) against
     * CPU (1 thread): padded and grown windows, random boxes. */
    backend_pieces(cpu2, 0);
    printf("pieces: %zu equal across contexts, %zu tilings merged into pm_isosurface's mesh\n",
           pieces_compared, tilings_merged);

    /* Particles: random blobs, parameters as splashsurf's users set them. */
    static const double cs[] = {0.5, 0.75, 1.0, 1.5};
    for (int rep = 0; rep < 4; rep++) {
        scene S = {0};
        double r = 0.02 + 0.02 * pmt_uniform();
        int blobs = 1 + (int)(pmt_rand() % 4);
        for (int b = 0; b < blobs; b++)
            ball(&S, pmt_uniform() * 40 * r, pmt_uniform() * 30 * r, pmt_uniform() * 35 * r,
                 (3 + 6 * pmt_uniform()) * r, r, 0.6);
        for (int i = 0; i < 5; i++) /* a few free particles */
            add(&S, pmt_uniform() * 60 * r, pmt_uniform() * 60 * r, pmt_uniform() * 60 * r);
        pm_field_params p;
        params_of(&p, r, rep == 3 ? 1.5 : 2.0, cs[rep], rep == 2 ? 0.45 : 0.6);
        char what[96];
        snprintf(what, sizeof what, "blobs %d (%zu particles) c %g", blobs, S.n, cs[rep]);
        static const size_t bs1[] = {0, 8, 13, 48};
        brick_fields(cpu2, &S, &p, bs1[rep], what);
        static const size_t bs[] = {0, 5, 16, 40};
        sparse_vs_dense(&S, &p, bs, 4, what);
        free(S.xyz);
    }

    /* Pieces larger than the merge's runs (16384 vertices or triangles,
     * src/core/piece_merge.c): one brick holding a large ball, cut into
     * runs at row starts, and the same ball in bricks of 40 points. */
    {
        scene S = {0};
        const double r = 0.02;
        ball(&S, 0.0, 0.0, 0.0, 26 * r, r, 0.5);
        pm_field_params p;
        params_of(&p, r, 2.0, 0.5, 0.6);
        pm_reconstruct_options ro = {sizeof ro, PM_GRID_DENSE, 0};
        pm_mesh dense;
        PMT_OK(pm_reconstruct(cpu2, S.xyz, S.n, &p, &ro, NULL, &dense, NULL));
        PMT_CHECK(dense.num_vertices > 2 * 16384 && dense.num_triangles > 2 * 16384,
                  "large pieces: only %zu vertices, %zu triangles", dense.num_vertices,
                  dense.num_triangles);
        static const size_t bs[] = {1024, 40};
        for (int b = 0; b < 2; b++) {
            ro.grid = PM_GRID_SPARSE;
            ro.brick_points = bs[b];
            pm_mesh sp;
            pm_reconstruct_report rs;
            PMT_OK(pm_reconstruct(cpu2, S.xyz, S.n, &p, &ro, NULL, &sp, &rs));
            if (b == 0)
                PMT_CHECK(rs.bricks_occupied == 1, "large pieces: %llu bricks, expected one",
                          (unsigned long long)rs.bricks_occupied);
            char w[80];
            snprintf(w, sizeof w, "large pieces: brick %zu", bs[b]);
            check_same_mesh(&sp, &dense, w);
            pm_mesh_free(cpu2, &sp);
        }
        printf("large pieces: %zu vertices in one brick, merged in runs as the dense mesh\n",
               dense.num_vertices);
        pm_mesh_free(cpu2, &dense);
        free(S.xyz);
    }

    /* Surfaces across brick faces, edges and corners, and a particle
     * exactly on a brick boundary: blobs centred on lattice points that
     * are brick corners of a fixed lattice (anchors at the box corners). */
    {
        pm_field_params p;
        const size_t brick = 16; /* B = 8: two cells per brick */
        scene S = {0};
        corners_scene(&S, &p, brick);
        static const size_t bs[] = {16, 8, 24};
        brick_fields(cpu2, &S, &p, brick, "brick corners");
        sparse_vs_dense(&S, &p, bs, 3, "brick corners");
        /* Empty bricks: most of the grid's bricks hold nothing. */
        pm_reconstruct_options ro = {sizeof ro, PM_GRID_SPARSE, brick};
        pm_mesh m;
        pm_reconstruct_report rep;
        PMT_OK(pm_reconstruct(cpu2, S.xyz, S.n, &p, &ro, NULL, &m, &rep));
        PMT_CHECK(rep.bricks_occupied * 4 < rep.bricks_total,
                  "brick corners: %llu of %llu bricks occupied, expected most empty",
                  (unsigned long long)rep.bricks_occupied, (unsigned long long)rep.bricks_total);
        pm_mesh_report mr;
        PMT_OK(pm_mesh_analyze(&m, &mr));
        pm_mesh_free(cpu2, &m);
        /* Auto takes sparse here. */
        ro.grid = PM_GRID_AUTO;
        PMT_OK(pm_reconstruct(cpu2, S.xyz, S.n, &p, &ro, NULL, &m, &rep));
        PMT_CHECK(rep.sparse, "auto on a mostly empty grid took the dense path");
        pm_mesh_free(cpu2, &m);
        free(S.xyz);
    }

    /* Blur: no sparse path. */
    {
        float xyz[6] = {0, 0, 0, 0.1f, 0, 0};
        pm_field_params p;
        params_of(&p, 0.05, 2.0, 0.5, 0.6);
        p.method = PM_FIELD_BLUR;
        pm_reconstruct_options ro = {sizeof ro, PM_GRID_SPARSE, 0};
        pm_mesh m;
        pm_status s = pm_reconstruct(cpu1, xyz, 2, &p, &ro, NULL, &m, NULL);
        PMT_CHECK(s == PM_STATUS_UNSUPPORTED && strstr(pm_last_error(), "blur"),
                  "blur sparse: %s: %s", pm_status_string(s), pm_last_error());
        ro.grid = PM_GRID_AUTO;
        pm_reconstruct_report rep;
        PMT_OK(pm_reconstruct(cpu1, xyz, 2, &p, &ro, NULL, &m, &rep));
        PMT_CHECK(!rep.sparse && m.num_triangles > 0, "blur auto: sparse %d, %zu triangles",
                  rep.sparse, m.num_triangles);
        pm_mesh_free(cpu1, &m);
    }

    pm_context_destroy(cpu1);
    pm_context_destroy(cpu3);
    pm_context_destroy(cpu2);
    pm_context_destroy(ctx);
    return pmt_finish("test_sparse");
}
