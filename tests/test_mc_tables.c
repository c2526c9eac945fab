/* Marching cubes tables: the committed table equals the one generated from
 * first principles; every case uses exactly its crossing edges; at most 5
 * triangles; neighbouring cells agree on every shared face (watertightness
 * is a property of the table). `test_mc_tables print` writes the C text. */
#include "test_common.h"

#include "core/mc_tables.h"
#include "mc_tables_gen.h"

static int8_t gen_tri[256][16];
static uint8_t gen_count[256];

static void print_tables(void)
{
    printf("const int8_t pmi_mc_tri_table[256][16] = {\n");
    for (int c = 0; c < 256; c++) {
        printf("    {");
        for (int i = 0; i < 16; i++)
            printf("%d%s", gen_tri[c][i], i < 15 ? ", " : "");
        printf("},%s", c % 1 == 0 ? "\n" : "");
    }
    printf("};\n\nconst uint8_t pmi_mc_tri_count[256] = {\n   ");
    for (int c = 0; c < 256; c++)
        printf(" %d,%s", gen_count[c], c % 16 == 15 ? "\n   " : "");
    printf("};\n");
}

/* Twice the midpoint of edge e, shifted by `shift` along `axis`. */
static void mid2(int e, int axis, int shift, int m[3])
{
    for (int i = 0; i < 3; i++)
        m[i] =
            pmi_mc_corner[pmi_mc_edge_corner[e][0]][i] + pmi_mc_corner[pmi_mc_edge_corner[e][1]][i];
    m[axis] += 2 * shift;
}

static int on_face(int e, int axis, int side)
{
    return pmi_mc_corner[pmi_mc_edge_corner[e][0]][axis] == side &&
           pmi_mc_corner[pmi_mc_edge_corner[e][1]][axis] == side;
}

/* Directed boundary edges of a case's triangles lying on a face (a boundary
 * edge appears once; interior fan diagonals appear in both directions). */
static int face_segments(int cs, int axis, int side, int seg[12][2])
{
    int n = 0;
    const int8_t *t = pmi_mc_tri_table[cs];
    for (int k = 0; k < 3 * pmi_mc_tri_count[cs]; k++) {
        int a = t[k], b = t[(k % 3 == 2) ? k - 2 : k + 1];
        if (!on_face(a, axis, side) || !on_face(b, axis, side)) continue;
        int rev = 0;
        for (int q = 0; q < 3 * pmi_mc_tri_count[cs]; q++)
            if (t[q] == b && t[(q % 3 == 2) ? q - 2 : q + 1] == a) rev = 1;
        if (rev) continue;
        seg[n][0] = a;
        seg[n][1] = b;
        n++;
    }
    return n;
}

