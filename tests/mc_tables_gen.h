/* The marching cubes triangle table regenerated from first principles
 * (mc_tables_gen.c), for test_mc_tables, which guards the committed copy in
 * src/core/mc_tables.c. */
#ifndef PM_TESTS_MC_TABLES_GEN_H
#define PM_TESTS_MC_TABLES_GEN_H

#include <stdint.h>

/* Returns 0 on success, -1 when the rule breaks an invariant (inconsistent
 * chaining, more than 5 triangles). */
int mc_generate_tables(int8_t tri[256][16], uint8_t count[256]);

#endif
