/* runtime/file.c — regular files only, refused before anything can block
 * (see file.h). */
#include "runtime/file.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static void set_why(char *why, size_t n, const char *text)
{
    if (why && n)
        snprintf(why, n, "%s", text);
}

static const char *kind_of(mode_t m)
{
    return S_ISDIR(m)    ? "not a regular file (a directory)"
           : S_ISFIFO(m) ? "not a regular file (a FIFO)"
           : S_ISSOCK(m) ? "not a regular file (a socket)"
           : S_ISCHR(m)  ? "not a regular file (a character device)"
           : S_ISBLK(m)  ? "not a regular file (a block device)"
                         : "not a regular file";
}

static int errno_fail(int e, char *why, size_t n)
{
    char buf[128];
    /* the GNU strerror_r: the text may be in buf or a static string */
    set_why(why, n, strerror_r(e, buf, sizeof buf));
    errno = e;
    return -1;
}

int tsr__open_regular(const char *path, char *why, size_t whylen)
{
    struct stat st;
    /* stat first: open() itself would block on a FIFO without a writer */
    if (stat(path, &st) != 0)
        return errno_fail(errno, why, whylen);
    if (!S_ISREG(st.st_mode)) {
        set_why(why, whylen, kind_of(st.st_mode));
        errno = EINVAL;
        return -1;
    }
    /* O_NONBLOCK: should the path become a FIFO after the stat, open still
     * returns, and the fstat below refuses it. A regular file ignores it. */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0)
        return errno_fail(errno, why, whylen);
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        return errno_fail(e, why, whylen);
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        set_why(why, whylen, kind_of(st.st_mode));
        errno = EINVAL;
        return -1;
    }
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) != 0) {
        int e = errno;
        close(fd);
        return errno_fail(e, why, whylen);
    }
    return fd;
}

FILE *tsr__fopen_regular(const char *path, char *why, size_t whylen)
{
    int fd = tsr__open_regular(path, why, whylen);
    if (fd < 0)
        return NULL;
    FILE *f = fdopen(fd, "rb");
    if (!f) {
        int e = errno;
        close(fd);
        errno_fail(e, why, whylen);
    }
    return f;
}
