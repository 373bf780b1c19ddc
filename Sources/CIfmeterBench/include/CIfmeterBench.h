// The C of the raw loops `make bench` compares ifmeter against: only what
// Swift cannot express, netlink's macros that lay out a dump request and
// walk the messages of a buffer, and a parse of /proc/net/dev's text. Each
// function works on the memory it is given and nothing else: the sockets,
// reads and errors are Swift's (Sources/ifmeter-bench/RawLoops.swift). This
// header also gives Swift NETLINK_ROUTE, RTMGRP_LINK and sockaddr_nl.
#ifndef CIFMETER_BENCH_H
#define CIFMETER_BENCH_H

#ifdef __linux__
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>

/// The room a dump request needs (cifm_raw_dump_request).
enum { CIFM_RAW_REQUEST_SIZE = 64 };

/// Lays out a dump request with sequence number `seq` in `out`
/// (CIFM_RAW_REQUEST_SIZE bytes): RTM_GETSTATS asking for
/// IFLA_STATS_LINK_64 alone when `stats`, RTM_GETLINK otherwise. Returns
/// its length, what to send.
size_t cifm_raw_dump_request(void *out, uint32_t seq, int stats);

/// Walks the netlink messages of one read of that dump (`n` bytes at
/// `buf`), the minimal way: counts the interfaces of sequence `seq` and
/// adds their rx_bytes (IFLA_STATS_LINK_64, or IFLA_STATS64 of
/// RTM_GETLINK's messages) to *sum. At NLMSG_DONE *done becomes 1; at
/// NLMSG_ERROR too, with the kernel's error number (positive) in *error.
/// Returns the interfaces counted in this buffer.
long cifm_raw_parse_dump(const void *buf, size_t n, uint32_t seq, int stats, uint64_t *sum, int *done, int *error);

/// The link messages (RTM_NEWLINK, RTM_DELLINK) in one read of a socket
/// subscribed to RTNLGRP_LINK.
long cifm_raw_count_link_events(const void *buf, size_t n);

/// Parses /proc/net/dev's text, `n` bytes at `buf` with room for one more
/// (the parse cuts the text into lines in place): the number of
/// interfaces, and the sum of their receive bytes in *sum.
long cifm_raw_parse_proc_net_dev(char *buf, size_t n, uint64_t *sum);
#endif

#endif
