/* The module: exceptions carrying the library's messages, the Context type
 * and the job runner that releases the GIL and keeps KeyboardInterrupt
 * working while the library computes. */
#define PMX_IMPORT_ARRAY_HERE
#include "pmx.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

/* Inputs below this many elements run on the calling thread (with the GIL
 * released): handing them to the worker would cost more than they take. */
#define PMX_INLINE_ELEMENTS ((size_t)1 << 20)
/* How often a waiting caller looks for signals (KeyboardInterrupt). */
#define PMX_SIGNAL_POLL_MS 50

static PyObject *pmx_Error, *pmx_InvalidArgumentError, *pmx_OutOfMemoryError, *pmx_OverflowError,
    *pmx_UnsupportedError, *pmx_DeviceError, *pmx_IOError, *pmx_ParseError;

PyObject *pmx_raise_status(pm_status s, const char *message)
{
    PyObject *type = pmx_Error;
    switch (s) {
    case PM_STATUS_INVALID_ARGUMENT: type = pmx_InvalidArgumentError; break;
    case PM_STATUS_OUT_OF_MEMORY: type = pmx_OutOfMemoryError; break;
    case PM_STATUS_OVERFLOW: type = pmx_OverflowError; break;
    case PM_STATUS_UNSUPPORTED: type = pmx_UnsupportedError; break;
    case PM_STATUS_DEVICE_ERROR: type = pmx_DeviceError; break;
    case PM_STATUS_IO_ERROR: type = pmx_IOError; break;
    case PM_STATUS_PARSE_ERROR: type = pmx_ParseError; break;
    default: break;
    }
    const char *m = message && message[0] ? message : pm_status_string(s);
    PyObject *exc = PyObject_CallFunction(type, "s", m);
    if (!exc) return NULL;
    PyObject *name = PyUnicode_FromString(pm_status_string(s));
    if (name) {
        PyObject_SetAttrString(exc, "status", name);
        Py_DECREF(name);
    }
    PyErr_SetObject(type, exc);
    Py_DECREF(exc);
    return NULL;
}

PyObject *pmx_raise_job(const pmx_job *job) { return pmx_raise_status(job->status, job->message); }

void pmx_job_fail(pmx_job *job, pm_status s)
{
    job->status = s;
    snprintf(job->message, sizeof job->message, "%s", pm_last_error());
}

void pmx_job_failf(pmx_job *job, pm_status s, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    job->status = s;
    vsnprintf(job->message, sizeof job->message, fmt, ap);
    va_end(ap);
}

/* ------------------------------------------------------------------------ */
/* Context lifetime                                                          */
/* ------------------------------------------------------------------------ */

static void run_deferred_locked(pmx_ctx *c)
{
    /* Called with busy set by the caller (the context is ours), mu not held. */
    for (;;) {
        pthread_mutex_lock(&c->mu);
        pmx_deferred *d = c->deferred;
        if (d) c->deferred = d->next;
        pthread_mutex_unlock(&c->mu);
        if (!d) return;
        d->fn(c, d->arg);
        free(d);
    }
}

static void ctx_destroy(pmx_ctx *c)
{
    run_deferred_locked(c);
    pm_context_destroy(c->ctx);
    pthread_mutex_destroy(&c->mu);
    pthread_cond_destroy(&c->cv);
    free(c);
}

void pmx_ctx_ref(pmx_ctx *c)
{
    pthread_mutex_lock(&c->mu);
    c->refs++;
    pthread_mutex_unlock(&c->mu);
}

void pmx_ctx_unref(pmx_ctx *c)
{
    pthread_mutex_lock(&c->mu);
    int last = --c->refs == 0;
    if (last && c->worker_started) {
        /* The worker destroys the context once its job (if any) is done. */
        c->stop = 1;
        pthread_cond_broadcast(&c->cv);
        pthread_mutex_unlock(&c->mu);
        return;
    }
    pthread_mutex_unlock(&c->mu);
    if (last) ctx_destroy(c);
}

