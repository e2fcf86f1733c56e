/* Carrier handles through the public C API: state, slot access, release,
 * ownership claims, foreign ops tables (contract-carriers C-3..C-15,
 * C-13 claims). Each refusal is checked to change nothing. */
#include <pthread.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include <strideweave/strideweave.h>

static void test_cpu_slots_version_release(void)
{
    sw_error err;
    sw_carrier *c;
    CHECK(sw_cpu_new(4, SW_DT_FLOAT32, 0, &c, &err) == SW_OK);
    CHECK_EQ_I64(sw_carrier_size(c), 4);
    CHECK(sw_carrier_dtype(c) == SW_DT_FLOAT32);
    CHECK(strcmp(sw_carrier_name(c), "CPU") == 0);
    CHECK(sw_carrier_class_of(c) == &sw_cpu_class);
    float v[4] = {9, 9, 9, 9};
    CHECK(sw_carrier_read(c, 0, 4, v, &err) == SW_OK);
    CHECK(v[0] == 0 && v[3] == 0); /* zero-filled */
    CHECK_EQ_I64(sw_carrier_version(c), 0);
    float w[2] = {1.5f, -2.0f};
    CHECK(sw_carrier_write(c, 2, 2, w, &err) == SW_OK);
    CHECK_EQ_I64(sw_carrier_version(c), 1);
    CHECK(sw_carrier_read(c, 2, 2, v, &err) == SW_OK);
    CHECK(v[0] == 1.5f && v[1] == -2.0f);
    /* Range: no wrap-around, nothing written, version kept. */
    CHECK(sw_carrier_write(c, 3, 2, w, &err) == SW_ERANGE);
    CHECK(sw_carrier_write(c, -1, 1, w, &err) == SW_ERANGE);
    CHECK(sw_carrier_read(c, 4, 1, v, &err) == SW_ERANGE);
    CHECK_EQ_I64(sw_carrier_version(c), 1);
    CHECK(sw_cpu_pointer(c) != NULL);
    CHECK(((float *)sw_cpu_pointer(c))[2] == 1.5f);
    /* Release: idempotent, storage gone, introspection still works. */
    CHECK(sw_carrier_release(c, &err) == SW_OK);
    CHECK(sw_carrier_release(c, &err) == SW_OK);
    CHECK(sw_carrier_is_released(c));
    CHECK_EQ_I64(sw_carrier_size(c), 0);
    CHECK(sw_cpu_pointer(c) == NULL);
    CHECK(sw_carrier_read(c, 0, 1, v, &err) == SW_ESTATE);
    CHECK(strstr(err.msg, "released") != NULL);
    CHECK(sw_carrier_write(c, 0, 1, w, &err) == SW_ESTATE);
    CHECK_EQ_I64(sw_carrier_version(c), 1);
    sw_carrier_unref(c);
}

static void test_constructor_refusals_allocate_nothing(void)
{
    sw_error err;
    sw_carrier *c = NULL;
    int64_t live = sw_alloc_live_bytes();
    CHECK(sw_cpu_new(-1, SW_DT_FLOAT32, 0, &c, &err) == SW_EINVAL);
    CHECK(sw_cpu_new(4, SW_DT_FLOAT64, 0, &c, &err) == SW_EINVAL);
    CHECK(strstr(err.msg, "does not support storage dtype Float64") != NULL);
    CHECK(sw_cpu_new(4, SW_DT_FLOATING, 0, &c, &err) == SW_EINVAL);
    CHECK(sw_file_backed_new(NULL, SW_DT_BOOL, 0, &c, &err) == SW_EINVAL);
    CHECK(sw_file_backed_new("a/b", SW_DT_FLOAT32, 0, &c, &err) == SW_EINVAL);
    CHECK(sw_file_backed_new("..", SW_DT_FLOAT32, 0, &c, &err) == SW_EINVAL);
    unsigned char bad_bool[2] = {1, 2};
    CHECK(sw_generic_new(bad_bool, 2, SW_DT_BOOL, 0, &c, &err) == SW_EINVAL);
    CHECK(sw_fault_arm("alloc", 0, 1) == SW_OK);
    CHECK(sw_cpu_new(4, SW_DT_INT32, 0, &c, &err) == SW_ENOMEM);
    sw_fault_clear();
    CHECK(sw_fault_arm("alloc", 1, 1) == SW_OK); /* the handle after the storage */
    CHECK(sw_cpu_new(4, SW_DT_INT32, 0, &c, &err) == SW_ENOMEM);
    sw_fault_clear();
    CHECK(c == NULL);
    CHECK_EQ_I64(sw_alloc_live_bytes(), live);
}

