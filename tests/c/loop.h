/* A real Linux block device for the C tests: a loop device (losetup) over a
 * sparse file, optionally on a small tmpfs that cannot hold all of it.
 * loop_unavailable() says why none can be made here (not Linux, not root,
 * no losetup or loop driver); loop_attach fills `why` when it fails. */
#ifndef SW_TEST_LOOP_H
#define SW_TEST_LOOP_H

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

typedef struct loop_dev {
    char dir[64];      /* temporary directory (the tmpfs mount point when tiny) */
    char backing[128]; /* the sparse file */
    char path[64];     /* /dev/loopN */
    int mounted;
} loop_dev;

static const char *loop_unavailable(void)
{
#ifndef __linux__
    return "loop devices exist on Linux only";
#else
    if (geteuid() != 0)
        return "creating a loop device needs root";
    if (access("/dev/loop-control", F_OK) != 0)
        return "/dev/loop-control is missing (no loop driver here)";
    if (system("losetup --version >/dev/null 2>&1") != 0)
        return "losetup is not installed";
    return NULL;
#endif
}

static int loop_run(const char *fmt, const char *a, const char *b)
{
    char cmd[512];
    snprintf(cmd, sizeof cmd, fmt, a, b);
    return system(cmd);
}

/* `bytes` of sparse backing; `tmpfs_bytes` > 0 puts the backing file on a
 * tmpfs of that size. 0 on success, else -1 with `why` set. */
static int loop_attach(loop_dev *l, long long bytes, long long tmpfs_bytes, const char **why)
{
    memset(l, 0, sizeof *l);
    snprintf(l->dir, sizeof l->dir, "/tmp/sw-loop-XXXXXX");
    if (!mkdtemp(l->dir)) {
        *why = "cannot make a temporary directory";
        return -1;
    }
    if (tmpfs_bytes > 0) {
        char size[32];
        snprintf(size, sizeof size, "size=%lld", tmpfs_bytes);
        if (loop_run("mount -t tmpfs -o %s tmpfs %s >/dev/null 2>&1", size, l->dir) != 0) {
            rmdir(l->dir);
            *why = "cannot mount a tmpfs here";
            return -1;
        }
        l->mounted = 1;
    }
    snprintf(l->backing, sizeof l->backing, "%s/backing.img", l->dir);
    int fd = open(l->backing, O_CREAT | O_RDWR | O_TRUNC, 0600);
    if (fd < 0 || ftruncate(fd, bytes) != 0) {
        if (fd >= 0)
            close(fd);
        *why = "cannot create the sparse backing file";
        goto fail;
    }
    close(fd);
    char cmd[256];
    snprintf(cmd, sizeof cmd, "losetup --find --show %s 2>/dev/null", l->backing);
    FILE *p = popen(cmd, "r");
    if (!p || !fgets(l->path, sizeof l->path, p)) {
        if (p)
            pclose(p);
        *why = "losetup could not attach a loop device";
        goto fail;
    }
    if (pclose(p) != 0) {
        *why = "losetup could not attach a loop device";
        goto fail;
    }
    l->path[strcspn(l->path, "\n")] = 0;
    return 0;
fail:
    unlink(l->backing);
    if (l->mounted)
        loop_run("umount -l %s%s >/dev/null 2>&1", l->dir, "");
    rmdir(l->dir);
    return -1;
}

static void loop_detach(loop_dev *l)
{
    loop_run("losetup -d %s%s >/dev/null 2>&1", l->path, "");
    unlink(l->backing);
    if (l->mounted)
        loop_run("umount -l %s%s >/dev/null 2>&1", l->dir, "");
    rmdir(l->dir);
}

/* What reached the device: `n` floats of the backing file at `offset`. */
static inline int loop_backing_floats(const loop_dev *l, long long offset, float *out, int n)
{
    int fd = open(l->backing, O_RDONLY);
    if (fd < 0)
        return -1;
    ssize_t r = pread(fd, out, (size_t)n * sizeof(float), (off_t)offset);
    close(fd);
    return r == (ssize_t)((size_t)n * sizeof(float)) ? 0 : -1;
}

#endif