void pmx_ctx_defer(pmx_ctx *c, void (*fn)(pmx_ctx *, void *), void *arg)
{
    pthread_mutex_lock(&c->mu);
    if (!c->busy) {
        c->busy = 1;
        pthread_mutex_unlock(&c->mu);
        fn(c, arg);
        run_deferred_locked(c);
        pthread_mutex_lock(&c->mu);
        c->busy = 0;
        pthread_cond_broadcast(&c->cv);
        pthread_mutex_unlock(&c->mu);
        return;
    }
    pmx_deferred *d = malloc(sizeof *d);
    if (!d) {
        /* Without memory for the list entry, wait for the context instead. */
        while (c->busy)
            pthread_cond_wait(&c->cv, &c->mu);
        c->busy = 1;
        pthread_mutex_unlock(&c->mu);
        fn(c, arg);
        pthread_mutex_lock(&c->mu);
        c->busy = 0;
        pthread_cond_broadcast(&c->cv);
        pthread_mutex_unlock(&c->mu);
        return;
    }
    d->fn = fn;
    d->arg = arg;
    d->next = c->deferred;
    c->deferred = d;
    pthread_mutex_unlock(&c->mu);
}

/* ------------------------------------------------------------------------ */
/* The job runner                                                             */
/* ------------------------------------------------------------------------ */

static int release_job_refs(void *arg)
{
    pmx_job *job = arg;
    for (int i = 0; i < 6; i++)
        Py_CLEAR(job->keep[i]);
    free(job);
    return 0;
}

/* An abandoned job is finished: free its results, and give its Python
 * references back on the main thread (Py_AddPendingCall needs no GIL). */
static void finish_abandoned(pmx_job *job)
{
    if (job->discard) job->discard(job);
    if (Py_AddPendingCall(release_job_refs, job) != 0) {
        /* The queue is full: keep the references (a leak, never a crash). */
    }
}

static void *worker_main(void *arg)
{
    pmx_ctx *c = arg;
    pthread_mutex_lock(&c->mu);
    for (;;) {
        while (!c->job && !c->stop)
            pthread_cond_wait(&c->cv, &c->mu);
        if (c->job) {
            pmx_job *job = c->job;
            pthread_mutex_unlock(&c->mu);
            job->run(job);
            run_deferred_locked(c);
            pthread_mutex_lock(&c->mu);
            c->job = NULL;
            job->done = 1;
            int abandoned = job->abandoned;
            c->busy = 0;
            pthread_cond_broadcast(&c->cv);
            if (abandoned) {
                pthread_mutex_unlock(&c->mu);
                finish_abandoned(job);
                pmx_ctx_unref(c); /* the abandoned job's reference */
                pthread_mutex_lock(&c->mu);
            }
            continue;
        }
        if (c->stop && c->refs == 0) break;
        if (c->stop) c->stop = 0; /* woken by a stale stop: references came back */
    }
    pthread_mutex_unlock(&c->mu);
    c->busy = 1;
    ctx_destroy(c);
    return NULL;
}

static void deadline_in(struct timespec *ts, int ms)
{
    clock_gettime(CLOCK_REALTIME, ts);
    ts->tv_nsec += (long)ms * 1000000L;
    while (ts->tv_nsec >= 1000000000L) {
        ts->tv_nsec -= 1000000000L;
        ts->tv_sec++;
    }
}

/* Takes the context for this thread, checking for signals while another
 * thread (or an abandoned job) holds it. */
static int acquire(pmx_ctx *c)
{
    for (;;) {
        int got = 0;
        Py_BEGIN_ALLOW_THREADS pthread_mutex_lock(&c->mu);
        if (c->busy) {
            struct timespec ts;
            deadline_in(&ts, PMX_SIGNAL_POLL_MS);
            pthread_cond_timedwait(&c->cv, &c->mu, &ts);
        }
        if (!c->busy) {
            c->busy = 1;
            got = 1;
        }
        pthread_mutex_unlock(&c->mu);
        Py_END_ALLOW_THREADS if (got) return 0;
        if (PyErr_CheckSignals() < 0) return -1;
    }
}

