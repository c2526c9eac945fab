/* Shared internals of the file readers and writers: a bounded buffered
 * reader that knows its line and byte position, a text tokenizer, number
 * parsing, endian swaps, checked allocation of volumes and points, and the
 * atomic writer (temporary file in the same directory, then rename). */
#ifndef PM_IO_IO_H
#define PM_IO_IO_H

#include <stddef.h>
#include <stdint.h>

#include "core/util.h"

/* The reader's buffer; also the longest line or token it accepts. */
#define PMI_READ_BUFFER (1u << 20)

typedef struct pmi_reader {
    int fd;
    const char *path;    /* as the caller gave it, for messages */
    uint64_t size;       /* file size in bytes */
    unsigned char *buf;  /* cap + 1 bytes (room for a NUL) */
    size_t cap;          /* min(PMI_READ_BUFFER, file size): small files, small buffers */
    size_t pos, len;     /* unread bytes are buf[pos..len) */
    uint64_t buf_offset; /* file offset of buf[0] */
    uint64_t line;       /* number of the last line or token's line (1-based) */
    uint64_t next_line;  /* line of the next unread byte */
} pmi_reader;

/* Opens a regular file for reading. Directories, missing and unreadable
 * files are PM_STATUS_IO_ERROR naming the path. The reader keeps `path`
 * (not a copy) for its messages: it must stay valid until
 * pmi_reader_close. */
pm_status pmi_reader_open(pmi_reader *r, const char *path);
void pmi_reader_close(pmi_reader *r);
/* Byte offset of the next unread byte, and how many bytes follow it. */
uint64_t pmi_reader_tell(const pmi_reader *r);
uint64_t pmi_reader_remaining(const pmi_reader *r);
/* Makes up to `want` bytes available at buf + pos without consuming them;
 * returns how many are (fewer only at the end of the file or on error). */
size_t pmi_reader_peek(pmi_reader *r, size_t want);
/* The next line without its "\n" or "\r\n", NUL-terminated, valid until the
 * next call. *eof is set (and OK returned) when no bytes are left. */
pm_status pmi_read_line(pmi_reader *r, char **line, size_t *len, int *eof);
/* The next line that is not empty or all blanks (same contract). */
pm_status pmi_read_nonblank_line(pmi_reader *r, char **line, size_t *len, int *eof);
/* Exactly n bytes into dst; a short file is a PARSE_ERROR naming `what`. */
pm_status pmi_read_bytes(pmi_reader *r, void *dst, size_t n, const char *what);
pm_status pmi_skip_bytes(pmi_reader *r, uint64_t n, const char *what);
/* The next whitespace-separated token, NUL-terminated in tok (cap bytes).
 * At the end of the file a PARSE_ERROR naming `what` is returned. */
pm_status pmi_read_token(pmi_reader *r, char *tok, size_t cap, const char *what);

/* Number parsing of a whole NUL-terminated string: 1 on success. */
int pmi_parse_double(const char *s, double *v);
int pmi_parse_float(const char *s, float *v);
int pmi_parse_i64(const char *s, int64_t *v);
int pmi_parse_u64(const char *s, uint64_t *v);
/* Case-insensitive comparisons of ASCII strings. */
int pmi_streq(const char *a, const char *b);
int pmi_starts_with(const char *s, const char *prefix);
/* The extension of a path's file name, without the dot ("" if none). */
const char *pmi_extension(const char *path);
/* Splits s in place into whitespace-separated words; returns the count
 * (at most max; further words stay in the last one's tail untouched). */
int pmi_split(char *s, char **words, int max);

/* A detached data file's path: relative names are relative to the
 * header's directory (malloc'd; NULL when out of memory). */
char *pmi_sibling_path(const char *header, const char *name);

int pmi_host_big_endian(void);
/* Reverses the bytes of each of n elements of elem_size bytes. */
void pmi_swap_bytes(void *data, size_t n, size_t elem_size);

