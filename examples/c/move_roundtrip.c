/* A CPU tensor moves to a file and back, then goes to DLPack.
 * Build: cc move_roundtrip.c $(pkg-config --cflags --libs strideweave) */
#include <stdio.h>
#include <strideweave/strideweave.h>

#define TRY(call)                                                        \
    do {                                                                 \
        if ((call) != SW_OK) {                                           \
            fprintf(stderr, "%s failed: %s\n", #call, err.msg);          \
            return 1;                                                    \
        }                                                                \
    } while (0)

int main(void)
{
    sw_error err;
    sw_carrier *cpu, *file, *back;
    sw_tensor *t, *on_file, *home;
    sw_move_handle *m;

    /* A 3 x 4 Float32 tensor on 12 slots of host memory. */
    int64_t extents[2] = {3, 4};
    TRY(sw_cpu_new(12, SW_DT_FLOAT32, 0, &cpu, &err));
    TRY(sw_tensor_new_strided(cpu, 0, 2, extents, NULL, &t, &err));
    for (int64_t i = 0; i < 12; i++)
        TRY(sw_tensor_set_f32(t, i, 0.5f * (float)i, &err));

    /* Move it into an empty file: returns at once, the pool copies. */
    TRY(sw_file_backed_new(NULL, SW_DT_FLOAT32, 0, &file, &err));
    TRY(sw_move_async(t, file, NULL, &m, &err));
    TRY(sw_move_wait(m, &on_file, &err));
    sw_move_unref(m);
    printf("on %s: %lld slots, source released: %d\n", sw_carrier_name(file),
           (long long)sw_carrier_size(file), sw_carrier_is_released(cpu));

    /* And back into fresh host memory. */
    TRY(sw_cpu_new(12, SW_DT_FLOAT32, SW_CARRIER_EMPTY, &back, &err));
    TRY(sw_move(on_file, back, &home, &err));

    /* Hand it to any DLPack consumer; here we read it ourselves. */
    DLManagedTensorVersioned *dl;
    TRY(sw_tensor_to_dlpack(home, &dl, &err));
    const float *v = (const float *)dl->dl_tensor.data;
    printf("dlpack: ndim %d, shape %lld x %lld, v[11] = %g\n", (int)dl->dl_tensor.ndim,
           (long long)dl->dl_tensor.shape[0], (long long)dl->dl_tensor.shape[1], v[11]);
    int ok = v[11] == 5.5f;
    dl->deleter(dl);

    sw_tensor_unref(home);
    sw_tensor_unref(on_file);
    sw_tensor_unref(t);
    sw_carrier_unref(back);
    sw_carrier_unref(file);
    sw_carrier_unref(cpu);
    return ok ? 0 : 1;
}
