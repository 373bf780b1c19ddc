#ifdef __linux__
#include "CIfmeterLinux.h"

#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <linux/magic.h>
#include <sys/ioctl.h>
#include <sys/vfs.h>
#include <sys/timerfd.h>
#include <time.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

/// A link's entry: glibc attaches the statistics (ifa_data) to link entries
/// only. A link without a hardware address (a tun) has no address at all,
/// so its entry is known by its data, not by an AF_PACKET address.
static int is_link_entry(const struct ifaddrs *ifa) {
    return ifa != NULL && ifa->ifa_data != NULL && (ifa->ifa_addr == NULL || ifa->ifa_addr->sa_family == AF_PACKET);
}

int cifm_ifaddrs_stats32(const struct ifaddrs *ifa, cifm_stats32 *out) {
    if (!is_link_entry(ifa))
        return -1;
    const struct rtnl_link_stats *s = ifa->ifa_data;
    out->rx_packets = s->rx_packets;
    out->tx_packets = s->tx_packets;
    out->rx_bytes = s->rx_bytes;
    out->tx_bytes = s->tx_bytes;
    out->rx_errors = s->rx_errors;
    out->tx_errors = s->tx_errors;
    out->rx_dropped = s->rx_dropped;
    out->tx_dropped = s->tx_dropped;
    return 0;
}

int cifm_ifaddrs_kernel_stats(const struct ifaddrs *ifa, uint64_t out[24]) {
    if (!is_link_entry(ifa))
        return -1;
    const __u32 *fields = ifa->ifa_data;  // struct rtnl_link_stats: 32-bit fields
    for (int i = 0; i < 24; i++)
        out[i] = fields[i];
    return 0;
}

int cifm_ifaddrs_packet_info(const struct ifaddrs *ifa, int *ifindex, int *hatype) {
    if (ifa == NULL || ifa->ifa_addr == NULL || ifa->ifa_addr->sa_family != AF_PACKET)
        return -1;
    const struct sockaddr_ll *ll = (const struct sockaddr_ll *)ifa->ifa_addr;
    *ifindex = ll->sll_ifindex;
    *hatype = ll->sll_hatype;
    return 0;
}

void cifm_tune_malloc(void) {
    mallopt(M_MMAP_THRESHOLD, 256 * 1024);
    mallopt(M_ARENA_MAX, 2);
}

void cifm_release_free_memory(void) { malloc_trim(0); }

int cifm_setns_net(int fd) { return setns(fd, CLONE_NEWNET); }

int cifm_is_nsfs(int fd) {
    struct statfs fs;
    return fstatfs(fd, &fs) == 0 && fs.f_type == NSFS_MAGIC;
}

int cifm_timer_create(void) {
    return timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
}

int cifm_timer_set(int fd, uint64_t nanoseconds) {
    struct itimerspec spec = {0};
    spec.it_value.tv_sec = (time_t)(nanoseconds / 1000000000u);
    spec.it_value.tv_nsec = (long)(nanoseconds % 1000000000u);
    return timerfd_settime(fd, 0, &spec, NULL);
}
#endif
