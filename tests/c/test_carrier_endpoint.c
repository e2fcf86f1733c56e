/* White-box: the endpoints the core's transfer kernels read and write
 * (sw_carrier_endpoint, a block carrier's endpoint and its device's
 * primitive), which the public headers do not show. The tests of the
 * public API (test_carrier.c, test_block_device.c) see only include/. */
#include <string.h>

#include "blockdev_internal.h" /* sw_block_device_primitive, sw_blockdev_transfer */
#include "carrier_internal.h"  /* sw_carrier_endpoint */
#include "check.h"
#include "loop.h"
#include <strideweave/strideweave.h>

#define MIB (1LL << 20)

/* A carrier "in another language" with no storage callback: its impl is
 * eight int32 slots. */
static int64_t f_size(void *impl) { (void)impl; return 8; }
static sw_status f_read(void *impl, int64_t slot, int64_t n, void *out, sw_error *err)
{
    (void)err;
    memcpy(out, (int32_t *)impl + slot, (size_t)n * sizeof(int32_t));
    return SW_OK;
}
static sw_status f_write(void *impl, int64_t slot, int64_t n, const void *in, sw_error *err)
{
    (void)err;
    memcpy((int32_t *)impl + slot, in, (size_t)n * sizeof(int32_t));
    return SW_OK;
}
static void f_nothing(void *impl) { (void)impl; }
static const sw_carrier_class foreign_ops = {
    .name = "Foreign", .size = f_size, .read = f_read, .write = f_write,
    .release = f_nothing, .destroy = f_nothing,
};

/* sw_carrier_endpoint: CPU and Generic memory, a FileBacked file; a
 * released one answers with no storage; a foreign class without a storage
 * callback and a STATE_ONLY class have none. A Generic carrier's memory is
 * an endpoint although its class has no storage callback. */
static void test_endpoints(void)
{
    sw_error err;
    sw_endpoint e;
    sw_carrier *cpu = NULL, *gen = NULL, *file = NULL, *foreign_c = NULL, *state = NULL;
    float vals[4] = {1, 2, 3, 4};
    CHECK(sw_cpu_new(4, SW_DT_FLOAT32, 0, &cpu, &err) == SW_OK);
    CHECK(sw_generic_new(vals, 4, SW_DT_FLOAT32, 0, &gen, &err) == SW_OK);
    CHECK(sw_file_backed_new(NULL, SW_DT_FLOAT32, 0, &file, &err) == SW_OK);
    CHECK(sw_carrier_allocate(file, 4, &err) == SW_OK);
    CHECK(sw_carrier_endpoint(cpu, &e) == 1);
    CHECK(e.kind == SW_ENDPOINT_HOST && e.host == sw_cpu_pointer(cpu) && e.offset == 0);
    CHECK(sw_carrier_endpoint(gen, &e) == 1);
    CHECK(e.kind == SW_ENDPOINT_HOST && e.host == sw_generic_pointer(gen) && e.host != NULL);
    CHECK(e.host && ((float *)e.host)[2] == 3.0f);
    CHECK(sw_carrier_endpoint(file, &e) == 1);
    CHECK(e.kind == SW_ENDPOINT_FILE && e.fd == sw_file_backed_fd(file) && e.fd >= 0);
    int32_t impl[8] = {0};
    CHECK(sw_carrier_new(&foreign_ops, impl, SW_DT_INT32, 0, &foreign_c, &err) == SW_OK);
    CHECK(sw_carrier_endpoint(foreign_c, &e) == 0);
    static const sw_carrier_class state_only = {.name = "StateOnly",
                                                .flags = SW_CARRIER_CLASS_STATE_ONLY};
    CHECK(sw_carrier_new(&state_only, NULL, SW_DT_ANY, 0, &state, &err) == SW_OK);
    CHECK(sw_carrier_endpoint(state, &e) == 0);
    CHECK(sw_carrier_endpoint(NULL, &e) == 0);
    sw_carrier *all[3] = {cpu, gen, file};
    for (int i = 0; i < 3; i++) {
        CHECK(sw_carrier_release(all[i], &err) == SW_OK);
        CHECK(sw_carrier_endpoint(all[i], &e) == 1);
        CHECK(e.host == NULL && e.fd == -1);
        sw_carrier_unref(all[i]);
    }
    sw_carrier_unref(foreign_c);
    sw_carrier_unref(state);
}

/* ---- on a loop device ------------------------------------------------------ */

/* A block carrier's endpoint is its device's file at its extent, and the
 * device's primitive takes a transfer through it. */
static void test_block_device_endpoint(const char *path)
{
    sw_error err;
    sw_block_device *d = NULL;
    CHECK_EQ_I64(sw_block_device_open(path, &d, &err), SW_OK);
    if (!d)
        return;
    float vals[4] = {1, 2, 3, 4}, got[4] = {0};
    sw_carrier *a = NULL, *b = NULL, *cpu = NULL;
    CHECK_EQ_I64(sw_cpu_new(4, SW_DT_FLOAT32, 0, &cpu, &err), SW_OK);
    CHECK_EQ_I64(sw_carrier_write(cpu, 0, 4, vals, &err), SW_OK);
    CHECK_EQ_I64(sw_block_device_allocate(d, 1, SW_DT_FLOAT32, 0, &a, &err), SW_OK);
    CHECK_EQ_I64(sw_block_device_allocate(d, 8, SW_DT_FLOAT32, 0, &b, &err), SW_OK);
    CHECK(sw_block_device_primitive(d) != NULL && sw_block_device_primitive(NULL) == NULL);
    sw_endpoint e = {.kind = SW_ENDPOINT_HOST, .fd = -7, .offset = 99};
    CHECK(sw_block_device_carrier_endpoint(cpu, &e) == 0);
    CHECK(e.fd == -7 && e.offset == 99); /* untouched */
    CHECK(sw_block_device_carrier_endpoint(b, &e) == 1);
    CHECK(e.kind == SW_ENDPOINT_FILE && e.fd == sw_block_device_primitive(d)->fd);
    CHECK_EQ_I64(e.offset * 4, sw_block_device_carrier_offset_bytes(b));
    CHECK(e.offset > 0);
    /* A transfer through them lands in b's slots. */
    sw_transfer t = {.src = {.kind = SW_ENDPOINT_HOST, .host = sw_cpu_pointer(cpu), .fd = -1},
                     .dst = e, .itemsize = 4, .bulk = 1, .cosize = 4, .ndim = 0};
    CHECK_EQ_I64(sw_blockdev_transfer(sw_block_device_primitive(d), &t, &err), SW_OK);
    CHECK_EQ_I64(sw_carrier_read(b, 0, 4, got, &err), SW_OK);
    CHECK(memcmp(got, vals, sizeof vals) == 0);
    sw_carrier_unref(a);
    sw_carrier_unref(b);
    sw_carrier_unref(cpu);
    CHECK_EQ_I64(sw_block_device_close(d, &err), SW_OK);
    sw_block_device_unref(d);
}

int main(void)
{
    test_endpoints();
    loop_dev loop;
    const char *why = loop_unavailable();
    if (!why && loop_attach(&loop, 64 * MIB, 0, &why) == 0) {
        test_block_device_endpoint(loop.path);
        loop_detach(&loop);
    } else {
        printf("skip the loop device test: %s\n", why);
    }
    return check_report("carrier_endpoint");
}
