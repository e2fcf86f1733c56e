// libstrideweave from C++: every installed header is included and one of
// its functions called, so a header without its extern "C" guard fails to
// link here (the C++ compiler would look for a mangled name).
// Build: c++ cxx_link.cpp $(pkg-config --cflags --libs strideweave)
#include <cstdio>
#include <cstring>

#include <strideweave/alloc.h>
#include <strideweave/binding.h>
#include <strideweave/block_device.h>
#include <strideweave/carrier.h>
#include <strideweave/clock.h>
#include <strideweave/copy.h>
#include <strideweave/dlpack.h>
#include <strideweave/dtype.h>
#include <strideweave/engine.h>
#include <strideweave/evictable.h>
#include <strideweave/executor.h>
#include <strideweave/export.h>
#include <strideweave/filestore.h>
#include <strideweave/layout.h>
#include <strideweave/layout_view.h>
#include <strideweave/move.h>
#include <strideweave/parallel.h>
#include <strideweave/route.h>
#include <strideweave/status.h>
#include <strideweave/strideweave.h>
#include <strideweave/tensor.h>
#include <strideweave/tensor_ops.h>
#include <strideweave/tensor_walk.h>
#include <strideweave/testing.h>
#include <strideweave/tile_set.h>
#include <strideweave/tiled_evictable.h>
#include <strideweave/tiles.h>

static int failures = 0;

static void expect(bool ok, const char *what)
{
    if (!ok) {
        std::fprintf(stderr, "cxx_link: %s\n", what);
        failures++;
    }
}

static void count_part(void *ctx, int part)
{
    (void)part;
    __atomic_fetch_add(static_cast<int *>(ctx), 1, __ATOMIC_RELAXED);
}

// A CPU tensor moved to another CPU carrier (carrier, tensor, move, layout,
// layout_view, tensor_walk, dlpack, binding, evictable headers).
static void tensor_part(sw_error &err)
{
    sw_carrier *cpu = nullptr, *dst = nullptr;
    sw_tensor *t = nullptr, *moved = nullptr;
    sw_move_handle *m = nullptr;
    int64_t extents[2] = {2, 3};
    if (sw_cpu_new(6, SW_DT_FLOAT32, 0, &cpu, &err) != SW_OK ||
        sw_tensor_new_strided(cpu, 0, 2, extents, nullptr, &t, &err) != SW_OK ||
        sw_tensor_set_f32(t, 5, 2.5f, &err) != SW_OK ||
        sw_cpu_new(6, SW_DT_FLOAT32, SW_CARRIER_EMPTY, &dst, &err) != SW_OK ||
        sw_move_async(t, dst, nullptr, &m, &err) != SW_OK ||
        sw_move_wait(m, &moved, &err) != SW_OK) {
        expect(false, err.msg);
    } else {
        float v = 0;
        expect(sw_tensor_get_f32(moved, 5, &v, &err) == SW_OK && v == 2.5f, "moved value");
        expect(sw_carrier_pending_roles(dst) == 0, "pending roles after commit");
        expect(sw_evictable_is_evicted(dst) == 0, "a CPU carrier is not evicted");
        const sw_layout *layout = sw_tensor_layout(moved);
        expect(sw_layout_is_flat(layout) == 1, "flat layout");
        sw_layout *copy = sw_layout_copy(layout, &err);
        expect(copy != nullptr, "layout copy");
        sw_layout_free(copy);
        sw_layout *permuted = nullptr;
        int64_t order[2] = {1, 0};
        expect(sw_layout_view_permute(&layout, 1, order, 2, &permuted, nullptr, &err) == SW_OK,
               "permute");
        sw_layout_free(permuted);
        DLManagedTensorVersioned *dl = nullptr;
        expect(sw_tensor_to_dlpack(moved, &dl, &err) == SW_OK, "dlpack export");
        if (dl != nullptr)
            dl->deleter(dl);
    }
    if (m != nullptr)
        sw_move_unref(m);
    sw_tensor_unref(moved);
    sw_tensor_unref(t);
    sw_carrier_unref(dst);
    sw_carrier_unref(cpu);
}

// One call into each remaining header.
static void other_headers(sw_error &err)
{
    void *p = sw_malloc(16);
    expect(p != nullptr, "sw_malloc");
    char src[4] = {'a', 'b', 'c', 'd'};
    expect(sw_copy_span(p, src, sizeof src, &err) == SW_OK && std::memcmp(p, src, 4) == 0,
           "sw_copy_span");
    sw_free(p);
    expect(sw_clock_ns() > 0, "sw_clock_ns");
    expect(sw_dtype_slot_bytes(SW_DT_FLOAT32) == 4, "sw_dtype_slot_bytes");
    expect(sw_dlpack_block_bytes(1, 2) > 0, "sw_dlpack_block_bytes");
    expect(sw_filestore_creator_pid() >= 0, "sw_filestore_creator_pid");
    expect(sw_engine_held() == 0, "sw_engine_held");
    expect(sw_fault_enabled() == 0 || sw_fault_enabled() == 1, "sw_fault_enabled");
    expect(sw_route_registry_version() == sw_route_registry_version(), "sw_route_registry_version");
    expect(sw_binary_result_dtype(SW_DT_FLOAT32, SW_DT_FLOAT32) == SW_DT_FLOAT32,
           "sw_binary_result_dtype");
    expect(sw_block_device_of(nullptr) == nullptr, "sw_block_device_of");
    expect(sw_tiled_evictable_of(nullptr) == nullptr, "sw_tiled_evictable_of");

    int parts = 0;
    sw_parallel_run(3, count_part, &parts);
    expect(parts == 3 && sw_parallel_width() >= 1, "sw_parallel_run");

    sw_completion *c = sw_completion_new();
    expect(c != nullptr, "sw_completion_new");
    if (c != nullptr) {
        sw_completion_signal(c);
        expect(sw_completion_is_done(c) == 1, "sw_completion_is_done");
        sw_completion_free(c);
    }

    sw_tile_geometry g;
    int64_t grid[1] = {2}, tile[1] = {3};
    sw_tile_set *set = nullptr;
    expect(sw_tiles_geometry_init(&g, 1, grid, tile, &err) == SW_OK, "sw_tiles_geometry_init");
    expect(sw_tile_set_new(1, 0, nullptr, &g, &set, &err) == SW_OK, "sw_tile_set_new");
    sw_tile_set_unref(set);

    sw_error_clear(&err);
}

int main()
{
    sw_error err;
    sw_error_clear(&err);
    tensor_part(err);
    other_headers(err);
    if (failures == 0)
        std::printf("C++: every public header links\n");
    return failures == 0 ? 0 : 1;
}
