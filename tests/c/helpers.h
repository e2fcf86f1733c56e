/* Small builders and probes the C tests share, through the public headers
 * only: carriers of known values, flat tensors and layouts, a carrier's
 * state flags, the session directory's file count and a thread's scheduler
 * state. Each returns NULL (or a sentinel) on failure and checks nothing
 * itself: the test that calls it says what it expects. */
#ifndef SW_TEST_HELPERS_H
#define SW_TEST_HELPERS_H

#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/types.h>

#include <strideweave/strideweave.h>
#include <strideweave/binding.h> /* sw_carrier_get_state */

/* A CPU float32 carrier of n slots holding base + i at slot i; NULL when
 * it cannot be made. */
static inline sw_carrier *cpu_values(int64_t n, float base)
{
    sw_error err;
    sw_carrier *c = NULL;
    if (sw_cpu_new(n, SW_DT_FLOAT32, 0, &c, &err) != SW_OK)
        return NULL;
    float *p = sw_cpu_pointer(c);
    for (int64_t i = 0; i < n; i++)
        p[i] = base + (float)i;
    return c;
}

/* A one-dimensional tensor of n contiguous slots of `c` from `offset`;
 * NULL when the tensor is refused. */
static inline sw_tensor *flat_at(sw_carrier *c, int64_t offset, int64_t n)
{
    sw_error err;
    sw_tensor *t = NULL;
    int64_t ext[1] = {n};
    sw_tensor_new_strided(c, offset, 1, ext, NULL, &t, &err);
    return t;
}

/* The same from slot 0: a move's usual source. */
static inline sw_tensor *flat_tensor(sw_carrier *c, int64_t n)
{
    return flat_at(c, 0, n);
}

/* The canonical layout of n contiguous slots (a span to move without a
 * tensor); NULL when out of memory. */
static inline sw_layout *flat_layout(int64_t n)
{
    sw_error err;
    uint8_t profile[1] = {SW_NODE_LEAF};
    int64_t ext[1] = {n};
    return sw_layout_canonical(1, profile, ext, &err);
}

/* Whether a move has marked the carrier pending. */
static inline int carrier_pending(sw_carrier *c)
{
    sw_carrier_state s;
    sw_carrier_get_state(c, &s);
    return s.pending;
}

/* Whether the carrier is released. */
static inline int carrier_released(sw_carrier *c)
{
    sw_carrier_state s;
    sw_carrier_get_state(c, &s);
    return s.released;
}

/* Files in the session directory (FileBacked stores), to prove none leak;
 * -1 when there is no session directory. */
static inline int session_files(void)
{
    const char *dir;
    if (sw_filestore_session_dir(&dir, NULL) != SW_OK)
        return -1;
    DIR *d = opendir(dir);
    int n = 0;
    for (struct dirent *e; d && (e = readdir(d));)
        if (e->d_name[0] != '.')
            n++;
    if (d)
        closedir(d);
    return n;
}

/* A thread's scheduler state from /proc ('S': asleep, e.g. in exit's
 * drain); '?' when it cannot be read. */
static inline char thread_state(pid_t tid)
{
    char path[64], buf[256];
    snprintf(path, sizeof path, "/proc/self/task/%d/stat", (int)tid);
    FILE *f = fopen(path, "r");
    if (!f)
        return '?';
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    char *p = strrchr(buf, ')');
    return p && p[1] == ' ' ? p[2] : '?';
}

#endif
