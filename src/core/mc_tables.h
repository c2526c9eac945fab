/* Marching cubes tables (Lorensen and Cline 1987), in Paul Bourke's corner
 * and edge numbering, generated from first principles by
 * tests/mc_tables_gen.c (face-local disambiguation: ambiguous faces separate
 * the inside corners; test_mc_tables guards this copy).
 * Shared by the CPU and CUDA backends. Internal header. */
#ifndef PM_CORE_MC_TABLES_H
#define PM_CORE_MC_TABLES_H

#include <stdint.h>

/* Corner c of a cell at lattice offset (pmi_mc_corner[c][0..2]):
 * 0=(0,0,0) 1=(1,0,0) 2=(1,1,0) 3=(0,1,0), 4..7 the same at z+1. */
extern const uint8_t pmi_mc_corner[8][3];
/* Edge e joins corners pmi_mc_edge_corner[e][0] (the LOWER lattice index)
 * and [1] (the higher); it runs along axis pmi_mc_edge_axis[e] (0=x, 1=y,
 * 2=z) from the lower corner. */
extern const uint8_t pmi_mc_edge_corner[12][2];
extern const uint8_t pmi_mc_edge_axis[12];
/* Case index: bit c set when corner c is inside. Triangle t of a case uses
 * edges pmi_mc_tri_table[case][3t..3t+2] (counter-clockwise seen from
 * outside the inside region); the list ends with -1. At most 5 triangles. */
extern const int8_t pmi_mc_tri_table[256][16];
extern const uint8_t pmi_mc_tri_count[256];

#endif
