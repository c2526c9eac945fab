/* Density fields and particle reconstruction from Python: pm_field_compute
 * (or pm_field_compute_async on a lattice the caller fixes), optionally
 * followed by pm_isosurface of the field in the same job. */
#include "pmx.h"

#include <string.h>

typedef struct {
    pmx_job base;
    const float *xyz; /* host or context memory */
    size_t n;
    int upload; /* xyz is host memory and the call needs context memory */
    pm_field_params params;
    int have_grid;
    pm_field_grid grid;
    pm_field field; /* result (volume in context memory, owned) */
    float *grid_field;
    int extract;    /* also extract the surface */
    int want_field; /* hand the field out */
    int download;   /* the field goes to host memory (CUDA context, host output) */
    float *host_field;
    pm_isosurface_options opt;
    pm_mesh mesh;
    pm_field meta; /* the field's description, kept when its memory goes */
} field_job;

/* Frees the field in context memory (copied out, or not wanted). */
static void drop_field(field_job *j, pm_context *ctx)
{
    if (j->grid_field) {
        pm_free(ctx, j->grid_field);
        j->grid_field = NULL;
        memset(&j->field, 0, sizeof j->field);
    } else {
        pm_field_free(ctx, &j->field);
    }
}

static void field_run(pmx_job *job)
{
    field_job *j = (field_job *)job;
    pm_context *ctx = job->ctx->ctx;
    pm_status s;
    float *xyz_ctx = NULL;
    const float *xyz = j->xyz;
    if (j->have_grid) {
        const size_t bytes = j->n * 3 * sizeof(float);
        if (j->upload) {
            s = pm_alloc(ctx, bytes, (void **)&xyz_ctx);
            if (s == PM_STATUS_OK) s = pm_upload(ctx, xyz_ctx, j->xyz, bytes);
            if (s != PM_STATUS_OK) goto fail;
            xyz = xyz_ctx;
        }
        size_t points = j->grid.dims[0] * j->grid.dims[1] * j->grid.dims[2];
        pm_field_status *st_ctx = NULL;
        pm_field_status st;
        s = pm_alloc(ctx, points * sizeof(float), (void **)&j->grid_field);
        if (s == PM_STATUS_OK) s = pm_alloc(ctx, sizeof st, (void **)&st_ctx);
        if (s == PM_STATUS_OK)
            s = pm_field_compute_async(ctx, xyz, j->n, &j->params, &j->grid, j->grid_field, st_ctx);
        if (s == PM_STATUS_OK) s = pm_context_synchronize(ctx);
        if (s == PM_STATUS_OK) s = pm_download(ctx, &st, st_ctx, sizeof st);
        pm_free(ctx, st_ctx);
        if (s != PM_STATUS_OK) goto fail;
        if (st.first_nonfinite != UINT64_MAX) {
            pm_free(ctx, xyz_ctx);
            pmx_job_failf(job, PM_STATUS_INVALID_ARGUMENT,
                          "particle %llu has a non-finite coordinate",
                          (unsigned long long)st.first_nonfinite);
            return;
        }
        /* Present the lattice as a field. */
        const double sp = j->params.cube_size * j->params.radius;
        pm_field *f = &j->field;
        f->volume.data = j->grid_field;
        f->volume.type = PM_SAMPLE_F32;
        f->volume.nx = j->grid.dims[0];
        f->volume.ny = j->grid.dims[1];
        f->volume.nz = j->grid.dims[2];
        for (int a = 0; a < 3; a++) {
            f->volume.spacing[a] = sp;
            f->volume.origin[a] = (double)j->grid.lo[a] * sp;
        }
        f->iso = j->params.iso;
        f->inside = PM_INSIDE_ABOVE;
        f->particles_used = (size_t)st.particles_used;
        f->particles_dropped = j->n - (size_t)st.particles_used;
    } else {
        s = pm_field_compute(ctx, xyz, j->n, &j->params, &j->field);
        if (s != PM_STATUS_OK) goto fail;
    }
    pm_free(ctx, xyz_ctx);
    xyz_ctx = NULL;
    if (j->extract) {
        j->opt.inside = j->field.inside;
        s = pm_isosurface(ctx, &j->field.volume, j->field.iso, &j->opt, &j->mesh);
        if (s != PM_STATUS_OK) goto fail;
    }
    j->meta = j->field;
    if (j->want_field && j->download) {
        const pm_volume *v = &j->field.volume;
        const size_t bytes = v->nx * v->ny * v->nz * sizeof(float);
        j->host_field = malloc(bytes ? bytes : 1);
        if (!j->host_field) {
            pmx_job_failf(job, PM_STATUS_OUT_OF_MEMORY, "no host memory for the field (%zu bytes)",
                          bytes);
            return;
        }
        s = pm_download(ctx, j->host_field, v->data, bytes);
        if (s != PM_STATUS_OK) goto fail;
    }
    if (!j->want_field || j->download) drop_field(j, ctx);
    return;
fail:
    pmx_job_fail(job, s);
    pm_free(ctx, xyz_ctx);
}

