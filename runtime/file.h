/* runtime/file.h — opening a file that is read by its path (platform files,
 * models, checkpoints, tokenizer files, token shards, the programs' inputs):
 * regular files only. open() on a FIFO with no writer blocks for ever, and a
 * device or folder is no file either: such a path is refused at once with a
 * reason the caller puts in its message.
 *
 * The library and the command-line programs share it: tools/meson.build
 * compiles this unit into the programs too (they link the public API only).
 */
#ifndef TSR_RUNTIME_FILE_H
#define TSR_RUNTIME_FILE_H

#include <stddef.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Open `path` read-only (close-on-exec) if it is a regular file. Returns the
 * descriptor, or -1 with errno set (stat's or open's error; EINVAL for a
 * path that exists but is not a regular file) and, when why is not NULL, a
 * short reason in it: "not a regular file (a FIFO)", "not a regular file
 * (a directory)", or strerror's text. */
int tsr__open_regular(const char *path, char *why, size_t whylen);

/* The same as a stdio stream (mode "rb"); NULL, errno and why as above. */
FILE *tsr__fopen_regular(const char *path, char *why, size_t whylen);

#ifdef __cplusplus
}
#endif
#endif
