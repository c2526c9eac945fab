/* The value range of a host-memory volume: what a caller checks an iso
 * value against (an iso outside the range gives an empty surface) and how
 * many samples are NaN (they count as outside). */
#include <math.h>
#include <string.h>

#include "core/backend.h"
#include "core/util.h"

#define RANGE_LOOP(T)                                                                              \
    for (size_t k = 0; k < v.nz; k++)                                                              \
        for (size_t j = 0; j < v.ny; j++) {                                                        \
            const T *row = (const T *)v.data + k * v.slice_stride + j * v.row_stride;              \
            for (size_t i = 0; i < v.nx; i++) {                                                    \
                const double x = (double)row[i];                                                   \
                if (x != x) {                                                                      \
                    nan++;                                                                         \
                    continue;                                                                      \
                }                                                                                  \
                if (x < lo) lo = x;                                                                \
                if (x > hi) hi = x;                                                                \
            }                                                                                      \
        }

pm_status pm_volume_range(const pm_volume *volume, double *min, double *max, size_t *nan_count)
{
    pmi_clear_error();
    if (!min || !max || !nan_count)
        return pmi_error(PM_STATUS_INVALID_ARGUMENT, "pm_volume_range: NULL argument");
    pm_volume v;
    pm_status s = pmi_volume_resolve(volume, &v);
    if (s != PM_STATUS_OK) return s;
    double lo = INFINITY, hi = -INFINITY;
    size_t nan = 0;
    switch (v.type) {
    case PM_SAMPLE_U8: RANGE_LOOP(uint8_t) break;
    case PM_SAMPLE_U16: RANGE_LOOP(uint16_t) break;
    case PM_SAMPLE_I16: RANGE_LOOP(int16_t) break;
    case PM_SAMPLE_F32: RANGE_LOOP(float) break;
    case PM_SAMPLE_F64: RANGE_LOOP(double) break;
    }
    *min = lo <= hi ? lo : NAN;
    *max = lo <= hi ? hi : NAN;
    *nan_count = nan;
    return PM_STATUS_OK;
}
