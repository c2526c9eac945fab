/* Internals of the VTK XML readers (vtk_xml.c, vtk_xml_read.c): the file
 * held in memory, a minimal tag and attribute scanner (no XML library:
 * VTK's files use a small, regular subset), and DataArray decoding in the
 * ascii, binary (base64) and appended (raw or base64) formats, with or
 * without vtkZLibDataCompressor. */
#ifndef PM_IO_VTK_XML_H
#define PM_IO_VTK_XML_H

#include "io/io.h"

typedef struct vtx_file {
    const char *path;
    char *text;                    /* the whole file, NUL-terminated */
    size_t size;                   /* bytes in text */
    size_t xml_end;                /* where tags may be searched: up to <AppendedData */
    int swap;                      /* the file's byte order differs from the host's */
    int header64;                  /* header_type="UInt64" */
    int zlib;                      /* compressor="vtkZLibDataCompressor" */
    const unsigned char *appended; /* after the '_' of <AppendedData>, or NULL */
    size_t appended_size;
    int appended_base64;
    char dataset[64]; /* the VTKFile's type */
} vtx_file;

typedef struct vtx_tag {
    const char *start, *end;     /* '<' and the '>' that closes the opening tag */
    const char *body, *body_end; /* content up to the matching close tag */
} vtx_tag;

/* Loads path (checked against max_memory_bytes) and parses <VTKFile>;
 * its type attribute must be `type` (or one of "A|B"). */
pm_status pmi_vtx_open(vtx_file *f, const char *path, const char *type, size_t max_memory_bytes);
void pmi_vtx_close(vtx_file *f);
/* The first <name ...> tag in [from, to) ; 0 when there is none. */
int pmi_vtx_find(const vtx_file *f, const char *from, const char *to, const char *name,
                 vtx_tag *tag);
/* An attribute's value into out (cap bytes); 0 when absent. */
int pmi_vtx_attr(const vtx_tag *tag, const char *name, char *out, size_t cap);
/* n numbers of an attribute; 0 when absent, -1 when malformed. */
int pmi_vtx_numbers(const vtx_tag *tag, const char *name, double *v, int n);
/* The byte offset of p in the file, for messages. */
static inline unsigned long long pmi_vtx_offset(const vtx_file *f, const char *p)
{
    return (unsigned long long)(p - f->text);
}

/* What a decoded DataArray is converted to. */
typedef enum vtx_out { VTX_FLOAT, VTX_INT64, VTX_SAMPLES } vtx_out;

/* Decodes the DataArray `tag` of count tuples of ncomp components into a
 * new block (*out, malloc'd): floats, int64s, or (VTX_SAMPLES) the file's
 * samples converted by pmi_samples_convert (type in *type). `what` names
 * the array in messages. */
pm_status pmi_vtx_array(const vtx_file *f, const vtx_tag *tag, uint64_t count, int ncomp,
                        vtx_out kind, size_t max_memory_bytes, const char *what, void **out,
                        pm_sample_type *type);

#endif
