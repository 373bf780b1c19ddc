// The tests' C: only what Swift cannot reach. tun's ioctl number (a macro)
// and its request (struct ifreq, which Swift cannot name where glibc's and
// the kernel's definitions of it both show), and glibc's GNU extensions,
// which Swift's Glibc module leaves out, each a plain pass-through. Opening
// the tun device, spawning and reading the errors are Swift's
// (IfmeterTestSupport's NetnsSupport.swift and ChildProcess.swift). The
// includes give the tests sockaddr_ll for packet sockets. Linked by tests
// only.
#ifndef CIFMETER_TEST_SUPPORT_H
#define CIFMETER_TEST_SUPPORT_H

#ifdef __linux__
#include <stddef.h>
#include <spawn.h>
#include <sys/socket.h>
#include <linux/if_packet.h>
#include <net/if.h>

/// The room a tun request needs (cifm_tun_request).
enum { CIFM_TUN_REQUEST_SIZE = 64 };

/// TUNSETIFF, the ioctl that attaches a /dev/net/tun descriptor to a
/// device, created if need be.
unsigned long cifm_tunsetiff(void);

/// Lays out TUNSETIFF's request in `out` (CIFM_TUN_REQUEST_SIZE bytes): the
/// tun device `name` (a tap when `tap` is not 0), no packet information
/// before each packet.
void cifm_tun_request(void *out, const char *name, int tap);

/// pipe2(fds, O_CLOEXEC), as it returns.
int cifm_pipe_cloexec(int fds[2]);

/// posix_spawn_file_actions_addclosefrom_np: the spawned program starts
/// with every descriptor from `from` up closed. 0, or an error number.
int cifm_spawn_closefrom(posix_spawn_file_actions_t *actions, int from);

/// malloc_usable_size: the room a malloc'd block really has (tests check
/// that kept buffers hold no slack).
size_t cifm_usable_size(const void *block);
#endif

#endif
