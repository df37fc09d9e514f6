// The Linux calls Swift's Glibc module leaves out (they need _GNU_SOURCE): moving bytes from a
// socket to a file inside the kernel through a pipe, and a rename that never replaces. Elsewhere
// they fail with ENOSYS.
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
