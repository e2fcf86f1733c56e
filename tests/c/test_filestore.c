/* The FileBacked file store: session directory, exclusive creation, I/O
 * loops, growth, removal, fault injection, and exit cleanup (C-22, C-23). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "strideweave/alloc.h"
#include "strideweave/filestore.h"
#include "strideweave/testing.h"

static int is_hex32(const char *s)
{
    for (int i = 0; i < 32; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
            return 0;
    return 1;
}

static int exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0;
}

static int count_entries(const char *dir)
{
    DIR *d = opendir(dir);
    int n = 0;
    if (!d)
        return -1;
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
            n++;
    closedir(d);
    return n;
}

static char tmp_root[] = "/tmp/sw-filestore-test-XXXXXX";

static void test_session_dir(void)
{
    const char *dir = NULL, *again = NULL;
    sw_error err;
    CHECK(sw_filestore_creator_pid() == 0);
    CHECK(!sw_filestore_is_owner());
    CHECK_EQ_I64(sw_filestore_session_dir(&dir, &err), SW_OK);
    CHECK_EQ_I64(sw_filestore_session_dir(&again, &err), SW_OK);
    CHECK(dir == again);
    CHECK(sw_filestore_creator_pid() == (long)getpid());
    CHECK(sw_filestore_is_owner());
    size_t root = strlen(tmp_root);
    CHECK(strncmp(dir, tmp_root, root) == 0);
    const char *leaf = dir + root;
    CHECK(strncmp(leaf, "/.strideweave-filebacked-", 25) == 0);
    CHECK(strlen(leaf) == 25 + 32);
    CHECK(is_hex32(leaf + 25));
    struct stat st;
    CHECK(stat(dir, &st) == 0 && S_ISDIR(st.st_mode));
    CHECK_EQ_I64(st.st_mode & 07777, 0700);
}

static void test_names(void)
{
    char a[SW_FILESTORE_NAME_LEN], b[SW_FILESTORE_NAME_LEN];
    CHECK_EQ_I64(sw_filestore_generate_name(a, NULL), SW_OK);
    CHECK_EQ_I64(sw_filestore_generate_name(b, NULL), SW_OK);
    CHECK(strlen(a) == 36 && is_hex32(a) && strcmp(a + 32, ".bin") == 0);
    CHECK(strcmp(a, b) != 0);
    sw_error err;
    CHECK_EQ_I64(sw_filestore_check_name("", 0, &err), SW_EINVAL);
    CHECK_EQ_I64(sw_filestore_check_name(".", 1, &err), SW_EINVAL);
    CHECK_EQ_I64(sw_filestore_check_name("..", 2, &err), SW_EINVAL);
    CHECK_EQ_I64(sw_filestore_check_name("a/b", 3, &err), SW_EINVAL);
    CHECK_EQ_I64(sw_filestore_check_name("a\0b", 3, &err), SW_EINVAL);
    CHECK_EQ_I64(sw_filestore_check_name("...", 3, &err), SW_OK);
    CHECK_EQ_I64(sw_filestore_check_name(".x", 2, &err), SW_OK);
}

static void test_create_io_remove(void)
{
    int64_t live = sw_alloc_live_bytes();
    int fd = -1, fd2 = -1;
    char *path = NULL, *path2 = NULL;
    sw_error err;
    CHECK_EQ_I64(sw_filestore_create("slots.bin", &fd, &path, &err), SW_OK);
    CHECK(fd >= 0 && path && exists(path));
    /* exclusive: an existing name is refused and left alone */
    CHECK_EQ_I64(sw_filestore_create("slots.bin", &fd2, &path2, &err), SW_EEXIST);
    CHECK(fd2 == -1 && path2 == NULL);
    CHECK(strstr(err.msg, "slots.bin") != NULL);
    CHECK_EQ_I64(sw_filestore_create("a/b", &fd2, &path2, &err), SW_EINVAL);

    /* growth reads back as zeros */
    CHECK_EQ_I64(sw_filestore_resize(fd, 16, &err), SW_OK);
    unsigned char buf[16];
    memset(buf, 0xAA, sizeof buf);
    CHECK_EQ_I64(sw_filestore_pread(fd, buf, 16, 0, &err), SW_OK);
    int zero = 1;
    for (int i = 0; i < 16; i++)
        zero &= buf[i] == 0;
    CHECK(zero);
    const char msg[] = "strideweave!";
    CHECK_EQ_I64(sw_filestore_pwrite(fd, msg, 12, 4, &err), SW_OK);
    char back[12];
    CHECK_EQ_I64(sw_filestore_pread(fd, back, 12, 4, &err), SW_OK);
    CHECK(memcmp(back, msg, 12) == 0);
    /* reading past the end is an error, not a short success */
    CHECK_EQ_I64(sw_filestore_pread(fd, buf, 8, 12, &err), SW_EIO);
    CHECK_EQ_I64(err.sys_errno, EIO);
    CHECK_EQ_I64(sw_filestore_resize(fd, -1, &err), SW_EINVAL);

    /* a bad descriptor reports the OS error */
    CHECK_EQ_I64(sw_filestore_pwrite(-1, msg, 1, 0, &err), SW_EIO);
    CHECK_EQ_I64(err.sys_errno, EBADF);

    /* another process's file is closed but not unlinked */
    char *copy = sw_malloc(strlen(path) + 1);
    strcpy(copy, path);
    sw_filestore_remove(-1, copy, (long)getpid() + 1);
    CHECK(exists(path));
    char *keep = sw_malloc(strlen(path) + 1);
    strcpy(keep, path);
    sw_filestore_remove(fd, path, (long)getpid());
    CHECK(!exists(keep));
    sw_free(keep);

    CHECK_EQ_I64(sw_filestore_create_unique(&fd, &path, &err), SW_OK);
    const char *leaf = strrchr(path, '/') + 1;
    CHECK(strlen(leaf) == 36 && is_hex32(leaf));
    sw_filestore_remove(fd, path, (long)getpid());
    sw_filestore_remove(-1, NULL, 0);
    CHECK_EQ_I64(sw_alloc_live_bytes(), live);
}

