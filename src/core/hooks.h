/* Test hooks: force a fallback path that users reach only with inputs too
 * large or too rare for the test suite, so that every path has a test.
 * Compiled in only with the CMake option PM_TEST_HOOKS (ON by default; a
 * packager may turn it off). The environment variable PYRAMESH_TEST_HOOKS
 * holds a comma-separated list of hook names; an unknown name, or the
 * variable set in a build without hooks, is an error of the call that reads
 * it, so a misspelled test variant fails instead of testing the default.
 * Each path that ran is reported in pm_isosurface_report.path, and the
 * tests assert it. Internal header (pmi_ prefix). */
#ifndef PM_CORE_HOOKS_H
#define PM_CORE_HOOKS_H

#include "pyramesh.h"

#ifdef __cplusplus
extern "C" {
#endif

/* CUDA: every kernel launched the ordinary way (devices before 9.0). */
#define PMI_HOOK_NOPDL 4u
/* CPU marching cubes: the portable path of CPUs without AVX2. */
#define PMI_HOOK_SCALAR 8u
/* CPU marching cubes: the two-pass extraction (taken when the slab walk
 * declines), writing the mesh with streaming stores (taken for meshes of
 * 64 MiB and more). */
#define PMI_HOOK_TWOPASS 16u
/* CUDA: what a device that cannot launch a cooperative grid runs:
 * pm_collide's level-by-level traversal instead of its persistent kernel,
 * and adaptive subdivision's red promotion a pass at a time (the host
 * reading a word per pass) instead of its closure in one launch. */
#define PMI_HOOK_LEVELS 32u
/* pm_isosurface of a host volume on a GPU: streamed through it in slabs
 * (the path of volumes larger than the GPU's memory), five of them. */
#define PMI_HOOK_SLABS 64u
/* A GPU's slab windows: every window owning more than one slice is
 * refused as over its memory budget, so the slabs are meshed as halves
 * down to single slices (the path of dense surfaces under a tight limit). */
#define PMI_HOOK_SPLIT 128u
/* CUDA: the device refuses a stream-ordered memory pool (older drivers
 * and devices), so scratch is cudaMalloc memory. */
#define PMI_HOOK_NOPOOL 256u
/* CUDA marching cubes: pass 1 by the streaming classification on small
 * volumes too (which take the direct classification by default), so the
 * suite's volumes, shaped for its chunks and bands, test it. */
#define PMI_HOOK_STREAM 512u
/* CUDA marching cubes: the direct classification's epochs wrap around
 * after 3 calls instead of 2^30 - 1, so its tile states are zeroed again
 * (report: states=zeroed) as a long-running context's are. */
#define PMI_HOOK_EPOCHS 1024u
/* CPU marching cubes: the slab walk takes no sample of rows before it
 * starts, so that a volume whose mesh passes its budget declines only
 * once it has (report: declined=budget). */
#define PMI_HOOK_WALKFULL 2048u
/* Loop subdivision: the even rule walks every fan on every level, never
 * marking the vertices with a split edge first (MARK_ENDS, taken when few
 * edges split), so the suite compares the two paths' bytes. */
#define PMI_HOOK_WALKALL 4096u
/* CUDA marching cubes: the capture of a repeated call's launches into a
 * graph fails after the launches were captured (as a driver refusing the
 * graph would), so the shape's calls run their launches. */
#define PMI_HOOK_NOGRAPH 8192u
/* CUDA adaptive subdivision: red promotion by strip rounds from the
 * start, without the chain passes first (the rounds are taken after a
 * pass that cut a chain at its cap of steps), so every mesh of the suite
 * tests the rounds' bytes against the CPU's chains. */
#define PMI_HOOK_STRIPS 16384u

/* The hooks set in PYRAMESH_TEST_HOOKS (0 when unset). Returns
 * PM_STATUS_INVALID_ARGUMENT, with the message set, for an unknown name or
 * when the variable is set in a build without PM_TEST_HOOKS. The variable
 * is read at every call (tests change it between calls). */
pm_status pmi_hooks(unsigned *hooks);

#ifdef __cplusplus
}
#endif
#endif
