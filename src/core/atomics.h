/* The relaxed atomics the host/device rules headers share (loop_rules.h,
 * post_rules.h): CUDA's atomic functions in device code, GCC's __atomic
 * builtins on the host, where the same steps run as OpenMP loops.
 * Internal header, C and CUDA C++. */
#ifndef PM_CORE_ATOMICS_H
#define PM_CORE_ATOMICS_H

#include <stdint.h>

#ifdef __CUDACC__
#define PMI_AHD static __host__ __device__ __forceinline__
#else
#define PMI_AHD static inline
#endif

/* *p += 1; returns the value before. */
PMI_AHD uint32_t pmi_atomic_inc(uint32_t *p)
{
#ifdef __CUDA_ARCH__
    return atomicAdd((unsigned int *)p, 1u);
#else
    return __atomic_fetch_add(p, 1u, __ATOMIC_RELAXED);
#endif
}

/* *p = min(*p, v): the first error of a parallel step by its code. */
PMI_AHD void pmi_atomic_min(unsigned long long *p, unsigned long long v)
{
#ifdef __CUDA_ARCH__
    atomicMin(p, v);
#else
    unsigned long long cur = __atomic_load_n(p, __ATOMIC_RELAXED);
    while (v < cur &&
           !__atomic_compare_exchange_n(p, &cur, v, 1, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
    }
#endif
}

#endif
