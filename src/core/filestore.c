#include "strideweave/filestore.h"
#include "fault_internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdatomic.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "strideweave/alloc.h"
#include "filestore_internal.h"
#include "fork_internal.h"
#include "core_thread_internal.h"
#include "move_exit_internal.h"

SW_FORK_LINKED;

/* A removed file this large is closed on the caller, unless deferred (see
 * close_later); a write this large waits for deferred closes first. */
#define REAP_SYNC_BYTES ((int64_t)1 << 20)

#define DIR_PREFIX ".strideweave-filebacked-"
#define NEW_PREFIX ".strideweave-filebacked-new-"
#define LOCK_NAME ".lock"
/* iovecs per pwritev call: within every system's IOV_MAX (POSIX: >= 16;
 * Linux 1024). */
#define IOV_BATCH 1024

static pthread_mutex_t session_lock = PTHREAD_MUTEX_INITIALIZER;
static char session_dir[PATH_MAX];
static _Atomic long session_pid; /* 0 until the directory exists */

static int random_bytes(unsigned char *buf, size_t n)
{
    size_t got = 0;
    while (got < n) {
        ssize_t r = getrandom(buf + got, n - got, 0);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            break;
        }
        got += (size_t)r;
    }
    if (got == n)
        return 0;
    /* getrandom unavailable: fall back to the device. */
    int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    got = 0;
    while (got < n) {
        ssize_t r = read(fd, buf + got, n - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0) {
            close(fd);
            return -1;
        }
        got += (size_t)r;
    }
    close(fd);
    return 0;
}

static int random_hex32(char *out)
{
    static const char digits[] = "0123456789abcdef";
    unsigned char raw[16];
    if (random_bytes(raw, sizeof raw) < 0)
        return -1;
    for (int i = 0; i < 16; i++) {
        out[2 * i] = digits[raw[i] >> 4];
        out[2 * i + 1] = digits[raw[i] & 15];
    }
    out[32] = '\0';
    return 0;
}

static int empty_dir(int dfd);

/* The session directory as the exit cleanup finds it again: its parent
 * ("" is "/"), its own name, and its identity when it was made. */
static char session_base[PATH_MAX];
static char session_name[64];
static dev_t session_dev;
static ino_t session_ino;

/* A descriptor of the session directory this process made, through which
 * a released file's name is removed (unlinkat: no walk of the directory's
 * path per file), and the process it belongs to (a forked child inherits
 * its parent's and makes its own). */
static _Atomic int session_dfd = -1;
static _Atomic long session_dfd_pid;

