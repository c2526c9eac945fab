/* scikit-image's mesh clean-ups for marching_cubes: remove_degenerate_faces
 * (allow_degenerate=False) and the classic implementation's unique-vertex
 * merge (method='_lorensen'), on host NumPy arrays. */
#include "pmx.h"

#include <string.h>

/* ------------------------------------------------------------------------ */
/* remove_degenerate_faces and the classic unique-vertex merge                */
/* ------------------------------------------------------------------------ */

static int same3(const float *a, const float *b)
{
    return a[0] == b[0] && a[1] == b[1] && a[2] == b[2];
}

static int faces_view(PyObject *o, PyArrayObject **out)
{
    *out = (PyArrayObject *)PyArray_FROMANY(o, NPY_INT64, 2, 2, NPY_ARRAY_IN_ARRAY);
    if (!*out) return -1;
    if (PyArray_DIM(*out, 1) != 3) {
        PyErr_SetString(PyExc_ValueError, "faces must have shape (F, 3)");
        return -1;
    }
    return 0;
}

/* remove_degenerate(vertices float32 (V,3), faces (F,3)) -> (map1 int32 (V,),
 * faces_ok bool (F,)): scikit-image's remove_degenerate_faces merge loop
 * (a triangle with two vertices at one position is dropped and those
 * vertices are merged into the lower mapped index), chains followed. */
PyObject *pmx_remove_degenerate(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *vo, *fo;
    if (!PyArg_ParseTuple(args, "OO", &vo, &fo)) return NULL;
    PyArrayObject *v = (PyArrayObject *)PyArray_FROMANY(vo, NPY_FLOAT32, 2, 2, NPY_ARRAY_IN_ARRAY);
    PyArrayObject *f = NULL, *map = NULL, *ok = NULL;
    PyObject *res = NULL;
    if (!v || faces_view(fo, &f) < 0) goto out;
    npy_intp V = PyArray_DIM(v, 0), F = PyArray_DIM(f, 0);
    map = (PyArrayObject *)PyArray_SimpleNew(1, &V, NPY_INT32);
    ok = (PyArrayObject *)PyArray_SimpleNew(1, &F, NPY_BOOL);
    if (!map || !ok) goto out;
    const float *pos = PyArray_DATA(v);
    const int64_t *idx = PyArray_DATA(f);
    int32_t *m = PyArray_DATA(map);
    npy_bool *k = PyArray_DATA(ok);
    for (npy_intp i = 0; i < V; i++)
        m[i] = (int32_t)i;
    for (npy_intp t = 0; t < F; t++) {
        const int64_t i1 = idx[3 * t], i2 = idx[3 * t + 1], i3 = idx[3 * t + 2];
        if (i1 < 0 || i2 < 0 || i3 < 0 || i1 >= V || i2 >= V || i3 >= V) {
            PyErr_SetString(PyExc_IndexError, "face index out of range");
            goto out;
        }
        k[t] = 1;
        const int pairs[3][2] = {{0, 1}, {0, 2}, {1, 2}};
        const int64_t ii[3] = {i1, i2, i3};
        for (int q = 0; q < 3; q++) {
            const int64_t a = ii[pairs[q][0]], b = ii[pairs[q][1]];
            if (same3(pos + 3 * a, pos + 3 * b)) {
                const int32_t lo = m[a] < m[b] ? m[a] : m[b];
                m[a] = m[b] = lo;
                k[t] = 0;
            }
        }
    }
    /* Merged vertices point at a lower one that may itself have been
     * merged: follow to the root (scikit-image stops after one step and
     * can then point a face at an unrelated vertex). */
    for (npy_intp i = 0; i < V; i++) {
        int32_t r = m[i];
        while (m[r] != r)
            r = m[r];
        m[i] = r;
    }
    res = Py_BuildValue("(OO)", map, ok);
out:
    Py_XDECREF(v);
    Py_XDECREF(f);
    Py_XDECREF(map);
    Py_XDECREF(ok);
    return res;
}

/* An open-addressing table of positions (bits of the three floats, -0
 * folded onto +0 so that equal coordinates hash alike). */
