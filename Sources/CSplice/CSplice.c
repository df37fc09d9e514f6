#define _GNU_SOURCE
#include "CSplice.h"
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

ssize_t haul_splice(int in, int out, int64_t *out_offset, size_t length, int nonblocking) {
#ifdef __linux__
    loff_t offset = out_offset ? (loff_t)*out_offset : 0;
    unsigned flags = SPLICE_F_MOVE | (nonblocking ? SPLICE_F_NONBLOCK : 0);
    ssize_t moved = splice(in, NULL, out, out_offset ? &offset : NULL, length, flags);
    if (out_offset) *out_offset = (int64_t)offset;
    return moved;
#else
    (void)in; (void)out; (void)out_offset; (void)length; (void)nonblocking;
    errno = ENOSYS;
    return -1;
#endif
}

int haul_set_pipe_size(int pipe, int size) {
#ifdef __linux__
    return fcntl(pipe, F_SETPIPE_SZ, size);
#else
    (void)pipe; (void)size;
    errno = ENOSYS;
    return -1;
#endif
}

int haul_start_writeback(int fd, int64_t offset, int64_t length) {
#ifdef __linux__
    return sync_file_range(fd, (off64_t)offset, (off64_t)length, SYNC_FILE_RANGE_WRITE);
#else
    (void)fd; (void)offset; (void)length;
    errno = ENOSYS;
    return -1;
#endif
}

int haul_pipe(int fds[2]) {
#ifdef __linux__
    return pipe2(fds, O_CLOEXEC | O_NONBLOCK);
#else
    int result = pipe(fds);
    if (result == 0) {
        fcntl(fds[0], F_SETFD, FD_CLOEXEC); fcntl(fds[1], F_SETFD, FD_CLOEXEC);
        fcntl(fds[0], F_SETFL, O_NONBLOCK); fcntl(fds[1], F_SETFL, O_NONBLOCK);
    }
    return result;
#endif
}

int haul_rename_noreplace(const char *from, const char *to) {
#ifdef __linux__
    return renameat2(AT_FDCWD, from, AT_FDCWD, to, RENAME_NOREPLACE);
#else
    (void)from; (void)to;
    errno = ENOSYS;
    return -1;
#endif
}

#ifdef __linux__
#include <sys/xattr.h>
#endif

ssize_t haul_get_attribute(int fd, const char *path, const char *name, void *value, size_t size) {
#ifdef __linux__
    return fd >= 0 ? fgetxattr(fd, name, value, size) : getxattr(path, name, value, size);
#else
    (void)fd; (void)path; (void)name; (void)value; (void)size;
    errno = ENOTSUP;
    return -1;
#endif
}

int haul_set_attribute(int fd, const char *name, const void *value, size_t size) {
#ifdef __linux__
    return fsetxattr(fd, name, value, size, 0);
#else
    (void)fd; (void)name; (void)value; (void)size;
    errno = ENOTSUP;
    return -1;
#endif
}

int haul_remove_attribute(int fd, const char *name) {
#ifdef __linux__
    return fremovexattr(fd, name);
#else
    (void)fd; (void)name;
    errno = ENOTSUP;
    return -1;
#endif
}

int haul_mount_id(const char *path, uint64_t *device, uint64_t *mount) {
#ifdef __linux__
    struct statx info;
    const unsigned unique = 0x4000; // STATX_MNT_ID_UNIQUE, which glibc 2.36's headers lack
    if (statx(AT_FDCWD, path, AT_STATX_SYNC_AS_STAT, unique, &info) != 0) return -1;
    if (!(info.stx_mask & unique)) {
        errno = ENOTSUP;
        return -1;
    }
    *device = ((uint64_t)info.stx_dev_major << 32) | info.stx_dev_minor;
    *mount = info.stx_mnt_id;
    return 0;
#else
    (void)path; (void)device; (void)mount;
    errno = ENOSYS;
    return -1;
#endif
}
