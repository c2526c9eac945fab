/* pyramesh._pyramesh: the CPython extension behind the pyramesh package.
 * Shared declarations of the module's C files: contexts and the job runner
 * (module.c), array views and context arrays (arrays.c), isosurfaces and
 * the scikit-image post-processing (iso.c, mc_post.c), density fields
 * (field.c) and the primitives (prims.c). Everything public is pm_; the
 * module's own helpers are pmx_. */
#ifndef PMX_H
#define PMX_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#define NPY_NO_DEPRECATED_API NPY_1_7_API_VERSION
#ifndef PMX_IMPORT_ARRAY_HERE
#define NO_IMPORT_ARRAY
#endif
#define PY_ARRAY_UNIQUE_SYMBOL pmx_numpy_api
#include <numpy/arrayobject.h>

/* Builds against NumPy 1.x and 2.x: the element size of a descriptor is
 * read through this macro in 2.x. */
#if NPY_ABI_VERSION < 0x02000000
#define PyDataType_ELSIZE(d) ((d)->elsize)
#endif

#include <pthread.h>
#include <stdint.h>

#include "pyramesh.h"

/* ------------------------------------------------------------------------ */
/* Contexts and jobs (module.c)                                             */
/* ------------------------------------------------------------------------ */

/* A job: work that runs without the GIL, on the calling thread (small
 * inputs) or on the context's worker thread, while the calling thread
 * waits and checks for signals. On KeyboardInterrupt the caller returns at
 * once and the job is abandoned to the worker: it finishes (the library
 * has no way to stop a call), then `discard` frees its results and the
 * Python references it holds are released on the main thread. */
typedef struct pmx_job pmx_job;
struct pmx_job {
    void (*run)(pmx_job *job);     /* no GIL; sets status and message */
    void (*discard)(pmx_job *job); /* no GIL; frees results of an abandoned job */
    struct pmx_ctx *ctx;
    pm_status status;
    char message[512];
    PyObject *keep[6]; /* references held while the job may run */
    void *dl[2];       /* DLPack tensors read by the job, released after it */
    int done, abandoned;
};

/* The C side of a Context: the pm_context, a lock that gives it to one
 * thread at a time, its worker thread, and frees deferred while it works. */
typedef struct pmx_deferred {
    struct pmx_deferred *next;
    void (*fn)(struct pmx_ctx *c, void *arg);
    void *arg;
} pmx_deferred;

typedef struct pmx_ctx {
    pm_context *ctx;
    pm_device device;
    int cuda_device;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int refs; /* under mu: the Context object, owners of context memory, abandoned jobs */
    int busy; /* under mu: a thread is using ctx */
    int worker_started, stop;
    pmx_job *job; /* under mu: the job handed to the worker */
    pmx_deferred *deferred;
    pthread_t worker;
} pmx_ctx;

typedef struct {
    PyObject_HEAD pmx_ctx *c;
} pmx_ContextObject;

extern PyTypeObject pmx_ContextType;

/* Sets the job's status and message from the library's last error. */
void pmx_job_fail(pmx_job *job, pm_status s);
void pmx_job_failf(pmx_job *job, pm_status s, const char *fmt, ...);
/* Runs a job on the context (GIL held on entry and exit). Returns 0 when
 * the job ran (its status may still be an error: pmx_raise_job), -1 with a
 * Python exception before it started (the caller still owns it), -2 when
 * it was abandoned on an exception (the runner owns and frees it; the
 * caller must not touch it). work_elements chooses inline or worker. */
int pmx_run(pmx_ctx *c, pmx_job *job, size_t work_elements);
/* Raises the exception for a failed job (returns NULL). */
PyObject *pmx_raise_job(const pmx_job *job);
/* Raises the exception for a status with a message. */
PyObject *pmx_raise_status(pm_status s, const char *message);
/* Frees `fn(c, arg)` when the context is free (now, or after the job). */
void pmx_ctx_defer(pmx_ctx *c, void (*fn)(pmx_ctx *, void *), void *arg);
void pmx_ctx_ref(pmx_ctx *c);
void pmx_ctx_unref(pmx_ctx *c);
/* The pmx_ctx of a Context object, or NULL with TypeError. */
pmx_ctx *pmx_ctx_from(PyObject *obj);

/* ------------------------------------------------------------------------ */
/* Array views and context arrays (arrays.c)                                */
/* ------------------------------------------------------------------------ */

#define PMX_MAXDIM 4

enum { PMX_MEM_HOST = 1, PMX_MEM_CUDA = 2 };

/* A borrowed view of an input array: a NumPy array (or anything NumPy
 * accepts), an object with __cuda_array_interface__, or a DLPack producer. */
typedef struct pmx_view {
    char *data;
    int mem;       /* PMX_MEM_HOST or PMX_MEM_CUDA */
    int device_id; /* CUDA device from DLPack, -1 when unknown */
    int typenum;   /* NumPy type number */
    int itemsize;
    int ndim;
    Py_ssize_t shape[PMX_MAXDIM];
    Py_ssize_t strides[PMX_MAXDIM]; /* bytes */
    PyObject *keep;                 /* the array or capsule that owns the memory */
    void *dl;                       /* DLManagedTensor to release */
} pmx_view;

/* Fills *v from obj; returns 0, or -1 with an exception. Host objects that
 * are not arrays go through numpy.asarray. */