/* With session_lock held, once the directory is made. */
static void session_dir_open(void)
{
    int old = atomic_exchange(&session_dfd, -1);
    if (old >= 0)
        close(old);
    int dfd = open(session_dir, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    struct stat st;
    if (dfd >= 0 && (fstat(dfd, &st) != 0 || st.st_dev != session_dev ||
                     st.st_ino != session_ino)) {
        close(dfd);
        dfd = -1;
    }
    atomic_store(&session_dfd_pid, (long)getpid());
    atomic_store(&session_dfd, dfd);
}

/* Remove a file's name: relative to the session directory's descriptor
 * when the file is in it, else by its path. */
static void remove_name(const char *path, long pid)
{
    size_t n = strlen(session_dir);
    int dfd = atomic_load(&session_dfd);
    if (dfd >= 0 && atomic_load(&session_dfd_pid) == pid && n > 0 &&
        strncmp(path, session_dir, n) == 0 && path[n] == '/' && !strchr(path + n + 1, '/'))
        unlinkat(dfd, path + n + 1, 0);
    else
        unlink(path);
}

/* Remove the session directory through descriptors: the name is opened
 * relative to its parent with O_NOFOLLOW, and only the directory this
 * process made (same device and inode) is emptied and removed, so a
 * symlink or another directory put in its place is never followed or
 * touched. */
static void remove_session_at_exit(void)
{
    sw_filestore_reclaim_wait();
    if (session_pid == 0 || session_pid != (long)getpid())
        return;
    sw_move_exit_drain(); /* moves into session files finish first */
    int basefd = open(session_base[0] ? session_base : "/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (basefd < 0)
        return;
    int dfd = openat(basefd, session_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    struct stat st;
    if (dfd >= 0 && fstat(dfd, &st) == 0 && st.st_dev == session_dev &&
        st.st_ino == session_ino) {
        empty_dir(dfd);
        unlinkat(basefd, session_name, AT_REMOVEDIR);
    }
    if (dfd >= 0)
        close(dfd);
    close(basefd);
}

/* ---- reclaiming the directories of processes that died ---------------------
 *
 * A live process holds an exclusive flock on LOCK_NAME inside its session
 * directory for as long as it runs (the descriptor is never closed; the
 * kernel drops the lock when the process dies, however it dies). A
 * directory only gets its final name once that lock is held (it is made
 * under NEW_PREFIX and renamed), so a session directory whose lock can be
 * taken belongs to nobody alive. Reclaiming works through descriptors
 * opened with O_NOFOLLOW relative to TMPDIR, so a symlink planted there
 * never leads the removal elsewhere, and only directories owned by this
 * user are touched. */

static int lock_fd = -1; /* held for the life of the process */

/* `prefix` followed by exactly 32 lowercase hex digits. */
static int is_prefixed_hex(const char *name, const char *prefix)
{
    size_t plen = strlen(prefix);
    if (strncmp(name, prefix, plen) != 0 || strlen(name) != plen + 32)
        return 0;
    for (size_t i = plen; i < plen + 32; i++)
        if (!((name[i] >= '0' && name[i] <= '9') || (name[i] >= 'a' && name[i] <= 'f')))
            return 0;
    return 1;
}

/* A session directory, or one whose maker died between mkdir and rename. */
static int is_session_name(const char *name)
{
    return is_prefixed_hex(name, DIR_PREFIX) || is_prefixed_hex(name, NEW_PREFIX);
}

/* Remove the flat contents of the open directory `dfd`; -1 when it
 * cannot be listed. */
static int empty_dir(int dfd)
{
    int dup_fd = dup(dfd);
    DIR *d = dup_fd >= 0 ? fdopendir(dup_fd) : NULL;
    if (!d) {
        if (dup_fd >= 0)
            close(dup_fd);
        return -1;
    }
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0)
            unlinkat(dfd, e->d_name, 0); /* a subdirectory is not ours: left */
    closedir(d);
    return 0;
}

static void reclaim_one(int basefd, const char *name)
{
    int dfd = openat(basefd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (dfd < 0)
        return;
    struct stat st;
    int lfd = -1;
    if (fstat(dfd, &st) == 0 && st.st_uid == geteuid())
        lfd = openat(dfd, LOCK_NAME, O_RDWR | O_NOFOLLOW | O_CLOEXEC);
    if (lfd >= 0 && flock(lfd, LOCK_EX | LOCK_NB) == 0) {
        empty_dir(dfd);
        unlinkat(basefd, name, AT_REMOVEDIR);
    }
    if (lfd >= 0)
        close(lfd); /* drops our lock, if we took it */
    close(dfd);
}

void sw_filestore_reclaim_abandoned(const char *base)
{
    int basefd = open(base, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (basefd < 0)
        return;
    int list_fd = dup(basefd);
    DIR *d = list_fd >= 0 ? fdopendir(list_fd) : NULL;
    if (d) {
        struct dirent *e;
        while ((e = readdir(d)) != NULL)
            if (is_session_name(e->d_name))
                reclaim_one(basefd, e->d_name);
        closedir(d);
    } else if (list_fd >= 0) {
        close(list_fd);
    }
    close(basefd);
}

/* Make `final` (a session directory path) with its lock held: create it
 * under a temporary name, lock, then rename. 0, EEXIST to try another
 * name, or another errno. */
static int make_locked_dir(const char *base, const char *hex, const char *final)
{
    char tmp[PATH_MAX];
    if (snprintf(tmp, sizeof tmp, "%s/%s%s", base, NEW_PREFIX, hex) >= (int)sizeof tmp)
        return ENAMETOOLONG;
    if (mkdir(tmp, 0700) != 0)
        return errno;
    char lock_path[PATH_MAX];
    int fd = -1, e = 0;
    if (snprintf(lock_path, sizeof lock_path, "%s/%s", tmp, LOCK_NAME) >= (int)sizeof lock_path)
        e = ENAMETOOLONG;
    if (!e && (fd = open(lock_path, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600)) < 0)
        e = errno;
    if (!e && flock(fd, LOCK_EX | LOCK_NB) != 0)
        e = errno == EWOULDBLOCK ? EEXIST : errno; /* a reclaim holds it: another name */
    /* rename() would replace an existing empty directory: refuse that. */
    if (!e && mkdir(final, 0700) == 0) {
        rmdir(final);
    } else if (!e) {
        e = errno;
    }
    /* ENOENT: another process's startup reclaim removed the half-made
     * directory before our lock was taken; try another name. */
    if (!e && rename(tmp, final) != 0)
        e = errno == ENOENT ? EEXIST : errno;
    if (e) {
        if (fd >= 0)
            close(fd);
        unlink(lock_path);
        rmdir(tmp);
        return e;
    }
    lock_fd = fd;
    return 0;
}

/* fork() while another thread holds session_lock must not leave the
 * child's copy locked for good. */
void sw_filestore_fork_prepare(void)
{
    pthread_mutex_lock(&session_lock);
}

void sw_filestore_fork_parent(void)
{
    pthread_mutex_unlock(&session_lock);
}

/* This process's id, read once and again in each forked child: getpid()
 * is a system call, and every file created or released asks for it. */
static _Atomic long pid_now;

void sw_filestore_fork_child(void)
{
    atomic_store(&pid_now, (long)getpid());
    pthread_mutex_unlock(&session_lock);
}

/* The fork handlers are in place since the library loaded (fork.c), so a
 * child never reads its parent's id. */
static long this_pid(void)
{
    long pid = atomic_load_explicit(&pid_now, memory_order_relaxed);
    if (pid == 0) {
        pid = (long)getpid();
        atomic_store(&pid_now, pid);
    }
    return pid;
}

sw_status sw_filestore_session_dir(const char **dir, sw_error *err)
{
    sw_status st = SW_OK;
    pthread_mutex_lock(&session_lock);
    SW_FAULT_PAUSE("file_session_pause"); /* tests: fork with the lock held */
    /* A forked child makes a directory of its own: its parent removes its
     * own at exit, and the child's files must outlive that. */
    if (session_pid != this_pid()) {
        const char *base = getenv("TMPDIR");
        if (!base || !*base)
            base = "/tmp";
        /* A relative TMPDIR is resolved now, once: the paths kept for
         * `path`, release and the exit cleanup must not follow later
         * chdir() calls. */
        static char absbase[PATH_MAX];
        if (base[0] != '/') {
            char cwd[PATH_MAX];
            if (!getcwd(cwd, sizeof cwd)) {
                int e = errno;
                st = sw_error_set_errno(err, SW_EIO, e,
                                        "cannot resolve the relative TMPDIR %s: %s", base,
                                        strerror(e));
                goto out;
            }
            if (snprintf(absbase, sizeof absbase, "%s/%s", strcmp(cwd, "/") ? cwd : "",
                         base) >= (int)sizeof absbase) {
                st = sw_error_set(err, SW_EINVAL, "TMPDIR path is too long: %s", base);
                goto out;
            }
            base = absbase;
        }
        size_t baselen = strlen(base);
        while (baselen > 1 && base[baselen - 1] == '/')
            baselen--; /* "dir/" → "dir" (but keep "/") */
        if (baselen == 1 && base[0] == '/')
            baselen = 0;
        char basecopy[PATH_MAX];
        snprintf(basecopy, sizeof basecopy, "%.*s", (int)baselen, base);
        /* Storage left by processes that died without cleaning up goes first. */
        sw_filestore_reclaim_abandoned(baselen ? basecopy : "/");
        char hex[33];
        int made = 0;
        for (int attempt = 0; attempt < 16 && !made; attempt++) {
            if (random_hex32(hex) < 0) {
                st = sw_error_set_errno(err, SW_EIO, errno ? errno : EIO,
                                        "cannot generate a random directory name");
                goto out;
            }
            if (snprintf(session_dir, sizeof session_dir, "%.*s/%s%s", (int)baselen, base,
                         DIR_PREFIX, hex) >= (int)sizeof session_dir) {
                st = sw_error_set(err, SW_EINVAL, "TMPDIR path is too long: %s", base);
                goto out;
            }
            int e = make_locked_dir(baselen ? basecopy : "", hex, session_dir);
            if (e == 0)
                made = 1;
            else if (e != EEXIST) {
                st = sw_error_set_errno(err, SW_EIO, e,
                                        "cannot create the FileBacked directory %s: %s",
                                        session_dir, strerror(e));
                goto out;
            }
        }
        if (!made) {
            st = sw_error_set_errno(err, SW_EIO, EEXIST,
                                    "cannot create a unique FileBacked directory in %s",
                                    base);
            goto out;
        }
        chmod(session_dir, 0700); /* a umask could have narrowed it */
        struct stat st_dir;
        if (lstat(session_dir, &st_dir) == 0) {
            session_dev = st_dir.st_dev;
            session_ino = st_dir.st_ino;
        }
        snprintf(session_base, sizeof session_base, "%.*s", (int)baselen, base);
        snprintf(session_name, sizeof session_name, "%s%s", DIR_PREFIX, hex);
        session_dir_open();
        static int registered;
        if (!registered) {
            atexit(remove_session_at_exit);
            registered = 1;
        }
        session_pid = this_pid();
    }
out:
    if (st != SW_OK)
        session_dir[0] = '\0';
    pthread_mutex_unlock(&session_lock);
    if (st == SW_OK && dir)
        *dir = session_dir;
    return st;
}

long sw_filestore_creator_pid(void)
{
    return session_pid;
}

int sw_filestore_is_owner(void)
{
    return session_pid != 0 && session_pid == (long)getpid();
}

sw_status sw_filestore_generate_name(char *out, sw_error *err)
{
    if (random_hex32(out) < 0)
        return sw_error_set_errno(err, SW_EIO, errno ? errno : EIO,
                                  "cannot generate a random file name");
    memcpy(out + 32, ".bin", 5);
    return SW_OK;
}

sw_status sw_filestore_check_name(const char *name, size_t len, sw_error *err)
{
    if (len == 0)
        return sw_error_set(err, SW_EINVAL, "filename must not be empty");
    if ((len == 1 && name[0] == '.') || (len == 2 && name[0] == '.' && name[1] == '.'))
        return sw_error_set(err, SW_EINVAL, "filename must not be '.' or '..'");
    if (memchr(name, '/', len))
        return sw_error_set(err, SW_EINVAL, "filename must not contain '/'");
    if (memchr(name, '\0', len))
        return sw_error_set(err, SW_EINVAL, "filename must not contain NUL");
    return SW_OK;
}

/* A session file is private scratch storage nobody reads the access time
 * of: its descriptor makes no access-time updates (on a relatime mount the
 * first read after each write would otherwise dirty the inode, which
 * measured as half of a small file read's time). Only the file's owner may
 * ask for that; we just created it, and where a file system still refuses,
 * the descriptor stays as it was. */
static int create_file(const char *full)
{
    int f = open(full, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
#ifdef O_NOATIME
    if (f >= 0) /* of the flags F_SETFL sets, the open asked for none */
        (void)fcntl(f, F_SETFL, O_NOATIME);
#endif
    return f;
}

sw_status sw_filestore_create(const char *name, int *fd, char **path, sw_error *err)
{
    const char *dir;
    sw_status st = sw_filestore_check_name(name, strlen(name), err);
    if (st != SW_OK)
        return st;
    if ((st = sw_filestore_session_dir(&dir, err)) != SW_OK)
        return st;
    size_t need = strlen(dir) + 1 + strlen(name) + 1;
    char *full = sw_malloc(need);
    if (!full)
        return sw_error_set(err, SW_ENOMEM, "out of memory for a FileBacked path");
    snprintf(full, need, "%s/%s", dir, name);
    sw_filestore_large_closes_wait();
    if (SW_FAULT_HIT("open")) {
        sw_free(full);
        return sw_error_set_errno(err, SW_EIO, EIO, "cannot create %s: injected fault",
                                  name);
    }
    int f = create_file(full);
    if (f < 0 && (errno == EMFILE || errno == ENFILE) && sw_filestore_reclaim_pending() > 0) {
        /* Released files' descriptors still waiting to be closed count
         * against the limit: close them and try again. */
        sw_filestore_reclaim_wait();
        f = create_file(full);
    }
    if (f < 0) {
        int e = errno;
        sw_free(full);
        if (e == EEXIST)
            return sw_error_set_errno(err, SW_EEXIST, e,
                                      "FileBacked file already exists: %s", name);
        return sw_error_set_errno(err, SW_EIO, e, "cannot create %s: %s", name,
                                  strerror(e));
    }
    *fd = f;
    *path = full;
    return SW_OK;
}

sw_status sw_filestore_create_unique(int *fd, char **path, sw_error *err)
{
    char name[SW_FILESTORE_NAME_LEN];
    sw_status st = SW_EEXIST;
    for (int attempt = 0; attempt < 16 && st == SW_EEXIST; attempt++) {
        if ((st = sw_filestore_generate_name(name, err)) != SW_OK)
            return st;
        st = sw_filestore_create(name, fd, path, err);
    }
    return st;
}

sw_status sw_filestore_pread(int fd, void *buf, size_t bytes, int64_t offset,
                             sw_error *err)
{
    if (SW_FAULT_HIT("pread"))
        return sw_error_set_errno(err, SW_EIO, EIO, "reading the FileBacked file failed: injected fault");
    char *p = buf;
    while (bytes > 0) {
        ssize_t r = pread(fd, p, bytes, (off_t)offset);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            int e = errno;
            return sw_error_set_errno(err, SW_EIO, e, "reading the FileBacked file failed: %s", strerror(e));
        }
        if (r == 0)
            return sw_error_set_errno(err, SW_EIO, EIO,
                                      "pread failed: unexpected end of file");
        p += r;
        bytes -= (size_t)r;
        offset += r;
    }
    return SW_OK;
}

/* The error of a write that returned r <= 0 (errno still set for r < 0):
 * r == 0 stored nothing, which on a file means the disk is full. */
static sw_status write_failed(ssize_t r, sw_error *err)
{
    if (r == 0)
        return sw_error_set_errno(err, SW_EIO, EIO, "writing the FileBacked file stored nothing (is the disk full?)");
    int e = errno;
    return sw_error_set_errno(err, SW_EIO, e, "writing the FileBacked file failed: %s", strerror(e));
}

sw_status sw_filestore_pwrite(int fd, const void *buf, size_t bytes, int64_t offset,
                              sw_error *err)
{
    if (SW_FAULT_HIT("pwrite"))
        return sw_error_set_errno(err, SW_EIO, EIO, "writing the FileBacked file failed: injected fault");
    if (bytes >= (size_t)REAP_SYNC_BYTES)
        sw_filestore_large_closes_wait();
    const char *p = buf;
    while (bytes > 0) {
        ssize_t r = pwrite(fd, p, bytes, (off_t)offset);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return write_failed(r, err);
        p += r;
        bytes -= (size_t)r;
        offset += r;
    }
    return SW_OK;
}

/* The next batch of pieces from iov[i] on, the first `skip` bytes of
 * iov[i] left out (already transferred); how many pieces it holds. */
static int iov_batch(const struct iovec *iov, int64_t n, int64_t i, size_t skip,
                     struct iovec batch[IOV_BATCH])
{
    int k = 0;
    for (int64_t j = i; j < n && k < IOV_BATCH; j++, k++) {
        batch[k] = iov[j];
        if (j == i) {
            batch[k].iov_base = (char *)batch[k].iov_base + skip;
            batch[k].iov_len -= skip;
        }
    }
    return k;
}

/* Step (i, skip) past `done` bytes transferred. */
static void iov_advance(const struct iovec *iov, int64_t n, size_t done, int64_t *i,
                        size_t *skip)
{
    while (*i < n && done >= iov[*i].iov_len - *skip) {
        done -= iov[*i].iov_len - *skip;
        *skip = 0;
        ++*i;
    }
    *skip += done;
}

sw_status sw_filestore_pwritev(int fd, const struct iovec *iov, int64_t n, int64_t offset,
                               sw_error *err)
{
    if (SW_FAULT_HIT("pwrite"))
        return sw_error_set_errno(err, SW_EIO, EIO, "writing the FileBacked file failed: injected fault");
    sw_filestore_large_closes_wait(); /* a tile set's runs: large as a whole */
    struct iovec batch[IOV_BATCH];
    int64_t i = 0;
    size_t skip = 0; /* bytes of iov[i] already written */
    while (i < n) {
        int k = iov_batch(iov, n, i, skip, batch);
        ssize_t r = pwritev(fd, batch, k, (off_t)offset);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return write_failed(r, err);
        offset += r;
        iov_advance(iov, n, (size_t)r, &i, &skip);
    }
    return SW_OK;
}

/* The part of a copy the kernel would not do, through a buffer of at most
 * COPY_STAGE_BYTES: pread, then pwrite. */
#define COPY_STAGE_BYTES ((int64_t)1 << 20)

static sw_status copy_staged(int src_fd, int64_t src_offset, int dst_fd, int64_t dst_offset,
                             int64_t bytes, sw_error *err)
{
    size_t cap = (size_t)(bytes < COPY_STAGE_BYTES ? bytes : COPY_STAGE_BYTES);
    unsigned char *buf = sw_malloc(cap);
    if (!buf)
        return sw_error_set(err, SW_ENOMEM, "out of memory copying between files");
    sw_status st = SW_OK;
    for (int64_t done = 0; st == SW_OK && done < bytes;) {
        size_t n = (size_t)(bytes - done) < cap ? (size_t)(bytes - done) : cap;
        st = sw_filestore_pread(src_fd, buf, n, src_offset + done, err);
        if (st == SW_OK)
            st = sw_filestore_pwrite(dst_fd, buf, n, dst_offset + done, err);
        done += (int64_t)n;
    }
    sw_free(buf);
    return st;
}

/* Whether copy_file_range's errno says the kernel cannot copy between these
 * files (another file system, an old kernel, a file kind it refuses). */
static int copy_unsupported(int e)
{
    return e == EXDEV || e == ENOSYS || e == EINVAL || e == EOPNOTSUPP;
}

sw_status sw_filestore_copy_range(int src_fd, int64_t src_offset, int dst_fd,
                                  int64_t dst_offset, int64_t bytes, sw_error *err)
{
    if (SW_FAULT_HIT("copy_range"))
        return sw_error_set_errno(err, SW_EIO, EIO, "copying between FileBacked files failed: "
                                  "injected fault");
    if (bytes >= REAP_SYNC_BYTES)
        sw_filestore_large_closes_wait();
    int kernel = !SW_FAULT_HIT("copy_range_unsupported");
    while (kernel && bytes > 0) {
        loff_t in = (loff_t)src_offset, out = (loff_t)dst_offset;
        ssize_t r = copy_file_range(src_fd, &in, dst_fd, &out, (size_t)bytes, 0);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0 && copy_unsupported(errno))
            break;
        if (r < 0) {
            int e = errno;
            return sw_error_set_errno(err, SW_EIO, e, "copying between FileBacked files failed: "
                                      "%s", strerror(e));
        }
        if (r == 0)
            return sw_error_set_errno(err, SW_EIO, EIO, "copy_file_range failed: unexpected end "
                                      "of file");
        src_offset += r;
        dst_offset += r;
        bytes -= r;
    }
    return bytes > 0 ? copy_staged(src_fd, src_offset, dst_fd, dst_offset, bytes, err) : SW_OK;
}

sw_status sw_filestore_preadv(int fd, const struct iovec *iov, int64_t n, int64_t offset,
                              sw_error *err)
{
    if (SW_FAULT_HIT("pread"))
        return sw_error_set_errno(err, SW_EIO, EIO, "reading the FileBacked file failed: injected fault");
    struct iovec batch[IOV_BATCH];
    int64_t i = 0;
    size_t skip = 0; /* bytes of iov[i] already read */
    while (i < n) {
        if (iov[i].iov_len == skip) { /* an empty piece (or one just finished) */
            skip = 0;
            i++;
            continue;
        }
        int k = iov_batch(iov, n, i, skip, batch);
        ssize_t r = preadv(fd, batch, k, (off_t)offset);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            int e = errno;
            return sw_error_set_errno(err, SW_EIO, e, "reading the FileBacked file failed: %s", strerror(e));
        }
        if (r == 0)
            return sw_error_set_errno(err, SW_EIO, EIO, "preadv failed: unexpected end of file");
        offset += r;
        iov_advance(iov, n, (size_t)r, &i, &skip);
    }
    return SW_OK;
}

sw_status sw_filestore_resize(int fd, int64_t bytes, sw_error *err)
{
    if (bytes < 0)
        return sw_error_set(err, SW_EINVAL, "file length must be >= 0");
    if (SW_FAULT_HIT("truncate"))
        return sw_error_set_errno(err, SW_EIO, EIO, "resizing the FileBacked file failed: injected fault");
    sw_filestore_large_closes_wait();
    while (ftruncate(fd, (off_t)bytes) != 0) {
        if (errno == EINTR)
            continue;
        int e = errno;
        return sw_error_set_errno(err, SW_EIO, e, "resizing the FileBacked file failed: %s", strerror(e));
    }
    return SW_OK;
}

/* ---- closing released files off the caller's path ---------------------------
 *
 * Removing a released file costs two system calls: the unlink, and the
 * last close, which on most file systems is where the inode and its blocks
 * are freed (often the dearer of the two, and growing with the file). The
 * unlink happens at once, so the name is free and nothing can reach the data
 * any more; the descriptor goes onto a queue that one reaper thread closes,
 * as free() hands memory back. Waking the reaper costs a system call too, so
 * small files are closed in batches: the reaper is woken once the queue
 * holds REAP_BATCH descriptors or REAP_BYTES of storage, or any file of
 * unknown size; until then at most that much small storage waits. Woken
 * while its caller still releases files, it lets that burst go by first
 * (reap_let_burst_pass_locked), with at most REAP_QUIET_BYTES waiting. Files of
 * REAP_SYNC_BYTES or more are closed by the caller (see close_later). The queue
 * is emptied before fork() (the child inherits no released descriptor, so
 * the space is free in both processes) and at exit
 * (sw_filestore_reclaim_wait). When the thread cannot start, or the queue is
 * full, the caller closes the descriptor itself. */

#define REAP_MAX 256 /* descriptors held open at most */
#define REAP_BATCH 64
#define REAP_BYTES ((int64_t)1 << 20)

static pthread_mutex_t reap_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t reap_work = PTHREAD_COND_INITIALIZER; /* the reaper: a batch is due */
static pthread_cond_t reap_idle = PTHREAD_COND_INITIALIZER; /* waiters: batch closed */
static int reap_fds[REAP_MAX];
static int reap_count;     /* queued, not yet taken */
/* Storage of the queued files, counted up to REAP_QUIET_BYTES (a file of
 * unknown size counts as that much): its batch is due from REAP_BYTES, and
 * the reaper's burst pause ends at REAP_QUIET_BYTES. */
static int64_t reap_bytes;
static int reap_due;       /* the queue is to be closed now */
static int reap_sleeping;  /* the reaper waits on reap_work */
static int reap_busy;      /* the reaper is closing a batch it took */
static int reap_started;   /* the reaper thread runs in this process */
/* Deferred large closes (sw_filestore_defer_large_closes): queued, and in
 * all (queued or in the reaper's batch), which waiters read without the
 * lock first. */
static int reap_large_queued;
static _Atomic int reap_large;

/* A caller that keeps releasing files is in a burst of moves out of
 * FileBacked carriers, and closing beside it slows each of its moves: the
 * last closes and its own unlinks and reads meet in the file system. 256
 * FileBacked -> CPU moves of 4 KiB in flight took 4.7 us each with the
 * reaper closing beside them, 4.1 us with it waiting (bench/sweep.py's
 * file->cpu* cell). So the reaper lets a burst go by first: it pauses
 * REAP_QUIET_US at a time while descriptors keep arriving, until
 * REAP_QUIET_HIGH of them wait (room stays for another batch before the
 * caller must close its own) or they hold REAP_QUIET_BYTES of storage (the disk
 * space a burst keeps from other writers stays small); never with a file
 * of unknown size or a large one queued, whose close a later creation or
 * large write waits for. */
#define REAP_QUIET_US 200
#define REAP_QUIET_HIGH (REAP_MAX - REAP_BATCH)
#define REAP_QUIET_BYTES ((int64_t)16 << 20)

/* With reap_lock held (let go during each pause). */
static void reap_let_burst_pass_locked(void)
{
    for (;;) {
        int before = reap_count;
        if (before >= REAP_QUIET_HIGH || reap_bytes >= REAP_QUIET_BYTES ||
            reap_large_queued > 0)
            return;
        pthread_mutex_unlock(&reap_lock);
        nanosleep(&(struct timespec){.tv_nsec = REAP_QUIET_US * 1000L}, NULL);
        pthread_mutex_lock(&reap_lock);
        if (reap_count <= before)
            return; /* quiet, or a waiter closed the queue itself */
    }
}

static void *reaper_main(void *arg)
{
    (void)arg;
    int batch[REAP_MAX];
    /* Normal priority on purpose: a file creation or large transfer waits
     * for a large close this thread took (filestore.h), and a lowered
     * priority cannot be raised back without privileges, so on a busy
     * machine that waiter would wait behind every other thread. */
    pthread_mutex_lock(&reap_lock);
    for (;;) {
        while (!reap_due) {
            reap_sleeping = 1;
            pthread_cond_wait(&reap_work, &reap_lock);
            reap_sleeping = 0;
        }
        /* Tests stop the reaper here, with descriptors queued and no lock
         * held, to see them still open and fork or exit meanwhile. */
        pthread_mutex_unlock(&reap_lock);
        SW_FAULT_PAUSE("file_reclaim_pause");
        pthread_mutex_lock(&reap_lock);
        reap_let_burst_pass_locked();
        int n = reap_count, large = reap_large_queued;
        memcpy(batch, reap_fds, (size_t)n * sizeof batch[0]);
        reap_count = 0;
        reap_large_queued = 0;
        reap_bytes = 0;
        reap_due = 0;
        reap_busy = 1;
        pthread_mutex_unlock(&reap_lock);
        for (int i = 0; i < n; i++)
            close(batch[i]);
        pthread_mutex_lock(&reap_lock);
        reap_busy = 0;
        atomic_fetch_sub(&reap_large, large);
        pthread_cond_broadcast(&reap_idle);
    }
    return NULL;
}

/* With reap_lock held: close what is queued here and wait for a batch the
 * reaper is closing. */
static void reap_drain_locked(void)
{
    while (reap_count > 0)
        close(reap_fds[--reap_count]);
    atomic_fetch_sub(&reap_large, reap_large_queued);
    reap_large_queued = 0;
    reap_bytes = 0;
    reap_due = 0;
    while (reap_busy)
        pthread_cond_wait(&reap_idle, &reap_lock);
}

void sw_filestore_reap_fork_prepare(void)
{
    pthread_mutex_lock(&reap_lock);
    reap_drain_locked();
}

void sw_filestore_reap_fork_parent(void)
{
    pthread_mutex_unlock(&reap_lock);
}

void sw_filestore_reap_fork_child(void)
{
    /* The reaper thread is not in the child; the queue is empty. The
     * parent's reaper, asleep on reap_work, is still counted there as a
     * waiter the child lacks: the child's first wake of its own reaper
     * then hung in pthread_cond_signal. Fresh condition variables. */
    reap_started = 0;
    reap_busy = 0;
    reap_sleeping = 0;
    pthread_cond_init(&reap_work, NULL);
    pthread_cond_init(&reap_idle, NULL);
    atomic_store(&reap_large, 0);
    pthread_mutex_unlock(&reap_lock);
}

/* With reap_lock held: 1 when the reaper runs (started now if needed). */
static int reaper_running(void)
{
    if (!reap_started)
        reap_started = sw_thread_start_detached(reaper_main, NULL) == 0;
    return reap_started;
}

/* `bytes` < 0: the file's size is not known. */
static void close_later(int fd, int64_t bytes)
{
    /* A large file's storage is freed on the caller, as free() unmaps a
     * large block at once: freed in the background it was still being
     * returned while the next large write ran, which then waited on the
     * file system (a first TiledEvictable eviction after a 256 MiB release
     * took 55-140 ms instead of 5 ms; releasing its 16 MiB tile files did
     * the same to the next one, so the line is drawn at 1 MiB). */
    int large = bytes >= REAP_SYNC_BYTES;
    if (large && !sw_core_thread_state.defer_large_closes) {
        close(fd);
        return;
    }
    /* Deferred (a move's source): in the background, at once, and the
     * next file creation or large file transfer waits for it. */
    pthread_mutex_lock(&reap_lock);
    SW_FAULT_PAUSE("file_reap_queue_pause"); /* tests: fork with the lock held */
    if (reap_count < REAP_MAX && reaper_running()) {
        reap_fds[reap_count++] = fd;
        if (large) {
            reap_large_queued++;
            atomic_fetch_add(&reap_large, 1);
        }
        if (bytes < 0 || bytes >= REAP_QUIET_BYTES - reap_bytes)
            reap_bytes = REAP_QUIET_BYTES;
        else
            reap_bytes += bytes;
        if (reap_bytes >= REAP_BYTES || reap_count >= REAP_BATCH)
            reap_due = 1;
        if (reap_due && reap_sleeping)
            pthread_cond_signal(&reap_work);
        fd = -1;
    }
    pthread_mutex_unlock(&reap_lock);
    if (fd >= 0)
        close(fd);
}

void sw_filestore_defer_large_closes(int on)
{
    sw_core_thread_state.defer_large_closes = on != 0;
}

void sw_filestore_large_closes_wait(void)
{
    if (atomic_load(&reap_large) == 0)
        return;
    pthread_mutex_lock(&reap_lock);
    reap_drain_locked();
    pthread_mutex_unlock(&reap_lock);
}

void sw_filestore_reclaim_wait(void)
{
    pthread_mutex_lock(&reap_lock);
    reap_drain_locked();
    pthread_mutex_unlock(&reap_lock);
}

int sw_filestore_reclaim_pending(void)
{
    pthread_mutex_lock(&reap_lock);
    int n = reap_count + reap_busy;
    pthread_mutex_unlock(&reap_lock);
    return n;
}

void sw_filestore_remove_named(int fd, const char *path, long creator_pid, int64_t bytes)
{
    if (path) {
        long pid = this_pid();
        if (creator_pid == pid)
            remove_name(path, pid);
    }
    if (fd >= 0)
        close_later(fd, bytes);
}

void sw_filestore_remove_sized(int fd, char *path, long creator_pid, int64_t bytes)
{
    sw_filestore_remove_named(fd, path, creator_pid, bytes);
    sw_free(path);
}

void sw_filestore_remove(int fd, char *path, long creator_pid)
{
    sw_filestore_remove_sized(fd, path, creator_pid, -1);
}
