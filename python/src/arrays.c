/* Arrays in and out: views of NumPy arrays, __cuda_array_interface__ and
 * DLPack producers (read in place), the owners that free library memory
 * when the last array over it goes, and ContextArray, an array in context
 * memory (device memory on a CUDA context) that exposes
 * __cuda_array_interface__ (CUDA) or __array_interface__ (CPU) and DLPack. */
#include "pmx.h"

#include <string.h>

#ifdef PM_HAVE_CUDA
/* Two CUDA runtime calls (the library links the runtime): declared here so
 * that the module includes no CUDA header. cudaError_t is an enum and
 * cudaStream_t a pointer. */
extern int cudaStreamSynchronize(void *stream);
#endif

/* ------------------------------------------------------------------------ */
/* DLPack (https://dmlc.github.io/dlpack), the unversioned ABI              */
/* ------------------------------------------------------------------------ */

enum { kDLCPU = 1, kDLCUDA = 2, kDLCUDAHost = 3, kDLCUDAManaged = 13 };
enum { kDLInt = 0, kDLUInt = 1, kDLFloat = 2, kDLBool = 6 };

typedef struct {
    int32_t device_type;
    int32_t device_id;
} DLDevice;

typedef struct {
    uint8_t code;
    uint8_t bits;
    uint16_t lanes;
} DLDataType;

typedef struct {
    void *data;
    DLDevice device;
    int32_t ndim;
    DLDataType dtype;
    int64_t *shape;
    int64_t *strides;
    uint64_t byte_offset;
} DLTensor;

typedef struct DLManagedTensor {
    DLTensor dl_tensor;
    void *manager_ctx;
    void (*deleter)(struct DLManagedTensor *self);
} DLManagedTensor;

static int dl_typenum(DLDataType t)
{
    if (t.lanes != 1) return -1;
    switch (t.code) {
    case kDLInt:
        return t.bits == 8    ? NPY_INT8
               : t.bits == 16 ? NPY_INT16
               : t.bits == 32 ? NPY_INT32
               : t.bits == 64 ? NPY_INT64
                              : -1;
    case kDLUInt:
        return t.bits == 8    ? NPY_UINT8
               : t.bits == 16 ? NPY_UINT16
               : t.bits == 32 ? NPY_UINT32
               : t.bits == 64 ? NPY_UINT64
                              : -1;
    case kDLFloat:
        return t.bits == 16   ? NPY_FLOAT16
               : t.bits == 32 ? NPY_FLOAT32
               : t.bits == 64 ? NPY_FLOAT64
                              : -1;
    case kDLBool: return t.bits == 8 ? NPY_BOOL : -1;
    default: return -1;
    }
}

static int typenum_dl(int typenum, DLDataType *t)
{
    t->lanes = 1;
    switch (typenum) {
    case NPY_UINT8: *t = (DLDataType){kDLUInt, 8, 1}; return 0;
    case NPY_UINT16: *t = (DLDataType){kDLUInt, 16, 1}; return 0;
    case NPY_UINT32: *t = (DLDataType){kDLUInt, 32, 1}; return 0;
    case NPY_UINT64: *t = (DLDataType){kDLUInt, 64, 1}; return 0;
    case NPY_INT16: *t = (DLDataType){kDLInt, 16, 1}; return 0;
    case NPY_INT32: *t = (DLDataType){kDLInt, 32, 1}; return 0;
    case NPY_INT64: *t = (DLDataType){kDLInt, 64, 1}; return 0;
    case NPY_FLOAT32: *t = (DLDataType){kDLFloat, 32, 1}; return 0;
    case NPY_FLOAT64: *t = (DLDataType){kDLFloat, 64, 1}; return 0;
    default: return -1;
    }
}

/* ------------------------------------------------------------------------ */
/* Views                                                                      */
/* ------------------------------------------------------------------------ */

Py_ssize_t pmx_view_size(const pmx_view *v)
{
    Py_ssize_t n = 1;
    for (int i = 0; i < v->ndim; i++)
        n *= v->shape[i];
    return n;
}

