#ifdef __linux__
#include "CIfmeterBench.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/if_link.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/// A bound NETLINK_ROUTE socket, subscribed to `groups`, with a receive
/// buffer of `rcvbuf` bytes (past rmem_max, when allowed, if `force`).
static int open_route_socket(int type_flags, unsigned int groups, int rcvbuf, int force) {
    int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC | type_flags, NETLINK_ROUTE);
    if (fd < 0)
        return -1;
    if (rcvbuf > 0) {
        setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof rcvbuf);
        if (force)
            setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &rcvbuf, sizeof rcvbuf);
    }
    struct sockaddr_nl sa = {.nl_family = AF_NETLINK, .nl_groups = groups};
    if (bind(fd, (struct sockaddr *)&sa, sizeof sa) < 0) {
        int saved = errno;
        close(fd);
        errno = saved;
        return -1;
    }
    return fd;
}

int cifm_raw_event_socket(int rcvbuf) { return open_route_socket(SOCK_NONBLOCK, RTMGRP_LINK, rcvbuf, 1); }

long cifm_raw_event_drain(int fd, void *buf, size_t len, long *overruns) {
    long count = 0;
    for (;;) {
        ssize_t n = recv(fd, buf, len, 0);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            if (errno == ENOBUFS) {
                (*overruns)++;
                continue;
            }
            return count;
        }
        if (n == 0)
            return count;
        for (struct nlmsghdr *nh = buf; NLMSG_OK(nh, (size_t)n); nh = NLMSG_NEXT(nh, n))
            if (nh->nlmsg_type == RTM_NEWLINK || nh->nlmsg_type == RTM_DELLINK)
                count++;
    }
}

int cifm_raw_netlink_open(int rcvbuf) { return open_route_socket(0, 0, rcvbuf, 0); }

static long raw_dump(int fd, void *buf, size_t len, uint32_t seq, uint64_t *sum, int stats) {
    struct {
        struct nlmsghdr nh;
        union {
            struct if_stats_msg ifsm;
            struct ifinfomsg ifi;
        };
    } req;
    memset(&req, 0, sizeof req);
    req.nh.nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP;
    req.nh.nlmsg_seq = seq;
    if (stats) {
        req.nh.nlmsg_len = NLMSG_LENGTH(sizeof(struct if_stats_msg));
        req.nh.nlmsg_type = RTM_GETSTATS;
        req.ifsm.family = AF_UNSPEC;
        req.ifsm.filter_mask = IFLA_STATS_FILTER_BIT(IFLA_STATS_LINK_64);
    } else {
        req.nh.nlmsg_len = NLMSG_LENGTH(sizeof(struct ifinfomsg));
        req.nh.nlmsg_type = RTM_GETLINK;
        req.ifi.ifi_family = AF_UNSPEC;
    }
    if (send(fd, &req, req.nh.nlmsg_len, 0) < 0)
        return -1;
    long count = 0;
    uint64_t total = 0;
    for (;;) {
        ssize_t n = recv(fd, buf, len, 0);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        for (struct nlmsghdr *nh = buf; NLMSG_OK(nh, (size_t)n); nh = NLMSG_NEXT(nh, n)) {
            if (nh->nlmsg_seq != seq)
                continue;
            if (nh->nlmsg_type == NLMSG_DONE) {
                *sum = total;
                return count;
            }
            if (nh->nlmsg_type == NLMSG_ERROR) {
                struct nlmsgerr *err = NLMSG_DATA(nh);
                errno = -err->error;
                return -1;
            }
            size_t hdr = stats ? sizeof(struct if_stats_msg) : sizeof(struct ifinfomsg);
            struct rtattr *rta = (struct rtattr *)((char *)NLMSG_DATA(nh) + NLMSG_ALIGN(hdr));
            int rlen = nh->nlmsg_len - NLMSG_LENGTH(NLMSG_ALIGN(hdr));
            unsigned short want = stats ? IFLA_STATS_LINK_64 : IFLA_STATS64;
            for (; RTA_OK(rta, rlen); rta = RTA_NEXT(rta, rlen)) {
                if (rta->rta_type == want) {
                    struct rtnl_link_stats64 s;
                    memcpy(&s, RTA_DATA(rta), sizeof s);
                    total += s.rx_bytes;
                    break;
                }
            }
            count++;
        }
    }
}

long cifm_raw_getstats_dump(int fd, void *buf, size_t len, uint32_t seq, uint64_t *sum) {
    return raw_dump(fd, buf, len, seq, sum, 1);
}

long cifm_raw_getlink_dump(int fd, void *buf, size_t len, uint32_t seq, uint64_t *sum) {
    return raw_dump(fd, buf, len, seq, sum, 0);
}

long cifm_raw_proc_net_dev(char *buf, size_t len, uint64_t *sum) {
    int fd = open("/proc/thread-self/net/dev", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    size_t used = 0;
    for (;;) {
        ssize_t n = read(fd, buf + used, len - 1 - used);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            int saved = errno;
            close(fd);
            errno = saved;
            return -1;
        }
        if (n == 0)
            break;
        used += (size_t)n;
        if (used == len - 1) {
            close(fd);
            errno = ENOBUFS;
            return -1;
        }
    }
    close(fd);
    buf[used] = 0;
    long count = 0;
    uint64_t total = 0;
    char *line = buf;
    int lineno = 0;
    while (line && *line) {
        char *next = strchr(line, '\n');
        if (next)
            *next++ = 0;
        if (lineno++ >= 2) {
            char *colon = strchr(line, ':');
            if (colon) {
                char *p = colon + 1;
                uint64_t v[16];
                for (int i = 0; i < 16; i++)
                    v[i] = strtoull(p, &p, 10);
                total += v[0];
                count++;
            }
        }
        line = next;
    }
    *sum = total;
    return count;
}
#endif