static void field_discard(pmx_job *job)
{
    field_job *j = (field_job *)job;
    pm_context *ctx = job->ctx->ctx;
    drop_field(j, ctx);
    pm_mesh_free(ctx, &j->mesh);
    free(j->host_field);
    j->host_field = NULL;
}

static void field_job_free(pmx_ctx *c, void *arg)
{
    field_job *j = arg;
    j->base.ctx = c;
    field_discard(&j->base);
    free(j);
}

static int opt_triple(PyObject *o, double out[3], const char *what)
{
    if (o == Py_None) return 0;
    PyObject *seq = PySequence_Fast(o, what);
    if (!seq) return -1;
    int ok = PySequence_Fast_GET_SIZE(seq) == 3;
    for (int i = 0; ok && i < 3; i++) {
        out[i] = PyFloat_AsDouble(PySequence_Fast_GET_ITEM(seq, i));
        if (out[i] == -1.0 && PyErr_Occurred()) ok = 0;
    }
    Py_DECREF(seq);
    if (!ok && !PyErr_Occurred()) PyErr_Format(PyExc_ValueError, "%s must have 3 values", what);
    return ok ? 1 : -1;
}

static int particles_view(PyObject *o, pmx_ctx *c, pmx_view *v)
{
    if (pmx_view_get(o, v) < 0) return -1;
    if (v->typenum != NPY_FLOAT32 || v->ndim != 2 || v->shape[1] != 3 ||
        !pmx_view_c_contiguous(v)) {
        PyErr_SetString(PyExc_ValueError,
                        "particles must be a C-contiguous float32 array of shape (n, 3)");
        return -1;
    }
    if (v->mem == PMX_MEM_CUDA && c->device != PM_DEVICE_CUDA) {
        PyErr_SetString(PyExc_ValueError, "CUDA particles need a CUDA context (device='cuda')");
        return -1;
    }
    return 0;
}

static void fill_params(pm_field_params *p, double radius, double sl, double cs, double iso,
                        double rho, int method, int blur_steps, Py_ssize_t max_mem)
{
    memset(p, 0, sizeof *p);
    p->struct_size = sizeof *p;
    p->radius = radius;
    p->smoothing_length = sl;
    p->cube_size = cs;
    p->iso = iso;
    p->rest_density = rho;
    p->method = (pm_field_method)method;
    p->blur_steps = blur_steps;
    p->max_memory_bytes = (size_t)(max_mem > 0 ? max_mem : 0);
}

/* field_compute(context, particles, radius, smoothing_length, cube_size,
 *     iso, rest_density, method, blur_steps, aabb_min, aabb_max,
 *     max_memory, grid_lo, grid_dims, device_out, extract, want_field,
 *     normals, mode)
 * -> (field values (nz, ny, nx) or None, origin, spacing, iso, particles_used,
 *     particles_dropped, timings, mesh) with mesh None or
 *     (vertices, faces, normals, active_cells). */
