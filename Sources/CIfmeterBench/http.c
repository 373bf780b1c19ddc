#ifdef __linux__
#include "CIfmeterBench.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

struct cifm_bench_sink {
    int fd;
    atomic_llong bytes;
    atomic_llong body_bytes;
    atomic_long requests;
};

int cifm_bench_listen(uint16_t port) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(port), .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (bind(fd, (struct sockaddr *)&sa, sizeof sa) < 0 || listen(fd, 16) < 0) {
        int saved = errno;
        close(fd);
        errno = saved;
        return -1;
    }
    return fd;
}

/// One connection: requests one after another (keep-alive), each its
/// headers and a Content-Length body, answered 204.
static void serve_connection(cifm_bench_sink *sink, int fd) {
    char buf[65536];
    size_t have = 0;
    for (;;) {
        // Headers.
        char *end = NULL;
        while (!(end = memmem(buf, have, "\r\n\r\n", 4))) {
            if (have == sizeof buf)
                return;
            ssize_t n = read(fd, buf + have, sizeof buf - have);
            if (n <= 0)
                return;
            atomic_fetch_add(&sink->bytes, n);
            have += (size_t)n;
        }
        size_t header_len = (size_t)(end - buf) + 4;
        long long length = 0;
        for (char *line = buf; line < end;) {
            char *next = memmem(line, (size_t)(end - line), "\r\n", 2);
            if (!next)
                next = end;
            if (strncasecmp(line, "Content-Length:", 15) == 0)
                length = atoll(line + 15);
            line = next + 2;
        }
        // The body: what is buffered, then the rest.
        size_t buffered = have - header_len;
        long long left = length - (long long)(buffered < (size_t)length ? buffered : (size_t)length);
        size_t extra = buffered > (size_t)length ? buffered - (size_t)length : 0;
        memmove(buf, buf + have - extra, extra);
        have = extra;
        while (left > 0) {
            char skip[65536];
            ssize_t n = read(fd, skip, left < (long long)sizeof skip ? (size_t)left : sizeof skip);
            if (n <= 0)
                return;
            atomic_fetch_add(&sink->bytes, n);
            left -= n;
        }
        atomic_fetch_add(&sink->body_bytes, length);
        atomic_fetch_add(&sink->requests, 1);
        static const char answer[] = "HTTP/1.1 204 No Content\r\nContent-Length: 0\r\n\r\n";
        if (write(fd, answer, sizeof answer - 1) < 0)
            return;
    }
}

static void *sink_loop(void *arg) {
    cifm_bench_sink *sink = arg;
    for (;;) {
        int fd = accept4(sink->fd, NULL, NULL, SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED)
                continue;
            return NULL;
        }
        serve_connection(sink, fd);
        close(fd);
    }
}

cifm_bench_sink *cifm_bench_sink_start(int listening_fd) {
    cifm_bench_sink *sink = calloc(1, sizeof *sink);
    if (!sink)
        return NULL;
    sink->fd = listening_fd;
    pthread_t thread;
    if (pthread_create(&thread, NULL, sink_loop, sink) != 0) {
        free(sink);
        return NULL;
    }
    pthread_detach(thread);
    return sink;
}

void cifm_bench_sink_counts(cifm_bench_sink *sink, long long *bytes, long long *body_bytes, long *requests) {
    *bytes = atomic_load(&sink->bytes);
    *body_bytes = atomic_load(&sink->body_bytes);
    *requests = atomic_load(&sink->requests);
}

long long cifm_bench_http_get(uint16_t port, const char *request, char *body, size_t body_len, long long *body_bytes) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(port), .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (connect(fd, (struct sockaddr *)&sa, sizeof sa) < 0 || write(fd, request, strlen(request)) < 0) {
        close(fd);
        return -1;
    }
    long long total = 0;
    long long header_end = -1;
    char buf[65536];
    char tail[4] = {0};
    size_t kept = 0;
    ssize_t n;
    while ((n = read(fd, buf, sizeof buf)) > 0) {
        for (ssize_t i = 0; i < n; i++) {
            if (header_end < 0) {
                memmove(tail, tail + 1, 3);
                tail[3] = buf[i];
                if (memcmp(tail, "\r\n\r\n", 4) == 0)
                    header_end = total + i + 1;
            } else if (kept + 1 < body_len) {
                body[kept++] = buf[i];
            }
        }
        total += n;
    }
    close(fd);
    if (body_len > 0)
        body[kept] = 0;
    *body_bytes = header_end < 0 ? 0 : total - header_end;
    return total;
}
#endif
