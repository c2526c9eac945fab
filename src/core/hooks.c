/* PYRAMESH_TEST_HOOKS, parsed strictly (see hooks.h). */
#include "core/hooks.h"

#include <stdlib.h>
#include <string.h>

#include "core/util.h"

#ifdef PM_TEST_HOOKS
static const struct {
    const char *name;
    unsigned bit;
} hook_names[] = {
    {"nopdl", PMI_HOOK_NOPDL},       {"scalar", PMI_HOOK_SCALAR},   {"twopass", PMI_HOOK_TWOPASS},
    {"levels", PMI_HOOK_LEVELS},     {"slabs", PMI_HOOK_SLABS},     {"split", PMI_HOOK_SPLIT},
    {"nopool", PMI_HOOK_NOPOOL},     {"stream", PMI_HOOK_STREAM},   {"epochs", PMI_HOOK_EPOCHS},
    {"walkfull", PMI_HOOK_WALKFULL}, {"walkall", PMI_HOOK_WALKALL}, {"nograph", PMI_HOOK_NOGRAPH},
    {"strips", PMI_HOOK_STRIPS},
};
#endif

pm_status pmi_hooks(unsigned *hooks)
{
    *hooks = 0;
    const char *e = getenv("PYRAMESH_TEST_HOOKS");
    if (!e || !*e) return PM_STATUS_OK;
#ifndef PM_TEST_HOOKS
    return pmi_error(PM_STATUS_INVALID_ARGUMENT,
                     "PYRAMESH_TEST_HOOKS is set (\"%s\") but this build has no test hooks "
                     "(configure with -DPM_TEST_HOOKS=ON)",
                     e);
#else
    const char *p = e;
    while (*p) {
        size_t len = strcspn(p, ",");
        unsigned bit = 0;
        for (size_t h = 0; h < sizeof hook_names / sizeof hook_names[0]; h++)
            if (strlen(hook_names[h].name) == len && strncmp(p, hook_names[h].name, len) == 0)
                bit = hook_names[h].bit;
        if (!bit)
            return pmi_error(
                PM_STATUS_INVALID_ARGUMENT,
                "PYRAMESH_TEST_HOOKS: unknown hook \"%.*s\" in \"%s\" (expected a "
                "comma-separated list of nopdl, scalar, twopass, "
                "levels, slabs, split, nopool, stream, epochs, walkfull, walkall, nograph, strips)",
                (int)len, p, e);
        *hooks |= bit;
        p += len;
        if (*p == ',') p++;
    }
    return PM_STATUS_OK;
#endif
}