PyObject *pmx_field_compute(PyObject *self, PyObject *args, PyObject *kw)
{
    (void)self;
    static char *kwlist[] = {"context",    "particles", "radius",       "smoothing_length",
                             "cube_size",  "iso",       "rest_density", "method",
                             "blur_steps", "aabb_min",  "aabb_max",     "max_memory",
                             "grid_lo",    "grid_dims", "device_out",   "extract",
                             "want_field", "normals",   "mode",         NULL};
    PyObject *ctxo, *po, *amin, *amax, *glo, *gdims;
    double radius, sl, cs, iso, rho;
    int method, blur_steps, device_out, extract, want_field, normals, mode;
    Py_ssize_t max_mem;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OOdddddiiOOnOOpppii", kwlist, &ctxo, &po, &radius,
                                     &sl, &cs, &iso, &rho, &method, &blur_steps, &amin, &amax,
                                     &max_mem, &glo, &gdims, &device_out, &extract, &want_field,
                                     &normals, &mode))
        return NULL;
    pmx_ctx *c = pmx_ctx_from(ctxo);
    if (!c) return NULL;
    pmx_view v;
    if (particles_view(po, c, &v) < 0) {
        pmx_view_release(&v);
        return NULL;
    }
    PyObject *res = NULL;
    int ran = 0;
    field_job *j = calloc(1, sizeof *j);
    if (!j) {
        PyErr_NoMemory();
        goto out;
    }
    j->base.run = field_run;
    j->base.discard = field_discard;
    j->xyz = (const float *)v.data;
    j->n = (size_t)v.shape[0];
    fill_params(&j->params, radius, sl, cs, iso, rho, method, blur_steps, max_mem);
    int a1 = opt_triple(amin, j->params.aabb_min, "aabb_min");
    int a2 = opt_triple(amax, j->params.aabb_max, "aabb_max");
    if (a1 < 0 || a2 < 0) goto out;
    if (a1 != a2) {
        PyErr_SetString(PyExc_ValueError, "aabb_min and aabb_max go together");
        goto out;
    }
    j->params.use_aabb = a1 == 1;
    if (glo != Py_None) {
        double lo[3], dims[3];
        if (opt_triple(glo, lo, "grid lo") < 0 || opt_triple(gdims, dims, "grid dims") < 0)
            goto out;
        for (int a = 0; a < 3; a++) {
            j->grid.lo[a] = (int64_t)lo[a];
            if (dims[a] < 2) {
                PyErr_SetString(PyExc_ValueError, "grid dims must be at least 2 per axis");
                goto out;
            }
            j->grid.dims[a] = (size_t)dims[a];
        }
        j->have_grid = 1;
        j->upload = v.mem == PMX_MEM_HOST && c->device == PM_DEVICE_CUDA;
        if (j->params.smoothing_length == 0) j->params.smoothing_length = 2.0;
        if (j->params.cube_size == 0) j->params.cube_size = 0.5;
        if (j->params.iso == 0) j->params.iso = 0.6;
    }
    j->extract = extract;
    j->want_field = want_field || !extract;
    j->download = !device_out && c->device == PM_DEVICE_CUDA;
    j->opt.struct_size = sizeof j->opt;
    j->opt.normals = (pm_normals)normals;
    j->opt.mode = (pm_mesh_mode)mode;
    j->opt.output_in_context_memory = device_out && c->device == PM_DEVICE_CUDA;
    Py_INCREF(v.keep);
    j->base.keep[0] = v.keep;
    pmx_job_adopt_view(&j->base, &v);
    int r = pmx_run(c, &j->base, j->n * 64);
    if (r == -2) {
        j = NULL;
        goto out;
    }
    pmx_job_release_views(&j->base);
    Py_CLEAR(j->base.keep[0]);
    if (r == -1) goto out;
    if (j->base.status != PM_STATUS_OK) {
        pmx_raise_job(&j->base);
        ran = 1;
        goto out;
    }
    ran = 1;
    /* The field: copied to host memory in the job, or still in context
     * memory, where an owner of the right kind frees it. */
    const pm_volume *vol = &j->meta.volume;
    Py_ssize_t shape[3] = {(Py_ssize_t)vol->nz, (Py_ssize_t)vol->ny, (Py_ssize_t)vol->nx};
    PyObject *values = NULL;
    if (!j->want_field) {
        Py_INCREF(Py_None);
        values = Py_None;
    } else if (j->host_field) {
        pmx_OwnerObject *fo = pmx_owner_new(NULL, PMX_OWN_MALLOC);
        if (!fo) goto out;
        fo->ptr = j->host_field;
        j->host_field = NULL;
        npy_intp dims[3] = {shape[0], shape[1], shape[2]};
        values = pmx_host_array((PyObject *)fo, fo->ptr, NPY_FLOAT32, 3, dims);
        Py_DECREF(fo);
        if (!values) goto out;
    } else {
        pmx_OwnerObject *fo = pmx_owner_new(c, j->grid_field ? PMX_OWN_ALLOC : PMX_OWN_FIELD);
        if (!fo) goto out;
        if (j->grid_field)
            fo->ptr = j->grid_field;
        else
            fo->field = j->field;
        j->grid_field = NULL;
        memset(&j->field, 0, sizeof j->field);
        values = pmx_result_array((PyObject *)fo, c, device_out, (void *)vol->data, NPY_FLOAT32, 3,
                                  shape);
        Py_DECREF(fo);
        if (!values) goto out;
    }
    PyObject *mesh;
    const double extract_ms = j->mesh.timings.extract_ms;
    if (j->extract) {
        pmx_OwnerObject *mo = pmx_owner_new(c, PMX_OWN_MESH);
        if (!mo) {
            Py_DECREF(values);
            goto out;
        }
        mo->mesh = j->mesh;
        memset(&j->mesh, 0, sizeof j->mesh);
        const pm_mesh *m = &mo->mesh;
        Py_ssize_t vs[2] = {(Py_ssize_t)m->num_vertices, 3},
                   fs[2] = {(Py_ssize_t)m->num_triangles, 3};
        PyObject *pv =
            pmx_result_array((PyObject *)mo, c, device_out, m->positions, NPY_FLOAT32, 2, vs);
        PyObject *pf = m->indices ? pmx_result_array((PyObject *)mo, c, device_out, m->indices,
                                                     NPY_UINT32, 2, fs)
                                  : (Py_INCREF(Py_None), Py_None);
        PyObject *pn = m->normals ? pmx_result_array((PyObject *)mo, c, device_out, m->normals,
                                                     NPY_FLOAT32, 2, vs)
                                  : (Py_INCREF(Py_None), Py_None);
        Py_DECREF(mo);
        mesh = pv && pf && pn
                   ? Py_BuildValue("(NNNK)", pv, pf, pn, (unsigned long long)m->active_cells)
                   : NULL;
        if (!mesh) {
            Py_XDECREF(pv);
            Py_XDECREF(pf);
            Py_XDECREF(pn);
            Py_DECREF(values);
            goto out;
        }
    } else {
        Py_INCREF(Py_None);
        mesh = Py_None;
    }
    const pm_timings *t = &j->meta.timings;
    res = Py_BuildValue("(N(ddd)(ddd)dnn{s:d,s:d,s:d,s:d}N)", values, vol->origin[0],
                        vol->origin[1], vol->origin[2], vol->spacing[0], vol->spacing[1],
                        vol->spacing[2], j->meta.iso, (Py_ssize_t)j->meta.particles_used,
                        (Py_ssize_t)j->meta.particles_dropped, "neighbours_ms", t->neighbours_ms,
                        "density_ms", t->density_ms, "field_ms", t->field_ms, "extract_ms",
                        extract_ms, mesh);