static void test_immutable_and_generic(void)
{
    sw_error err;
    float vals[3] = {1, 2, 3};
    sw_carrier *g;
    CHECK(sw_generic_new(vals, 3, SW_DT_FLOAT32, SW_CARRIER_IMMUTABLE, &g, &err) == SW_OK);
    vals[0] = 100; /* copied: later changes are invisible */
    float v;
    CHECK(sw_carrier_read(g, 0, 1, &v, &err) == SW_OK);
    CHECK(v == 1);
    CHECK(sw_generic_pointer(g) != NULL);
    CHECK(((float *)sw_generic_pointer(g))[2] == 3.0f);
    CHECK(!sw_carrier_is_mutable(g));
    CHECK(sw_carrier_write(g, 0, 1, &v, &err) == SW_ESTATE);
    CHECK(strstr(err.msg, "immutable") != NULL);
    CHECK(sw_carrier_increment_version(g, &err) == SW_ESTATE);
    CHECK_EQ_I64(sw_carrier_version(g), 0);
    sw_carrier_unref(g);

    unsigned char b[3] = {1, 0, 1};
    CHECK(sw_generic_new(b, 3, SW_DT_BOOL, 0, &g, &err) == SW_OK);
    unsigned char two = 2, one = 1;
    CHECK(sw_carrier_write(g, 1, 1, &two, &err) == SW_EINVAL);
    CHECK_EQ_I64(sw_carrier_version(g), 0);
    CHECK(sw_carrier_write(g, 1, 1, &one, &err) == SW_OK);
    CHECK_EQ_I64(sw_carrier_version(g), 1);
    sw_carrier_unref(g); /* never released: the last reference frees it */

    /* The binding's view of Generic slots: the pointer of its own class
     * only, NULL once released. */
    CHECK(sw_generic_new(b, 3, SW_DT_BOOL, 0, &g, &err) == SW_OK);
    CHECK(sw_cpu_pointer(g) == NULL);
    CHECK(((unsigned char *)sw_generic_pointer(g))[2] == 1);
    CHECK(sw_carrier_release(g, &err) == SW_OK);
    CHECK(sw_generic_pointer(g) == NULL);
    sw_carrier_unref(g);
}

static void test_file_backed(void)
{
    sw_error err;
    sw_carrier *f, *g;
    CHECK(sw_file_backed_new("clib-test-carrier.bin", SW_DT_INT32, 0, &f, &err) == SW_OK);
    CHECK_EQ_I64(sw_carrier_size(f), 0);
    const char *path = sw_file_backed_path(f);
    CHECK(path && access(path, F_OK) == 0);
    CHECK(strstr(path, "clib-test-carrier.bin") != NULL);
    /* The same name again: refused, the existing file untouched. */
    CHECK(sw_file_backed_new("clib-test-carrier.bin", SW_DT_INT32, 0, &g, &err) == SW_EEXIST);
    CHECK(access(path, F_OK) == 0);
    CHECK(sw_file_backed_path(NULL) == NULL);
    CHECK(sw_carrier_release(f, &err) == SW_OK);
    path = sw_file_backed_path(f); /* still answered after release */
    CHECK(path && access(path, F_OK) != 0);
    sw_carrier_unref(f);
}

typedef struct access_arg {
    sw_carrier *c;
    uint64_t token;
    sw_status st;
    int is_mutable;
} access_arg;

static void *other_thread_access(void *p)
{
    access_arg *a = p;
    sw_error err;
    a->is_mutable = sw_carrier_is_mutable(a->c);
    a->st = sw_carrier_begin_owner_access(a->c, a->token, &err);
    return NULL;
}

static void test_ownership_claims(void)
{
    sw_error err;
    sw_carrier *c;
    uint64_t token = 0, t2;
    CHECK(sw_cpu_new(2, SW_DT_FLOAT32, 0, &c, &err) == SW_OK);
    CHECK(sw_carrier_claim(c, &token, &err) == SW_OK);
    CHECK(token != 0);
    CHECK(sw_carrier_is_owned(c));
    CHECK(!sw_carrier_is_mutable(c));
    CHECK(sw_carrier_claim(c, &t2, &err) == SW_ESTATE);
    float one = 1, v;
    CHECK(sw_carrier_read(c, 0, 1, &v, &err) == SW_OK); /* reads work */
    CHECK(sw_carrier_write(c, 0, 1, &one, &err) == SW_ESTATE);
    CHECK(strstr(err.msg, "owned") != NULL);
    CHECK(sw_carrier_release(c, &err) == SW_ESTATE);
    CHECK(!sw_carrier_is_released(c));
    CHECK(sw_carrier_begin_owner_access(c, token + 1, &err) == SW_ESTATE);
    CHECK(sw_carrier_begin_owner_access(c, token, &err) == SW_OK);
    CHECK(sw_carrier_begin_owner_access(c, token, &err) == SW_OK); /* re-entrant */
    CHECK(sw_carrier_has_owner_access(c));
    CHECK(sw_carrier_is_mutable(c));
    /* Thread-bound: another thread sees it immutable and cannot enter. */
    access_arg a = {c, token, SW_OK, 1};
    pthread_t th;
    pthread_create(&th, NULL, other_thread_access, &a);
    pthread_join(th, NULL);
    CHECK(a.st == SW_ESTATE);
    CHECK(a.is_mutable == 0);
    CHECK(sw_carrier_write(c, 0, 1, &one, &err) == SW_OK);
    CHECK_EQ_I64(sw_carrier_version(c), 1);
    CHECK(sw_carrier_end_owner_access(c, token, &err) == SW_OK);
    CHECK(sw_carrier_end_owner_access(c, token, &err) == SW_OK);
    CHECK(sw_carrier_end_owner_access(c, token, &err) == SW_ESTATE);
    CHECK(!sw_carrier_is_mutable(c));
    CHECK(sw_carrier_relinquish(c, token + 1, &err) == SW_ESTATE);
    CHECK(sw_carrier_is_owned(c));
    CHECK(sw_carrier_relinquish(c, token, &err) == SW_OK);
    CHECK(!sw_carrier_is_owned(c));
    CHECK(sw_carrier_is_mutable(c));
    CHECK(sw_carrier_release(c, &err) == SW_OK);
    CHECK(sw_carrier_claim(c, &t2, &err) == SW_ESTATE);
    sw_carrier_unref(c);
}