/* Checks a volume's dims (each >= 2), its byte count (checked product,
 * at most `available` bytes when that is not UINT64_MAX, at most
 * max_memory_bytes when non-zero), then allocates it. `where` names the
 * header field for messages. */
/* Inflates exactly skip + bytes bytes (gzip or zlib wrapper, concatenated
 * members allowed) from the reader, keeping the last `bytes`. A stream
 * that ends early is an error, and so is one that holds more unless
 * allow_more (a gzip bomb stops at the declared size either way).
 * declared_by ends the messages: "... the N bytes that <declared_by>". */
pm_status pmi_inflate_exact(pmi_reader *r, uint64_t skip, unsigned char *dst, size_t bytes,
                            const char *declared_by, int allow_more);
pm_status pmi_volume_alloc(const char *path, const char *where, size_t nx, size_t ny, size_t nz,
                           pm_sample_type type, size_t max_memory_bytes, uint64_t available,
                           void **data, size_t *bytes);
/* The same for n points of 3 floats; min_bytes_each is the smallest number
 * of file bytes one point can occupy (0: no file-size check). */
pm_status pmi_points_alloc(const char *path, const char *where, uint64_t n, uint64_t min_bytes_each,
                           uint64_t available, size_t max_memory_bytes, float **xyz);
/* PARSE_ERROR naming the first point with a NaN or infinite coordinate. */
pm_status pmi_points_check_finite(const char *path, const float *xyz, size_t n);

/* The atomic writer. Errors are sticky: after the first failure every call
 * does nothing and commit returns the failure (message already recorded). */
typedef struct pmi_writer {
    int fd;
    const char *path; /* the caller's name, for messages */
    char *target;     /* where the file goes: path, or a symlink's target */
    char *tmp_path;
    unsigned char *buf;
    size_t len;
    pm_status status;
} pmi_writer;

pm_status pmi_writer_open(pmi_writer *w, const char *path);
void pmi_writer_put(pmi_writer *w, const void *data, size_t n);
/* A pointer to n (<= 64 KiB) free bytes in the staging buffer; the caller
 * fills them and calls pmi_writer_advance(w, used). NULL after a failure. */
unsigned char *pmi_writer_reserve(pmi_writer *w, size_t n);
void pmi_writer_advance(pmi_writer *w, size_t used);
void pmi_writer_printf(pmi_writer *w, const char *fmt, ...) PMI_PRINTF(2, 3);
void pmi_writer_f32(pmi_writer *w, float v, int big_endian);
void pmi_writer_i32(pmi_writer *w, int32_t v, int big_endian);
/* Flushes, closes and renames over path; on any failure removes the
 * temporary file and leaves path untouched. */
pm_status pmi_writer_commit(pmi_writer *w);
void pmi_writer_abort(pmi_writer *w);

/* n whitespace-separated ASCII samples of type t into dst (vtk.c; NRRD's
 * ascii encoding uses it too). Out-of-range integers are errors. */
pm_status pmi_read_ascii_samples(pmi_reader *r, pm_sample_type t, void *dst, size_t n);

/* A byte source over a file that may be gzip-compressed (told by its
 * first two bytes, 1f 8b; concatenated members allowed): reads return the
 * uncompressed bytes and pos counts them. */
typedef struct pmi_source {
    pmi_reader r;
    int gz;
    void *z;      /* the z_stream when gz */
    int ended;    /* the current gzip member has ended */
    uint64_t pos; /* uncompressed bytes consumed */
} pmi_source;

pm_status pmi_source_open(pmi_source *s, const char *path);
void pmi_source_close(pmi_source *s);
/* Exactly n bytes; an early end is a PARSE_ERROR naming `what`. */
pm_status pmi_source_read(pmi_source *s, void *dst, size_t n, const char *what);
pm_status pmi_source_skip(pmi_source *s, uint64_t n, const char *what);
/* After the last wanted byte: a gzip stream must reach its trailer (a
 * file cut there is an error); the bytes in between are dropped. */
