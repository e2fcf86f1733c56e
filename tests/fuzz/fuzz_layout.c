/* libFuzzer target: layout construction and the walks every Python call
 * builds on, from arbitrary bytes. The input is read as a profile (one byte
 * per marker), then extents and strides; whatever sw_layout_new accepts
 * must survive every query without a sanitizer report. Seeds in
 * tests/fuzz/seeds_layout: interleaved layouts whose injectivity check once
 * enumerated ~65M coordinates (63 s an input), now settled in 45 steps. */
#include <stdint.h>
#include <string.h>

#include "strideweave/layout.h"

static int64_t take_i64(const uint8_t **p, size_t *left)
{
    int64_t v = 0;
    size_t n = *left < 8 ? *left : 8;
    memcpy(&v, *p, n);
    *p += n;
    *left -= n;
    return v;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    int32_t nprofile = data[0] % 80;
    data++, size--;
    if ((size_t)nprofile > size)
        return 0;
    uint8_t profile[80];
    int32_t nleaves = 0;
    for (int32_t i = 0; i < nprofile; i++) {
        profile[i] = (uint8_t)(1 + data[i] % 3); /* Leaf, Push, Pop */
        nleaves += profile[i] == SW_NODE_LEAF;
    }
    data += nprofile, size -= (size_t)nprofile;
    int64_t extents[80], strides[80];
    for (int32_t i = 0; i < nleaves; i++) {
        /* Mostly small values, sometimes anything (overflow checks). */
        int64_t e = take_i64(&data, &size), s = take_i64(&data, &size);
        extents[i] = (e & 1) ? e >> 1 : (e >> 1) % 9;
        strides[i] = (s & 1) ? s >> 1 : (s >> 1) % 17;
    }
    sw_error err;
    sw_layout *l = sw_layout_new(nprofile, profile, extents, strides, &err);
    if (!l)
        return 0;
    sw_layout_is_injective(l, &err);
    int64_t idx;
    for (int64_t k = 0; k < l->size && k < 64; k++)
        sw_layout_index(l, k, &idx, &err);
    sw_layout_index(l, l->size, &idx, &err); /* out of range: refused */
    for (int32_t i = 0; i < l->rank && i < 8; i++) {
        sw_layout *m = sw_layout_mode(l, i, &err);
        sw_layout_free(m);
    }
    sw_layout *c = sw_layout_canonical(l->nprofile, l->profile, l->extents, &err);
    sw_layout_free(c);
    sw_layout *copy = sw_layout_copy(l, &err);
    sw_layout_free(copy);
    sw_layout_free(l);
    return 0;
}
