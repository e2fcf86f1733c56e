/* The FileBacked file store (contract-carriers C-22, C-23).
 *
 * Files live flat in one hidden per-process session directory,
 * `$TMPDIR/.strideweave-filebacked-<32 hex>` (TMPDIR unset or empty: /tmp),
 * mode 0700, created on first use (thread-safe) and removed at exit by an
 * atexit handler in the process that created it only (through descriptors,
 * never following a symlink put in its place). A forked child makes its own
 * directory on its first use, so its files outlive its parent's exit and it
 * never deletes its parent's files. The creator holds an flock on
 * `.lock` inside it for its whole life, so a directory left by a process
 * that was killed is recognized (its lock is free) and removed by the next
 * process that makes FileBacked storage. A slot file is raw native-order
 * data with no header. I/O loops survive EINTR and short transfers and
 * consult fault injection ("open", "pread", "pwrite", "truncate").
 *
 * Ownership: the session directory's path belongs to the store (valid for
 * the life of the process; never free it). sw_filestore_create and
 * _create_unique give the caller the open descriptor and `*path`, a string
 * from sw_malloc: hand both back to sw_filestore_remove (or _remove_sized),
 * which unlinks the file, sw_frees the path and closes the descriptor; or
 * close(fd) and sw_free(path) yourself, and the file stays until the
 * session directory goes at exit. Buffers, iovecs and names passed in are
 * borrowed for the call.
 * Threads: every call is thread-safe. The session directory is made once
 * whichever threads ask first; the I/O calls are positional (pread/pwrite),
 * so threads may share a descriptor for byte ranges none of them writes
 * while another reads or writes them; removals queue under a lock;
 * sw_filestore_defer_large_closes is per thread; sw_filestore_reclaim_abandoned
 * may race other threads or processes doing the same (each directory is
 * taken under its flock). */
#ifndef STRIDEWEAVE_FILESTORE_H
#define STRIDEWEAVE_FILESTORE_H

#include "strideweave/export.h"

#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include "strideweave/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* "<32 hex>.bin" plus the terminating NUL. */
#define SW_FILESTORE_NAME_LEN 37

/* The session directory's absolute path, creating it on first use. The
 * string stays valid for the life of the process. */
SW_API sw_status sw_filestore_session_dir(const char **dir, sw_error *err);
/* Remove the session directories under `base` whose process is gone (its
 * lock on the directory is free), never one whose owner is alive, never
 * through a symlink, only directories of this user; half-made ones
 * (`.strideweave-filebacked-new-<32 hex>`, their maker killed before the
 * rename) too. Runs before the session directory is made; exposed for
 * tests. */
SW_API void sw_filestore_reclaim_abandoned(const char *base);
/* Process id that created the session directory, 0 if none yet. */
SW_API long sw_filestore_creator_pid(void);
/* Whether the calling process created the session directory: only then
 * does it remove files at release and the directory at exit. */
SW_API int sw_filestore_is_owner(void);

/* Fill `out` (SW_FILESTORE_NAME_LEN bytes) with a fresh random
 * "<32 hex>.bin". */
SW_API sw_status sw_filestore_generate_name(char *out, sw_error *err);
/* SW_EINVAL unless `name` (`len` bytes) is a plain file name: not empty,
 * ".", or "..", and without '/' or NUL. */
SW_API sw_status sw_filestore_check_name(const char *name, size_t len, sw_error *err);

/* Create `name` exclusively (O_EXCL) in the session directory, length 0.
 * An existing file → SW_EEXIST and it is left untouched. On success `*fd`
 * is open read-write and `*path` is the sw_malloc'd absolute path, both the
 * caller's (see Ownership above); on failure neither is set. */
SW_API sw_status sw_filestore_create(const char *name, int *fd, char **path, sw_error *err);
/* sw_filestore_create with a generated name (retried on a collision). */
SW_API sw_status sw_filestore_create_unique(int *fd, char **path, sw_error *err);

/* Transfer exactly `bytes` at `offset`; EINTR and short transfers are
 * continued. End of file while reading → SW_EIO (errno EIO). */
SW_API sw_status sw_filestore_pread(int fd, void *buf, size_t bytes, int64_t offset,
                                    sw_error *err);
SW_API sw_status sw_filestore_pwrite(int fd, const void *buf, size_t bytes,
                                     int64_t offset, sw_error *err);