static void test_faults(void)
{
    if (!sw_fault_enabled())
        return;
    const char *dir;
    sw_error err;
    int fd;
    char *path;
    sw_filestore_session_dir(&dir, NULL);
    int before = count_entries(dir);
    CHECK_EQ_I64(sw_fault_arm("open", 0, 1), SW_OK);
    CHECK_EQ_I64(sw_filestore_create("f.bin", &fd, &path, &err), SW_EIO);
    CHECK_EQ_I64(count_entries(dir), before);
    CHECK_EQ_I64(sw_filestore_create("f.bin", &fd, &path, &err), SW_OK);
    CHECK_EQ_I64(sw_filestore_resize(fd, 8, &err), SW_OK);

    CHECK_EQ_I64(sw_fault_arm("pwrite", 0, 1), SW_OK);
    int32_t v = 7, r = -1;
    CHECK_EQ_I64(sw_filestore_pwrite(fd, &v, 4, 0, &err), SW_EIO);
    CHECK_EQ_I64(err.sys_errno, EIO);
    CHECK_EQ_I64(sw_filestore_pread(fd, &r, 4, 0, &err), SW_OK);
    CHECK_EQ_I64(r, 0); /* nothing written */
    CHECK_EQ_I64(sw_fault_arm("pread", 1, 1), SW_OK);
    CHECK_EQ_I64(sw_filestore_pread(fd, &r, 4, 0, &err), SW_OK);
    CHECK_EQ_I64(sw_filestore_pread(fd, &r, 4, 0, &err), SW_EIO);
    CHECK_EQ_I64(sw_fault_arm("truncate", 0, 1), SW_OK);
    CHECK_EQ_I64(sw_filestore_resize(fd, 64, &err), SW_EIO);
    struct stat st;
    CHECK(fstat(fd, &st) == 0 && st.st_size == 8);
    sw_fault_clear();
    sw_filestore_remove(fd, path, (long)getpid());
}