/* A carrier written "in another language": eight int32 slots behind an ops
 * table that counts its calls. */
typedef struct foreign {
    int32_t slots[8];
    int released, destroyed;
} foreign;

static int64_t f_size(void *impl) { (void)impl; return 8; }
static sw_status f_read(void *impl, int64_t slot, int64_t n, void *out, sw_error *err)
{
    (void)err;
    memcpy(out, ((foreign *)impl)->slots + slot, (size_t)n * 4);
    return SW_OK;
}
static sw_status f_write(void *impl, int64_t slot, int64_t n, const void *in, sw_error *err)
{
    if (((const int32_t *)in)[0] == -1) /* the storage refuses this value */
        return sw_error_set(err, SW_EIO, "foreign write failed");
    memcpy(((foreign *)impl)->slots + slot, in, (size_t)n * 4);
    return SW_OK;
}
static void f_release(void *impl) { ((foreign *)impl)->released++; }
static void f_destroy(void *impl) { ((foreign *)impl)->destroyed++; }
static const sw_carrier_class foreign_ops = {
    .name = "Foreign", .size = f_size, .read = f_read, .write = f_write,
    .release = f_release, .destroy = f_destroy,
};

static void test_foreign_ops_table(void)
{
    sw_error err;
    foreign impl = {{0}, 0, 0};
    sw_carrier *c;
    sw_carrier_class incomplete = foreign_ops;
    incomplete.read = NULL;
    CHECK(sw_carrier_new(&incomplete, &impl, SW_DT_INT32, 0, &c, &err) == SW_EINVAL);
    CHECK(sw_carrier_new(&foreign_ops, &impl, SW_DT_ANY, 0, &c, &err) == SW_EINVAL);
    CHECK(sw_carrier_new(&foreign_ops, &impl, SW_DT_INT32, 0, &c, &err) == SW_OK);
    CHECK(strcmp(sw_carrier_name(c), "Foreign") == 0);
    int32_t v = 7;
    CHECK(sw_carrier_write(c, 5, 1, &v, &err) == SW_OK);
    CHECK(impl.slots[5] == 7);
    CHECK_EQ_I64(sw_carrier_version(c), 1);
    v = -1; /* a failing write leaves the version alone */
    CHECK(sw_carrier_write(c, 5, 1, &v, &err) == SW_EIO);
    CHECK(strcmp(err.msg, "foreign write failed") == 0);
    CHECK_EQ_I64(sw_carrier_version(c), 1);
    CHECK(sw_carrier_write(c, 8, 1, &v, &err) == SW_ERANGE);
    sw_carrier_ref(c);
    sw_carrier_unref(c);
    CHECK(impl.released == 0 && impl.destroyed == 0);
    sw_carrier_unref(c); /* last: storage released once, impl destroyed once */
    CHECK(impl.released == 1 && impl.destroyed == 1);

    foreign impl2 = {{0}, 0, 0};
    CHECK(sw_carrier_new(&foreign_ops, &impl2, SW_DT_INT32, 0, &c, &err) == SW_OK);
    CHECK(sw_carrier_release(c, &err) == SW_OK);
    CHECK(sw_carrier_release(c, &err) == SW_OK);
    sw_carrier_unref(c);
    CHECK(impl2.released == 1 && impl2.destroyed == 1);
}

int main(void)
{
    int64_t live = sw_alloc_live_bytes();
    test_cpu_slots_version_release();
    test_constructor_refusals_allocate_nothing();
    test_immutable_and_generic();
    test_file_backed();
    test_ownership_claims();
    test_foreign_ops_table();
    /* The session directory path is the only allocation meant to stay. */
    CHECK(sw_alloc_live_bytes() - live < 4096);
    return check_report("carrier");
}
