/* pm_isosurface from Python: the volume read in place (NumPy, CUDA array
 * interface, DLPack; any axis with unit stride becomes the library's x),
 * the mesh handed out without a copy, and for marching_cubes the
 * scikit-image conventions applied in the same job (mc_post.c). */
#include "pmx.h"

#include <math.h>
#include <string.h>

int pmx_sample_type(int typenum)
{
    switch (typenum) {
    case NPY_UINT8: return PM_SAMPLE_U8;
    case NPY_BOOL: return PM_SAMPLE_U8;
    case NPY_UINT16: return PM_SAMPLE_U16;
    case NPY_INT16: return PM_SAMPLE_I16;
    case NPY_FLOAT32: return PM_SAMPLE_F32;
    case NPY_FLOAT64: return PM_SAMPLE_F64;
    default: return -1;
    }
}

/* Maps a 3-d view onto the library's layout: axis[L] is the view axis that
 * becomes library axis L (x with unit stride, then y and z by stride).
 * Returns 0, or -1 when the strides do not fit (no exception). */
static int volume_layout(const pmx_view *v, int axis[3], size_t n[3], size_t stride[3])
{
    int order[3] = {0, 1, 2};
    for (int i = 0; i < 3; i++)
        for (int j = i + 1; j < 3; j++)
            if (v->strides[order[j]] < v->strides[order[i]] ||
                (v->strides[order[j]] == v->strides[order[i]] && order[j] > order[i])) {
                int t = order[i];
                order[i] = order[j];
                order[j] = t;
            }
    /* Equal strides (an axis of length 1 or a broadcast) would make the
     * order ambiguous: the later NumPy axis becomes x, as in C order. */
    for (int L = 0; L < 3; L++) {
        axis[L] = order[L];
        n[L] = (size_t)v->shape[order[L]];
        Py_ssize_t s = v->strides[order[L]];
        if (s <= 0 || s % v->itemsize) return -1;
        stride[L] = (size_t)(s / v->itemsize);
    }
    if (stride[0] != 1) return -1;
    if (stride[1] < n[0] || stride[2] < stride[1] * (n[1] - 1) + n[0]) return -1;
    return 0;
}

/* Parity of the permutation that takes library axes to output columns. */
static int perm_odd(const int col[3])
{
    int inv = 0;
    for (int i = 0; i < 3; i++)
        for (int j = i + 1; j < 3; j++)
            inv += col[i] > col[j];
    return inv & 1;
}

typedef struct {
    pmx_job base;
    pm_volume vol;
    double iso;
    pm_isosurface_options opt;
    pm_isosurface_report report;
    pm_mesh mesh;
    int skimage;
    int reorder; /* columns permuted / faces flipped on the host */
    pmx_mc_post post;
    float *values;
    /* marching_cubes with level=None: the level from the volume's range,
     * found in the job (on the context's threads, just before the
     * extraction reads the same samples). */
    int auto_level;
    double range_lo, range_hi;
} iso_job;

/* scikit-image's default level: the middle of the float32 data range, the
 * sum rounded to float32 as NumPy's float32 scalars do. */
static double mid_level(double lo, double hi)
{
    const float s = (float)lo + (float)hi; /* float arithmetic (FLT_EVAL_METHOD 0) */
    return 0.5 * (double)s;
}

