// C shims for ifmeter: kernel macros and inline helpers Swift cannot import.
// Every name is prefixed `cifm_`. The tests' C is in CIfmeterTestSupport,
// the netlink macros of the benchmark's raw loops in CIfmeterBench.
#ifndef CIFMETER_LINUX_H
#define CIFMETER_LINUX_H

/// The commit the binary was built from, or "unknown" (revision.c).
const char *cifm_revision(void);

#ifdef __linux__
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/socket.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <linux/if_link.h>
#include <linux/if_arp.h>
#include <linux/if_tun.h>
#include <linux/if.h>
#include <linux/if_packet.h>
#include <linux/net_namespace.h>
#include <ifaddrs.h>

/// IFLA_STATS_FILTER_BIT(IFLA_STATS_LINK_64): the filter mask of an
/// RTM_GETSTATS request that asks for 64-bit link counters only.
static inline uint32_t cifm_stats_filter_link64(void) {
    return IFLA_STATS_FILTER_BIT(IFLA_STATS_LINK_64);
}

/// The 32-bit link statistics getifaddrs attaches to AF_PACKET entries.
typedef struct cifm_stats32 {
    uint32_t rx_packets, tx_packets, rx_bytes, tx_bytes;
    uint32_t rx_errors, tx_errors, rx_dropped, tx_dropped;
} cifm_stats32;

/// Reads `ifa_data` of a link's getifaddrs entry (a `struct
/// rtnl_link_stats`): an AF_PACKET entry, or one without an address (a link
/// without a hardware address, such as a tun). Returns 0 on success, -1
/// when the entry is not a link's.
int cifm_ifaddrs_stats32(const struct ifaddrs *ifa, cifm_stats32 *out);

/// All 24 fields of the entry's `struct rtnl_link_stats`, widened, in the
/// struct's order. Returns 0 on success, -1 when the entry has none.
int cifm_ifaddrs_kernel_stats(const struct ifaddrs *ifa, uint64_t out[24]);

/// The interface index and ARPHRD type of an AF_PACKET entry's address.
/// Returns 0 on success, -1 when the entry has no AF_PACKET address (then
/// ask if_nametoindex).
int cifm_ifaddrs_packet_info(const struct ifaddrs *ifa, int *ifindex, int *hatype);

/// Tunes glibc's malloc for a process whose big buffers come and go every
/// interval: a fixed mmap threshold (256 KiB) returns them to the system
/// when freed, and two arenas keep helper threads from each holding freed
/// memory of their own.
void cifm_tune_malloc(void);
/// malloc_trim(0): hands the pages of freed memory back to the system, in
/// every arena (glibc's malloc keeps them otherwise).
void cifm_release_free_memory(void);

/// setns(fd, CLONE_NEWNET) for the calling thread. Returns 0 or -1 and errno.
int cifm_setns_net(int fd);

/// 1 when `fd` is a namespace file (nsfs), 0 otherwise: `ip netns add`
/// creates the file under /run/netns before it mounts the namespace on it.
int cifm_is_nsfs(int fd);

/// A monotonic timerfd, non-blocking and close-on-exec (sys/timerfd.h is
/// not in Swift's Glibc module); -1 with errno on failure.
int cifm_timer_create(void);

/// Arms the timer to expire once, `nanoseconds` from now (0 disarms it).
/// Returns 0, or -1 with errno.
int cifm_timer_set(int fd, uint64_t nanoseconds);

/// A link's speed (Mbit/s, -1 when unknown) and duplex (DUPLEX_HALF 0,
/// DUPLEX_FULL 1, DUPLEX_UNKNOWN 0xff) as its driver reports them to
/// ETHTOOL_GSET, asked through `fd`, a socket in the link's namespace: what
/// sysfs's `speed` and `duplex` show. Returns 0, or -1 and errno (no
/// ethtool support: EOPNOTSUPP).
int cifm_ethtool_link(int fd, const char *name, int32_t *speed, uint8_t *duplex);

#endif

#endif