int pmx_view_c_contiguous(const pmx_view *v)
{
    if (pmx_view_size(v) == 0) return 1;
    Py_ssize_t expect = v->itemsize;
    for (int i = v->ndim - 1; i >= 0; i--) {
        if (v->shape[i] != 1 && v->strides[i] != expect) return 0;
        expect *= v->shape[i];
    }
    return 1;
}

static int set_dims(pmx_view *v, int ndim)
{
    if (ndim > PMX_MAXDIM) {
        PyErr_Format(PyExc_ValueError, "pyramesh: arrays of at most %d dimensions, not %d",
                     PMX_MAXDIM, ndim);
        return -1;
    }
    v->ndim = ndim;
    return 0;
}

static int view_numpy(PyArrayObject *a, pmx_view *v)
{
    if (set_dims(v, PyArray_NDIM(a)) < 0) return -1;
    v->mem = PMX_MEM_HOST;
    v->device_id = -1;
    v->data = PyArray_BYTES(a);
    v->typenum = PyArray_TYPE(a);
    v->itemsize = (int)PyArray_ITEMSIZE(a);
    for (int i = 0; i < v->ndim; i++) {
        v->shape[i] = PyArray_DIM(a, i);
        v->strides[i] = PyArray_STRIDE(a, i);
    }
    v->keep = (PyObject *)a;
    return 0;
}

static int tuple_of_ssize(PyObject *t, Py_ssize_t *out, int n, const char *what)
{
    if (!PyTuple_Check(t) || PyTuple_GET_SIZE(t) != n) {
        PyErr_Format(PyExc_ValueError, "__cuda_array_interface__: bad %s", what);
        return -1;
    }
    for (int i = 0; i < n; i++) {
        out[i] = PyLong_AsSsize_t(PyTuple_GET_ITEM(t, i));
        if (out[i] == -1 && PyErr_Occurred()) return -1;
    }
    return 0;
}

static int view_cai(PyObject *cai, pmx_view *v)
{
    if (!PyDict_Check(cai)) {
        PyErr_SetString(PyExc_TypeError, "__cuda_array_interface__ is not a dict");
        return -1;
    }
    PyObject *shape = PyDict_GetItemString(cai, "shape");
    PyObject *typestr = PyDict_GetItemString(cai, "typestr");
    PyObject *data = PyDict_GetItemString(cai, "data");
    PyObject *strides = PyDict_GetItemString(cai, "strides");
    PyObject *mask = PyDict_GetItemString(cai, "mask");
    PyObject *stream = PyDict_GetItemString(cai, "stream");
    if (!shape || !typestr || !data || !PyTuple_Check(shape)) {
        PyErr_SetString(PyExc_ValueError, "__cuda_array_interface__ lacks shape, typestr or data");
        return -1;
    }
    if (mask && mask != Py_None) {
        PyErr_SetString(PyExc_ValueError, "pyramesh: masked CUDA arrays are not supported");
        return -1;
    }
    if (set_dims(v, (int)PyTuple_GET_SIZE(shape)) < 0) return -1;
    if (tuple_of_ssize(shape, v->shape, v->ndim, "shape") < 0) return -1;
    PyArray_Descr *d = NULL;
    if (!PyArray_DescrConverter(typestr, &d)) return -1;
    if (!PyArray_ISNBO(d->byteorder)) {
        Py_DECREF(d);
        PyErr_SetString(PyExc_ValueError, "pyramesh: CUDA array in non-native byte order");
        return -1;
    }
    v->typenum = d->type_num;
    v->itemsize = (int)PyDataType_ELSIZE(d);
    Py_DECREF(d);
    if (!PyTuple_Check(data) || PyTuple_GET_SIZE(data) != 2) {
        PyErr_SetString(PyExc_ValueError, "__cuda_array_interface__: data must be (ptr, readonly)");
        return -1;
    }
    uintptr_t ptr = (uintptr_t)PyLong_AsUnsignedLongLong(PyTuple_GET_ITEM(data, 0));
    if (PyErr_Occurred()) return -1;
    v->data = (char *)ptr;
    if (strides && strides != Py_None) {
        if (tuple_of_ssize(strides, v->strides, v->ndim, "strides") < 0) return -1;
    } else {
        Py_ssize_t s = v->itemsize;
        for (int i = v->ndim - 1; i >= 0; i--) {
            v->strides[i] = s;
            s *= v->shape[i];
        }
    }
    v->mem = PMX_MEM_CUDA;
    v->device_id = -1;
    if (stream && stream != Py_None) {
        /* Version 3: the producer's work on `stream` must finish first. */
        unsigned long long h = PyLong_AsUnsignedLongLong(stream);
        if (PyErr_Occurred()) return -1;
#ifdef PM_HAVE_CUDA
        int e;
        Py_BEGIN_ALLOW_THREADS e = cudaStreamSynchronize((void *)(uintptr_t)h);
        Py_END_ALLOW_THREADS if (e != 0)
        {
            PyErr_Format(PyExc_RuntimeError,
                         "cudaStreamSynchronize on the array's stream failed (%d)", e);
            return -1;
        }
#else
        (void)h;
#endif
    }
    return 0;
}

