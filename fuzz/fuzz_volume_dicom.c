/* libFuzzer target: the DICOM series reader (src/io/dicom.cpp, GDCM). The
 * input is one slice file, written into a private directory beside a
 * fixed valid slice (tests/dicom_writer.h: 5 x 4 u16 at z = 0); the
 * directory goes through pm_volume_read and what is read through marching
 * cubes. The seeds (fuzz/make_corpus.sh builds this file with
 * -DPM_FUZZ_DICOM_SEEDS into a small program that writes them) are
 * partners of that slice at z = 2.5 with every pixel format and rescale,
 * so mutations reach the series checks, the reading and the conversion.
 *
 * GDCM as Debian builds it (3.0) keeps its assert()s, and malformed files
 * reach them (GDCM >= 3.2 throws instead, which dicom.cpp catches). The
 * reader walks every file's element structure first and refuses a file
 * that ends inside an element or has an unknown VR (dicom.cpp); values
 * GDCM asserts on (samples per pixel not 1, 3 or 4, ...) still reach it.
 * So that the fuzzer gets past them to our own code, this target
 *  - turns those GDCM assert()s into a rejected input: its
 *    __assert_fail() takes over glibc's while the reader runs and jumps
 *    back here; each assert site is reported once on stderr, its input
 *    saved as gdcm-assert-<file>-<line>.dcm in $PM_FUZZ_GDCM_ASSERTS
 *    when set. The jump skips GDCM's destructors: their memory is lost
 *    (leak detection is off in this target) and their files are closed
 *    here.
 * PM_FUZZ_DICOM_STRICT=1 turns that off: an assert() aborts (to reproduce one: fuzz_volume_dicom FILE). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../tests/dicom_writer.h"

static const uint16_t dcm_pixels[20] = {0,   100, 200, 300, 400, 500, 600, 700, 800, 900,
                                        900, 800, 700, 600, 500, 400, 300, 200, 100, 0};

#ifdef PM_FUZZ_DICOM_SEEDS

/* Writes the seed corpus into argv[1] (an existing directory). */
int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s DIR\n", argv[0]);
        return 2;
    }
    int16_t sgn[20];
    uint8_t u8[20];
    for (int i = 0; i < 20; i++) {
        sgn[i] = (int16_t)(dcm_pixels[i] - 450);
        u8[i] = (uint8_t)(dcm_pixels[i] / 4);
    }
    struct {
        const char *name;
        unsigned bits, stored, sign;
        int rescale;
        double slope, intercept;
        const void *px;
    } seeds[] = {
        {"u16.dcm", 16, 0, 0, 0, 1, 0, dcm_pixels},
        {"i16_hu.dcm", 16, 0, 1, 1, 1, -1024, sgn},
        {"u16_12bit.dcm", 16, 12, 0, 1, 0.37, -10.25, dcm_pixels},
        {"i16_12bit.dcm", 16, 12, 1, 0, 1, 0, sgn},
        {"u8.dcm", 8, 0, 0, 0, 1, 0, u8},
        {"i8.dcm", 8, 0, 1, 1, 2.5, 0, u8},
    };
    int status = 0;
    for (size_t k = 0; k < sizeof seeds / sizeof seeds[0]; k++) {
        dcmw_slice s = dcmw_axial(4, 5, 2.5, seeds[k].px);
        s.bits_allocated = seeds[k].bits;
        s.bits_stored = seeds[k].stored;
        s.pixel_representation = seeds[k].sign;
        s.rescale = seeds[k].rescale;
        s.slope = seeds[k].slope;
        s.intercept = seeds[k].intercept;
        s.instance = 1;
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", argv[1], seeds[k].name);
        if (dcmw_write(path, &s) != 0) {
            perror(path);
            status = 1;
        }
    }
    return status;
}

#else

#include <fcntl.h>
#include <setjmp.h>

#include "fuzz_common.h"

static char dcm_dir[256], dcm_input[300], dcm_partner[300];
static int dcm_strict;

/* The GDCM assert()s met: where, how often, the first input saved. */
static const char *dcm_assert_dir;
static const uint8_t *dcm_data;
static size_t dcm_size;
static jmp_buf dcm_jump;
static volatile int dcm_armed;
static struct {
    char file[96];
    unsigned line;
    unsigned long count;
} dcm_sites[64];
static int dcm_nsites;
static unsigned long dcm_asserts;