static void iso_run(pmx_job *job)
{
    iso_job *j = (iso_job *)job;
    if (j->auto_level) {
        const size_t n[3] = {j->vol.nx, j->vol.ny, j->vol.nz};
        const size_t stride[3] = {1, j->vol.row_stride, j->vol.slice_stride};
        pmx_range(j->vol.data, j->vol.type, n, stride, j->post.threads, &j->range_lo,
                  &j->range_hi);
        /* All NaN, or a level that is NaN or infinite: no extraction (an
         * empty result; the Python side raises scikit-image's error). */
        if (!(j->range_lo <= j->range_hi)) return;
        const double level = mid_level(j->range_lo, j->range_hi);
        j->iso = j->post.iso = j->post.iso_eff = level;
        if (isnan(level) || isinf(level)) return;
    }
    pm_status s = pm_isosurface(job->ctx->ctx, &j->vol, j->iso, &j->opt, &j->mesh);
    if (s != PM_STATUS_OK) {
        pmx_job_fail(job, s);
        return;
    }
    if (j->skimage) {
        /* values first: the library's vertex numbering tells which edge a
         * vertex on a lattice point belongs to, and the mask renumbers. */
        j->values = malloc((j->mesh.num_vertices ? j->mesh.num_vertices : 1) * sizeof(float));
        if (!j->values) {
            pmx_job_failf(job, PM_STATUS_OUT_OF_MEMORY, "marching_cubes: out of memory for values");
            return;
        }
        const int fused = !j->post.mask && j->mesh.indices;
        pmx_mc_values(&j->post, &j->mesh, j->values, fused);
        if (fused) return;
        if (j->post.mask && pmx_mc_apply_mask(&j->post, &j->mesh, j->values) < 0) {
            pmx_job_failf(job, PM_STATUS_OUT_OF_MEMORY,
                          "marching_cubes: out of memory for the mask");
            return;
        }
    }
    if (j->reorder) pmx_mc_reorder(&j->post, &j->mesh);
}

static void iso_discard(pmx_job *job)
{
    iso_job *j = (iso_job *)job;
    pm_mesh_free(job->ctx->ctx, &j->mesh);
    free(j->values);
    j->values = NULL;
}

static void iso_job_free(pmx_ctx *c, void *arg)
{
    iso_job *j = arg;
    j->base.ctx = c;
    iso_discard(&j->base);
    free(j);
}

static int parse_triple(PyObject *o, double out[3], const char *what)
{
    PyObject *seq = PySequence_Fast(o, what);
    if (!seq) return -1;
    if (PySequence_Fast_GET_SIZE(seq) != 3) {
        Py_DECREF(seq);
        PyErr_Format(PyExc_ValueError, "%s must have 3 values", what);
        return -1;
    }
    for (int i = 0; i < 3; i++) {
        out[i] = PyFloat_AsDouble(PySequence_Fast_GET_ITEM(seq, i));
        if (out[i] == -1.0 && PyErr_Occurred()) {
            Py_DECREF(seq);
            return -1;
        }
    }
    Py_DECREF(seq);
    return 0;
}

static PyObject *build_result(iso_job *j, pmx_ctx *c, int device_out)
{
    pmx_OwnerObject *owner = pmx_owner_new(c, PMX_OWN_MESH);
    if (!owner) return NULL;
    owner->mesh = j->mesh;
    memset(&j->mesh, 0, sizeof j->mesh);
    const pm_mesh *m = &owner->mesh;
    PyObject *pos = NULL, *idx = NULL, *nrm = NULL, *val = NULL, *res = NULL;
    Py_ssize_t vshape[2] = {(Py_ssize_t)m->num_vertices, 3};
    Py_ssize_t fshape[2] = {(Py_ssize_t)m->num_triangles, 3};
    pos = pmx_result_array((PyObject *)owner, c, device_out, m->positions, NPY_FLOAT32, 2, vshape);
    if (!pos) goto done;
    if (m->indices) {
        int tn = NPY_UINT32;
        /* scikit-image's faces are int32; the same bits while indices fit. */
        if (j->skimage && m->num_vertices <= (size_t)INT32_MAX) tn = NPY_INT32;
        idx = pmx_result_array((PyObject *)owner, c, device_out, m->indices, tn, 2, fshape);
        if (!idx) goto done;
        if (j->skimage && tn == NPY_UINT32) {
            PyObject *wide =
                PyArray_CastToType((PyArrayObject *)idx, PyArray_DescrFromType(NPY_INT64), 0);
            Py_DECREF(idx);
            idx = wide;
            if (!idx) goto done;
        }
    } else {
        Py_INCREF(Py_None);
        idx = Py_None;
    }
    if (m->normals) {
        nrm =
            pmx_result_array((PyObject *)owner, c, device_out, m->normals, NPY_FLOAT32, 2, vshape);
        if (!nrm) goto done;
    } else {
        Py_INCREF(Py_None);
        nrm = Py_None;
    }
    if (j->values) {
        pmx_OwnerObject *vo = pmx_owner_new(NULL, PMX_OWN_MALLOC);
        if (!vo) goto done;
        vo->ptr = j->values;
        j->values = NULL;
        npy_intp n = (npy_intp)m->num_vertices;
        val = pmx_host_array((PyObject *)vo, vo->ptr, NPY_FLOAT32, 1, &n);
        Py_DECREF(vo);
        if (!val) goto done;
    } else {
        Py_INCREF(Py_None);
        val = Py_None;
    }
    PyObject *names = PyList_New(0), *ms = PyList_New(0);
    if (!names || !ms) {
        Py_XDECREF(names);
        Py_XDECREF(ms);
        goto done;
    }
    for (int i = 0; i < 4 && j->report.stage_names[i]; i++) {
        PyObject *nm = PyUnicode_FromString(j->report.stage_names[i]);
        PyObject *t = PyFloat_FromDouble(j->report.stage_ms[i]);
        if (nm) PyList_Append(names, nm);
        if (t) PyList_Append(ms, t);
        Py_XDECREF(nm);
        Py_XDECREF(t);
    }
    res = Py_BuildValue("(OOOOKsNNdddd)", pos, idx, nrm, val, (unsigned long long)m->active_cells,
                        j->report.path, names, ms, m->timings.extract_ms, j->iso, j->range_lo,
                        j->range_hi);
done:
    Py_XDECREF(pos);
    Py_XDECREF(idx);
    Py_XDECREF(nrm);
    Py_XDECREF(val);
    Py_DECREF(owner);
    return res;
}

