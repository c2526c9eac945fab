/* DICOM series without GDCM: the build found no libgdcm-dev, so a
 * directory given as a volume is refused with the way to get support. */
#ifndef PM_HAVE_GDCM
#include "io/io.h"

pm_status pmi_dicom_read(const char *path, size_t max_memory_bytes, pm_volume *out)
{
    (void)max_memory_bytes;
    (void)out;
    return pmi_error(PM_STATUS_UNSUPPORTED,
                     "%s: is a directory: DICOM series need GDCM, and this pyramesh was built "
                     "without it (install libgdcm-dev and rebuild)",
                     path);
}
#else
/* dicom.cpp provides pmi_dicom_read; ISO C wants a declaration here. */
typedef int pmi_dicom_stub_unused;
#endif