int pmx_run(pmx_ctx *c, pmx_job *job, size_t work_elements)
{
    job->ctx = c;
    job->status = PM_STATUS_OK;
    job->message[0] = 0;
    job->done = job->abandoned = 0;
    if (acquire(c) < 0) return -1;
    if (work_elements < PMX_INLINE_ELEMENTS) {
        Py_BEGIN_ALLOW_THREADS job->run(job);
        run_deferred_locked(c);
        pthread_mutex_lock(&c->mu);
        c->busy = 0;
        pthread_cond_broadcast(&c->cv);
        pthread_mutex_unlock(&c->mu);
        Py_END_ALLOW_THREADS job->done = 1;
        return 0;
    }
    pthread_mutex_lock(&c->mu);
    if (!c->worker_started) {
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        int e = pthread_create(&c->worker, &attr, worker_main, c);
        pthread_attr_destroy(&attr);
        if (e != 0) {
            c->busy = 0;
            pthread_cond_broadcast(&c->cv);
            pthread_mutex_unlock(&c->mu);
            PyErr_Format(PyExc_RuntimeError, "pyramesh: cannot start a worker thread (%s)",
                         strerror(e));
            return -1;
        }
        c->worker_started = 1;
    }
    c->job = job;
    pthread_cond_broadcast(&c->cv);
    pthread_mutex_unlock(&c->mu);
    for (;;) {
        int done;
        Py_BEGIN_ALLOW_THREADS pthread_mutex_lock(&c->mu);
        if (!job->done) {
            struct timespec ts;
            deadline_in(&ts, PMX_SIGNAL_POLL_MS);
            pthread_cond_timedwait(&c->cv, &c->mu, &ts);
        }
        done = job->done;
        pthread_mutex_unlock(&c->mu);
        Py_END_ALLOW_THREADS if (done) return 0;
        if (PyErr_CheckSignals() < 0) {
            pthread_mutex_lock(&c->mu);
            if (job->done) {
                pthread_mutex_unlock(&c->mu);
                if (job->discard) job->discard(job);
                return -1;
            }
            job->abandoned = 1;
            c->refs++; /* held until the worker has finished the job */
            pthread_mutex_unlock(&c->mu);
            return -2;
        }
    }
}

/* ------------------------------------------------------------------------ */
/* Context type                                                               */
/* ------------------------------------------------------------------------ */

pmx_ctx *pmx_ctx_from(PyObject *obj)
{
    if (!PyObject_TypeCheck(obj, &pmx_ContextType)) {
        PyErr_SetString(PyExc_TypeError, "expected a pyramesh.Context");
        return NULL;
    }
    pmx_ctx *c = ((pmx_ContextObject *)obj)->c;
    if (!c) PyErr_SetString(PyExc_ValueError, "the context is closed");
    return c;
}

static int parse_device(PyObject *o, pm_device *d)
{
    if (!o || o == Py_None) {
        *d = PM_DEVICE_AUTO;
        return 0;
    }
    const char *s = PyUnicode_Check(o) ? PyUnicode_AsUTF8(o) : NULL;
    if (!s) {
        PyErr_SetString(PyExc_TypeError, "device must be 'auto', 'cpu' or 'cuda'");
        return -1;
    }
    if (!strcmp(s, "auto"))
        *d = PM_DEVICE_AUTO;
    else if (!strcmp(s, "cpu"))
        *d = PM_DEVICE_CPU;
    else if (!strcmp(s, "cuda") || !strcmp(s, "gpu"))
        *d = PM_DEVICE_CUDA;
    else {
        PyErr_Format(PyExc_ValueError, "device must be 'auto', 'cpu' or 'cuda', not '%s'", s);
        return -1;
    }
    return 0;
}

static int Context_init(pmx_ContextObject *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"device", "threads", "cuda_device", NULL};
    PyObject *dev = NULL;
    int threads = 0, cuda_device = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|O$ii", kwlist, &dev, &threads, &cuda_device))
        return -1;
    pm_device d;
    if (parse_device(dev, &d) < 0) return -1;
    if (threads < 0 || cuda_device < 0) {
        PyErr_SetString(PyExc_ValueError, "threads and cuda_device must be >= 0");
        return -1;
    }
    if (self->c) {
        PyErr_SetString(PyExc_RuntimeError, "Context already initialised");
        return -1;
    }
    pm_context_desc desc = {sizeof desc, d, cuda_device, threads, NULL};
    pm_context *ctx = NULL;
    pm_status s;
    Py_BEGIN_ALLOW_THREADS s = pm_context_create(&desc, &ctx);
    Py_END_ALLOW_THREADS if (s != PM_STATUS_OK)
    {
        pmx_raise_status(s, pm_last_error());
        return -1;
    }
    pmx_ctx *c = calloc(1, sizeof *c);
    if (!c) {
        pm_context_destroy(ctx);
        PyErr_NoMemory();
        return -1;
    }
    c->ctx = ctx;
    c->device = pm_context_device(ctx);
    c->cuda_device = cuda_device;
    c->refs = 1;
    pthread_mutex_init(&c->mu, NULL);
    pthread_cond_init(&c->cv, NULL);
    self->c = c;
    return 0;
}

