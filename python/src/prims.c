/* The data-parallel primitives from Python: reduce, scan, filter, compact,
 * expand and the HistoPyramid, on NumPy arrays or arrays in context memory
 * (CUDA arrays on a CUDA context). Host inputs on a CUDA context are
 * copied in; results are returned where the caller asks (host by default
 * for host inputs, context memory for device inputs). */
#include "pmx.h"

#include <string.h>

enum { P_REDUCE, P_SCAN, P_FILTER, P_COMPACT, P_EXPAND, P_HP_BUILD, P_HP_TRAVERSE };

typedef struct {
    pmx_job base;
    int op;
    const void *in; /* as given: host or context memory */
    size_t n, elem;
    int upload;                       /* `in` is host memory on a CUDA context */
    void *in_ctx;                     /* the uploaded copy */
    size_t width, height, row_stride; /* reduce over an image */
    int rop, cmp, horn;
    float threshold;
    int out_host_copy; /* results go to host memory from a CUDA context */
    void *out[2];      /* context memory (pm_alloc) */
    size_t out_elem[2];
    void *host[2]; /* malloc'ed host copies */
    size_t count;
    double result;
    uint64_t total;
    pm_histopyramid *hp; /* built, or traversed */
    uint64_t first_key;
} prim_job;

static pm_status alloc_out(prim_job *j, int k, size_t count)
{
    return pm_alloc(j->base.ctx->ctx, (count ? count : 1) * j->out_elem[k], &j->out[k]);
}

static void free_outs(prim_job *j)
{
    for (int k = 0; k < 2; k++) {
        pm_free(j->base.ctx->ctx, j->out[k]);
        j->out[k] = NULL;
    }
}

/* Runs a call with capacity-and-count contract: on the CPU with room for
 * every input at once; on CUDA, where memory is scarcer, the count first. */
static pm_status counted(prim_job *j, size_t max_count, int outs)
{
    pm_context *ctx = j->base.ctx->ctx;
    const int cuda = j->base.ctx->device == PM_DEVICE_CUDA;
    size_t cap = cuda || j->op == P_EXPAND ? 0 : max_count;
    for (int pass = 0; pass < 2; pass++) {
        for (int k = 0; k < outs; k++) {
            pm_status s = alloc_out(j, k, cap);
            if (s != PM_STATUS_OK) return s;
        }
        pm_status s = PM_STATUS_OK;
        switch (j->op) {
        case P_FILTER:
            s = (j->horn ? pm_filter_horn_f32 : pm_filter_f32)(
                ctx, j->in, j->n, (pm_compare)j->cmp, j->threshold, j->out[0], cap, &j->count);
            break;
        case P_COMPACT: s = pm_compact(ctx, j->in, j->n, j->out[0], cap, &j->count); break;
        case P_EXPAND: s = pm_expand(ctx, j->in, j->n, j->out[0], j->out[1], cap, &j->count); break;
        }
        if (s == PM_STATUS_OK) return s;
        if (s != PM_STATUS_TRUNCATED || pass == 1) return s;
        free_outs(j);
        cap = j->count;
    }
    return PM_STATUS_OK;
}