pm_status pmi_source_finish(pmi_source *s);
/* An upper bound of the bytes left (deflate's 1032:1 for gzip), checked
 * before memory is allocated for what a header declares. */
uint64_t pmi_source_bound(const pmi_source *s);
/* Inflates one zlib (or gzip) stream of src_bytes into exactly dst_bytes;
 * more or fewer is a PARSE_ERROR naming `what`. */
pm_status pmi_inflate_block(const char *path, const char *what, const unsigned char *src,
                            size_t src_bytes, unsigned char *dst, size_t dst_bytes);

/* A byte source over the part of a file from byte `offset` on, which is
 * one gzip or zlib stream (concatenated gzip members allowed): the
 * streamed readers' gzip data. Close with pmi_source_close. */
pm_status pmi_source_open_at(pmi_source *s, const char *path, uint64_t offset);
/* After exactly `bytes` uncompressed bytes were read: the stream must end
 * there (its trailer reached, no byte more), as pmi_inflate_exact checks;
 * with allow_more, whatever follows is not read. */
pm_status pmi_source_end_exact(pmi_source *s, uint64_t bytes, const char *declared_by,
                               int allow_more);

/* Where a volume's samples lie in a file, for the streamed readers
 * (volume_source.c): the header read and every size checked against the
 * file, as the in-memory reader checks them. */
typedef struct pmi_volume_layout {
    char *data_path;         /* malloc'd: the file that holds the samples */
    uint64_t offset;         /* plain: byte of the first sample; gzip: the stream's first byte */
    uint64_t skip;           /* gzip: uncompressed bytes before the samples */
    int gz;                  /* the samples are inside a gzip/zlib stream */
    int allow_more;          /* bytes after the samples are allowed */
    int big_endian;          /* the samples' byte order */
    pm_sample_type type;
    size_t dims[3];
    double spacing[3], origin[3];
    const char *declared_by; /* "... the N bytes that <declared_by>" */
} pmi_volume_layout;

/* Raw samples (pm_raw_options) and NRRD files; NRRD ascii encoding is
 * PM_STATUS_UNSUPPORTED. Free L->data_path on success. */
pm_status pmi_raw_layout(const char *path, const pm_raw_options *raw, pmi_volume_layout *L);
pm_status pmi_nrrd_layout(const char *path, pmi_volume_layout *L);

/* Sample kinds of files, before conversion to a pm_sample_type. */
typedef enum pmi_kind {
    PMI_U8,
    PMI_I8,
    PMI_U16,
    PMI_I16,
    PMI_U32,
    PMI_I32,
    PMI_F32,
    PMI_F64
} pmi_kind;

size_t pmi_kind_size(pmi_kind k);
const char *pmi_kind_string(pmi_kind k);
/* The type samples of kind k become: the same type where the project has
 * it, f32 for i8, u32 and i32 (exact up to 2^24), f32 (f64 for f64) when
 * scaled (a rescale slope/intercept that is not the identity). */
pm_sample_type pmi_kind_target(pmi_kind k, int scaled);
/* pmi_volume_alloc for samples of kind k: the memory limit covers the
 * source and its converted copy together. */
pm_status pmi_volume_alloc_kind(const char *path, const char *where, size_t nx, size_t ny,
                                size_t nz, pmi_kind kind, int scaled, size_t max_memory_bytes,
                                uint64_t available, void **data, size_t *bytes);
/* Converts n samples of kind k (host byte order) at *data to
 * pmi_kind_target(k, scaled), value * slope + inter when scaled; *data is
 * replaced (the old block freed) when the type changes. */
pm_status pmi_samples_convert(const char *path, void **data, size_t n, pmi_kind kind, int scaled,
                              double slope, double inter, pm_sample_type *type);
