// The Linux calls Swift's Glibc module leaves out (they need _GNU_SOURCE, or a header it does not
// import): moving bytes from a socket to a file inside the kernel through a pipe, a rename that
// never replaces, and a file's extended attributes. Elsewhere they fail with ENOSYS (ENOTSUP for
// the attributes).
#pragma once
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

// splice(2): up to `length` bytes from `in` to `out`; `out_offset` (may be NULL) is the file
// offset to write at, advanced by what was moved.
ssize_t haul_splice(int in, int out, int64_t *out_offset, size_t length, int nonblocking);

// fcntl(F_SETPIPE_SZ): the pipe's capacity; returns the size set, or -1.
int haul_set_pipe_size(int pipe, int size);

// sync_file_range(SYNC_FILE_RANGE_WRITE): starts writing `length` bytes at `offset` of `fd` to
// disk without waiting for them, so a later fsync has less left to wait for.
int haul_start_writeback(int fd, int64_t offset, int64_t length);

// pipe2(O_CLOEXEC | O_NONBLOCK).
int haul_pipe(int fds[2]);

// renameat2(RENAME_NOREPLACE): gives `from` the name `to` unless `to` exists (EEXIST), in one
// step. EINVAL where the file system cannot do it without replacing.
int haul_rename_noreplace(const char *from, const char *to);

// The extended attribute `name` of the file `fd` (fd >= 0) or `path` (fd < 0): fgetxattr(2) /
// getxattr(2) into `value` (up to `size` bytes); returns its length, or -1 with errno (ENODATA: the
// file has none; ENOTSUP: the file system keeps none).
ssize_t haul_get_attribute(int fd, const char *path, const char *name, void *value, size_t size);

// fsetxattr(2): sets the attribute `name` of `fd` to `size` bytes of `value`; 0 or -1 with errno.
int haul_set_attribute(int fd, const char *name, const void *value, size_t size);

// fremovexattr(2): removes the attribute `name` of `fd`; 0 or -1 with errno.
int haul_remove_attribute(int fd, const char *name);

// statx(2) with STATX_MNT_ID_UNIQUE (Linux 6.8): the file system's device and the unique id of the
// mount that holds `path` (never reused in a boot: a file system mounted again gets a new one);
// 0, or -1 (ENOTSUP when the kernel gives no unique id).
int haul_mount_id(const char *path, uint64_t *device, uint64_t *mount);