static void used_capsule_destructor(PyObject *cap) { (void)cap; }

static int view_dlpack(PyObject *obj, pmx_view *v)
{
    PyObject *dev = PyObject_CallMethod(obj, "__dlpack_device__", NULL);
    if (!dev) return -1;
    long dtype = -1, did = 0;
    if (PyTuple_Check(dev) && PyTuple_GET_SIZE(dev) == 2) {
        dtype = PyLong_AsLong(PyTuple_GET_ITEM(dev, 0));
        did = PyLong_AsLong(PyTuple_GET_ITEM(dev, 1));
    }
    Py_DECREF(dev);
    if (PyErr_Occurred()) return -1;
    int cuda = dtype == kDLCUDA || dtype == kDLCUDAManaged;
    if (!cuda && dtype != kDLCPU && dtype != kDLCUDAHost) {
        PyErr_Format(PyExc_ValueError, "pyramesh: DLPack device type %ld is not supported", dtype);
        return -1;
    }
    PyObject *cap;
    if (cuda) {
        /* stream=1: the producer orders its work before the legacy default
         * stream, which is then waited for. */
        PyObject *kw = Py_BuildValue("{s:i}", "stream", 1);
        PyObject *fn = PyObject_GetAttrString(obj, "__dlpack__");
        PyObject *empty = PyTuple_New(0);
        cap = kw && fn && empty ? PyObject_Call(fn, empty, kw) : NULL;
        Py_XDECREF(kw);
        Py_XDECREF(fn);
        Py_XDECREF(empty);
    } else {
        cap = PyObject_CallMethod(obj, "__dlpack__", NULL);
    }
    if (!cap) return -1;
    DLManagedTensor *t = PyCapsule_GetPointer(cap, "dltensor");
    if (!t) {
        Py_DECREF(cap);
        return -1;
    }
    if (PyCapsule_SetName(cap, "used_dltensor") < 0 ||
        PyCapsule_SetDestructor(cap, used_capsule_destructor) < 0) {
        Py_DECREF(cap);
        return -1;
    }
    v->dl = t;
    v->keep = cap;
    const DLTensor *d = &t->dl_tensor;
    if (set_dims(v, d->ndim) < 0) return -1;
    v->typenum = dl_typenum(d->dtype);
    if (v->typenum < 0) {
        PyErr_Format(PyExc_ValueError,
                     "pyramesh: DLPack dtype (code %d, %d bits, %d lanes) is not supported",
                     d->dtype.code, d->dtype.bits, d->dtype.lanes);
        return -1;
    }
    v->itemsize = d->dtype.bits / 8;
    v->data = (char *)d->data + d->byte_offset;
    Py_ssize_t s = v->itemsize;
    for (int i = v->ndim - 1; i >= 0; i--) {
        v->shape[i] = (Py_ssize_t)d->shape[i];
        v->strides[i] = d->strides ? (Py_ssize_t)d->strides[i] * v->itemsize : s;
        s *= v->shape[i];
    }
    v->mem = cuda ? PMX_MEM_CUDA : PMX_MEM_HOST;
    v->device_id = cuda ? (int)did : -1;
#ifdef PM_HAVE_CUDA
    if (cuda) {
        int e;
        Py_BEGIN_ALLOW_THREADS e = cudaStreamSynchronize((void *)(uintptr_t)1);
        Py_END_ALLOW_THREADS if (e != 0)
        {
            PyErr_Format(PyExc_RuntimeError, "cudaStreamSynchronize (legacy stream) failed (%d)",
                         e);
            return -1;
        }
    }
#endif
    return 0;
}

