/* Carrier handles through the public C API: state, slot access, release,
 * ownership claims, foreign ops tables (contract-carriers C-3..C-15,
 * C-13 claims). Each refusal is checked to change nothing. */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <string.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include <strideweave/strideweave.h>
#include <strideweave/binding.h>
#include "strideweave/testing.h"

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

/* Growth, the descriptor a binding reads and writes through, and the
 * refusals of growth (each leaves the size as it was). */
/* Growth for a caller that writes the whole span next: the size is
 * recorded, the file stays empty until that write sets its length; the
 * checks are the allocate ones; a grown carrier grows as allocate does. */
static void test_file_backed_allocate_for_write(void)
{
    sw_error err;
    sw_carrier *f, *cpu;
    CHECK(sw_file_backed_new(NULL, SW_DT_FLOAT32, 0, &f, &err) == SW_OK);
    CHECK(sw_cpu_new(2, SW_DT_FLOAT32, 0, &cpu, &err) == SW_OK);
    CHECK(sw_file_backed_allocate_for_write(cpu, 4, &err) == SW_ETYPE);
    CHECK(sw_file_backed_allocate_for_write(f, INT64_MAX / 2, &err) == SW_EOVERFLOW);
    CHECK_EQ_I64(sw_carrier_size(f), 0);
    int fd = sw_file_backed_fd(f);
    CHECK(sw_file_backed_allocate_for_write(f, 4, &err) == SW_OK);
    CHECK_EQ_I64(sw_carrier_size(f), 4);
    CHECK_EQ_I64(lseek(fd, 0, SEEK_END), 0); /* no resize */
    float v[4] = {1, 2, 3, 4}, r[4] = {0};
    CHECK(sw_carrier_write(f, 0, 4, v, &err) == SW_OK);
    CHECK_EQ_I64(lseek(fd, 0, SEEK_END), 16);
    CHECK(sw_carrier_read(f, 0, 4, r, &err) == SW_OK);
    CHECK(r[0] == 1 && r[3] == 4);
    /* Not empty any more: a real growth, new slots read 0. */
    CHECK(sw_file_backed_allocate_for_write(f, 6, &err) == SW_OK);
    CHECK_EQ_I64(lseek(fd, 0, SEEK_END), 24);
    CHECK(sw_file_backed_allocate_for_write(f, 5, &err) == SW_EINVAL);
    /* Pending refuses it with nothing changed. */
    sw_carrier *g;
    CHECK(sw_file_backed_new(NULL, SW_DT_FLOAT32, 0, &g, &err) == SW_OK);
    sw_carrier_mark_pending(g, SW_CARRIER_PENDING_DESTINATION);
    CHECK(sw_file_backed_allocate_for_write(g, 4, &err) == SW_ESTATE);
    CHECK_EQ_I64(sw_carrier_size(g), 0);
    sw_carrier_unmark_pending(g, SW_CARRIER_PENDING_DESTINATION);
    if (sw_fault_enabled()) {
        sw_fault_arm("truncate", 0, 1);
        CHECK(sw_file_backed_allocate_for_write(g, 4, &err) == SW_EIO);
        sw_fault_clear();
        CHECK_EQ_I64(sw_carrier_size(g), 0);
    }
    sw_carrier_unref(g);
    sw_carrier_unref(cpu);
    sw_carrier_unref(f);
}