int main(int argc, char **argv)
{
    pmt_seed_init();
    int r = mc_generate_tables(gen_tri, gen_count);
    PMT_CHECK(r == 0, "generator reported a broken invariant");
    if (argc > 1 && strcmp(argv[1], "print") == 0) {
        print_tables();
        return r ? 1 : 0;
    }
    if (argc > 1 && strcmp(argv[1], "cuda") == 0 && !pm_cuda_available()) {
        printf("skipped: no usable CUDA device\n");
        return PMT_SKIP;
    }
    /* 1. The committed copy is the generated table. */
    PMT_CHECK(memcmp(gen_tri, pmi_mc_tri_table, sizeof gen_tri) == 0,
              "committed pmi_mc_tri_table differs from the generator (run test_mc_tables print)");
    PMT_CHECK(memcmp(gen_count, pmi_mc_tri_count, sizeof gen_count) == 0,
              "committed pmi_mc_tri_count differs from the generator");

    /* 2. Per case: count matches the list, each crossing edge used, only
     * crossing edges used, no degenerate triangles, <= 5 triangles. */
    int maxt = 0, hist[6] = {0};
    for (int cs = 0; cs < 256; cs++) {
        int n = pmi_mc_tri_count[cs];
        maxt = n > maxt ? n : maxt;
        if (n <= 5) hist[n]++;
        PMT_CHECK(n <= 5, "case %d has %d triangles", cs, n);
        PMT_CHECK(pmi_mc_tri_table[cs][3 * n] == -1, "case %d list not terminated", cs);
        int used[12] = {0};
        for (int k = 0; k < 3 * n; k++) {
            int e = pmi_mc_tri_table[cs][k];
            PMT_CHECK(e >= 0 && e < 12, "case %d bad edge %d", cs, e);
            if (e < 0 || e >= 12) continue;
            used[e] = 1;
        }
        for (int t = 0; t < n; t++) {
            const int8_t *v = &pmi_mc_tri_table[cs][3 * t];
            PMT_CHECK(v[0] != v[1] && v[1] != v[2] && v[0] != v[2], "case %d degenerate", cs);
        }
        for (int e = 0; e < 12; e++) {
            int c0 = pmi_mc_edge_corner[e][0], c1 = pmi_mc_edge_corner[e][1];
            int crossing = ((cs >> c0) & 1) != ((cs >> c1) & 1);
            PMT_CHECK(crossing == used[e], "case %d edge %d crossing %d used %d", cs, e, crossing,
                      used[e]);
        }
    }
    PMT_CHECK(pmi_mc_tri_count[0] == 0 && pmi_mc_tri_count[255] == 0, "empty cases");
    /* Case 1 (corner 0 inside): one triangle on edges 0, 3, 8, facing +xyz. */
    PMT_CHECK(pmi_mc_tri_count[1] == 1 && pmi_mc_tri_table[1][0] == 0 &&
                  pmi_mc_tri_table[1][1] == 3 && pmi_mc_tri_table[1][2] == 8,
              "case 1 is %d %d %d", pmi_mc_tri_table[1][0], pmi_mc_tri_table[1][1],
              pmi_mc_tri_table[1][2]);

    /* 3. Neighbouring cells agree: for every axis and every pair of cases
     * whose shared face has the same corner states, cell A's boundary
     * segments on its far face equal cell B's on its near face, reversed. */
    int pairs = 0;
    for (int axis = 0; axis < 3; axis++) {
        for (int a = 0; a < 256; a++) {
            for (int b = 0; b < 256; b++) {
                int same = 1;
                for (int c = 0; c < 8 && same; c++) {
                    if (pmi_mc_corner[c][axis] != 1) continue;
                    /* The corner of B at the same place: coord axis 0. */
                    int want[3] = {pmi_mc_corner[c][0], pmi_mc_corner[c][1], pmi_mc_corner[c][2]};
                    want[axis] = 0;
                    for (int d = 0; d < 8; d++)
                        if (pmi_mc_corner[d][0] == want[0] && pmi_mc_corner[d][1] == want[1] &&
                            pmi_mc_corner[d][2] == want[2])
                            same = ((a >> c) & 1) == ((b >> d) & 1);
                }
                if (!same) continue;
                pairs++;
                int sa[12][2], sb[12][2];
                int na = face_segments(a, axis, 1, sa), nb = face_segments(b, axis, 0, sb);
                PMT_CHECK(na == nb, "axis %d cases %d|%d: %d vs %d segments", axis, a, b, na, nb);
                for (int i = 0; i < na; i++) {
                    int pa0[3], pa1[3], found = 0;
                    mid2(sa[i][0], axis, 0, pa0);
                    mid2(sa[i][1], axis, 0, pa1);
                    for (int j = 0; j < nb; j++) {
                        int pb0[3], pb1[3];
                        mid2(sb[j][0], axis, 1, pb0);
                        mid2(sb[j][1], axis, 1, pb1);
                        if (!memcmp(pa0, pb1, sizeof pa0) && !memcmp(pa1, pb0, sizeof pa1))
                            found = 1;
                    }
                    PMT_CHECK(found, "axis %d cases %d|%d: segment %d-%d not matched reversed",
                              axis, a, b, sa[i][0], sa[i][1]);
                }
            }
        }
    }
    PMT_CHECK(pairs == 3 * 256 * 16, "pairs %d", pairs);
    printf("max triangles per case %d; histogram 0..5: %d %d %d %d %d %d\n", maxt, hist[0], hist[1],
           hist[2], hist[3], hist[4], hist[5]);
    return pmt_finish("test_mc_tables");
}
