/* Internals of the VTK legacy readers shared by vtk.c (volumes, points)
 * and vtk_mesh.c (POLYDATA meshes): the opened file with its header read,
 * and the helpers that skip or read typed arrays in ASCII or BINARY
 * (big-endian) encoding. */
#ifndef PM_IO_VTK_LEGACY_H
#define PM_IO_VTK_LEGACY_H

#include "io/io.h"

typedef struct vtk_file {
    pmi_reader r;
    int binary;
    char dataset[64];
} vtk_file;

/* Opens path and reads the header up to "DATASET <type>" (into dataset). */
pm_status pmi_vtk_open(vtk_file *f, const char *path);
/* Bytes per value of a VTK data type name; 0 if unknown. */
int pmi_vtk_type_size(const char *t);
/* Whether the next non-blank text starts with keyword (nothing consumed). */
int pmi_vtk_next_is(pmi_reader *r, const char *keyword);
/* Skips n values of `size` bytes (binary) or n tokens (ASCII). */
pm_status pmi_vtk_skip_values(vtk_file *f, uint64_t n, int size, const char *what);
/* A 5.x METADATA block after an array, if one follows. */
pm_status pmi_vtk_skip_metadata(vtk_file *f);
/* A "FIELD name n" block whose first line was split into w[0..nw). */
pm_status pmi_vtk_skip_field(vtk_file *f, char **w, int nw);
/* count float or double (size 4 or 8) triples into dst as floats; `what`
 * names the block and `item` one triple in messages. */
pm_status pmi_vtk_read_triples(vtk_file *f, size_t count, int size, float *dst, const char *what,
                               const char *item);

#endif