static void prim_run(pmx_job *job)
{
    prim_job *j = (prim_job *)job;
    pm_context *ctx = job->ctx->ctx;
    pm_status s = PM_STATUS_OK;
    const void *in = j->in;
    size_t results = 0; /* elements of out[0] / out[1] to copy to the host */
    if (j->upload && j->n) {
        s = pm_alloc(ctx, j->n * j->elem, &j->in_ctx);
        if (s == PM_STATUS_OK) s = pm_upload(ctx, j->in_ctx, j->in, j->n * j->elem);
        if (s != PM_STATUS_OK) goto fail;
        in = j->in_ctx;
    }
    j->in = in;
    switch (j->op) {
    case P_REDUCE:
        if (j->height > 1)
            s = pm_reduce_image_f32(ctx, in, j->width, j->height, j->row_stride,
                                    (pm_reduce_op)j->rop, &j->result);
        else
            s = pm_reduce_f32(ctx, in, j->n, (pm_reduce_op)j->rop, &j->result);
        break;
    case P_SCAN:
        s = alloc_out(j, 0, j->n);
        if (s == PM_STATUS_OK) s = pm_scan_exclusive_u32(ctx, in, j->n, j->out[0], &j->total);
        results = j->n;
        break;
    case P_FILTER:
    case P_COMPACT:
        s = counted(j, j->n, 1);
        results = j->count;
        break;
    case P_EXPAND:
        s = counted(j, 0, 2);
        results = j->count;
        break;
    case P_HP_BUILD:
        s = pm_histopyramid_build(ctx, in, j->n, &j->hp);
        if (s == PM_STATUS_OK) s = pm_histopyramid_total(ctx, j->hp, &j->total);
        break;
    case P_HP_TRAVERSE:
        s = alloc_out(j, 0, j->n);
        if (s == PM_STATUS_OK) s = alloc_out(j, 1, j->n);
        if (s == PM_STATUS_OK)
            s = pm_histopyramid_traverse(ctx, j->hp, j->first_key, j->n, j->out[0], j->out[1]);
        results = j->n;
        break;
    }
    if (s != PM_STATUS_OK) goto fail;
    if (j->out_host_copy) {
        for (int k = 0; k < 2; k++) {
            if (!j->out[k]) continue;
            const size_t bytes = results * j->out_elem[k];
            j->host[k] = malloc(bytes ? bytes : 1);
            if (!j->host[k]) {
                pmx_job_failf(job, PM_STATUS_OUT_OF_MEMORY, "no host memory for %zu bytes", bytes);
                break;
            }
            if (bytes) s = pm_download(ctx, j->host[k], j->out[k], bytes);
            if (s != PM_STATUS_OK) goto fail;
        }
        free_outs(j);
    }
    pm_free(ctx, j->in_ctx);
    j->in_ctx = NULL;
    return;
fail:
    pmx_job_fail(job, s);
    pm_free(ctx, j->in_ctx);
    j->in_ctx = NULL;
}

static void prim_discard(pmx_job *job)
{
    prim_job *j = (prim_job *)job;
    free_outs(j);
    for (int k = 0; k < 2; k++) {
        free(j->host[k]);
        j->host[k] = NULL;
    }
    if (j->op == P_HP_BUILD && j->hp) {
        pm_histopyramid_destroy(job->ctx->ctx, j->hp);
        j->hp = NULL;
    }
}

static void prim_job_free(pmx_ctx *c, void *arg)
{
    prim_job *j = arg;
    j->base.ctx = c;
    prim_discard(&j->base);
    free(j);
}

/* Reads the input: its dtype must be `typenum` (bool counts as uint8),
 * C-contiguous (any shape, read flat) unless allow_rows. */
static int input(PyObject *o, pmx_ctx *c, int typenum, const char *what, pmx_view *v)
{
    if (pmx_view_get(o, v) < 0) return -1;
    int t = v->typenum == NPY_BOOL ? NPY_UINT8 : v->typenum;
    if (t != typenum) {
        PyArray_Descr *d = PyArray_DescrFromType(typenum);
        PyErr_Format(PyExc_TypeError, "%s must have dtype %R", what, (PyObject *)d);
        Py_XDECREF(d);
        return -1;
    }
    if (v->mem == PMX_MEM_CUDA && c->device != PM_DEVICE_CUDA) {
        PyErr_Format(PyExc_ValueError,
                     "%s is a CUDA array: it needs a CUDA context (device='cuda')", what);
        return -1;
    }
    return 0;
}

static int need_contiguous(const pmx_view *v, const char *what)
{
    if (pmx_view_c_contiguous(v)) return 0;
    PyErr_Format(PyExc_ValueError, "%s must be C-contiguous", what);
    return -1;
}

