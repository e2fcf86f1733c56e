/* Views and many moves in flight: eight column views of one matrix are
 * copied into their own files at once, then checked.
 * Build: cc async_views.c $(pkg-config --cflags --libs strideweave) */
#include <stdio.h>
#include <strideweave/strideweave.h>

#define N 8

int main(void)
{
    sw_error err;
    sw_carrier *src[N], *dst[N];
    sw_move_handle *moves[N];
    int64_t extents[2] = {4, N}; /* mode 0 (rows, fastest) x mode 1 (columns) */
    int failed = 0;

    for (int j = 0; j < N; j++) {
        sw_tensor *matrix, *column;
        /* Each matrix gets its own carrier: a move releases its source. */
        if (sw_cpu_new(4 * N, SW_DT_INT32, 0, &src[j], &err) != SW_OK ||
            sw_tensor_new_strided(src[j], 0, 2, extents, NULL, &matrix, &err) != SW_OK)
            return fprintf(stderr, "setup: %s\n", err.msg), 1;
        for (int64_t i = 0; i < 4 * N; i++)
            sw_tensor_set_i32(matrix, i, (int32_t)(100 * j + i), &err);
        /* Column j: slice mode 1 to [j, j+1). */
        if (sw_tensor_slice(matrix, 1, j, j + 1, &column, &err) != SW_OK ||
            sw_file_backed_new(NULL, SW_DT_INT32, 0, &dst[j], &err) != SW_OK ||
            sw_move_async(column, dst[j], NULL, &moves[j], &err) != SW_OK)
            return fprintf(stderr, "move %d: %s\n", j, err.msg), 1;
        /* The move holds what it needs; dropping ours is fine. */
        sw_tensor_unref(column);
        sw_tensor_unref(matrix);
    }
    for (int j = 0; j < N; j++) {
        sw_tensor *moved;
        if (sw_move_wait(moves[j], &moved, &err) != SW_OK)
            return fprintf(stderr, "wait %d: %s\n", j, err.msg), 1;
        for (int64_t i = 0; i < 4; i++) {
            int32_t v;
            sw_tensor_get_i32(moved, i, &v, &err);
            if (v != 100 * j + 4 * j + i)
                failed = 1;
        }
        printf("column %d -> %s, %lld bytes, first value %d\n", j,
               sw_move_route_of(moves[j]) == SW_ROUTE_BULK ? "bulk" : "elementwise",
               (long long)sw_move_bytes(moves[j]), 100 * j + 4 * j);
        sw_tensor_unref(moved);
        sw_move_unref(moves[j]);
        sw_carrier_unref(dst[j]);
        sw_carrier_unref(src[j]);
    }
    return failed;
}
