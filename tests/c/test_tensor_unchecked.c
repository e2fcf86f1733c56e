/* Tensors a binding made on placements it checked itself
 * (sw_tensor_new_unchecked) and its export of one whose lifetime it owns
 * (sw_tensor_to_dlpack_owned), through the public C API: the handle is
 * made whatever the carrier's state or size, yet every access through it
 * is still checked against the carrier (elements, values, DLPack, a move's
 * span); a STATE_ONLY carrier's tensor answers SW_ENOTSUP. */
#include <string.h>

#include "check.h"
#include <strideweave/strideweave.h>
#include <strideweave/binding.h>

static sw_layout *flat(int64_t n, int64_t stride)
{
    sw_error err;
    return sw_layout_new(1, (const uint8_t[]){SW_NODE_LEAF}, &n, &stride, &err);
}

static void test_arguments(void)
{
    sw_error err;
    sw_carrier *c;
    sw_tensor *t = NULL;
    sw_layout *l = flat(4, 1);
    CHECK(sw_cpu_new(4, SW_DT_FLOAT32, 0, &c, &err) == SW_OK);
    CHECK(sw_tensor_new_unchecked(NULL, 0, l, &t, &err) == SW_ETYPE);
    CHECK(sw_tensor_new_unchecked(c, 0, NULL, &t, &err) == SW_ETYPE);
    CHECK(sw_tensor_new_unchecked(c, 0, l, NULL, &err) == SW_ETYPE);
    CHECK(sw_tensor_new_unchecked(c, -1, l, &t, &err) == SW_EINVAL);
    CHECK(t == NULL);
    /* The layout is copied: the caller's may go at once. */
    CHECK(sw_tensor_new_unchecked(c, 0, l, &t, &err) == SW_OK);
    sw_layout_free(l);
    CHECK_EQ_I64(sw_tensor_size(t), 4);
    CHECK_EQ_I64(sw_tensor_layout(t)->cosize, 4);
    CHECK(sw_tensor_set_f32(t, 3, 7.0f, &err) == SW_OK);
    float v = 0;
    CHECK(sw_tensor_get_f32(t, 3, &v, &err) == SW_OK && v == 7.0f);
    sw_tensor_unref(t);
    sw_carrier_unref(c);
}

/* A span past the carrier's 4 slots: made, but every access refuses it. */
static void test_span_past_the_carrier(void)
{
    sw_error err;
    sw_carrier *c, *d;
    sw_tensor *t, *view;
    sw_layout *l = flat(4, 2); /* cosize 7 */
    CHECK(sw_cpu_new(4, SW_DT_FLOAT32, 0, &c, &err) == SW_OK);
    CHECK(sw_tensor_new(c, 0, l, &t, &err) == SW_ERANGE);
    CHECK(sw_tensor_new_unchecked(c, 0, l, &t, &err) == SW_OK);
    float v = 0, all[4];
    CHECK(sw_tensor_get_f32(t, 1, &v, &err) == SW_OK); /* slot 2 is inside */
    CHECK(sw_tensor_get_f32(t, 3, &v, &err) == SW_ERANGE);
    CHECK(sw_tensor_set_f32(t, 3, 1.0f, &err) == SW_ERANGE);
    CHECK(sw_tensor_read_values(t, all, &err) == SW_ERANGE);
    DLManagedTensorVersioned *dl = NULL;
    CHECK(sw_tensor_to_dlpack(t, &dl, &err) == SW_ERANGE && dl == NULL);
    /* A move checks the span as sw_move_span_async does; nothing changes. */
    CHECK(sw_cpu_new(0, SW_DT_FLOAT32, 0, &d, &err) == SW_OK);
    sw_move_handle *m = NULL;
    CHECK(sw_move_async(t, d, NULL, &m, &err) == SW_ERANGE && m == NULL);
    sw_tensor *moved = NULL;
    CHECK(sw_move(t, d, &moved, &err) == SW_ERANGE && moved == NULL);
    CHECK_EQ_I64(sw_carrier_size(d), 0);
    CHECK(sw_carrier_pending_roles(c) == 0 && sw_carrier_pending_roles(d) == 0);
    CHECK(!sw_carrier_is_released(c));
    /* A view of it is as unchecked: its span (slots 2..6) is refused too. */
    CHECK(sw_tensor_slice(t, 0, 1, 4, &view, &err) == SW_OK);
    CHECK(sw_move_async(view, d, NULL, &m, &err) == SW_ERANGE && m == NULL);
    CHECK(sw_tensor_read_values(view, all, &err) == SW_ERANGE);
    sw_tensor_unref(view);
    /* One inside: moves like any tensor. */
    sw_tensor_unref(t);
    sw_layout_free(l);
    l = flat(2, 2);
    CHECK(sw_tensor_new_unchecked(c, 1, l, &t, &err) == SW_OK);
    CHECK(sw_tensor_set_f32(t, 1, 5.0f, &err) == SW_OK);
    sw_carrier *d3;
    CHECK(sw_cpu_new(3, SW_DT_FLOAT32, 0, &d3, &err) == SW_OK);
    CHECK(sw_move(t, d3, &moved, &err) == SW_OK);
    sw_carrier_unref(d3);
    CHECK(sw_tensor_get_f32(moved, 1, &v, &err) == SW_OK && v == 5.0f);
    sw_tensor_unref(moved);
    sw_tensor_unref(t);
    sw_layout_free(l);
    sw_carrier_unref(c);
    sw_carrier_unref(d);
}