/* Run `body` in a forked child that exits normally; returns its status. */
static int in_child(void (*body)(void))
{
    pid_t pid = fork();
    if (pid == 0) {
        body();
        exit(0); /* runs atexit handlers */
    }
    int status = 0;
    waitpid(pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

__attribute__((unused)) static void child_touches_store(void)
{
    int fd;
    char *path;
    /* in a session directory of its own (its parent's exit must not take
     * it); closed and freed but left on disk for the child's exit */
    if (sw_filestore_create_unique(&fd, &path, NULL) == SW_OK)
        sw_filestore_remove(fd, path, 0);
}

static int report_fd = -1;

/* A child that creates its own session directory and leaves a file in it:
 * its exit must remove both. It reports the directory through a pipe. */
static void child_creates_own_session(void)
{
    const char *dir;
    int fd;
    char *path;
    if (sw_filestore_session_dir(&dir, NULL) != SW_OK)
        exit(3);
    if (sw_filestore_create("left.bin", &fd, &path, NULL) != SW_OK)
        exit(4);
    sw_filestore_remove(fd, path, 0); /* left on disk for the exit cleanup */
    if (write(report_fd, dir, strlen(dir)) != (ssize_t)strlen(dir))
        exit(5);
}

static void test_exit_cleanup(void)
{
    const char *dir;
    sw_filestore_session_dir(&dir, NULL);
    int before = count_entries(dir), dirs_before = count_entries(tmp_root);
    /* a forked child neither writes into nor removes the parent's directory,
     * and its exit removes its own */
#ifndef __SANITIZE_THREAD__ /* TSan cannot follow a multi-threaded fork: the
                            * background close of released files runs a
                            * thread by now, and the child starts its own */
    CHECK_EQ_I64(in_child(child_touches_store), 0);
#endif
    CHECK(exists(dir));
    CHECK_EQ_I64(count_entries(dir), before);
    CHECK_EQ_I64(count_entries(tmp_root), dirs_before);
}

static char session_at_exit[4096];
static pid_t main_pid;

/* Registered before the store's own handler, so it runs after it: the
 * session directory must be gone by then. */
static void verify_removed_at_exit(void)
{
    if (getpid() != main_pid)
        return; /* children inherit the registration */
    if (session_at_exit[0] && exists(session_at_exit)) {
        fprintf(stderr, "session directory %s survived exit\n", session_at_exit);
        _exit(1);
    }
    rmdir(tmp_root);
}

/* More pieces than one pwritev call takes (and empty ones): they land
 * back to back from the offset, in order. */
static void test_pwritev_gathers_many_pieces(void)
{
    enum { PIECES = 2500 };
    static unsigned char src[PIECES * 3];
    static struct iovec iov[PIECES];
    size_t total = 0;
    for (int i = 0; i < PIECES; i++) {
        size_t len = (size_t)(i % 4 == 3 ? 0 : 1 + i % 3);
        for (size_t k = 0; k < len; k++)
            src[3 * i + k] = (unsigned char)(i * 7 + k);
        iov[i] = (struct iovec){.iov_base = src + 3 * i, .iov_len = len};
        total += len;
    }
    int fd = -1;
    char *path = NULL;
    sw_error err;
    CHECK_EQ_I64(sw_filestore_create_unique(&fd, &path, &err), SW_OK);
    CHECK_EQ_I64(sw_filestore_pwritev(fd, iov, PIECES, 5, &err), SW_OK);
    static unsigned char back[PIECES * 3];
    CHECK_EQ_I64(sw_filestore_pread(fd, back, total, 5, &err), SW_OK);
    int ok = 1;
    size_t at = 0;
    for (int i = 0; i < PIECES; i++)
        for (size_t k = 0; k < iov[i].iov_len; k++)
            ok &= back[at++] == src[3 * i + k];
    CHECK(ok);
    CHECK(iov[0].iov_base == src && iov[0].iov_len == 1); /* left unchanged */
    CHECK_EQ_I64(sw_filestore_pwritev(-1, iov, 2, 0, &err), SW_EIO);
    CHECK_EQ_I64(err.sys_errno, EBADF);
    sw_filestore_remove(fd, path, (long)getpid());
}

/* preadv scatters file bytes into more pieces than one call takes (and
 * empty ones), in order; end of file and the "pread" fault are SW_EIO. */
static void test_preadv_scatters_many_pieces(void)
{
    enum { PIECES = 2500 };
    static unsigned char file[PIECES * 3], dst[PIECES * 3];
    static struct iovec iov[PIECES];
    size_t total = 0;
    for (int i = 0; i < PIECES; i++) {
        size_t len = (size_t)(i % 4 == 3 ? 0 : 1 + i % 3);
        iov[i] = (struct iovec){.iov_base = dst + 3 * i, .iov_len = len};
        total += len;
    }
    for (size_t b = 0; b < total; b++)
        file[b] = (unsigned char)(b * 13 + 1);
    int fd = -1;
    char *path = NULL;
    sw_error err;
    CHECK_EQ_I64(sw_filestore_create_unique(&fd, &path, &err), SW_OK);
    CHECK_EQ_I64(sw_filestore_pwrite(fd, file, total, 7, &err), SW_OK);
    CHECK_EQ_I64(sw_filestore_preadv(fd, iov, PIECES, 7, &err), SW_OK);
    int ok = 1;
    size_t at = 0;
    for (int i = 0; i < PIECES; i++)
        for (size_t k = 0; k < iov[i].iov_len; k++)
            ok &= dst[3 * i + k] == file[at++];
    CHECK(ok);
    CHECK(iov[0].iov_base == dst && iov[0].iov_len == 1); /* left unchanged */
    CHECK_EQ_I64(sw_filestore_preadv(fd, iov, PIECES, 8, &err), SW_EIO); /* one byte short */
    CHECK_EQ_I64(err.sys_errno, EIO);
    if (sw_fault_enabled()) {
        sw_fault_arm("pread", 0, 1);
        CHECK_EQ_I64(sw_filestore_preadv(fd, iov, 2, 7, &err), SW_EIO);
        sw_fault_clear();
    }
    sw_filestore_remove(fd, path, (long)getpid());
}

/* A removed file's name is gone on return; its descriptor is closed by the
 * background thread, all of them by sw_filestore_reclaim_wait, and only
 * those: a file opened meanwhile keeps its descriptor. */
static void test_remove_closes_in_background(void)
{
    enum { N = 64 };
    int fds[N];
    char *paths[N], *names[N];
    sw_error err;
    for (int i = 0; i < N; i++) {
        CHECK_EQ_I64(sw_filestore_create_unique(&fds[i], &paths[i], &err), SW_OK);
        CHECK_EQ_I64(sw_filestore_resize(fds[i], 1 << 16, &err), SW_OK);
        names[i] = sw_malloc(strlen(paths[i]) + 1);
        strcpy(names[i], paths[i]);
    }
    for (int i = 0; i < N; i++) {
        sw_filestore_remove(fds[i], paths[i], (long)getpid());
        CHECK(!exists(names[i]));
    }
    int keep_fd = -1;
    char *keep_path = NULL;
    CHECK_EQ_I64(sw_filestore_create_unique(&keep_fd, &keep_path, &err), SW_OK);
    sw_filestore_reclaim_wait();
    CHECK_EQ_I64(sw_filestore_reclaim_pending(), 0);
    int open_left = 0;
    for (int i = 0; i < N; i++)
        open_left += fds[i] != keep_fd && fcntl(fds[i], F_GETFD) != -1;
    CHECK_EQ_I64(open_left, 0);
    CHECK(fcntl(keep_fd, F_GETFD) != -1);
    CHECK_EQ_I64(sw_filestore_pwrite(keep_fd, "x", 1, 0, &err), SW_OK);
    /* a small file waits for a batch (its name is gone at once) ... */
    char *keep_name = sw_malloc(strlen(keep_path) + 1);
    strcpy(keep_name, keep_path);
    sw_filestore_remove_sized(keep_fd, keep_path, (long)getpid(), 1);
    CHECK(!exists(keep_name));
    CHECK_EQ_I64(sw_filestore_reclaim_pending(), 1);
    CHECK(fcntl(keep_fd, F_GETFD) != -1);
    /* ... which the wait closes */
    sw_filestore_reclaim_wait();
    CHECK_EQ_I64(sw_filestore_reclaim_pending(), 0);
    CHECK(fcntl(keep_fd, F_GETFD) == -1 && errno == EBADF);
    sw_free(keep_name);
    for (int i = 0; i < N; i++)
        sw_free(names[i]);
}

/* A caller that keeps removing files is let go by first (the background
 * closer pauses while more arrive), but not for ever: small files removed
 * in one burst with no pause, more than the closer's queue holds, are all
 * closed in the background once the last one (of unknown size, so its
 * batch is due at once) is in, with no wait called. */
static void test_burst_of_removals_is_closed_in_the_background(void)
{
    enum { N = 320 };
    static int fds[N];
    char *paths[N];
    sw_error err;
    sw_filestore_reclaim_wait();
    for (int i = 0; i < N; i++) {
        CHECK_EQ_I64(sw_filestore_create_unique(&fds[i], &paths[i], &err), SW_OK);
        CHECK_EQ_I64(sw_filestore_pwrite(fds[i], "x", 1, 0, &err), SW_OK);
    }
    for (int i = 0; i < N - 1; i++)
        sw_filestore_remove_sized(fds[i], paths[i], (long)getpid(), 4096);
    sw_filestore_remove(fds[N - 1], paths[N - 1], (long)getpid());
    for (int ms = 0; ms < 10000 && sw_filestore_reclaim_pending() > 0; ms++)
        usleep(1000);
    CHECK_EQ_I64(sw_filestore_reclaim_pending(), 0);
    int open_left = 0;
    for (int i = 0; i < N; i++)
        open_left += fcntl(fds[i], F_GETFD) != -1;
    CHECK_EQ_I64(open_left, 0);
}

/* Remove `n` fresh files of 64 KiB (n at most 64), then wait for their
 * descriptors to be closed; 0, or the step that failed. */
static int remove_a_batch(int n)
{
    int fds[64];
    char *paths[64];
    for (int i = 0; i < n; i++)
        if (sw_filestore_create_unique(&fds[i], &paths[i], NULL) != SW_OK ||
            sw_filestore_resize(fds[i], 1 << 16, NULL) != SW_OK)
            return 1;
    for (int i = 0; i < n; i++)
        sw_filestore_remove_sized(fds[i], paths[i], (long)getpid(), 1 << 16);
    sw_filestore_reclaim_wait();
    return sw_filestore_reclaim_pending() == 0 ? 0 : 2;
}

__attribute__((unused)) static void child_wakes_its_own_reaper(void)
{
    alarm(20); /* a wake that never returns ends the child, not the suite */
    for (int round = 0; round < 40; round++)
        if (remove_a_batch(64) != 0)
            exit(10 + round);
}

/* A child forked while the parent's background closer sleeps starts its
 * own, and wakes it batch after batch: the parent's sleeping thread, absent
 * in the child, must not be counted as a waiter there (a child's wake once
 * hung in pthread_cond_signal, test_moved_source_memory.py's fork test). */
static void test_child_reaper_after_fork(void)
{
    CHECK_EQ_I64(remove_a_batch(64), 0); /* the parent's thread runs, then sleeps */
#ifndef __SANITIZE_THREAD__ /* TSan cannot follow a multi-threaded fork */
    for (int i = 0, status = 0; i < 3 && status == 0; i++) {
        status = in_child(child_wakes_its_own_reaper);
        CHECK_EQ_I64(status, 0);
    }
#endif
    CHECK_EQ_I64(remove_a_batch(64), 0); /* and the parent's still works */
}

int main(void)
{
    if (!mkdtemp(tmp_root)) {
        perror("mkdtemp");
        return 1;
    }
    setenv("TMPDIR", tmp_root, 1);
    main_pid = getpid();
    atexit(verify_removed_at_exit);

    int pipefd[2];
    CHECK(pipe(pipefd) == 0);
    report_fd = pipefd[1];
    CHECK_EQ_I64(in_child(child_creates_own_session), 0);
    close(pipefd[1]);
    char seen[4096] = {0};
    CHECK(read(pipefd[0], seen, sizeof seen - 1) > 0);
    close(pipefd[0]);
    CHECK(strstr(seen, "/.strideweave-filebacked-") != NULL);
    CHECK(!exists(seen));
    CHECK_EQ_I64(count_entries(tmp_root), 0);

    test_session_dir();
    test_names();
    test_create_io_remove();
    test_remove_closes_in_background();
    test_burst_of_removals_is_closed_in_the_background();
    test_pwritev_gathers_many_pieces();
    test_preadv_scatters_many_pieces();
    test_faults();
    test_exit_cleanup();
    test_child_reaper_after_fork();

    const char *dir;
    sw_filestore_session_dir(&dir, NULL);
    strncpy(session_at_exit, dir, sizeof session_at_exit - 1);
    return check_report("filestore");
}