int pmx_view_get(PyObject *obj, pmx_view *v)
{
    memset(v, 0, sizeof *v);
    if (PyArray_Check(obj)) {
        PyArrayObject *a = (PyArrayObject *)obj;
        if (PyArray_ISNOTSWAPPED(a) && PyArray_ISALIGNED(a)) {
            Py_INCREF(obj);
            return view_numpy(a, v);
        }
    } else if (PyObject_HasAttrString(obj, "__cuda_array_interface__")) {
        PyObject *cai = PyObject_GetAttrString(obj, "__cuda_array_interface__");
        if (!cai) return -1;
        int r = view_cai(cai, v);
        Py_DECREF(cai);
        if (r < 0) return -1;
        Py_INCREF(obj);
        v->keep = obj;
        return 0;
    } else if (PyObject_HasAttrString(obj, "__dlpack__") &&
               PyObject_HasAttrString(obj, "__dlpack_device__")) {
        if (view_dlpack(obj, v) < 0) {
            pmx_view_release(v);
            return -1;
        }
        return 0;
    }
    PyObject *a = PyArray_FromAny(obj, NULL, 0, 0, NPY_ARRAY_ALIGNED | NPY_ARRAY_NOTSWAPPED, NULL);
    if (!a) return -1;
    return view_numpy((PyArrayObject *)a, v);
}

void pmx_view_release(pmx_view *v)
{
    if (v->dl) {
        DLManagedTensor *t = v->dl;
        v->dl = NULL;
        if (t->deleter) t->deleter(t);
    }
    Py_CLEAR(v->keep);
}

void pmx_job_adopt_view(pmx_job *job, pmx_view *v)
{
    if (!v->dl) return;
    for (int i = 0; i < 2; i++)
        if (!job->dl[i]) {
            job->dl[i] = v->dl;
            v->dl = NULL;
            return;
        }
}

void pmx_job_release_views(pmx_job *job)
{
    for (int i = 0; i < 2; i++) {
        DLManagedTensor *t = job->dl[i];
        job->dl[i] = NULL;
        if (t && t->deleter) t->deleter(t);
    }
}

/* ------------------------------------------------------------------------ */
/* Owners                                                                     */
/* ------------------------------------------------------------------------ */

typedef struct {
    int kind;
    void *ptr;
    pm_mesh mesh;
    pm_field field;
} owned;

static void free_owned(pmx_ctx *c, void *arg)
{
    owned *o = arg;
    switch (o->kind) {
    case PMX_OWN_MESH: pm_mesh_free(c->ctx, &o->mesh); break;
    case PMX_OWN_ALLOC: pm_free(c->ctx, o->ptr); break;
    case PMX_OWN_FIELD: pm_field_free(c->ctx, &o->field); break;
    case PMX_OWN_HP: pm_histopyramid_destroy(c->ctx, o->ptr); break;
    default: break;
    }
    free(o);
}

pmx_OwnerObject *pmx_owner_new(pmx_ctx *c, int kind)
{
    pmx_OwnerObject *o = PyObject_New(pmx_OwnerObject, &pmx_OwnerType);
    if (!o) return NULL;
    o->c = c;
    o->kind = kind;
    o->ptr = NULL;
    memset(&o->mesh, 0, sizeof o->mesh);
    memset(&o->field, 0, sizeof o->field);
    if (c) pmx_ctx_ref(c);
    return o;
}

