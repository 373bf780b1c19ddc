// C for the tests: a tun device to push packets through, and a spawn that
// leaves no descriptor to a daemon (tmux). Linked by tests only.
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

/// Runs argv (searched in PATH) with stdio on /dev/null and every other
/// descriptor closed, and waits for it; for programs that leave a daemon
/// behind (tmux), which must not inherit the caller's pipes. Returns the
/// wait status, or -1 with errno set.
int cifm_spawn_detached(char *const argv[]);
#endif

#endif