static void test_file_backed_growth_and_fd(void)
{
    sw_error err;
    sw_carrier *f, *cpu;
    CHECK(sw_file_backed_new(NULL, SW_DT_FLOAT32, 0, &f, &err) == SW_OK);
    int fd = sw_file_backed_fd(f);
    CHECK(fd >= 0);
    CHECK(sw_carrier_allocate(f, 3, &err) == SW_OK);
    CHECK_EQ_I64(sw_carrier_size(f), 3);
    CHECK_EQ_I64(sw_carrier_version(f), 0); /* growth is not a write */
    float v[3] = {9, 9, 9};
    CHECK(sw_carrier_read(f, 0, 3, v, &err) == SW_OK);
    CHECK(v[0] == 0 && v[2] == 0); /* new slots read 0 */
    /* The same size again: nothing happens; smaller: refused. */
    CHECK(sw_carrier_allocate(f, 3, &err) == SW_OK);
    CHECK(sw_carrier_allocate(f, 2, &err) == SW_EINVAL);
    CHECK(strstr(err.msg, "shrink") != NULL);
    CHECK_EQ_I64(sw_carrier_size(f), 3);
    CHECK(sw_carrier_allocate(f, INT64_MAX / 2, &err) == SW_EOVERFLOW);
    CHECK_EQ_I64(sw_carrier_size(f), 3);
    /* Slot i lives at byte 4 i of the descriptor. */
    float w = 2.5f;
    CHECK(pwrite(fd, &w, 4, 8) == 4);
    CHECK(sw_carrier_read(f, 2, 1, v, &err) == SW_OK);
    CHECK(v[0] == 2.5f);
    /* Owned without owner access: growth refused like a release. */
    uint64_t token;
    CHECK(sw_carrier_claim(f, &token, &err) == SW_OK);
    CHECK(sw_carrier_allocate(f, 5, &err) == SW_ESTATE);
    CHECK(strstr(err.msg, "owned") != NULL);
    CHECK_EQ_I64(sw_carrier_size(f), 3);
    CHECK(sw_carrier_begin_owner_access(f, token, &err) == SW_OK);
    CHECK(sw_carrier_allocate(f, 5, &err) == SW_OK);
    CHECK(sw_carrier_end_owner_access(f, token, &err) == SW_OK);
    CHECK_EQ_I64(sw_carrier_size(f), 5);
    /* Undo, from a thread without owner access (a move's commit may run
     * anywhere): back to 0 slots, the file empty. Pending refuses it. */
    sw_carrier_mark_pending(f, SW_CARRIER_PENDING_DESTINATION);
    CHECK(sw_carrier_unallocate(f, &err) == SW_ESTATE);
    CHECK(strstr(err.msg, "pending") != NULL);
    CHECK_EQ_I64(sw_carrier_size(f), 5);
    sw_carrier_unmark_pending(f, SW_CARRIER_PENDING_DESTINATION);
    CHECK(sw_carrier_unallocate(f, &err) == SW_OK);
    CHECK(sw_carrier_relinquish(f, token, &err) == SW_OK);
    CHECK_EQ_I64(sw_carrier_size(f), 0);
    CHECK_EQ_I64(lseek(fd, 0, SEEK_END), 0);
    /* Classes without growth refuse it; after release nothing grows and
     * the descriptor is gone. */
    CHECK(sw_cpu_new(2, SW_DT_FLOAT32, 0, &cpu, &err) == SW_OK);
    CHECK(sw_file_backed_fd(cpu) == -1);
    CHECK(sw_file_backed_fd(NULL) == -1);
    CHECK(sw_carrier_allocate(cpu, 4, &err) == SW_EINVAL);
    CHECK_EQ_I64(sw_carrier_size(cpu), 2);
    CHECK(sw_carrier_allocate(NULL, 4, &err) == SW_ETYPE);
    sw_carrier_unref(cpu);
    CHECK(sw_carrier_release(f, &err) == SW_OK);
    CHECK(sw_file_backed_fd(f) == -1);
    CHECK(sw_carrier_allocate(f, 1, &err) == SW_ESTATE);
    CHECK(strstr(err.msg, "released") != NULL);
    sw_carrier_unref(f);
}

/* fork: a child releasing its parent's FileBacked closes its descriptor
 * but leaves the parent's file; FileBacked storage the child makes goes
 * into a session directory of its own, which the child's exit removes. */
#ifndef __SANITIZE_THREAD__ /* TSan cannot follow a multi-threaded fork: the
                            * background close of released files runs a
                            * thread, and the child starts its own */
static int fork_pipe[2];

