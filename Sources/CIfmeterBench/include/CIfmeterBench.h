// The raw C loops `make bench` compares ifmeter against: the practical
// limits of a netlink dump, /proc/net/dev and a dump per link event.
#ifndef CIFMETER_BENCH_H
#define CIFMETER_BENCH_H

#ifdef __linux__
#include <stddef.h>
#include <stdint.h>

/// One full RTM_GETSTATS (IFLA_STATS_LINK_64) dump on netlink socket `fd`,
/// parsed the minimal way: the number of interfaces, and the sum of their
/// rx_bytes in *sum. Returns -1 with errno set on failure.
long cifm_raw_getstats_dump(int fd, void *buf, size_t len, uint32_t seq, uint64_t *sum);

/// One full RTM_GETLINK dump, reading IFLA_STATS64 the same way.
long cifm_raw_getlink_dump(int fd, void *buf, size_t len, uint32_t seq, uint64_t *sum);

/// Reads and parses /proc/thread-self/net/dev (the calling thread's
/// namespace): the number of interfaces and the sum of receive bytes.
long cifm_raw_proc_net_dev(char *buf, size_t len, uint64_t *sum);

/// Opens a non-blocking NETLINK_ROUTE socket subscribed to link
/// notifications (RTNLGRP_LINK), for the benchmark's full-dump-per-event
/// comparison. Returns the descriptor or -1.
int cifm_raw_event_socket(int rcvbuf);

/// Reads what is queued on an event socket: returns the number of link
/// messages read; *overruns counts ENOBUFS.
long cifm_raw_event_drain(int fd, void *buf, size_t len, long *overruns);

/// Opens a NETLINK_ROUTE socket for the raw loops, with a receive buffer
/// of `rcvbuf` bytes. Returns the descriptor or -1.
int cifm_raw_netlink_open(int rcvbuf);

/// A listening TCP socket on 127.0.0.1:`port` (in the calling thread's
/// namespace), or -1.
int cifm_bench_listen(uint16_t port);

/// A minimal HTTP/1.1 receiver for the remote write benchmark, on its own
/// thread: it reads each request on `listening_fd` (headers, a
/// Content-Length body), answers 204 and counts what it read.
typedef struct cifm_bench_sink cifm_bench_sink;
cifm_bench_sink *cifm_bench_sink_start(int listening_fd);

/// Bytes read (headers and bodies), body bytes, and requests, so far.
void cifm_bench_sink_counts(cifm_bench_sink *sink, long long *bytes, long long *body_bytes, long *requests);

/// Sends `request` (a whole HTTP request, `Connection: close`) to
/// 127.0.0.1:`port` and reads the response to its end: returns every byte
/// read (-1 on a failure), the body's size in *body_bytes, and the start
/// of the body, NUL-terminated, in `body`.
long long cifm_bench_http_get(uint16_t port, const char *request, char *body, size_t body_len, long long *body_bytes);
#endif

#endif