static prim_job *new_job(int op, pmx_ctx *c, const pmx_view *v, size_t elem)
{
    prim_job *j = calloc(1, sizeof *j);
    if (!j) {
        PyErr_NoMemory();
        return NULL;
    }
    j->base.run = prim_run;
    j->base.discard = prim_discard;
    j->base.ctx = c;
    j->op = op;
    if (v) {
        j->in = v->data;
        j->n = (size_t)pmx_view_size(v);
        j->elem = elem;
        j->upload = v->mem == PMX_MEM_HOST && c->device == PM_DEVICE_CUDA;
    }
    return j;
}

/* Runs the job; returns 0, or -1 with an exception (the job is then freed
 * or handed over). On success the caller owns j. */
static int run(pmx_ctx *c, prim_job **jp, pmx_view *v)
{
    prim_job *j = *jp;
    if (v && v->keep) {
        Py_INCREF(v->keep);
        j->base.keep[0] = v->keep;
    }
    if (v) pmx_job_adopt_view(&j->base, v);
    int r = pmx_run(c, &j->base, j->n);
    if (r == -2) {
        *jp = NULL;
        return -1;
    }
    pmx_job_release_views(&j->base);
    Py_CLEAR(j->base.keep[0]);
    Py_CLEAR(j->base.keep[1]);
    if (r == -1) {
        free(j);
        *jp = NULL;
        return -1;
    }
    if (j->base.status != PM_STATUS_OK) {
        pmx_raise_job(&j->base);
        pmx_ctx_defer(c, prim_job_free, j);
        *jp = NULL;
        return -1;
    }
    return 0;
}

/* Output k of a finished job as an array (host or context memory). */
static PyObject *result(prim_job *j, pmx_ctx *c, int k, int typenum, Py_ssize_t count,
                        int device_out)
{
    pmx_OwnerObject *o;
    void *ptr;
    if (j->host[k]) {
        o = pmx_owner_new(NULL, PMX_OWN_MALLOC);
        ptr = j->host[k];
        if (o) {
            o->ptr = ptr;
            j->host[k] = NULL;
        }
        device_out = 0;
    } else {
        o = pmx_owner_new(c, PMX_OWN_ALLOC);
        ptr = j->out[k];
        if (o) {
            o->ptr = ptr;
            j->out[k] = NULL;
        }
    }
    if (!o) return NULL;
    PyObject *a = pmx_result_array((PyObject *)o, c, device_out, ptr, typenum, 1, &count);
    Py_DECREF(o);
    return a;
}

static void finish(pmx_ctx *c, prim_job *j) { pmx_ctx_defer(c, prim_job_free, j); }

static int out_flag(pmx_ctx *c, int input_on_device, PyObject *output, int *device_out,
                    int *host_copy)
{
    /* output: None (where the input is), 'host' or 'device'. */
    int dev = input_on_device;
    if (output != Py_None) {
        const char *s = PyUnicode_Check(output) ? PyUnicode_AsUTF8(output) : NULL;
        if (!s || (strcmp(s, "host") && strcmp(s, "device"))) {
            PyErr_SetString(PyExc_ValueError, "output must be None, 'host' or 'device'");
            return -1;
        }
        dev = !strcmp(s, "device");
    }
    *device_out = dev;
    *host_copy = !dev && c->device == PM_DEVICE_CUDA;
    return 0;
}

static const char *reduce_ops[] = {"sum", "mean", "min", "max", "geomean", NULL};
static const char *compares[] = {"<", "<=", ">", ">=", NULL};

static int pick(PyObject *o, const char **names, const char *what)
{
    const char *s = PyUnicode_Check(o) ? PyUnicode_AsUTF8(o) : NULL;
    for (int i = 0; s && names[i]; i++)
        if (!strcmp(s, names[i])) return i;
    PyErr_Format(PyExc_ValueError, "unknown %s %R", what, o);
    return -1;
}

/* The job of a primitive over the C-contiguous array xo (its view in v,
 * which the caller releases in every case) with an `output` argument:
 * where the result goes (*dev) and out_host_copy set. NULL with an
 * exception on error. */