static void Owner_dealloc(pmx_OwnerObject *self)
{
    if (self->kind == PMX_OWN_MALLOC) {
        free(self->ptr);
    } else if (self->c) {
        owned *o = malloc(sizeof *o);
        if (o) {
            o->kind = self->kind;
            o->ptr = self->ptr;
            o->mesh = self->mesh;
            o->field = self->field;
            /* Context memory is freed when no other thread uses the context. */
            pmx_ctx_defer(self->c, free_owned, o);
        }
    }
    if (self->c) pmx_ctx_unref(self->c);
    PyObject_Free(self);
}

PyTypeObject pmx_OwnerType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "pyramesh._Owner",
    .tp_basicsize = sizeof(pmx_OwnerObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Internal: keeps memory from the library alive while arrays use it.",
    .tp_dealloc = (destructor)Owner_dealloc,
};

PyObject *pmx_host_array(PyObject *owner, void *ptr, int typenum, int ndim, const npy_intp *shape)
{
    npy_intp dims[PMX_MAXDIM];
    for (int i = 0; i < ndim; i++)
        dims[i] = shape[i];
    PyObject *a = PyArray_SimpleNewFromData(ndim, dims, typenum, ptr);
    if (!a) return NULL;
    Py_INCREF(owner);
    if (PyArray_SetBaseObject((PyArrayObject *)a, owner) < 0) {
        Py_DECREF(a);
        return NULL;
    }
    return a;
}

/* ------------------------------------------------------------------------ */
/* ContextArray                                                               */
/* ------------------------------------------------------------------------ */

typedef struct {
    PyObject_HEAD PyObject *owner;
    pmx_ctx *c; /* kept alive by owner */
    char *ptr;
    int typenum, itemsize, ndim;
    Py_ssize_t shape[PMX_MAXDIM];
} pmx_ContextArrayObject;

PyObject *pmx_context_array(PyObject *owner, pmx_ctx *c, void *ptr, int typenum, int ndim,
                            const Py_ssize_t *shape)
{
    pmx_ContextArrayObject *a = PyObject_New(pmx_ContextArrayObject, &pmx_ContextArrayType);
    if (!a) return NULL;
    Py_INCREF(owner);
    a->owner = owner;
    a->c = c;
    a->ptr = ptr;
    a->typenum = typenum;
    PyArray_Descr *d = PyArray_DescrFromType(typenum);
    a->itemsize = d ? (int)PyDataType_ELSIZE(d) : 1;
    Py_XDECREF(d);
    a->ndim = ndim;
    for (int i = 0; i < ndim; i++)
        a->shape[i] = shape[i];
    return (PyObject *)a;
}

PyObject *pmx_result_array(PyObject *owner, pmx_ctx *c, int device_out, void *ptr, int typenum,
                           int ndim, const Py_ssize_t *shape)
{
    if (device_out) return pmx_context_array(owner, c, ptr, typenum, ndim, shape);
    npy_intp dims[PMX_MAXDIM];
    for (int i = 0; i < ndim; i++)
        dims[i] = shape[i];
    return pmx_host_array(owner, ptr, typenum, ndim, dims);
}

static void CA_dealloc(pmx_ContextArrayObject *self)
{
    Py_XDECREF(self->owner);
    PyObject_Free(self);
}

static Py_ssize_t CA_size(const pmx_ContextArrayObject *self)
{
    Py_ssize_t n = 1;
    for (int i = 0; i < self->ndim; i++)
        n *= self->shape[i];
    return n;
}

static int CA_is_cuda(const pmx_ContextArrayObject *self)
{
    return self->c->device == PM_DEVICE_CUDA;
}

static PyObject *shape_tuple(const pmx_ContextArrayObject *self)
{
    PyObject *t = PyTuple_New(self->ndim);
    if (!t) return NULL;
    for (int i = 0; i < self->ndim; i++)
        PyTuple_SET_ITEM(t, i, PyLong_FromSsize_t(self->shape[i]));
    return t;
}

