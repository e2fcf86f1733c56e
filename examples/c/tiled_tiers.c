/* A 4 x 4 grid of 2 x 2 tiles kept in host memory, some tiles evicted to
 * a file (one column asynchronously), a few tiles projected into a dense
 * tensor and handed to DLPack.
 * Build: cc tiled_tiers.c $(pkg-config --cflags --libs strideweave) */
#include <stdio.h>
#include <strideweave/strideweave.h>

#define TRY(call)                                                        \
    do {                                                                 \
        if ((call) != SW_OK) {                                           \
            fprintf(stderr, "%s failed: %s\n", #call, err.msg);          \
            return 1;                                                    \
        }                                                                \
    } while (0)

static void show(sw_tiled_evictable *te)
{
    static const char mark[] = "PSZ.";
    const sw_tile_geometry *g = sw_tiled_evictable_geometry(te);
    for (int64_t y = 0; y < g->grid[1]; y++) {
        printf("  ");
        for (int64_t x = 0; x < g->grid[0]; x++) {
            sw_te_tile_state s;
            int64_t c[2] = {x, y};
            if (sw_tiled_evictable_tile_state(te, c, &s, NULL) == SW_OK)
                putchar(mark[s.location]);
        }
        putchar('\n');
    }
}

int main(void)
{
    sw_error err;
    sw_carrier *primary, *secondary;
    sw_tiled_evictable *te;

    /* 8 x 8 Float32 values (slot i = x0 + 8 * x1) in host memory; slot i
     * holds i. The file starts empty. */
    TRY(sw_cpu_new(64, SW_DT_FLOAT32, 0, &primary, &err));
    float *v = sw_cpu_pointer(primary);
    for (int i = 0; i < 64; i++)
        v[i] = (float)i;
    TRY(sw_file_backed_new(NULL, SW_DT_FLOAT32, 0, &secondary, &err));
    int64_t grid[2] = {4, 4}, tile[2] = {2, 2};
    TRY(sw_tiled_evictable_new(primary, secondary, 2, grid, tile, &te, &err));
    sw_carrier_unref(primary); /* the TiledEvictable holds its own references */
    sw_carrier_unref(secondary);

    /* Evict the left half (tile columns x = 0, 1) to the file. */
    int64_t left[16], n = 0;
    for (int64_t y = 0; y < 4; y++)
        for (int64_t x = 0; x < 2; x++, n++) {
            left[2 * n] = x;
            left[2 * n + 1] = y;
        }
    TRY(sw_tiled_evictable_evict(te, left, n, &err));
    printf("after evicting the left half (P primary, S secondary):\n");
    show(te);

    /* Writing a slot of an evicted tile brings that tile back first. */
    float seven = 700.0f;
    TRY(sw_tiled_evictable_write(te, 9, 1, &seven, &err)); /* x = (1, 1): tile (0, 0) */
    printf("after writing slot 9:\n");
    show(te);

    /* Project tiles x in {3, 0}, y in {1}: a dense 4 x 2 tensor holding
     * tile (3, 1) then tile (0, 1), read from both tiers where they are. */
    int64_t xs[2] = {3, 0}, ys[1] = {1}, counts[2] = {2, 1};
    const int64_t *axes[2] = {xs, ys};
    sw_tile_selection sel = {2, counts, axes};
    sw_tensor *proj;
    TRY(sw_tiled_evictable_project(te, NULL, 0, &sel, NULL, &proj, &err));
    DLManagedTensorVersioned *dl;
    TRY(sw_tensor_to_dlpack(proj, &dl, &err));
    const float *p = (const float *)dl->dl_tensor.data;
    printf("projection %lld x %lld:", (long long)dl->dl_tensor.shape[0],
           (long long)dl->dl_tensor.shape[1]);
    for (int i = 0; i < 8; i++)
        printf(" %g", p[i]);
    printf("\n");
    /* Row 0 of the projection: x0 = 6, 7 (tile 3) then 0, 1 (tile 0) at x1 = 2. */
    int ok = p[0] == 22.0f && p[1] == 23.0f && p[2] == 16.0f && p[3] == 17.0f &&
             p[4] == 30.0f && p[7] == 25.0f;
    dl->deleter(dl);
    sw_tensor_unref(proj);

    /* Asynchronously: evict tile column x = 3 while this thread goes on,
     * then wait. The tiles are pending from the call until the commit. */
    int64_t col3[8] = {3, 0, 3, 1, 3, 2, 3, 3};
    sw_te_work *work;
    TRY(sw_tiled_evictable_evict_async(te, col3, 4, &work, &err));
    TRY(sw_te_work_wait(work, NULL, &err));
    sw_te_work_unref(work);
    printf("after evicting tile column 3 asynchronously:\n");
    show(te);

    float back;
    TRY(sw_tiled_evictable_read(te, 9, 1, &back, &err));
    ok = ok && back == 700.0f && sw_tiled_evictable_version(te) == 1;
    TRY(sw_tiled_evictable_release(te, &err)); /* frees every tile and the file */
    sw_tiled_evictable_unref(te);
    sw_move_drain();
    return ok ? 0 : 1;
}