static void test_released_carrier(void)
{
    sw_error err;
    sw_carrier *c;
    sw_tensor *t;
    sw_layout *l = flat(2, 1);
    CHECK(sw_cpu_new(2, SW_DT_INT32, 0, &c, &err) == SW_OK);
    CHECK(sw_carrier_release(c, &err) == SW_OK);
    CHECK(sw_tensor_new(c, 0, l, &t, &err) == SW_ESTATE);
    CHECK(sw_tensor_new_unchecked(c, 0, l, &t, &err) == SW_OK);
    int32_t v;
    CHECK(sw_tensor_get_i32(t, 0, &v, &err) == SW_ESTATE);
    CHECK(sw_tensor_set_i32(t, 0, 1, &err) == SW_ESTATE);
    sw_tensor_unref(t);
    sw_layout_free(l);
    sw_carrier_unref(c);
}

static const sw_carrier_class python_like = {
    .name = "PythonCarrier", .flags = SW_CARRIER_CLASS_STATE_ONLY,
};

static void test_state_only_carrier(void)
{
    sw_error err;
    sw_carrier *c, *d;
    sw_tensor *t;
    sw_layout *l = flat(3, 1);
    CHECK(sw_carrier_new(&python_like, NULL, SW_DT_FLOAT32, 0, &c, &err) == SW_OK);
    CHECK(sw_tensor_new(c, 0, l, &t, &err) == SW_ENOTSUP);
    CHECK(sw_tensor_new_unchecked(c, 0, l, &t, &err) == SW_OK);
    CHECK(sw_tensor_carrier(t) == c && sw_tensor_dtype(t) == SW_DT_FLOAT32);
    float v, all[3];
    CHECK(sw_tensor_get_f32(t, 0, &v, &err) == SW_ENOTSUP);
    CHECK(sw_tensor_set_f32(t, 0, 1.0f, &err) == SW_ENOTSUP);
    CHECK(sw_tensor_read_values(t, all, &err) == SW_ENOTSUP);
    DLManagedTensorVersioned *dl = NULL;
    CHECK(sw_tensor_to_dlpack(t, &dl, &err) == SW_ENOTSUP);
    CHECK(sw_cpu_new(0, SW_DT_FLOAT32, 0, &d, &err) == SW_OK);
    sw_move_handle *m = NULL;
    CHECK(sw_move_async(t, d, NULL, &m, &err) == SW_ENOTSUP && m == NULL);
    CHECK(err.detail == SW_MOVE_SOURCE_STATE_ONLY);
    CHECK(sw_carrier_pending_roles(c) == 0 && sw_carrier_pending_roles(d) == 0);
    CHECK_EQ_I64(sw_carrier_version(c), 0);
    sw_tensor_unref(t);
    sw_layout_free(l);
    sw_carrier_unref(c);
    sw_carrier_unref(d);
}

static void *pin_seen;
static int releases;
static void owner_release(void *ctx, void *pin)
{
    (void)ctx;
    pin_seen = pin;
    releases++;
    sw_alloc_unpin(pin);
}

static void test_dlpack_owned(void)
{
    sw_error err;
    sw_carrier *c, *f;
    sw_tensor *t;
    int ctx;
    sw_layout *l = flat(2, 3);
    sw_dlpack_owner owner = {.versioned = 1, .read_only = -1, .manager_ctx = &ctx,
                             .release = owner_release};
    CHECK(sw_cpu_new(8, SW_DT_FLOAT32, 0, &c, &err) == SW_OK);
    CHECK(sw_tensor_new_unchecked(c, 1, l, &t, &err) == SW_OK);
    DLManagedTensorVersioned *v = NULL;
    CHECK(sw_tensor_to_dlpack_owned(NULL, &owner, (void **)&v, &err) == SW_ETYPE);
    CHECK(sw_tensor_to_dlpack_owned(t, NULL, (void **)&v, &err) == SW_ETYPE);
    CHECK(sw_tensor_to_dlpack_owned(t, &owner, (void **)&v, &err) == SW_OK);
    CHECK(v->manager_ctx == &ctx && v->dl_tensor.byte_offset == 4);
    CHECK(v->dl_tensor.strides[0] == 3 && v->dl_tensor.shape[0] == 2);
    CHECK(!(v->flags & DLPACK_FLAG_BITMASK_READ_ONLY));
    void *data = v->dl_tensor.data;
    CHECK(data == sw_cpu_pointer(c));
    v->deleter(v);
    CHECK(releases == 1 && pin_seen == data);
    /* The span is checked at export; a released carrier is refused. */
    sw_tensor *far;
    CHECK(sw_tensor_new_unchecked(c, 6, l, &far, &err) == SW_OK);
    CHECK(sw_tensor_to_dlpack_owned(far, &owner, (void **)&v, &err) == SW_ERANGE);
    sw_tensor_unref(far);
    CHECK(sw_carrier_release(c, &err) == SW_OK);
    CHECK(sw_tensor_to_dlpack_owned(t, &owner, (void **)&v, &err) == SW_ESTATE);
    sw_tensor_unref(t);
    sw_carrier_unref(c);
    /* Only CPU storage is one pinnable block. */
    CHECK(sw_file_backed_new(NULL, SW_DT_FLOAT32, 0, &f, &err) == SW_OK);
    CHECK(sw_tensor_new_unchecked(f, 0, l, &t, &err) == SW_OK);
    CHECK(sw_tensor_to_dlpack_owned(t, &owner, (void **)&v, &err) == SW_ENOTSUP);
    CHECK(releases == 1);
    sw_tensor_unref(t);
    CHECK(sw_carrier_release(f, &err) == SW_OK);
    sw_carrier_unref(f);
    sw_layout_free(l);
}

int main(void)
{
    test_arguments();
    test_span_past_the_carrier();
    test_released_carrier();
    test_state_only_carrier();
    test_dlpack_owned();
    return check_report("tensor_unchecked");
}