/* Makes v (host data it owns, dims and type set, x fastest) an
 * axis-aligned grid in world coordinates: axes[a] is the world step of
 * index axis a and origin the world position of sample (0,0,0). Each index
 * axis must lie along a distinct world axis (off-axis parts within 1e-4 of
 * its length); the samples are reordered so that index axis w runs along
 * world axis w with positive spacing, and spacing and origin are set.
 * Oblique axes are PM_STATUS_UNSUPPORTED naming `what` and the matrix. */
pm_status pmi_volume_orient(const char *path, const char *what, const double axes[3][3],
                            const double origin[3], pm_volume *v);

/* Per-format entry points (one file each). */
pm_status pmi_ply_write(const char *path, const pm_mesh *mesh, int ascii);
pm_status pmi_obj_write(const char *path, const pm_mesh *mesh);
pm_status pmi_stl_write(const char *path, const pm_mesh *mesh);
pm_status pmi_vtk_write(const char *path, const pm_mesh *mesh);
pm_status pmi_nrrd_read(const char *path, size_t max_memory_bytes, pm_volume *out);
pm_status pmi_vtk_read_volume(const char *path, size_t max_memory_bytes, pm_volume *out);
pm_status pmi_raw_read(const char *path, const pm_raw_options *raw, size_t max_memory_bytes,
                       pm_volume *out);
pm_status pmi_ply_read_points(const char *path, size_t max_memory_bytes, pm_points *out);
pm_status pmi_vtk_read_points(const char *path, size_t max_memory_bytes, pm_points *out);
pm_status pmi_inr_read(const char *path, size_t max_memory_bytes, pm_volume *out);
pm_status pmi_mha_read(const char *path, size_t max_memory_bytes, pm_volume *out);
pm_status pmi_nifti_read(const char *path, size_t max_memory_bytes, pm_volume *out);
/* A directory of DICOM slices (dicom.cpp with GDCM; else UNSUPPORTED). */
pm_status pmi_dicom_read(const char *path, size_t max_memory_bytes, pm_volume *out);
pm_status pmi_vti_read(const char *path, size_t max_memory_bytes, pm_volume *out);
pm_status pmi_vtu_read_points(const char *path, size_t max_memory_bytes, pm_points *out);
pm_status pmi_bgeo_read(const char *path, size_t max_memory_bytes, pm_points *out);
pm_status pmi_csv_read(const char *path, size_t max_memory_bytes, pm_points *out);
pm_status pmi_vtp_write(const char *path, const pm_mesh *mesh, int base64);
/* As pmi_vtp_write, with a point array "GlobalIds" (Int64) when ids is not NULL. */
pm_status pmi_vtp_write_ids(const char *path, const pm_mesh *mesh, int base64, const uint64_t *ids);
pm_status pmi_glb_write(const char *path, const pm_mesh *mesh);
pm_status pmi_xyz_read(const char *path, pm_points_format format, size_t max_memory_bytes,
                       pm_points *out);

/* Vertex index of corner c of triangle t (soup meshes: 3t + c). */
static inline uint64_t pmi_mesh_index(const pm_mesh *m, size_t t, int c)
{
    return m->indices ? m->indices[3 * t + (size_t)c] : (uint64_t)(3 * t + (size_t)c);
}
/* Checks that a mesh can be written: host memory, arrays present, indices
 * in range (soups: 3 vertices per triangle). max_index is the largest
 * vertex index the format can store. */
pm_status pmi_mesh_check(const char *path, const pm_mesh *m, uint64_t max_index);
/* The same without reading the arrays: positions present, counts within
 * max_index, a soup's 3 vertices per triangle (any memory). */
pm_status pmi_mesh_check_counts(const char *path, const pm_mesh *m, uint64_t max_index);
/* A binary little-endian PLY of a mesh in ctx's memory, its body packed
 * by the backend (ply_body) and streamed into the file. */
pm_status pmi_ply_write_context(pm_context *ctx, const char *path, const pm_mesh *mesh);

#endif
