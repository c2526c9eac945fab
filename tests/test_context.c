/* Contexts, status strings, memory round trips, device selection. */
#include "test_common.h"

int main(int argc, char **argv)
{
    pm_context *ctx;
    pm_device dev;
    if (!pmt_init(argc, argv, &ctx, &dev)) return PMT_SKIP;
    PMT_CHECK(pm_context_device(ctx) == dev, "device %d", (int)pm_context_device(ctx));

    /* Every status has a distinct, non-empty name. */
    for (int s = PM_STATUS_OK; s <= PM_STATUS_PARSE_ERROR; s++) {
        PMT_CHECK(pm_status_string((pm_status)s)[0] != '\0', "status %d", s);
        for (int t = 0; t < s; t++)
            PMT_CHECK(strcmp(pm_status_string((pm_status)s), pm_status_string((pm_status)t)) != 0,
                      "statuses %d and %d share a name", s, t);
    }
    PMT_CHECK(pm_context_create(NULL, NULL) == PM_STATUS_INVALID_ARGUMENT, "NULL out");
    pm_context_desc bad = {sizeof bad, (pm_device)7, 0, 0, NULL};
    pm_context *c2 = NULL;
    PMT_CHECK(pm_context_create(&bad, &c2) == PM_STATUS_INVALID_ARGUMENT && !c2, "bad device");
    PMT_CHECK(pm_last_error()[0] != '\0', "no message for a bad device");
    /* An older, smaller descriptor (without cuda_stream) still works. */
    pm_context_desc old = {offsetof(pm_context_desc, cuda_stream), PM_DEVICE_CPU, 0, 1, NULL};
    PMT_OK(pm_context_create(&old, &c2));
    PMT_CHECK(pm_context_device(c2) == PM_DEVICE_CPU, "old desc");
    pm_context_destroy(c2);
    pm_context_destroy(NULL);

    /* Memory round trip of awkward sizes. */
    size_t sizes[] = {0, 1, 31, 4097, 1u << 20};
    for (size_t k = 0; k < sizeof sizes / sizeof *sizes; k++) {
        size_t n = sizes[k];
        unsigned char *h = malloc(n + 1), *back;
        for (size_t i = 0; i < n; i++)
            h[i] = (unsigned char)pmt_rand();
        void *d = pmt_to_ctx(ctx, h, n);
        PMT_CHECK(d != NULL, "pm_alloc(%zu) gave NULL", n);
        back = pmt_to_host(ctx, d, n);
        PMT_CHECK(n == 0 || memcmp(h, back, n) == 0, "round trip of %zu bytes", n);
        pm_free(ctx, d);
        free(h);
        free(back);
    }
    void *p = NULL;
    PMT_CHECK(pm_alloc(ctx, SIZE_MAX, &p) != PM_STATUS_OK && p == NULL, "huge alloc succeeded");
    PMT_CHECK(pm_alloc(NULL, 8, &p) == PM_STATUS_INVALID_ARGUMENT, "NULL ctx");
    pm_free(ctx, NULL);
    PMT_OK(pm_context_synchronize(ctx));
    pm_context_destroy(ctx);
    return pmt_finish("test_context");
}
