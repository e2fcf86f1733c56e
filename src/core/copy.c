/* Span and strided copy kernels (see copy.h). */
#include "strideweave/copy.h"
#include "strideweave/layout.h"

#include <string.h>

sw_status sw_copy_span(void *dst, const void *src, size_t nbytes, sw_error *err)
{
    if (nbytes == 0)
        return SW_OK;
    if (!dst || !src)
        return sw_error_set(err, SW_EINVAL, "copy span: NULL %s pointer",
                            dst ? "source" : "destination");
    memcpy(dst, src, nbytes);
    return SW_OK;
}

int sw_copy_coalesce(int ndim, int64_t *extents, int64_t *src_strides,
                     int64_t *dst_strides)
{
    int n = 0;
    for (int i = 0; i < ndim; i++) {
        if (extents[i] == 1)
            continue;
        if (n > 0) {
            int64_t snext, dnext, merged;
            if (!__builtin_mul_overflow(src_strides[n - 1], extents[n - 1], &snext) &&
                !__builtin_mul_overflow(dst_strides[n - 1], extents[n - 1], &dnext) &&
                snext == src_strides[i] && dnext == dst_strides[i] &&
                !__builtin_mul_overflow(extents[n - 1], extents[i], &merged)) {
                extents[n - 1] = merged;
                continue;
            }
        }
        extents[n] = extents[i];
        src_strides[n] = src_strides[i];
        dst_strides[n] = dst_strides[i];
        n++;
    }
    return n;
}

/* Whether every offset sum(c_i * strides[i] * itemsize) fits in int64:
 * the positive and the negative parts are summed separately. */
static int offsets_fit(const int64_t *extents, const int64_t *strides, int ndim,
                       int64_t itemsize)
{
    int64_t hi = 0, lo = 0;
    for (int i = 0; i < ndim; i++) {
        int64_t reach;
        if (__builtin_mul_overflow(extents[i] - 1, strides[i], &reach) ||
            __builtin_mul_overflow(reach, itemsize, &reach))
            return 0;
        if (reach > 0 ? __builtin_add_overflow(hi, reach, &hi)
                      : __builtin_add_overflow(lo, reach, &lo))
            return 0;
    }
    return 1;
}

static sw_status validate(const void *dst, const int64_t *dst_strides,
                          const void *src, const int64_t *src_strides,
                          const int64_t *extents, int ndim, size_t itemsize,
                          int64_t *count, sw_error *err)
{
    if (ndim < 0 || ndim > SW_COPY_MAX_DIMS)
        return sw_error_set(err, SW_EINVAL, "copy: ndim must be in [0, %d], got %d",
                            SW_COPY_MAX_DIMS, ndim);
    if (itemsize == 0 || itemsize > (size_t)INT64_MAX)
        return sw_error_set(err, SW_EINVAL, "copy: itemsize must be positive");
    if (ndim > 0 && (!extents || !dst_strides || !src_strides))
        return sw_error_set(err, SW_EINVAL, "copy: NULL extents or strides");
    int64_t n = 1;
    for (int i = 0; i < ndim; i++) {
        if (extents[i] < 0)
            return sw_error_set(err, SW_EINVAL,
                                "copy: extent %d must be >= 0, got %lld", i,
                                (long long)extents[i]);
        if (extents[i] == 0)
            n = 0;
    }
    *count = n;
    if (n == 0)
        return SW_OK;
    for (int i = 0; i < ndim; i++)
        if (__builtin_mul_overflow(n, extents[i], &n))
            return sw_error_set(err, SW_EOVERFLOW, "copy: element count overflows int64");
    *count = n;
    if (!offsets_fit(extents, src_strides, ndim, (int64_t)itemsize) ||
        !offsets_fit(extents, dst_strides, ndim, (int64_t)itemsize))
        return sw_error_set(err, SW_EOVERFLOW, "copy: byte offset overflows int64");
    if (!dst || !src)
        return sw_error_set(err, SW_EINVAL, "copy: NULL %s pointer",
                            dst ? "source" : "destination");
    return SW_OK;
}