static PyObject *typestr(const pmx_ContextArrayObject *self)
{
    PyArray_Descr *d = PyArray_DescrFromType(self->typenum);
    if (!d) return NULL;
    PyObject *s = PyObject_GetAttrString((PyObject *)d, "str");
    Py_DECREF(d);
    return s;
}

static PyObject *CA_get_cai(pmx_ContextArrayObject *self, void *closure)
{
    (void)closure;
    if (!CA_is_cuda(self)) {
        PyErr_SetString(PyExc_AttributeError,
                        "__cuda_array_interface__: this array is in host memory (a CPU context)");
        return NULL;
    }
    PyObject *shape = shape_tuple(self), *ts = typestr(self);
    if (!shape || !ts) {
        Py_XDECREF(shape);
        Py_XDECREF(ts);
        return NULL;
    }
    /* The library's calls are synchronous: the data is ready, no stream. */
    return Py_BuildValue("{s:N,s:N,s:(KO),s:O,s:i,s:O}", "shape", shape, "typestr", ts, "data",
                         (unsigned long long)(uintptr_t)self->ptr, Py_False, "strides", Py_None,
                         "version", 3, "stream", Py_None);
}

static PyObject *CA_get_ai(pmx_ContextArrayObject *self, void *closure)
{
    (void)closure;
    if (CA_is_cuda(self)) {
        PyErr_SetString(PyExc_AttributeError,
                        "__array_interface__: this array is in CUDA device memory; use get()");
        return NULL;
    }
    PyObject *shape = shape_tuple(self), *ts = typestr(self);
    if (!shape || !ts) {
        Py_XDECREF(shape);
        Py_XDECREF(ts);
        return NULL;
    }
    return Py_BuildValue("{s:N,s:N,s:(KO),s:O,s:i}", "shape", shape, "typestr", ts, "data",
                         (unsigned long long)(uintptr_t)self->ptr, Py_False, "strides", Py_None,
                         "version", 3);
}

static PyObject *CA_get_shape(pmx_ContextArrayObject *self, void *closure)
{
    (void)closure;
    return shape_tuple(self);
}

static PyObject *CA_get_dtype(pmx_ContextArrayObject *self, void *closure)
{
    (void)closure;
    return (PyObject *)PyArray_DescrFromType(self->typenum);
}

static PyObject *CA_get_ptr(pmx_ContextArrayObject *self, void *closure)
{
    (void)closure;
    return PyLong_FromUnsignedLongLong((unsigned long long)(uintptr_t)self->ptr);
}

static PyObject *CA_get_size(pmx_ContextArrayObject *self, void *closure)
{
    (void)closure;
    return PyLong_FromSsize_t(CA_size(self));
}

static PyObject *CA_get_nbytes(pmx_ContextArrayObject *self, void *closure)
{
    (void)closure;
    return PyLong_FromSsize_t(CA_size(self) * self->itemsize);
}

static PyObject *CA_get_ndim(pmx_ContextArrayObject *self, void *closure)
{
    (void)closure;
    return PyLong_FromLong(self->ndim);
}

static PyObject *CA_get_device(pmx_ContextArrayObject *self, void *closure)
{
    (void)closure;
    return PyUnicode_FromString(pm_device_string(self->c->device));
}

typedef struct {
    pmx_job base;
    void *dst;
    const void *src;
    size_t bytes;
} download_job;

static void download_run(pmx_job *job)
{
    download_job *j = (download_job *)job;
    pm_status s = pm_download(job->ctx->ctx, j->dst, j->src, j->bytes);
    if (s != PM_STATUS_OK) pmx_job_fail(job, s);
}

