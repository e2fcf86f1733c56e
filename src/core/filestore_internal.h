/* A released file's name and descriptor removed without handing over its
 * path (file_backed.c keeps the path for sw_file_backed_path after release:
 * with the public sw_filestore_remove_sized taking the path, a release
 * copied it first, an allocation and a copy on every FileBacked release). */
#ifndef SW_FILESTORE_INTERNAL_H
#define SW_FILESTORE_INTERNAL_H

#include <stdint.h>

/* sw_filestore_remove_sized, with `path` left to the caller. */
void sw_filestore_remove_named(int fd, const char *path, long creator_pid, int64_t bytes);

#endif