/* Write the `n` memory pieces `iov` back to back from file `offset` in as
 * few pwritev calls as the system's vector limit allows; EINTR and short
 * transfers are continued. `iov` is left unchanged. Consults the "pwrite"
 * fault once per call. */
SW_API sw_status sw_filestore_pwritev(int fd, const struct iovec *iov, int64_t n, int64_t offset,
                                      sw_error *err);
/* Read file bytes from `offset` on into the `n` memory pieces `iov`, back
 * to back, in as few preadv calls as the vector limit allows; EINTR and
 * short transfers are continued, end of file → SW_EIO (errno EIO). `iov` is
 * left unchanged. Consults the "pread" fault once per call. */
SW_API sw_status sw_filestore_preadv(int fd, const struct iovec *iov, int64_t n, int64_t offset,
                                     sw_error *err);
/* Copy `bytes` from file `src_fd` at `src_offset` to file `dst_fd` at
 * `dst_offset` inside the kernel (copy_file_range: no pass through user
 * memory); where the kernel cannot (EXDEV, ENOSYS, EINVAL, EOPNOTSUPP) the
 * rest goes through a bounded buffer, pread then pwrite. End of the source
 * → SW_EIO (errno EIO). Consults the "copy_range" fault (fails) and the
 * "copy_range_unsupported" fault (the kernel path refused) once per call. */
SW_API sw_status sw_filestore_copy_range(int src_fd, int64_t src_offset, int dst_fd,
                                         int64_t dst_offset, int64_t bytes, sw_error *err);
/* Set the file length to `bytes`; growth reads back as zeros. */
SW_API sw_status sw_filestore_resize(int fd, int64_t bytes, sw_error *err);

/* Unlink `path` when `creator_pid` is this process, sw_free `path` (if not
 * NULL), and close `fd` (if >= 0). Errors are ignored: the file may already
 * be gone. The name is gone on return; the close, where a file system frees
 * the storage, is left to a background thread (the descriptor is private:
 * nothing reaches the data any more), which starts on it at once. Every such
 * close has happened before fork() returns, in both processes, and at exit;
 * sw_filestore_reclaim_wait waits for them now. */
SW_API void sw_filestore_remove(int fd, char *path, long creator_pid);
/* sw_filestore_remove for a file of `bytes` bytes (< 0: unknown). Small
 * files are closed in batches: the background thread starts once 64 of them
 * or 1 MiB of storage wait (at once for a file of unknown size); a file of
 * 1 MiB or more is closed by the caller, so a large file's storage is free
 * on return. At most 256 descriptors wait (more are closed by the
 * caller), and sw_filestore_create closes the waiting ones when the process
 * runs out of descriptors. */
SW_API void sw_filestore_remove_sized(int fd, char *path, long creator_pid, int64_t bytes);
/* While on (per thread): a file of 1 MiB or more that sw_filestore_remove_sized
 * removes is closed by the background thread too (woken at once) instead
 * of by the caller; the name is still gone on return. The
 * move engine turns it on around the release of a move's source, whose
 * caller should not pay for freeing a large file's storage. Until such a
 * close is done, creating a file, resizing one, a write of 1 MiB or more,
 * and a move of 1 MiB or more into a file wait for it first
 * (sw_filestore_large_closes_wait), so freeing one file's storage never
 * runs beside the next large write (measured: it made that write several
 * times slower). Reads do not wait: a read beside the freeing ran at full
 * speed, and waiting made a 1-4 MiB file->CPU move ~1.6x slower. */
SW_API void sw_filestore_defer_large_closes(int on);
/* Wait until no large close deferred as above is left (the waiting ones are
 * closed here). Cheap when there is none. Thread-safe. */
SW_API void sw_filestore_large_closes_wait(void);
/* Close every descriptor sw_filestore_remove left to the background thread
 * and wait until it closed those it took: on return, the storage of every
 * file removed so far is freed. Thread-safe. */
SW_API void sw_filestore_reclaim_wait(void);
/* How many removed files' descriptors are still open (queued or being
 * closed): 0 once sw_filestore_reclaim_wait returned, until the next
 * removal. */
SW_API int sw_filestore_reclaim_pending(void);

#ifdef __cplusplus
}
#endif

#endif