static prim_job *array_job(int op, pmx_ctx *c, PyObject *xo, int type, const char *what,
                           size_t elem, PyObject *outo, pmx_view *v, int *dev)
{
    int copy;
    if (input(xo, c, type, what, v) < 0 || need_contiguous(v, what) < 0 ||
        out_flag(c, v->mem == PMX_MEM_CUDA, outo, dev, &copy) < 0)
        return NULL;
    prim_job *j = new_job(op, c, v, elem);
    if (j) j->out_host_copy = copy;
    return j;
}

/* reduce(context, x, op) -> float */
PyObject *pmx_reduce(PyObject *self, PyObject *args, PyObject *kw)
{
    (void)self;
    static char *kwlist[] = {"context", "x", "op", NULL};
    PyObject *ctxo, *xo, *opo;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OOO", kwlist, &ctxo, &xo, &opo)) return NULL;
    pmx_ctx *c = pmx_ctx_from(ctxo);
    if (!c) return NULL;
    int op = pick(opo, reduce_ops, "reduction");
    if (op < 0) return NULL;
    pmx_view v;
    if (input(xo, c, NPY_FLOAT32, "x", &v) < 0) {
        pmx_view_release(&v);
        return NULL;
    }
    PyObject *res = NULL;
    prim_job *j = new_job(P_REDUCE, c, &v, sizeof(float));
    if (!j) goto out;
    j->rop = op;
    j->height = 1;
    if (!pmx_view_c_contiguous(&v)) {
        /* A 2-d array with padded rows: pm_reduce_image_f32 reads it in place. */
        if (v.ndim != 2 || v.strides[1] != 4 || v.strides[0] % 4 || v.strides[0] < 4 * v.shape[1]) {
            free(j);
            PyErr_SetString(PyExc_ValueError,
                            "x must be C-contiguous, or 2-d with unit-stride rows");
            goto out;
        }
        j->width = (size_t)v.shape[1];
        j->height = (size_t)v.shape[0];
        j->row_stride = (size_t)(v.strides[0] / 4);
        j->n = j->height ? (j->height - 1) * j->row_stride + j->width : 0;
    }
    if (run(c, &j, &v) < 0) goto out;
    res = PyFloat_FromDouble(j->result);
    finish(c, j);
out:
    pmx_view_release(&v);
    return res;
}

/* scan(context, x, output) -> (exclusive prefix sums uint32, total) */
PyObject *pmx_scan(PyObject *self, PyObject *args, PyObject *kw)
{
    (void)self;
    static char *kwlist[] = {"context", "x", "output", NULL};
    PyObject *ctxo, *xo, *outo = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OO|O", kwlist, &ctxo, &xo, &outo)) return NULL;
    pmx_ctx *c = pmx_ctx_from(ctxo);
    if (!c) return NULL;
    pmx_view v;
    PyObject *res = NULL;
    int dev;
    prim_job *j = array_job(P_SCAN, c, xo, NPY_UINT32, "x", 4, outo, &v, &dev);
    if (!j) goto out;
    j->out_elem[0] = 4;
    if (run(c, &j, &v) < 0) goto out;
    PyObject *a = result(j, c, 0, NPY_UINT32, (Py_ssize_t)j->n, dev);
    if (a) res = Py_BuildValue("(NK)", a, (unsigned long long)j->total);
    finish(c, j);
out:
    pmx_view_release(&v);
    return res;
}

/* filter(context, x, cmp, threshold, horn, output) -> float32 array */
PyObject *pmx_filter(PyObject *self, PyObject *args, PyObject *kw)
{
    (void)self;
    static char *kwlist[] = {"context", "x", "cmp", "threshold", "horn", "output", NULL};
    PyObject *ctxo, *xo, *cmpo, *outo = Py_None;
    double threshold;
    int horn = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OOOd|pO", kwlist, &ctxo, &xo, &cmpo, &threshold,
                                     &horn, &outo))
        return NULL;
    pmx_ctx *c = pmx_ctx_from(ctxo);
    if (!c) return NULL;
    int cmp = pick(cmpo, compares, "comparison");
    if (cmp < 0) return NULL;
    pmx_view v;
    PyObject *res = NULL;
    int dev;
    prim_job *j = array_job(P_FILTER, c, xo, NPY_FLOAT32, "x", 4, outo, &v, &dev);
    if (!j) goto out;
    j->cmp = cmp;
    j->horn = horn;
    j->threshold = (float)threshold;
    j->out_elem[0] = 4;
    if (run(c, &j, &v) < 0) goto out;
    res = result(j, c, 0, NPY_FLOAT32, (Py_ssize_t)j->count, dev);
    finish(c, j);