static void Context_close_impl(pmx_ContextObject *self)
{
    pmx_ctx *c = self->c;
    self->c = NULL;
    if (c) pmx_ctx_unref(c);
}

static void Context_dealloc(pmx_ContextObject *self)
{
    Context_close_impl(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *Context_close(pmx_ContextObject *self, PyObject *unused)
{
    (void)unused;
    Context_close_impl(self);
    Py_RETURN_NONE;
}

static PyObject *Context_enter(PyObject *self, PyObject *unused)
{
    (void)unused;
    Py_INCREF(self);
    return self;
}

static PyObject *Context_exit(pmx_ContextObject *self, PyObject *args)
{
    (void)args;
    Context_close_impl(self);
    Py_RETURN_FALSE;
}

typedef struct {
    pmx_job base;
} sync_job;

static void sync_run(pmx_job *job)
{
    pm_status s = pm_context_synchronize(job->ctx->ctx);
    if (s != PM_STATUS_OK) pmx_job_fail(job, s);
}

static PyObject *Context_synchronize(pmx_ContextObject *self, PyObject *unused)
{
    (void)unused;
    pmx_ctx *c = pmx_ctx_from((PyObject *)self);
    if (!c) return NULL;
    pmx_job *job = calloc(1, sizeof(sync_job));
    if (!job) return PyErr_NoMemory();
    job->run = sync_run;
    int r = pmx_run(c, job, 0);
    if (r == -2) return NULL;
    if (r == -1) {
        free(job);
        return NULL;
    }
    PyObject *res =
        job->status == PM_STATUS_OK ? (Py_INCREF(Py_None), Py_None) : pmx_raise_job(job);
    free(job);
    return res;
}

static PyObject *Context_get_device(pmx_ContextObject *self, void *closure)
{
    (void)closure;
    pmx_ctx *c = pmx_ctx_from((PyObject *)self);
    return c ? PyUnicode_FromString(pm_device_string(c->device)) : NULL;
}

static PyObject *Context_get_device_name(pmx_ContextObject *self, void *closure)
{
    (void)closure;
    pmx_ctx *c = pmx_ctx_from((PyObject *)self);
    return c ? PyUnicode_FromString(pm_context_device_name(c->ctx)) : NULL;
}

static PyObject *Context_get_threads(pmx_ContextObject *self, void *closure)
{
    (void)closure;
    pmx_ctx *c = pmx_ctx_from((PyObject *)self);
    return c ? PyLong_FromLong(pm_context_num_threads(c->ctx)) : NULL;
}

static PyObject *Context_get_note(pmx_ContextObject *self, void *closure)
{
    (void)closure;
    pmx_ctx *c = pmx_ctx_from((PyObject *)self);
    return c ? PyUnicode_FromString(pm_context_note(c->ctx)) : NULL;
}

static PyObject *Context_get_cuda_device(pmx_ContextObject *self, void *closure)
{
    (void)closure;
    pmx_ctx *c = pmx_ctx_from((PyObject *)self);
    return c ? PyLong_FromLong(c->cuda_device) : NULL;
}

static PyObject *Context_get_closed(pmx_ContextObject *self, void *closure)
{
    (void)closure;
    return PyBool_FromLong(self->c == NULL);
}

static PyObject *Context_repr(pmx_ContextObject *self)
{
    if (!self->c) return PyUnicode_FromString("<pyramesh.Context (closed)>");
    return PyUnicode_FromFormat(
        "<pyramesh.Context device='%s' (%s), threads=%d>", pm_device_string(self->c->device),
        pm_context_device_name(self->c->ctx), pm_context_num_threads(self->c->ctx));
}

static PyMethodDef Context_methods[] = {
    {"close", (PyCFunction)Context_close, METH_NOARGS,
     "close()\n--\n\nReleases the context now (it is also released when no longer "
     "referenced).\nArrays it returned stay valid until they are freed."},
    {"synchronize", (PyCFunction)Context_synchronize, METH_NOARGS,
     "synchronize()\n--\n\nWaits until all work issued on the context is finished."},
    {"__enter__", Context_enter, METH_NOARGS, NULL},
    {"__exit__", (PyCFunction)Context_exit, METH_VARARGS, NULL},
    {NULL, NULL, 0, NULL}};

static PyGetSetDef Context_getset[] = {
    {"device", (getter)Context_get_device, NULL, "'cpu' or 'cuda': the device chosen.", NULL},
    {"device_name", (getter)Context_get_device_name, NULL, "A description of the device.", NULL},
    {"threads", (getter)Context_get_threads, NULL, "CPU threads the context uses.", NULL},
    {"cuda_device", (getter)Context_get_cuda_device, NULL, "The CUDA device index asked for.",
     NULL},
    {"note", (getter)Context_get_note, NULL,
     "Why an 'auto' context runs on the CPU although a GPU is present, or ''.", NULL},
    {"closed", (getter)Context_get_closed, NULL, "Whether close() was called.", NULL},
    {NULL, NULL, NULL, NULL, NULL}};

PyTypeObject pmx_ContextType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "pyramesh.Context",
    .tp_basicsize = sizeof(pmx_ContextObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Context(device='auto', *, threads=0, cuda_device=0)\n--\n\n"
              "A pyramesh context: a device (CPU with OpenMP, or one CUDA GPU) and\n"
              "its scratch memory. 'auto' picks CUDA when a usable GPU is present\n"
              "(the environment variable PYRAMESH_DEVICE=cpu|cuda overrides it).\n"
              "threads=0 uses every core. A context serves one call at a time;\n"
              "calls from several threads on one context wait for each other.",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Context_init,
    .tp_dealloc = (destructor)Context_dealloc,
    .tp_repr = (reprfunc)Context_repr,
    .tp_methods = Context_methods,
    .tp_getset = Context_getset,
};

/* ------------------------------------------------------------------------ */
/* Module                                                                     */
/* ------------------------------------------------------------------------ */

static PyObject *mod_cuda_available(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    int r;
    Py_BEGIN_ALLOW_THREADS r = pm_cuda_available();
    Py_END_ALLOW_THREADS return PyBool_FromLong(r);
}

static PyObject *mod_build_info(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    return PyUnicode_FromString(pm_build_info());
}

static PyMethodDef module_methods[] = {
    {"cuda_available", mod_cuda_available, METH_NOARGS,
     "cuda_available()\n--\n\nWhether this build has the CUDA backend and a usable GPU is "
     "present."},
    {"build_info", mod_build_info, METH_NOARGS,
     "build_info()\n--\n\nThe backends of this build, e.g. 'cpu (OpenMP); cuda (sm_90)'."},
    {"isosurface", (PyCFunction)(void (*)(void))pmx_isosurface, METH_VARARGS | METH_KEYWORDS,
     "Internal: see pyramesh.isosurface and pyramesh.marching_cubes."},
    {"volume_range", pmx_volume_minmax, METH_VARARGS,
     "volume_range(volume)\n--\n\nInternal: (min, max, non-NaN count) of a host volume."},
    {"remove_degenerate", pmx_remove_degenerate, METH_VARARGS,
     "Internal: scikit-image's remove_degenerate_faces."},
    {"merge_unique", pmx_merge_unique, METH_VARARGS,
     "Internal: merge vertices at equal positions, drop degenerate faces."},
    {"field_compute", (PyCFunction)(void (*)(void))pmx_field_compute, METH_VARARGS | METH_KEYWORDS,
     "Internal: see pyramesh.density_field."},
    {"field_grid_for_box", (PyCFunction)(void (*)(void))pmx_field_grid_for_box,
     METH_VARARGS | METH_KEYWORDS, "Internal: see pyramesh.field_grid_for_box."},
    {"reduce", (PyCFunction)(void (*)(void))pmx_reduce, METH_VARARGS | METH_KEYWORDS,
     "Internal: see pyramesh.reduce."},
    {"scan", (PyCFunction)(void (*)(void))pmx_scan, METH_VARARGS | METH_KEYWORDS,
     "Internal: see pyramesh.scan."},
    {"filter", (PyCFunction)(void (*)(void))pmx_filter, METH_VARARGS | METH_KEYWORDS,
     "Internal: see pyramesh.filter."},
    {"compact", (PyCFunction)(void (*)(void))pmx_compact, METH_VARARGS | METH_KEYWORDS,
     "Internal: see pyramesh.compact."},
    {"expand", (PyCFunction)(void (*)(void))pmx_expand, METH_VARARGS | METH_KEYWORDS,
     "Internal: see pyramesh.expand."},
    {"histopyramid", (PyCFunction)(void (*)(void))pmx_histopyramid, METH_VARARGS | METH_KEYWORDS,
     "Internal: see pyramesh.histopyramid."},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT,
    "_pyramesh",
    "The C extension of pyramesh (CPython and NumPy C APIs over libpyramesh).",
    -1,
    module_methods,
    NULL,
    NULL,
    NULL,
    NULL};

/* PyModule_AddObjectRef for Pythons before 3.10. */
static int add_ref(PyObject *m, const char *name, PyObject *o)
{
    Py_INCREF(o);
    if (PyModule_AddObject(m, name, o) < 0) {
        Py_DECREF(o);
        return -1;
    }
    return 0;
}

static PyObject *new_error(PyObject *m, const char *name, PyObject *bases, const char *doc)
{
    char full[96];
    snprintf(full, sizeof full, "pyramesh.%s", name);
    PyObject *e = PyErr_NewExceptionWithDoc(full, doc, bases, NULL);
    if (!e) return NULL;
    if (add_ref(m, name, e) < 0) {
        Py_DECREF(e);
        return NULL;
    }
    return e;
}

static int add_errors(PyObject *m)
{
    pmx_Error = new_error(m, "PyrameshError", PyExc_RuntimeError,
                          "A pyramesh library call failed; str() is the library's message and "
                          "`status` the status name.");
    if (!pmx_Error) return -1;
    struct {
        PyObject **slot;
        const char *name;
        PyObject *builtin;
    } table[] = {
        {&pmx_InvalidArgumentError, "InvalidArgumentError", PyExc_ValueError},
        {&pmx_OutOfMemoryError, "OutOfMemoryError", PyExc_MemoryError},
        {&pmx_OverflowError, "SizeOverflowError", PyExc_OverflowError},
        {&pmx_UnsupportedError, "UnsupportedError", PyExc_NotImplementedError},
        {&pmx_DeviceError, "DeviceError", NULL},
        {&pmx_IOError, "FileError", PyExc_OSError},
        {&pmx_ParseError, "ParseError", PyExc_ValueError},
    };
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++) {
        PyObject *bases = table[i].builtin ? PyTuple_Pack(2, pmx_Error, table[i].builtin)
                                           : PyTuple_Pack(1, pmx_Error);
        if (!bases) return -1;
        *table[i].slot = new_error(m, table[i].name, bases, NULL);
        Py_DECREF(bases);
        if (!*table[i].slot) return -1;
    }
    return 0;
}

PyMODINIT_FUNC PyInit__pyramesh(void)
{
    import_array();
    PyObject *m = PyModule_Create(&module_def);
    if (!m) return NULL;
    PyTypeObject *types[] = {&pmx_ContextType, &pmx_OwnerType, &pmx_ContextArrayType,
                             &pmx_HistoPyramidType};
    const char *names[] = {"Context", "_Owner", "ContextArray", "HistoPyramid"};
    for (int i = 0; i < 4; i++) {
        if (PyType_Ready(types[i]) < 0 || add_ref(m, names[i], (PyObject *)types[i]) < 0) {
            Py_DECREF(m);
            return NULL;
        }
    }
    if (add_errors(m) < 0 || PyModule_AddStringConstant(m, "version", PM_VERSION_STRING) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