#define SW_COPY_ELEMS(T)                                                   \
    for (int64_t j = 0; j < n; j++) {                                      \
        T v;                                                               \
        memcpy(&v, s + j * ss, sizeof v);                                  \
        memcpy(d + j * ds, &v, sizeof v);                                  \
    }

/* One innermost run: n elements at byte strides ds / ss. */
static void copy_run(char *d, const char *s, int64_t n, int64_t ds, int64_t ss,
                     size_t itemsize)
{
    if (ds == (int64_t)itemsize && ss == (int64_t)itemsize) {
        memcpy(d, s, (size_t)n * itemsize);
        return;
    }
    switch (itemsize) {
    case 1: SW_COPY_ELEMS(uint8_t) break;
    case 2: SW_COPY_ELEMS(uint16_t) break;
    case 4: SW_COPY_ELEMS(uint32_t) break;
    case 8: SW_COPY_ELEMS(uint64_t) break;
    default:
        for (int64_t j = 0; j < n; j++)
            memcpy(d + j * ds, s + j * ss, itemsize);
        break;
    }
}

/* `rows` contiguous runs of `run` bytes, the rows `db` / `sb` bytes apart.
 * Short runs are common in gapped layouts (a 16-float inner mode); a
 * fixed-size memcpy compiles to a few vector moves where a call with a
 * variable size costs more than the copy. */
#define SW_COPY_ROWS(N)                                                    \
    for (int64_t j = 0; j < rows; j++)                                     \
        memcpy(d + j * db, s + j * sb, N);

static void copy_rows(char *d, const char *s, int64_t rows, int64_t db, int64_t sb,
                      size_t run)
{
    switch (run) {
    case 4: SW_COPY_ROWS(4) break;
    case 8: SW_COPY_ROWS(8) break;
    case 16: SW_COPY_ROWS(16) break;
    case 32: SW_COPY_ROWS(32) break;
    case 64: SW_COPY_ROWS(64) break;
    case 128: SW_COPY_ROWS(128) break;
    default: SW_COPY_ROWS(run) break;
    }
}

sw_status sw_copy_strided(void *dst, const int64_t *dst_strides,
                          const void *src, const int64_t *src_strides,
                          const int64_t *extents, int ndim, size_t itemsize,
                          sw_error *err)
{
    int64_t count = 0;
    sw_status st = validate(dst, dst_strides, src, src_strides, extents, ndim,
                            itemsize, &count, err);
    if (st != SW_OK || count == 0)
        return st;

    int64_t e[SW_COPY_MAX_DIMS], ss[SW_COPY_MAX_DIMS], ds[SW_COPY_MAX_DIMS];
    for (int i = 0; i < ndim; i++) {
        e[i] = extents[i];
        ss[i] = src_strides[i];
        ds[i] = dst_strides[i];
    }
    int n = sw_copy_coalesce(ndim, e, ss, ds);
    if (n == 0) {
        memcpy(dst, src, itemsize);
        return SW_OK;
    }
    /* Byte strides, and the byte distance back to coordinate 0 of a mode;
     * validate() proved both fit. */
    int64_t sb[SW_COPY_MAX_DIMS], db[SW_COPY_MAX_DIMS];
    int64_t sback[SW_COPY_MAX_DIMS], dback[SW_COPY_MAX_DIMS], idx[SW_COPY_MAX_DIMS];
    for (int i = 0; i < n; i++) {
        sb[i] = ss[i] * (int64_t)itemsize;
        db[i] = ds[i] * (int64_t)itemsize;
        sback[i] = sb[i] * (e[i] - 1);
        dback[i] = db[i] * (e[i] - 1);
        idx[i] = 0;
    }
    char *d = dst;
    const char *s = src;
    int64_t doff = 0, soff = 0;
    /* Contiguous innermost runs: modes 0 and 1 together are one call. */
    int rowwise = n >= 2 && db[0] == (int64_t)itemsize && sb[0] == (int64_t)itemsize;
    int first = rowwise ? 2 : 1;
    for (;;) {
        if (rowwise)
            copy_rows(d + doff, s + soff, e[1], db[1], sb[1], (size_t)e[0] * itemsize);
        else
            copy_run(d + doff, s + soff, e[0], db[0], sb[0], itemsize);
        int k = first;
        for (; k < n; k++) {
            if (++idx[k] < e[k]) {
                doff += db[k];
                soff += sb[k];
                break;
            }
            idx[k] = 0;
            doff -= dback[k];
            soff -= sback[k];
        }
        if (k == n)
            break;
    }
    return SW_OK;
}