/* A NumPy copy of the array. */
static PyObject *CA_get(pmx_ContextArrayObject *self, PyObject *unused)
{
    (void)unused;
    npy_intp dims[PMX_MAXDIM];
    for (int i = 0; i < self->ndim; i++)
        dims[i] = self->shape[i];
    PyObject *out = PyArray_SimpleNew(self->ndim, dims, self->typenum);
    if (!out) return NULL;
    size_t bytes = (size_t)CA_size(self) * (size_t)self->itemsize;
    if (bytes == 0) return out;
    download_job *j = calloc(1, sizeof *j);
    if (!j) {
        Py_DECREF(out);
        return PyErr_NoMemory();
    }
    j->base.run = download_run;
    j->dst = PyArray_DATA((PyArrayObject *)out);
    j->src = self->ptr;
    j->bytes = bytes;
    /* The job writes into `out` and reads this array: both stay alive. */
    Py_INCREF(out);
    j->base.keep[0] = out;
    Py_INCREF(self);
    j->base.keep[1] = (PyObject *)self;
    int r = pmx_run(self->c, &j->base, bytes / 4);
    if (r == -2) {
        Py_DECREF(out);
        return NULL;
    }
    Py_CLEAR(j->base.keep[0]);
    Py_CLEAR(j->base.keep[1]);
    if (r == -1 || j->base.status != PM_STATUS_OK) {
        if (r == 0) pmx_raise_job(&j->base);
        free(j);
        Py_DECREF(out);
        return NULL;
    }
    free(j);
    return out;
}

static PyObject *CA_array(pmx_ContextArrayObject *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"dtype", "copy", NULL};
    PyObject *dtype = Py_None, *copy = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|OO", kwlist, &dtype, &copy)) return NULL;
    PyObject *a = CA_get(self, NULL);
    if (!a || dtype == Py_None) return a;
    PyObject *r = PyObject_CallMethod(a, "astype", "O", dtype);
    Py_DECREF(a);
    return r;
}

typedef struct {
    DLManagedTensor t;
    int64_t shape[PMX_MAXDIM];
    PyObject *array;
} dl_export;

static void dl_export_deleter(DLManagedTensor *t)
{
    dl_export *e = (dl_export *)t;
    PyGILState_STATE g = PyGILState_Ensure();
    Py_XDECREF(e->array);
    PyGILState_Release(g);
    free(e);
}

static void dl_capsule_destructor(PyObject *cap)
{
    if (!PyCapsule_IsValid(cap, "dltensor")) return; /* consumed */
    DLManagedTensor *t = PyCapsule_GetPointer(cap, "dltensor");
    if (t && t->deleter) t->deleter(t);
}

static PyObject *CA_dlpack(pmx_ContextArrayObject *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"stream", "max_version", "dl_device", "copy", NULL};
    PyObject *stream = Py_None, *maxv = Py_None, *dldev = Py_None, *copy = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|$OOOO", kwlist, &stream, &maxv, &dldev, &copy))
        return NULL;
    /* Our data is ready when the call that made it returned: no stream to
     * order after. Only the unversioned capsule is produced. */
    dl_export *e = calloc(1, sizeof *e);
    if (!e) return PyErr_NoMemory();
    if (typenum_dl(self->typenum, &e->t.dl_tensor.dtype) < 0) {
        free(e);
        PyErr_SetString(PyExc_TypeError, "pyramesh: dtype not exportable through DLPack");
        return NULL;
    }
    e->t.dl_tensor.data = self->ptr;
    e->t.dl_tensor.device.device_type = CA_is_cuda(self) ? kDLCUDA : kDLCPU;
    e->t.dl_tensor.device.device_id = CA_is_cuda(self) ? self->c->cuda_device : 0;
    e->t.dl_tensor.ndim = self->ndim;
    for (int i = 0; i < self->ndim; i++)
        e->shape[i] = self->shape[i];
    e->t.dl_tensor.shape = e->shape;
    e->t.dl_tensor.strides = NULL;
    e->t.dl_tensor.byte_offset = 0;
    e->t.manager_ctx = e;
    e->t.deleter = dl_export_deleter;
    Py_INCREF(self);
    e->array = (PyObject *)self;
    PyObject *cap = PyCapsule_New(&e->t, "dltensor", dl_capsule_destructor);
    if (!cap) {
        Py_DECREF(self);
        free(e);
    }
    return cap;
}