static int child_release_and_make(sw_carrier *parent_file)
{
    sw_error err;
    sw_carrier *mine;
    if (sw_carrier_release(parent_file, &err) != SW_OK)
        return 2;
    if (access(sw_file_backed_path(parent_file), F_OK) != 0)
        return 3; /* the parent's file must stay */
    if (sw_file_backed_new(NULL, SW_DT_INT32, 0, &mine, &err) != SW_OK)
        return 4;
    const char *p = sw_file_backed_path(mine);
    if (write(fork_pipe[1], p, strlen(p)) != (ssize_t)strlen(p))
        return 5;
    sw_carrier_unref(mine); /* its own file: deleted */
    /* A file left in the child's directory: its exit removes both. */
    int fd;
    char *left;
    if (sw_filestore_create("left-by-child.bin", &fd, &left, &err) != SW_OK)
        return 6;
    sw_filestore_remove(fd, left, 0); /* closed, kept on disk */
    return 0;
}

static void test_file_backed_after_fork(void)
{
    sw_error err;
    sw_carrier *f;
    CHECK(sw_file_backed_new(NULL, SW_DT_INT32, 0, &f, &err) == SW_OK);
    CHECK(sw_carrier_allocate(f, 2, &err) == SW_OK);
    const char *path = sw_file_backed_path(f);
    CHECK(pipe(fork_pipe) == 0);
    pid_t pid = fork();
    if (pid == 0) {
        close(fork_pipe[0]);
        exit(child_release_and_make(f)); /* exit runs the cleanup */
    }
    close(fork_pipe[1]);
    char child_path[4096] = {0};
    ssize_t n = read(fork_pipe[0], child_path, sizeof child_path - 1);
    close(fork_pipe[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    CHECK(n > 0);
    /* The child's file was in another directory, gone with the child. */
    const char *slash = strrchr(path, '/');
    CHECK(slash && strncmp(child_path, path, (size_t)(slash - path + 1)) != 0);
    CHECK(access(child_path, F_OK) != 0);
    char *child_dir = strrchr(child_path, '/');
    if (child_dir) {
        *child_dir = '\0';
        CHECK(access(child_path, F_OK) != 0);
    }
    /* The parent's carrier is untouched: live, its file there. */
    CHECK(!sw_carrier_is_released(f));
    CHECK(access(path, F_OK) == 0);
    int32_t v[2] = {7, 8};
    CHECK(sw_carrier_write(f, 0, 2, v, &err) == SW_OK);
    CHECK(sw_carrier_read(f, 1, 1, v, &err) == SW_OK && v[0] == 8);
    sw_carrier_unref(f);
}
#endif

typedef struct access_arg {
    sw_carrier *c;
    uint64_t token;
    sw_status st;
    int is_mutable;
    int detail;
} access_arg;

static void *other_thread_access(void *p)
{
    access_arg *a = p;
    sw_error err;
    a->is_mutable = sw_carrier_is_mutable(a->c);
    a->st = sw_carrier_begin_owner_access(a->c, a->token, &err);
    a->detail = err.detail;
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
    CHECK(err.detail == SW_CARRIER_REFUSED_TOKEN);
    CHECK(sw_carrier_end_owner_access(c, token, &err) == SW_ESTATE); /* none held yet */
    CHECK(err.detail == SW_CARRIER_REFUSED_NO_ACCESS);
    CHECK(sw_carrier_begin_owner_access(c, token, &err) == SW_OK);
    CHECK(sw_carrier_begin_owner_access(c, token, &err) == SW_OK); /* re-entrant */
    CHECK(sw_carrier_has_owner_access(c));
    CHECK(sw_carrier_is_mutable(c));
    /* Thread-bound: another thread sees it immutable and cannot enter. */
    access_arg a = {c, token, SW_OK, 1, 0};
    pthread_t th;
    pthread_create(&th, NULL, other_thread_access, &a);
    pthread_join(th, NULL);
    CHECK(a.st == SW_ESTATE && a.detail == SW_CARRIER_REFUSED_ACCESS_ELSEWHERE);
    CHECK(a.is_mutable == 0);
    CHECK(sw_carrier_write(c, 0, 1, &one, &err) == SW_OK);
    CHECK_EQ_I64(sw_carrier_version(c), 1);
    CHECK(sw_carrier_end_owner_access(c, token, &err) == SW_OK);
    CHECK(sw_carrier_end_owner_access(c, token, &err) == SW_OK);
    CHECK(sw_carrier_end_owner_access(c, token, &err) == SW_ESTATE);
    CHECK(err.detail == SW_CARRIER_REFUSED_NO_ACCESS);
    CHECK(sw_carrier_end_owner_access(c, token + 1, &err) == SW_ESTATE);
    CHECK(err.detail == SW_CARRIER_REFUSED_TOKEN); /* the token first */
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

/* A binding's own move engine: pending marks with the guard they bring,
 * transfer access on the destination, the commit's release. */
typedef struct transfer_arg {
    sw_carrier *c;
    sw_status write_st, read_st;
    int in_transfer;
} transfer_arg;

static void *write_without_transfer(void *p)
{
    transfer_arg *a = p;
    sw_error err;
    float v = 1;
    a->in_transfer = sw_carrier_in_transfer(a->c);
    a->write_st = sw_carrier_write(a->c, 0, 1, &v, &err);
    a->read_st = sw_carrier_read(a->c, 0, 1, &v, &err);
    return NULL;
}

static void test_binding_pending_and_transfer(void)
{
    sw_error err;
    sw_carrier *src, *dst;
    CHECK(sw_cpu_new(2, SW_DT_FLOAT32, 0, &src, &err) == SW_OK);
    CHECK(sw_cpu_new(2, SW_DT_FLOAT32, 0, &dst, &err) == SW_OK);
    sw_carrier_mark_pending(src, SW_CARRIER_PENDING_SOURCE);
    sw_carrier_mark_pending(dst, SW_CARRIER_PENDING_DESTINATION);
    CHECK(sw_carrier_pending_roles(src) == SW_CARRIER_PENDING_SOURCE);
    CHECK(sw_carrier_pending_roles(dst) == SW_CARRIER_PENDING_DESTINATION);
    CHECK(sw_carrier_is_pending(src) && !sw_carrier_is_mutable(src));
    float v[2] = {3, 4};
    /* The source stays readable; nothing is written, released or claimed. */
    CHECK(sw_carrier_read(src, 0, 2, v, &err) == SW_OK);
    CHECK(sw_carrier_write(src, 0, 1, v, &err) == SW_ESTATE);
    CHECK(strstr(err.msg, "pending") != NULL);
    CHECK(sw_carrier_release(src, &err) == SW_ESTATE);
    CHECK(sw_carrier_release_moved(src, &err) == SW_ESTATE);
    uint64_t token;
    CHECK(sw_carrier_claim(src, &token, &err) == SW_ESTATE);
    CHECK(sw_carrier_read(dst, 0, 1, v, &err) == SW_ESTATE);
    /* Transfer access: this thread reads and writes the destination
     * without advancing its version; other threads are still refused. */
    sw_carrier_begin_transfer(dst);
    sw_carrier_begin_transfer(dst); /* re-entrant */
    CHECK(sw_carrier_in_transfer(dst));
    CHECK(sw_carrier_is_mutable(dst));
    sw_carrier_state st;
    sw_carrier_get_state(dst, &st);
    CHECK(st.pending == SW_CARRIER_PENDING_DESTINATION && st.in_transfer && !st.released &&
          !st.owned && !st.owner_access && st.version == 0);
    sw_carrier_get_state(src, &st);
    CHECK(st.pending == SW_CARRIER_PENDING_SOURCE && !st.in_transfer);
    v[0] = 5;
    v[1] = 6;
    CHECK(sw_carrier_write(dst, 0, 2, v, &err) == SW_OK);
    CHECK(sw_carrier_increment_version(dst, &err) == SW_OK);
    CHECK_EQ_I64(sw_carrier_version(dst), 0);
    CHECK(sw_carrier_read(dst, 1, 1, v, &err) == SW_OK && v[0] == 6);
    transfer_arg a = {dst, SW_OK, SW_OK, 1};
    pthread_t th;
    pthread_create(&th, NULL, write_without_transfer, &a);
    pthread_join(th, NULL);
    CHECK(a.in_transfer == 0 && a.write_st == SW_ESTATE && a.read_st == SW_ESTATE);
    /* Transfer access never opens a source for writing. */
    sw_carrier_begin_transfer(src);
    CHECK(sw_carrier_write(src, 0, 1, v, &err) == SW_ESTATE);
    sw_carrier_end_transfer(src);
    sw_carrier_end_transfer(dst);
    CHECK(sw_carrier_in_transfer(dst));
    sw_carrier_end_transfer(dst);
    CHECK(!sw_carrier_in_transfer(dst));
    /* Commit: clear the marks, release the source even though it is owned
     * and this thread holds no owner access (checked at the start). */
    sw_carrier_unmark_pending(dst, SW_CARRIER_PENDING_DESTINATION);
    CHECK(sw_carrier_pending_roles(dst) == 0);
    sw_carrier_unmark_pending(src, SW_CARRIER_PENDING_SOURCE);
    CHECK(sw_carrier_claim(src, &token, &err) == SW_OK);
    CHECK(sw_carrier_release(src, &err) == SW_ESTATE);
    CHECK(sw_carrier_release_moved(src, &err) == SW_OK);
    CHECK(sw_carrier_is_released(src));
    CHECK(sw_carrier_release_moved(src, &err) == SW_OK); /* idempotent */
    /* Writes after the move advance the version again. */
    CHECK(sw_carrier_write(dst, 0, 1, v, &err) == SW_OK);
    CHECK_EQ_I64(sw_carrier_version(dst), 1);
    sw_carrier_unref(src);
    sw_carrier_unref(dst);
}

/* After fork the child drops access held by threads that did not survive,
 * never its own. */
static void *take_access(void *p)
{
    access_arg *a = p;
    sw_error err;
    a->st = sw_carrier_begin_owner_access(a->c, a->token, &err);
    sw_carrier_begin_transfer(a->c);
    return NULL;
}

static void test_drop_inherited_access(void)
{
    sw_error err;
    sw_carrier *c;
    uint64_t token;
    CHECK(sw_cpu_new(1, SW_DT_FLOAT32, 0, &c, &err) == SW_OK);
    CHECK(sw_carrier_claim(c, &token, &err) == SW_OK);
    access_arg a = {c, token, SW_EINVAL, 0, 0};
    pthread_t th;
    pthread_create(&th, NULL, take_access, &a);
    pthread_join(th, NULL);
    CHECK(a.st == SW_OK);
    /* The thread is gone but its access is still recorded. */
    CHECK(sw_carrier_begin_owner_access(c, token, &err) == SW_ESTATE);
    sw_carrier_drop_inherited_access(c);
    CHECK(sw_carrier_begin_owner_access(c, token, &err) == SW_OK);
    sw_carrier_drop_inherited_access(c); /* our own access stays */
    CHECK(sw_carrier_has_owner_access(c));
    sw_carrier_state st;
    sw_carrier_get_state(c, &st);
    CHECK(st.owned && st.owner_access && !st.pending && !st.in_transfer);
    CHECK(sw_carrier_end_owner_access(c, token, &err) == SW_OK);
    CHECK(sw_carrier_is_owned(c));
    sw_carrier_unref(c);
}

/* A foreign ops table used from several threads at once: every write lands
 * and counts once in the version, reads never see a torn slot, release
 * happens once. */
typedef struct shared_foreign {
    int32_t slots[64];
    _Atomic int calls, releases;
} shared_foreign;

static int64_t sf_size(void *impl) { (void)impl; return 64; }
static sw_status sf_read(void *impl, int64_t slot, int64_t n, void *out, sw_error *err)
{
    (void)err;
    shared_foreign *f = impl;
    f->calls++;
    memcpy(out, f->slots + slot, (size_t)n * 4);
    return SW_OK;
}
static sw_status sf_write(void *impl, int64_t slot, int64_t n, const void *in, sw_error *err)
{
    (void)err;
    shared_foreign *f = impl;
    f->calls++;
    /* Two halves with a yield between them: a lost lock shows as a torn
     * slot. */
    const int32_t *v = in;
    for (int64_t i = 0; i < n; i++) {
        f->slots[slot + i] = (int32_t)(v[i] & 0x7fff0000);
        sched_yield();
        f->slots[slot + i] = v[i];
    }
    return SW_OK;
}
static void sf_release(void *impl) { ((shared_foreign *)impl)->releases++; }
static const sw_carrier_class shared_foreign_ops = {
    .name = "SharedForeign", .size = sf_size, .read = sf_read, .write = sf_write,
    .release = sf_release,
};

enum { SF_THREADS = 6, SF_WRITES = 400 };

typedef struct sf_arg {
    sw_carrier *c;
    int id;
    int torn, failures;
} sf_arg;

static void *sf_worker(void *p)
{
    sf_arg *a = p;
    sw_error err;
    for (int i = 0; i < SF_WRITES; i++) {
        int64_t slot = (a->id * 7 + i) % 64;
        /* both halves equal: a slot read while half-written differs */
        int32_t h = (a->id * 1000 + i) & 0x7fff;
        int32_t v = (h << 16) | h;
        if (sw_carrier_write(a->c, slot, 1, &v, &err) != SW_OK)
            a->failures++;
        int32_t r;
        if (sw_carrier_read(a->c, (slot + 13) % 64, 1, &r, &err) != SW_OK)
            a->failures++;
        else if ((r >> 16) != (r & 0xffff))
            a->torn++;
        (void)sw_carrier_is_mutable(a->c);
        (void)sw_carrier_version(a->c);
    }
    return NULL;
}

static void test_foreign_ops_from_threads(void)
{
    sw_error err;
    static shared_foreign impl;
    sw_carrier *c;
    CHECK(sw_carrier_new(&shared_foreign_ops, &impl, SW_DT_INT32, 0, &c, &err) == SW_OK);
    pthread_t th[SF_THREADS];
    sf_arg args[SF_THREADS];
    for (int i = 0; i < SF_THREADS; i++) {
        args[i] = (sf_arg){sw_carrier_ref(c), i, 0, 0};
        pthread_create(&th[i], NULL, sf_worker, &args[i]);
    }
    for (int i = 0; i < SF_THREADS; i++) {
        pthread_join(th[i], NULL);
        CHECK_EQ_I64(args[i].failures, 0);
        CHECK_EQ_I64(args[i].torn, 0);
        sw_carrier_unref(args[i].c);
    }
    CHECK_EQ_I64(sw_carrier_version(c), SF_THREADS * SF_WRITES);
    CHECK_EQ_I64(impl.calls, 2 * SF_THREADS * SF_WRITES);
    CHECK(sw_carrier_release(c, &err) == SW_OK);
    sw_carrier_unref(c);
    CHECK_EQ_I64(impl.releases, 1);
}

int main(void)
{
    int64_t live = sw_alloc_live_bytes();
    test_cpu_slots_version_release();
    test_constructor_refusals_allocate_nothing();
    test_immutable_and_generic();
    test_file_backed();
    test_file_backed_growth_and_fd();
    test_file_backed_allocate_for_write();
#ifndef __SANITIZE_THREAD__
    test_file_backed_after_fork();
#endif
    test_ownership_claims();
    test_foreign_ops_table();
    test_binding_pending_and_transfer();
    test_drop_inherited_access();
    test_foreign_ops_from_threads();
    /* The session directory path is the only allocation meant to stay. */
    CHECK(sw_alloc_live_bytes() - live < 4096);
    return check_report("carrier");
}