/* isosurface(context, volume, iso, spacing, origin, normals, mode, inside,
 *            device_out, numpy_order, timed, join=False, sk_step=0,
 *            sk_mask=None, sk_ascent=False, sk_auto_level=False)
 * spacing and origin are per NumPy axis. numpy_order: vertex columns in
 * NumPy axis order (axis 0 first), else x (last axis), y, z. sk_step > 0
 * selects the scikit-image conventions (marching_cubes). Returns
 * (vertices, faces, normals, values, active_cells, path, stage_names,
 * stage_ms, extract_ms, iso, range_lo, range_hi). sk_auto_level (with
 * sk_step > 0): `iso` is ignored and the level is the middle of the
 * volume's range, computed in the job (range_lo > range_hi: all NaN; an
 * empty mesh when no level could be formed); the level used and the range
 * are returned (the range is NaN without sk_auto_level). join: ambiguous faces join the inside corners
 * (the library separates them): the complementary region is extracted,
 * with the same partition of the samples, and turned inside out. */
PyObject *pmx_isosurface(PyObject *self, PyObject *args, PyObject *kw)
{
    (void)self;
    static char *kwlist[] = {"context", "volume",  "iso",        "spacing",     "origin", "normals",
                             "mode",    "inside",  "device_out", "numpy_order", "timed",  "join",
                             "sk_step", "sk_mask", "sk_ascent",  "sk_auto_level", NULL};
    PyObject *ctxo, *volo, *spo, *oro, *masko = Py_None;
    double iso;
    int normals, mode, inside, device_out, numpy_order, timed, join = 0, sk_step = 0, sk_ascent = 0,
                                                                  sk_auto_level = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OOdOOiiippp|piOpp", kwlist, &ctxo, &volo, &iso,
                                     &spo, &oro, &normals, &mode, &inside, &device_out,
                                     &numpy_order, &timed, &join, &sk_step, &masko, &sk_ascent,
                                     &sk_auto_level))
        return NULL;
    pmx_ctx *c = pmx_ctx_from(ctxo);
    if (!c) return NULL;
    double spacing[3], origin[3];
    if (parse_triple(spo, spacing, "spacing") < 0 || parse_triple(oro, origin, "origin") < 0)
        return NULL;

    pmx_view v, mv;
    memset(&mv, 0, sizeof mv);
    if (pmx_view_get(volo, &v) < 0) return NULL;
    iso_job *j = NULL;
    PyObject *res = NULL;
    if (v.ndim != 3) {
        PyErr_Format(PyExc_ValueError, "volume must have 3 dimensions, not %d", v.ndim);
        goto out;
    }
    int st = pmx_sample_type(v.typenum);
    if (st < 0) {
        PyErr_SetString(PyExc_TypeError,
                        "volume dtype must be uint8, bool, uint16, int16, float32 or float64");
        goto out;
    }
    if (v.mem == PMX_MEM_CUDA && c->device != PM_DEVICE_CUDA) {
        PyErr_SetString(
            PyExc_ValueError,
            "a CUDA array needs a CUDA context (device='cuda'); this one is on the CPU");
        goto out;
    }
    int axis[3];
    size_t n[3], stride[3];
    if (volume_layout(&v, axis, n, stride) < 0) {
        if (v.mem == PMX_MEM_CUDA) {
            PyErr_SetString(PyExc_ValueError,
                            "the CUDA volume's strides do not fit (one axis must have unit stride, "
                            "the others increasing multiples): pass a contiguous array");
            goto out;
        }
        /* A host array the library cannot stride through: a C-ordered copy. */
        PyObject *copy = PyArray_NewCopy((PyArrayObject *)v.keep, NPY_CORDER);
        if (!copy) goto out;
        pmx_view_release(&v);
        if (pmx_view_get(copy, &v) < 0) {
            Py_DECREF(copy);
            return NULL;
        }
        Py_DECREF(copy);
        if (volume_layout(&v, axis, n, stride) < 0) {
            PyErr_SetString(PyExc_RuntimeError, "pyramesh: internal error (volume layout)");
            goto out;
        }
    }
    /* Output columns: col[L] is where library axis L goes. */
    int col[3];
    for (int L = 0; L < 3; L++)
        col[L] = numpy_order ? axis[L] : 2 - axis[L];
    int identity = col[0] == 0 && col[1] == 1 && col[2] == 2;

    j = calloc(1, sizeof *j);
    if (!j) {
        PyErr_NoMemory();
        goto out;
    }
    j->base.run = iso_run;
    j->base.discard = iso_discard;
    j->vol.data = v.data;
    j->vol.type = (pm_sample_type)st;
    j->vol.nx = n[0];
    j->vol.ny = n[1];
    j->vol.nz = n[2];
    j->vol.row_stride = stride[1];
    j->vol.slice_stride = stride[2];
    j->iso = iso;
    j->range_lo = j->range_hi = NAN;
    j->opt.struct_size = sizeof j->opt;
    j->opt.normals = (pm_normals)normals;
    j->opt.mode = (pm_mesh_mode)mode;
    j->opt.inside = (pm_inside)inside;
    j->opt.output_in_context_memory = device_out && c->device == PM_DEVICE_CUDA;
    j->opt.report = &j->report;
    j->report.timed = timed;
    pmx_mc_post *p = &j->post;
    for (int L = 0; L < 3; L++) {
        p->axis[L] = col[L];
        p->n[L] = n[L];
        p->stride[L] = stride[L];
    }
    p->data = v.data;
    p->threads = pm_context_num_threads(c->ctx);
    p->type = (pm_sample_type)st;
    p->iso = iso;
    p->step = 1;
    int flip = perm_odd(col);
    p->iso_eff = iso;
    p->inside_below = inside == PM_INSIDE_BELOW;
    if (join) {
        /* The same partition of the samples ({v > iso} against {v <= iso},
         * or {v < iso} against {v >= iso}) with the other side extracted:
         * every ambiguous face is resolved the other way. The triangles
         * and normals then face into the wanted region: turned around. */
        p->inside_below = !p->inside_below;
        j->opt.inside = p->inside_below ? PM_INSIDE_BELOW : PM_INSIDE_ABOVE;
        j->iso = nextafter(iso, p->inside_below ? INFINITY : -INFINITY);
        p->iso_eff = j->iso;
        flip = !flip;
        p->negate_normals = 1;
    }
    if (sk_step > 0) {
        if (v.mem != PMX_MEM_HOST || j->opt.output_in_context_memory) {
            PyErr_SetString(PyExc_ValueError, "marching_cubes works on host (NumPy) arrays");
            goto out;
        }
        j->skimage = 1;
        j->auto_level = sk_auto_level;
        p->step = sk_step;
        for (int L = 0; L < 3; L++)
            j->vol.spacing[L] = (double)sk_step;
        /* scikit-image ('descent'): clockwise seen from the side above the
         * level, normals towards decreasing values. */
        flip = !flip;
        if (sk_ascent) flip = !flip;
        if (masko != Py_None) {
            if (pmx_view_get(masko, &mv) < 0) goto out;
            if (mv.mem != PMX_MEM_HOST || mv.ndim != 3 || mv.itemsize != 1) {
                PyErr_SetString(PyExc_ValueError, "mask must be a 3-d bool array");
                goto out;
            }
            p->mask = (const uint8_t *)mv.data;
            /* The mask's axes follow the NumPy axes of the volume. */
            for (int L = 0; L < 3; L++)
                p->mask_stride[L] = (size_t)mv.strides[axis[L]];
        }
        j->reorder = 1;
    } else {
        for (int L = 0; L < 3; L++) {
            j->vol.spacing[L] = spacing[axis[L]];
            j->vol.origin[L] = origin[axis[L]];
        }
        if (!identity || flip || p->negate_normals) {
            if (j->opt.output_in_context_memory) {
                PyErr_SetString(PyExc_ValueError,
                                "device output keeps the library's vertex order and winding: use "
                                "axis_order='xyz', ambiguous='separate' and a C-ordered volume");
                goto out;
            }
            j->reorder = 1;
        }
    }
    p->flip_faces = flip;
    Py_INCREF(v.keep);
    j->base.keep[0] = v.keep;
    if (mv.keep) {
        Py_INCREF(mv.keep);
        j->base.keep[1] = mv.keep;
    }
    pmx_job_adopt_view(&j->base, &v);
    pmx_job_adopt_view(&j->base, &mv);
    int r = pmx_run(c, &j->base, n[0] * n[1] * n[2]);
    if (r == -2) {
        j = NULL; /* the worker owns it */
        goto out;
    }
    pmx_job_release_views(&j->base);
    Py_CLEAR(j->base.keep[0]);
    Py_CLEAR(j->base.keep[1]);
    if (r == -1) goto out;
    if (j->base.status == PM_STATUS_OK)
        res = build_result(j, c, device_out);
    else
        pmx_raise_job(&j->base);
    /* What the results did not take (a failed call's partial mesh) is
     * freed when the context is free. */
    pmx_ctx_defer(c, iso_job_free, j);
    j = NULL;