int pmx_view_get(PyObject *obj, pmx_view *v);
void pmx_view_release(pmx_view *v);
/* Hands the view's DLPack tensor (if any) to the job, which keeps the
 * producer's memory until it has finished (also when abandoned). */
void pmx_job_adopt_view(pmx_job *job, pmx_view *v);
/* Releases the DLPack tensors a job holds (GIL held). */
void pmx_job_release_views(pmx_job *job);
int pmx_view_c_contiguous(const pmx_view *v);
Py_ssize_t pmx_view_size(const pmx_view *v);

/* What frees memory the module hands out. */
enum { PMX_OWN_MESH = 1, PMX_OWN_ALLOC, PMX_OWN_FIELD, PMX_OWN_MALLOC, PMX_OWN_HP };
typedef struct {
    PyObject_HEAD pmx_ctx *c; /* NULL for PMX_OWN_MALLOC */
    int kind;
    void *ptr;    /* pm_alloc / malloc pointer, histopyramid */
    pm_mesh mesh; /* PMX_OWN_MESH */
    pm_field field;
} pmx_OwnerObject;

extern PyTypeObject pmx_OwnerType;
extern PyTypeObject pmx_ContextArrayType;

/* A new owner (references c). */
pmx_OwnerObject *pmx_owner_new(pmx_ctx *c, int kind);
/* A NumPy array over host memory kept alive by owner (steals nothing). */
PyObject *pmx_host_array(PyObject *owner, void *ptr, int typenum, int ndim, const npy_intp *shape);
/* A ContextArray over context memory kept alive by owner. */
PyObject *pmx_context_array(PyObject *owner, pmx_ctx *c, void *ptr, int typenum, int ndim,
                            const Py_ssize_t *shape);
/* Host (NumPy) or context array for a result, by `device_out`. */
PyObject *pmx_result_array(PyObject *owner, pmx_ctx *c, int device_out, void *ptr, int typenum,
                           int ndim, const Py_ssize_t *shape);

/* ------------------------------------------------------------------------ */
/* Entry points (iso.c, mc_post.c, field.c, prims.c)                         */
/* ------------------------------------------------------------------------ */

PyObject *pmx_isosurface(PyObject *self, PyObject *args, PyObject *kw);
PyObject *pmx_volume_minmax(PyObject *self, PyObject *args);
PyObject *pmx_remove_degenerate(PyObject *self, PyObject *args);
PyObject *pmx_merge_unique(PyObject *self, PyObject *args);
PyObject *pmx_field_compute(PyObject *self, PyObject *args, PyObject *kw);
PyObject *pmx_field_grid_for_box(PyObject *self, PyObject *args, PyObject *kw);
PyObject *pmx_reduce(PyObject *self, PyObject *args, PyObject *kw);
PyObject *pmx_scan(PyObject *self, PyObject *args, PyObject *kw);
PyObject *pmx_filter(PyObject *self, PyObject *args, PyObject *kw);
PyObject *pmx_compact(PyObject *self, PyObject *args, PyObject *kw);
PyObject *pmx_expand(PyObject *self, PyObject *args, PyObject *kw);
PyObject *pmx_histopyramid(PyObject *self, PyObject *args, PyObject *kw);
extern PyTypeObject pmx_HistoPyramidType;

/* Sample type of a NumPy type number, or -1. */
int pmx_sample_type(int typenum);

/* The skimage-compatible post-processing of an extracted mesh (mc_post.c),
 * host memory, no GIL. */
typedef struct pmx_mc_post {
    /* the volume the library read (library frame: x fastest) */
    const char *data;
    pm_sample_type type;
    size_t n[3];      /* points per library axis */
    size_t stride[3]; /* elements per step along each library axis */
    double iso;
    int inside_below; /* the mesh was extracted with PM_INSIDE_BELOW */
    double iso_eff;   /* the iso value given to the library */
    int step;         /* positions are in units of the original lattice: step per point */
    /* optional mask (original lattice), bytes per step along library axes */
    const uint8_t *mask;
    size_t mask_stride[3];
    int axis[3];    /* output column of library axis L */
    int flip_faces; /* reverse every triangle */
    int negate_normals;
    int threads; /* the context's thread count */
} pmx_mc_post;

/* Drops the triangles of masked-out cells and the vertices no triangle
 * uses (in place, values too; counts updated). Returns 0 or -1 when out
 * of memory. */
int pmx_mc_apply_mask(const pmx_mc_post *p, pm_mesh *mesh, float *values);
/* values[v]: scikit-image's per-vertex value (the largest range of the
 * cells around the vertex's edge, measured from iso). reorder: also does
 * pmx_mc_reorder's work on an indexed mesh, in the same pass. */
void pmx_mc_values(const pmx_mc_post *p, pm_mesh *mesh, float *values, int reorder);
/* Columns into NumPy axis order, faces and normals flipped as asked. */
void pmx_mc_reorder(const pmx_mc_post *p, pm_mesh *mesh);
/* Parallel NaN-ignoring range of a strided host volume on `threads`
 * threads; lo > hi when every sample is NaN. */
void pmx_range(const char *data, pm_sample_type type, const size_t n[3], const size_t stride[3],
               int threads, double *lo, double *hi);

#endif /* PMX_H */