out:
    pmx_view_release(&v);
    return res;
}

/* compact(context, flags, output) -> uint64 indices */
PyObject *pmx_compact(PyObject *self, PyObject *args, PyObject *kw)
{
    (void)self;
    static char *kwlist[] = {"context", "flags", "output", NULL};
    PyObject *ctxo, *xo, *outo = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OO|O", kwlist, &ctxo, &xo, &outo)) return NULL;
    pmx_ctx *c = pmx_ctx_from(ctxo);
    if (!c) return NULL;
    pmx_view v;
    PyObject *res = NULL;
    int dev;
    prim_job *j = array_job(P_COMPACT, c, xo, NPY_UINT8, "flags", 1, outo, &v, &dev);
    if (!j) goto out;
    j->out_elem[0] = 8;
    if (run(c, &j, &v) < 0) goto out;
    res = result(j, c, 0, NPY_UINT64, (Py_ssize_t)j->count, dev);
    finish(c, j);
out:
    pmx_view_release(&v);
    return res;
}

/* expand(context, counts, output) -> (source uint64, local uint32) */
PyObject *pmx_expand(PyObject *self, PyObject *args, PyObject *kw)
{
    (void)self;
    static char *kwlist[] = {"context", "counts", "output", NULL};
    PyObject *ctxo, *xo, *outo = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OO|O", kwlist, &ctxo, &xo, &outo)) return NULL;
    pmx_ctx *c = pmx_ctx_from(ctxo);
    if (!c) return NULL;
    pmx_view v;
    PyObject *res = NULL;
    int dev;
    prim_job *j = array_job(P_EXPAND, c, xo, NPY_UINT32, "counts", 4, outo, &v, &dev);
    if (!j) goto out;
    j->out_elem[0] = 8;
    j->out_elem[1] = 4;
    if (run(c, &j, &v) < 0) goto out;
    PyObject *a = result(j, c, 0, NPY_UINT64, (Py_ssize_t)j->count, dev);
    PyObject *b = a ? result(j, c, 1, NPY_UINT32, (Py_ssize_t)j->count, dev) : NULL;
    if (a && b)
        res = Py_BuildValue("(NN)", a, b);
    else {
        Py_XDECREF(a);
        Py_XDECREF(b);
    }
    finish(c, j);
out:
    pmx_view_release(&v);
    return res;
}

/* ------------------------------------------------------------------------ */
/* HistoPyramid                                                               */
/* ------------------------------------------------------------------------ */

typedef struct {
    PyObject_HEAD PyObject *owner; /* PMX_OWN_HP */
    pmx_ctx *c;
    uint64_t total;
    Py_ssize_t n;
    int on_device; /* built from a CUDA array: traverse() answers in device memory */
} pmx_HistoPyramidObject;

/* histopyramid(context, counts) -> HistoPyramid */
PyObject *pmx_histopyramid(PyObject *self, PyObject *args, PyObject *kw)
{
    (void)self;
    static char *kwlist[] = {"context", "counts", NULL};
    PyObject *ctxo, *xo;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OO", kwlist, &ctxo, &xo)) return NULL;
    pmx_ctx *c = pmx_ctx_from(ctxo);
    if (!c) return NULL;
    pmx_view v;
    PyObject *res = NULL;
    if (input(xo, c, NPY_UINT32, "counts", &v) < 0 || need_contiguous(&v, "counts") < 0) goto out;
    prim_job *j = new_job(P_HP_BUILD, c, &v, 4);
    if (!j) goto out;
    if (run(c, &j, &v) < 0) goto out;
    pmx_OwnerObject *o = pmx_owner_new(c, PMX_OWN_HP);
    pmx_HistoPyramidObject *h =
        o ? PyObject_New(pmx_HistoPyramidObject, &pmx_HistoPyramidType) : NULL;
    if (o && h) {
        o->ptr = j->hp;
        j->hp = NULL;
        h->owner = (PyObject *)o;
        h->c = c;
        h->total = j->total;
        h->n = (Py_ssize_t)j->n;
        h->on_device = v.mem == PMX_MEM_CUDA;
        res = (PyObject *)h;
    } else {
        Py_XDECREF(o);
    }
    finish(c, j);
out:
    pmx_view_release(&v);
    return res;
}