out:
    if (j) {
        Py_CLEAR(j->base.keep[0]);
        Py_CLEAR(j->base.keep[1]);
        free(j->values);
        free(j);
    }
    pmx_view_release(&mv);
    pmx_view_release(&v);
    return res;
}

/* ------------------------------------------------------------------------ */
/* Helpers for marching_cubes                                                */
/* ------------------------------------------------------------------------ */

/* volume_range(volume, threads) -> (min, max): NaN left out (min > max
 * when every sample is NaN), in parallel. */
PyObject *pmx_volume_minmax(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *volo;
    int threads;
    if (!PyArg_ParseTuple(args, "Oi", &volo, &threads)) return NULL;
    pmx_view v;
    if (pmx_view_get(volo, &v) < 0) return NULL;
    PyObject *res = NULL;
    int axis[3];
    size_t n[3], stride[3];
    int st = pmx_sample_type(v.typenum);
    if (v.mem != PMX_MEM_HOST || v.ndim != 3 || st < 0 || volume_layout(&v, axis, n, stride) < 0) {
        PyErr_SetString(PyExc_ValueError, "volume_range: a host volume of a library sample type");
        goto out;
    }
    double lo, hi;
    Py_BEGIN_ALLOW_THREADS pmx_range(v.data, (pm_sample_type)st, n, stride, threads, &lo, &hi);
    Py_END_ALLOW_THREADS res = Py_BuildValue("(dd)", lo, hi);
out:
    pmx_view_release(&v);
    return res;
}