static uint64_t hash3(const float *p)
{
    uint64_t h = 1469598103934665603ull;
    for (int q = 0; q < 3; q++) {
        float x = p[q] == 0.0f ? 0.0f : p[q];
        uint32_t u;
        memcpy(&u, &x, 4);
        h = (h ^ u) * 1099511628211ull;
        h ^= h >> 29;
    }
    return h;
}

/* merge_unique(vertices float32 (V,3), faces (F,3)) -> (vertices (U,3),
 * faces int64 (F',3)): the classic implementation's unpack_unique_verts:
 * triangles with two equal positions dropped, vertices at equal positions
 * merged, numbered in order of first use. */
PyObject *pmx_merge_unique(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *vo, *fo;
    if (!PyArg_ParseTuple(args, "OO", &vo, &fo)) return NULL;
    PyArrayObject *v = (PyArrayObject *)PyArray_FROMANY(vo, NPY_FLOAT32, 2, 2, NPY_ARRAY_IN_ARRAY);
    PyArrayObject *f = NULL, *ov = NULL, *of = NULL;
    PyObject *res = NULL;
    int64_t *slot_id = NULL, *first_of = NULL;
    if (!v || faces_view(fo, &f) < 0) goto out;
    const npy_intp V = PyArray_DIM(v, 0), F = PyArray_DIM(f, 0);
    size_t cap = 16;
    while (cap < 2 * (size_t)V)
        cap <<= 1;
    slot_id = malloc(cap * sizeof *slot_id);
    first_of = malloc((V ? V : 1) * sizeof *first_of); /* unique id -> a vertex */
    npy_intp dims[2] = {F, 3};
    of = (PyArrayObject *)PyArray_SimpleNew(2, dims, NPY_INT64);
    if (!slot_id || !first_of || !of) {
        if (!PyErr_Occurred()) PyErr_NoMemory();
        goto out;
    }
    for (size_t i = 0; i < cap; i++)
        slot_id[i] = -1;
    const float *pos = PyArray_DATA(v);
    const int64_t *idx = PyArray_DATA(f);
    int64_t *out_f = PyArray_DATA(of);
    npy_intp nf = 0, nu = 0;
    for (npy_intp t = 0; t < F; t++) {
        const int64_t ii[3] = {idx[3 * t], idx[3 * t + 1], idx[3 * t + 2]};
        for (int q = 0; q < 3; q++)
            if (ii[q] < 0 || ii[q] >= V) {
                PyErr_SetString(PyExc_IndexError, "face index out of range");
                goto out;
            }
        if (same3(pos + 3 * ii[0], pos + 3 * ii[1]) || same3(pos + 3 * ii[0], pos + 3 * ii[2]) ||
            same3(pos + 3 * ii[1], pos + 3 * ii[2]))
            continue;
        for (int q = 0; q < 3; q++) {
            const float *x = pos + 3 * ii[q];
            size_t h = (size_t)hash3(x) & (cap - 1);
            while (slot_id[h] >= 0 && !same3(pos + 3 * first_of[slot_id[h]], x))
                h = (h + 1) & (cap - 1);
            if (slot_id[h] < 0) {
                slot_id[h] = nu;
                first_of[nu++] = ii[q];
            }
            out_f[3 * nf + q] = slot_id[h];
        }
        nf++;
    }
    dims[0] = nu;
    ov = (PyArrayObject *)PyArray_SimpleNew(2, dims, NPY_FLOAT32);
    if (!ov) goto out;
    float *out_v = PyArray_DATA(ov);
    for (npy_intp u = 0; u < nu; u++)
        memcpy(out_v + 3 * u, pos + 3 * first_of[u], 3 * sizeof(float));
    PyObject *sliced = PySequence_GetSlice((PyObject *)of, 0, nf);
    if (!sliced) goto out;
    res = Py_BuildValue("(ON)", ov, sliced);
out:
    free(slot_id);
    free(first_of);
    Py_XDECREF(v);
    Py_XDECREF(f);
    Py_XDECREF(ov);
    Py_XDECREF(of);
    return res;
}
