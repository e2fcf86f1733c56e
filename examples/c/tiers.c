/* Two storage tiers: values in host memory, evicted to a file, promoted
 * back, read again.
 * Build: cc tiers.c $(pkg-config --cflags --libs strideweave) */
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
    sw_carrier *cpu, *file, *e;

    /* 1024 Float32 slots in host memory, and an empty file for later. */
    TRY(sw_cpu_new(1024, SW_DT_FLOAT32, 0, &cpu, &err));
    float *p = sw_cpu_pointer(cpu);
    for (int i = 0; i < 1024; i++)
        p[i] = 0.5f * (float)i;
    TRY(sw_file_backed_new(NULL, SW_DT_FLOAT32, 0, &file, &err));

    /* The Evictable owns both tiers now; read and write through it. */
    TRY(sw_evictable_new(cpu, file, NULL, &e, &err));
    float v = 42.0f;
    TRY(sw_carrier_write(e, 7, 1, &v, &err));

    /* Evict: the values go to the file, the host memory is freed. */
    TRY(sw_evictable_evict(e, &err));
    sw_carrier *secondary = sw_evictable_secondary(e);
    printf("evicted: %d, values on %s (%s), primary released: %d\n",
           sw_evictable_is_evicted(e), sw_carrier_name(secondary),
           sw_file_backed_path(secondary), sw_carrier_is_released(cpu));
    sw_carrier_unref(secondary);
    if (sw_carrier_read(e, 7, 1, &v, &err) == SW_OK)
        return 1; /* evicted values cannot be read */
    printf("reading while evicted: %s\n", err.msg);

    /* Promote: back into fresh host memory, the file is deleted. */
    TRY(sw_evictable_promote(e, &err));
    float back[2];
    TRY(sw_carrier_read(e, 7, 2, back, &err));
    printf("promoted: slot 7 = %g, slot 8 = %g, version %llu\n", back[0], back[1],
           (unsigned long long)sw_carrier_version(e));
    int ok = back[0] == 42.0f && back[1] == 4.0f;

    /* Release frees whatever tier holds the values now. */
    TRY(sw_carrier_release(e, &err));
    sw_carrier_unref(e);
    sw_carrier_unref(file);
    sw_carrier_unref(cpu);
    return ok ? 0 : 1;
}
