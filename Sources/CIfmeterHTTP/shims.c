#include "CIfmeterHTTP.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <microhttpd.h>
#include <zlib.h>

struct cifm_http_server {
    struct MHD_Daemon *daemon;
    cifm_http_logger logger;
    void *logger_cls;
};

static void log_adapter(void *cls, const char *fmt, va_list ap) {
    struct cifm_http_server *server = cls;
    if (!server->logger)
        return;
    char line[512];
    vsnprintf(line, sizeof line, fmt, ap);
    size_t n = strlen(line);
    while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r'))
        line[--n] = 0;
    server->logger(server->logger_cls, line);
}

cifm_http_server *cifm_http_start(int fd, cifm_http_limits limits, cifm_http_handler handler, void *handler_cls,
                                  cifm_http_logger logger, void *logger_cls) {
    struct cifm_http_server *server = calloc(1, sizeof *server);
    if (!server)
        return NULL;
    server->logger = logger;
    server->logger_cls = logger_cls;
    unsigned int flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL | MHD_USE_ERROR_LOG;
    server->daemon = MHD_start_daemon(
        flags, 0, NULL, NULL, (MHD_AccessHandlerCallback)handler, handler_cls,
        MHD_OPTION_EXTERNAL_LOGGER, log_adapter, server,
        MHD_OPTION_LISTEN_SOCKET, (MHD_socket)fd,
        MHD_OPTION_THREAD_POOL_SIZE, limits.threads,
        MHD_OPTION_CONNECTION_LIMIT, limits.connections,
        MHD_OPTION_PER_IP_CONNECTION_LIMIT, limits.per_ip,
        MHD_OPTION_CONNECTION_TIMEOUT, limits.timeout_seconds,
        MHD_OPTION_CONNECTION_MEMORY_LIMIT, limits.memory_per_connection,
        MHD_OPTION_END);
    if (!server->daemon) {
        free(server);
        return NULL;
    }
    return server;
}

void cifm_http_stop(cifm_http_server *server) {
    if (!server)
        return;
    MHD_stop_daemon(server->daemon);
    free(server);
}

int cifm_http_gzip(const void *input, size_t input_len, int level, void **output, size_t *output_len) {
    z_stream z;
    memset(&z, 0, sizeof z);
    // 15 window bits, +16 for a gzip header and trailer.
    int rc = deflateInit2(&z, level, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY);
    if (rc != Z_OK)
        return rc;
    size_t bound = deflateBound(&z, (uLong)input_len);
    unsigned char *out = malloc(bound);
    if (!out) {
        deflateEnd(&z);
        return Z_MEM_ERROR;
    }
    z.next_in = (Bytef *)input;
    z.avail_in = (uInt)input_len;
    z.next_out = out;
    z.avail_out = (uInt)bound;
    rc = deflate(&z, Z_FINISH);
    if (rc != Z_STREAM_END) {
        deflateEnd(&z);
        free(out);
        return rc == Z_OK ? Z_BUF_ERROR : rc;
    }
    *output = out;
    *output_len = z.total_out;
    deflateEnd(&z);
    return 0;
}
