/* Small helpers that keep error messages in the user's words: numbers that
 * agree with their nouns, and the name of a mode a key addresses. */
#ifndef STRIDEWEAVE_SW_MESSAGES_H
#define STRIDEWEAVE_SW_MESSAGES_H

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "sw_python.h"
#include "strideweave/layout.h"

/* "" for one, "s" otherwise: "%zd entr%s" needs its own pair, so this is
 * only for nouns that take a plain "s". */
static inline const char *sw_py_msg_s(long long n)
{
    return n == 1 ? "" : "s";
}

/* The path of child positions from the top of a layout to the mode a key
 * component addresses: empty for the whole tensor, {0} for top-level mode
 * 0, {1, 0} for the first child of top-level mode 1. */
typedef struct sw_py_mode_path {
    int depth;
    int32_t at[SW_LAYOUT_MAX_DEPTH + 1];
} sw_py_mode_path;

/* "the tensor", "mode 0", "mode (1, 0)": the mode a key component
 * addresses, as the user's key reached it; `whole` names what the key
 * indexes ("tensor", "layout"). */
static inline void sw_py_msg_mode_label(const sw_py_mode_path *path, const char *whole, char *buf,
                                        size_t cap)
{
    if (path->depth == 0) {
        snprintf(buf, cap, "the %s", whole);
        return;
    }
    if (path->depth == 1) {
        snprintf(buf, cap, "mode %d", (int)path->at[0]);
        return;
    }
    size_t n = (size_t)snprintf(buf, cap, "mode (");
    for (int i = 0; i < path->depth && n < cap; i++)
        n += (size_t)snprintf(buf + n, cap - n, i ? ", %d" : "%d", (int)path->at[i]);
    if (n < cap)
        snprintf(buf + n, cap - n, ")");
}

/* "a tensor of size 6", "mode 0 of size 2", "mode (1, 0) of size 3": what
 * an index was checked against. */
static inline void sw_py_msg_mode_name(const sw_py_mode_path *path, const char *whole, long long size,
                                       char *buf, size_t cap)
{
    /* The longest label (64 levels deep) is under 900 characters; a label
     * shorter than 1024 - 32 leaves a 1024-byte buf room for the size. */
    char label[1024 - 32];
    sw_py_msg_mode_label(path, whole, label, sizeof label);
    if (path->depth)
        snprintf(buf, cap, "%s of size %lld", label, size);
    else
        snprintf(buf, cap, "a %s of size %lld", whole, size);
}

/* "two" for 2 and so on: counts a user reads in a sentence. */
static inline const char *sw_py_msg_count_word(Py_ssize_t n, char *buf, size_t cap)
{
    static const char *const words[] = {"no", "one", "two", "three", "four",
                                        "five", "six", "seven", "eight", "nine"};
    if (n >= 0 && n < 10)
        return words[n];
    snprintf(buf, cap, "%zd", n);
    return buf;
}

/* NotImplementedError for an operation that works on single-plane tensors
 * only (T-11), in the user's words: "a ScaledInt32 tensor has two planes
 * and cannot be <cannot>; only <only> can". `dtype` is the tensor's DType
 * object. Returns -1. */
static inline int sw_py_msg_raise_planes(PyObject *dtype, Py_ssize_t nplanes, const char *cannot,
                                         const char *only)
{
    char num[32];
    const char *name = sw_dtype_info_of(SwDType_ID(dtype))->name;
    PyErr_Format(PyExc_NotImplementedError,
                 "a%s %s tensor has %s planes and cannot be %s; only %s can",
                 strchr("AEIOU", name[0]) ? "n" : "", name,
                 sw_py_msg_count_word(nplanes, num, sizeof num), cannot, only);
    return -1;
}

/* The tensors most single-plane operations accept. */
#define SW_MSG_ONE_PLANE "tensors with one plane (Float32, Int32 or Bool, on one carrier)"

#endif