static void dcm_note_assert(const char *file, unsigned line, const char *expr)
{
    dcm_asserts++;
    const char *base = strrchr(file, '/') ? strrchr(file, '/') + 1 : file;
    for (int i = 0; i < dcm_nsites; i++)
        if (dcm_sites[i].line == line && strcmp(dcm_sites[i].file, base) == 0) {
            dcm_sites[i].count++;
            return;
        }
    if (dcm_nsites == 64) return;
    snprintf(dcm_sites[dcm_nsites].file, sizeof dcm_sites[0].file, "%s", base);
    dcm_sites[dcm_nsites].line = line;
    dcm_sites[dcm_nsites++].count = 1;
    char path[512] = "";
    if (dcm_assert_dir) {
        snprintf(path, sizeof path, "%s/gdcm-assert-%s-%u.dcm", dcm_assert_dir, base, line);
        FILE *f = fopen(path, "wb");
        if (f) {
            if (dcm_size) fwrite(dcm_data, 1, dcm_size, f);
            fclose(f);
        }
    }
    fprintf(stderr, "fuzz_volume_dicom: GDCM assert at %s:%u (%s)%s%s\n", base, line, expr,
            path[0] ? ", input saved as " : "", path);
}

/* Takes over glibc's for the whole process (GDCM is a shared library, so
 * its calls come here); outside the reader, and for asserts outside GDCM's
 * sources (ours are findings), it does what glibc's does. */
__attribute__((noreturn)) void __assert_fail(const char *expr, const char *file, unsigned line,
                                             const char *func)
{
    const char *base = strrchr(file, '/') ? strrchr(file, '/') + 1 : file;
    if (dcm_armed && strncmp(base, "gdcm", 4) == 0) {
        dcm_armed = 0;
        dcm_note_assert(file, line, expr);
        longjmp(dcm_jump, 1);
    }
    fprintf(stderr, "%s:%u: %s: Assertion `%s' failed.\n", file, line, func, expr);
    abort();
}

/* The jump skips GDCM's destructors, whose memory is lost on purpose. */
const char *__asan_default_options(void) { return "detect_leaks=0"; }

static void dcm_cleanup(void)
{
    if (dcm_asserts)
        fprintf(stderr,
                "fuzz_volume_dicom: %lu GDCM assert()s at %d sites taken as rejected inputs "
                "(Debian's GDCM aborts there; see the top of fuzz_volume_dicom.c)\n",
                dcm_asserts, dcm_nsites);
    unlink(dcm_input);
    unlink(dcm_partner);
    rmdir(dcm_dir);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    const char *tmp = getenv("TMPDIR");
    snprintf(dcm_dir, sizeof dcm_dir, "%s/pm_fuzz_dicom_XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(dcm_dir)) abort();
    snprintf(dcm_input, sizeof dcm_input, "%s/input.dcm", dcm_dir);
    snprintf(dcm_partner, sizeof dcm_partner, "%s/partner.dcm", dcm_dir);
    dcmw_slice s = dcmw_axial(4, 5, 0, dcm_pixels);
    if (dcmw_write(dcm_partner, &s) != 0) abort();
    atexit(dcm_cleanup);
    const char *strict = getenv("PM_FUZZ_DICOM_STRICT");
    dcm_strict = strict && *strict == '1';
    const char *dir = getenv("PM_FUZZ_GDCM_ASSERTS");
    dcm_assert_dir = dir && *dir ? dir : NULL;
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* Truncated or damaged element structure is refused by the reader's
     * own check (src/io/dicom.cpp) before GDCM sees the file. */
    FILE *f = fopen(dcm_input, "wb");
    if (!f) abort();
    if (size && fwrite(data, 1, size, f) != size) abort();
    fclose(f);
    /* The descriptors open now; any other open after a jump is GDCM's. */
    unsigned char open_before[256];
    for (int fd = 0; fd < 256; fd++)
        open_before[fd] = fcntl(fd, F_GETFD) != -1;
    dcm_data = data;
    dcm_size = size;
    pm_volume vol;
    if (setjmp(dcm_jump)) {
        for (int fd = 0; fd < 256; fd++)
            if (!open_before[fd] && fcntl(fd, F_GETFD) != -1) close(fd);
        return 0;
    }
    dcm_armed = !dcm_strict;
    pm_status st = pm_volume_read(dcm_dir, NULL, PM_FUZZ_MAX_MEMORY, &vol);
    dcm_armed = 0;
    if (st == PM_STATUS_OK) {
        pm_fuzz_extract(&vol);
        pm_volume_free(&vol);
    } else if (pm_last_error()[0] == '\0') {
        abort(); /* every failure must say why */
    }
    return 0;
}

#endif