sw_status sw_copy_contiguous_strides(const int64_t *extents, int ndim,
                                     int64_t *out, sw_error *err)
{
    if (ndim < 0 || ndim > SW_COPY_MAX_DIMS)
        return sw_error_set(err, SW_EINVAL, "copy: ndim must be in [0, %d], got %d",
                            SW_COPY_MAX_DIMS, ndim);
    int64_t acc = 1;
    for (int i = 0; i < ndim; i++) {
        if (extents[i] < 0)
            return sw_error_set(err, SW_EINVAL,
                                "copy: extent %d must be >= 0, got %lld", i,
                                (long long)extents[i]);
        out[i] = acc;
        /* An extent 0 mode still gets a distinct stride; the product of the
         * others is what must fit. */
        if (extents[i] > 1 && __builtin_mul_overflow(acc, extents[i], &acc))
            return sw_error_set(err, SW_EOVERFLOW,
                                "copy: contiguous strides overflow int64");
    }
    return SW_OK;
}

static int any_empty(const int64_t *extents, int ndim)
{
    for (int i = 0; i < ndim; i++)
        if (extents[i] == 0)
            return 1;
    return 0;
}

/* Gather and scatter differ only in which side is the packed buffer, so the
 * checks (and their order) live here once; `packed_dst` picks the side. */
static sw_status copy_packed(void *dst, const int64_t *dst_strides, const void *src,
                             const int64_t *src_strides, const int64_t *extents, int ndim,
                             size_t itemsize, int packed_dst, sw_error *err)
{
    int64_t contig[SW_COPY_MAX_DIMS];
    if (ndim > 0 && !extents)
        return sw_error_set(err, SW_EINVAL, "copy: NULL extents or strides");
    sw_status st = sw_copy_contiguous_strides(extents, ndim, contig, err);
    if (st != SW_OK)
        return st;
    if (any_empty(extents, ndim))
        return SW_OK;
    return sw_copy_strided(dst, packed_dst ? contig : dst_strides, src,
                           packed_dst ? src_strides : contig, extents, ndim, itemsize, err);
}

sw_status sw_copy_gather(void *dst, const void *src, const int64_t *src_strides,
                         const int64_t *extents, int ndim, size_t itemsize,
                         sw_error *err)
{
    return copy_packed(dst, NULL, src, src_strides, extents, ndim, itemsize, 1, err);
}

sw_status sw_copy_scatter(void *dst, const int64_t *dst_strides, const void *src,
                          const int64_t *extents, int ndim, size_t itemsize,
                          sw_error *err)
{
    return copy_packed(dst, dst_strides, src, NULL, extents, ndim, itemsize, 0, err);
}

int sw_copy_layout_modes(const sw_layout *layout, int64_t *extents, int64_t *strides)
{
    int n = 0;
    for (int32_t i = 0; i < layout->nleaves; i++) {
        if (layout->extents[i] == 1)
            continue;
        if (n == SW_COPY_MAX_DIMS)
            return -1;
        extents[n] = layout->extents[i];
        strides[n] = layout->strides[i];
        n++;
    }
    return n;
}