out:
    if (j) {
        Py_CLEAR(j->base.keep[0]);
        /* What the results did not take is context memory: freed when the
         * context is free. */
        if (ran)
            pmx_ctx_defer(c, field_job_free, j);
        else
            free(j);
    }
    pmx_view_release(&v);
    return res;
}

/* field_grid_for_box(bmin, bmax, radius, smoothing_length, cube_size,
 *     method, blur_steps) -> (lo (x, y, z), dims (x, y, z)). */
PyObject *pmx_field_grid_for_box(PyObject *self, PyObject *args, PyObject *kw)
{
    (void)self;
    static char *kwlist[] = {"bmin",      "bmax",   "radius",     "smoothing_length",
                             "cube_size", "method", "blur_steps", NULL};
    PyObject *bmino, *bmaxo;
    double radius, sl, cs, bmin[3], bmax[3];
    int method, blur_steps;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OOdddii", kwlist, &bmino, &bmaxo, &radius, &sl, &cs,
                                     &method, &blur_steps))
        return NULL;
    if (opt_triple(bmino, bmin, "bmin") < 0 || opt_triple(bmaxo, bmax, "bmax") < 0) return NULL;
    pm_field_params p;
    fill_params(&p, radius, sl, cs, 0.0, 0.0, method, blur_steps, 0);
    pm_field_grid g;
    pm_status s = pm_field_grid_for_box(&p, bmin, bmax, &g);
    if (s != PM_STATUS_OK) return pmx_raise_status(s, pm_last_error());
    return Py_BuildValue("((LLL)(nnn))", (long long)g.lo[0], (long long)g.lo[1], (long long)g.lo[2],
                         (Py_ssize_t)g.dims[0], (Py_ssize_t)g.dims[1], (Py_ssize_t)g.dims[2]);
}