static PyObject *CA_dlpack_device(pmx_ContextArrayObject *self, PyObject *unused)
{
    (void)unused;
    return Py_BuildValue("(ii)", CA_is_cuda(self) ? kDLCUDA : kDLCPU,
                         CA_is_cuda(self) ? self->c->cuda_device : 0);
}

static Py_ssize_t CA_len(pmx_ContextArrayObject *self)
{
    if (self->ndim == 0) {
        PyErr_SetString(PyExc_TypeError, "len() of a 0-d array");
        return -1;
    }
    return self->shape[0];
}

static PyObject *CA_repr(pmx_ContextArrayObject *self)
{
    PyObject *shape = shape_tuple(self);
    PyArray_Descr *d = PyArray_DescrFromType(self->typenum);
    PyObject *r =
        shape && d ? PyUnicode_FromFormat("<pyramesh.ContextArray shape=%R dtype=%R device='%s'>",
                                          shape, (PyObject *)d, pm_device_string(self->c->device))
                   : NULL;
    Py_XDECREF(shape);
    Py_XDECREF(d);
    return r;
}

static PyMethodDef CA_methods[] = {
    {"get", (PyCFunction)CA_get, METH_NOARGS,
     "get()\n--\n\nA NumPy copy of the array (downloaded from the device on CUDA)."},
    {"__array__", (PyCFunction)(void (*)(void))CA_array, METH_VARARGS | METH_KEYWORDS,
     "A NumPy copy (numpy.asarray works on every device)."},
    {"__dlpack__", (PyCFunction)(void (*)(void))CA_dlpack, METH_VARARGS | METH_KEYWORDS,
     "__dlpack__(*, stream=None)\n--\n\nA DLPack capsule over the array (no copy)."},
    {"__dlpack_device__", (PyCFunction)CA_dlpack_device, METH_NOARGS,
     "(device type, device id) as DLPack numbers them."},
    {NULL, NULL, 0, NULL}};

static PyGetSetDef CA_getset[] = {
    {"__cuda_array_interface__", (getter)CA_get_cai, NULL,
     "Version 3 of the CUDA array interface (CUDA contexts only).", NULL},
    {"__array_interface__", (getter)CA_get_ai, NULL,
     "NumPy's array interface (CPU contexts only: the memory is host memory).", NULL},
    {"shape", (getter)CA_get_shape, NULL, "The shape.", NULL},
    {"dtype", (getter)CA_get_dtype, NULL, "The NumPy dtype.", NULL},
    {"ptr", (getter)CA_get_ptr, NULL, "The address of the first element.", NULL},
    {"size", (getter)CA_get_size, NULL, "Number of elements.", NULL},
    {"nbytes", (getter)CA_get_nbytes, NULL, "Number of bytes.", NULL},
    {"ndim", (getter)CA_get_ndim, NULL, "Number of dimensions.", NULL},
    {"device", (getter)CA_get_device, NULL, "'cpu' or 'cuda'.", NULL},
    {NULL, NULL, NULL, NULL, NULL}};

static PySequenceMethods CA_as_sequence = {.sq_length = (lenfunc)CA_len};

PyTypeObject pmx_ContextArrayType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "pyramesh.ContextArray",
    .tp_basicsize = sizeof(pmx_ContextArrayObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "An array in a context's memory: CUDA device memory on a CUDA context\n"
              "(exposes __cuda_array_interface__, so CuPy, Numba and PyTorch read it\n"
              "in place) or host memory on a CPU context (exposes __array_interface__).\n"
              "Both export DLPack. get() copies it into a NumPy array. The memory is\n"
              "freed when the last array over it is gone.",
    .tp_dealloc = (destructor)CA_dealloc,
    .tp_repr = (reprfunc)CA_repr,
    .tp_methods = CA_methods,
    .tp_getset = CA_getset,
    .tp_as_sequence = &CA_as_sequence,
};
