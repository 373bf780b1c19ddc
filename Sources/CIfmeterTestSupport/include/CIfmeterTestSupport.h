// C for the tests: a tun device to push packets through, and a spawn that
// starts a child as a shell would. Linked by tests only.
#ifndef CIFMETER_TEST_SUPPORT_H
#define CIFMETER_TEST_SUPPORT_H

#ifdef __linux__
#include <sys/socket.h>
#include <linux/if_packet.h>
#include <net/if.h>
/// Opens a tun (or tap, when `tap` is non-zero) device named `name` in the
/// calling thread's network namespace. Returns the descriptor, or -1 with
/// errno set. Used by the tests, which push packets through it.
int cifm_tun_open(const char *name, int tap);

/// Starts argv (searched in PATH) as a user's shell would: no signal
/// blocked, every signal at its default (in the test run's process group,
/// so ^C on it stops them all), with stdin, stdout and stderr on
/// the given descriptors (-1: /dev/null) and every other descriptor
/// closed. The caller's thread may block signals (Dispatch and Swift
/// concurrency threads do), and a child that inherits that mask ignores
/// SIGINT and SIGTERM and is not stopped by SIGTTOU. Returns 0 and the pid
/// in `pid`, or an errno value.
int cifm_spawn(char *const argv[], int in_fd, int out_fd, int err_fd, pid_t *pid);

/// pipe2(fds, O_CLOEXEC), which Swift's Glibc module leaves out.
int cifm_pipe_cloexec(int fds[2]);

/// malloc_usable_size: the room a malloc'd block really has (tests check
/// that kept buffers hold no slack).
#include <stddef.h>
size_t cifm_usable_size(const void *block);
#endif

#endif