static void HP_dealloc(pmx_HistoPyramidObject *self)
{
    Py_XDECREF(self->owner);
    PyObject_Free(self);
}

static PyObject *HP_traverse(pmx_HistoPyramidObject *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"first_key", "num_keys", "output", NULL};
    unsigned long long first = 0;
    PyObject *numo = Py_None, *outo = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|KOO", kwlist, &first, &numo, &outo)) return NULL;
    unsigned long long num;
    if (numo == Py_None) {
        num = first < self->total ? self->total - first : 0;
    } else {
        num = PyLong_AsUnsignedLongLong(numo);
        if (PyErr_Occurred()) return NULL;
    }
    int dev, copy;
    if (out_flag(self->c, self->on_device, outo, &dev, &copy) < 0) return NULL;
    prim_job *j = new_job(P_HP_TRAVERSE, self->c, NULL, 0);
    if (!j) return NULL;
    j->hp = ((pmx_OwnerObject *)self->owner)->ptr;
    j->first_key = first;
    j->n = (size_t)num;
    j->out_elem[0] = 8;
    j->out_elem[1] = 4;
    j->out_host_copy = copy;
    j->base.keep[1] = (Py_INCREF(self), (PyObject *)self);
    if (run(self->c, &j, NULL) < 0) return NULL;
    PyObject *a = result(j, self->c, 0, NPY_UINT64, (Py_ssize_t)num, dev);
    PyObject *b = a ? result(j, self->c, 1, NPY_UINT32, (Py_ssize_t)num, dev) : NULL;
    PyObject *res = a && b ? Py_BuildValue("(NN)", a, b) : NULL;
    if (!res) {
        Py_XDECREF(a);
        Py_XDECREF(b);
    }
    j->hp = NULL;
    finish(self->c, j);
    return res;
}

static PyObject *HP_get_total(pmx_HistoPyramidObject *self, void *closure)
{
    (void)closure;
    return PyLong_FromUnsignedLongLong(self->total);
}

static Py_ssize_t HP_len(pmx_HistoPyramidObject *self) { return self->n; }

static PyMethodDef HP_methods[] = {
    {"traverse", (PyCFunction)(void (*)(void))HP_traverse, METH_VARARGS | METH_KEYWORDS,
     "traverse(first_key=0, num_keys=None, output=None)\n--\n\n"
     "(source, local) for the keys first_key .. first_key + num_keys - 1\n"
     "(num_keys=None: up to the total), as pyramesh.expand numbers them:\n"
     "key k is local output local[k] of input source[k]. output=None answers\n"
     "where the counts were (device memory for a CUDA array)."},
    {NULL, NULL, 0, NULL}};

static PyGetSetDef HP_getset[] = {
    {"total", (getter)HP_get_total, NULL, "The sum of the counts (number of keys).", NULL},
    {NULL, NULL, NULL, NULL, NULL}};

static PySequenceMethods HP_as_sequence = {.sq_length = (lenfunc)HP_len};

PyTypeObject pmx_HistoPyramidType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "pyramesh.HistoPyramid",
    .tp_basicsize = sizeof(pmx_HistoPyramidObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A HistoPyramid built over per-input output counts (pyramesh.histopyramid):\n"
              "build once, traverse any range of output keys. len() is the number of inputs.",
    .tp_dealloc = (destructor)HP_dealloc,
    .tp_methods = HP_methods,
    .tp_getset = HP_getset,
    .tp_as_sequence = &HP_as_sequence,
};
