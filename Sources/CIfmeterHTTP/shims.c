#include "CIfmeterHTTP.h"

#include <dlfcn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <microhttpd.h>
#include <zlib.h>

// libmicrohttpd, loaded at run time.
static struct {
    struct MHD_Daemon *(*start_daemon)(unsigned int, uint16_t, MHD_AcceptPolicyCallback, void *, MHD_AccessHandlerCallback,
                                       void *, ...);
    void (*stop_daemon)(struct MHD_Daemon *);
    int (*get_connection_values)(struct MHD_Connection *, enum MHD_ValueKind, MHD_KeyValueIterator, void *);
    struct MHD_Response *(*create_response)(size_t, const void *, MHD_ContentReaderFreeCallback, void *);
    struct MHD_Response *(*create_callback_response)(uint64_t, size_t, MHD_ContentReaderCallback, void *,
                                                     MHD_ContentReaderFreeCallback);
    enum MHD_Result (*add_response_header)(struct MHD_Response *, const char *, const char *);
    enum MHD_Result (*queue_response)(struct MHD_Connection *, unsigned int, struct MHD_Response *);
    void (*destroy_response)(struct MHD_Response *);
} mhd;

int cifm_http_load(const char *library, char *error, size_t error_len) {
    if (mhd.start_daemon)
        return 0;
    void *lib = dlopen(library, RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        snprintf(error, error_len, "%s", dlerror());
        return -1;
    }
#define RESOLVE(field, symbol)                                          \
    do {                                                                \
        *(void **)&mhd.field = dlsym(lib, symbol);                      \
        if (!mhd.field) {                                               \
            snprintf(error, error_len, "libmicrohttpd lacks %s", symbol); \
            mhd.start_daemon = NULL;                                    \
            return -1;                                                  \
        }                                                               \
    } while (0)
    RESOLVE(stop_daemon, "MHD_stop_daemon");
    RESOLVE(get_connection_values, "MHD_get_connection_values");
    RESOLVE(create_response, "MHD_create_response_from_buffer_with_free_callback_cls");
    RESOLVE(create_callback_response, "MHD_create_response_from_callback");
    RESOLVE(add_response_header, "MHD_add_response_header");
    RESOLVE(queue_response, "MHD_queue_response");
    RESOLVE(destroy_response, "MHD_destroy_response");
    RESOLVE(start_daemon, "MHD_start_daemon");
#undef RESOLVE
    return 0;
}

int cifm_mhd_get_connection_values(struct MHD_Connection *connection, int kind,
                                   int (*iterator)(void *cls, int kind, const char *key, const char *value),
                                   void *iterator_cls) {
    return mhd.get_connection_values(connection, (enum MHD_ValueKind)kind, (MHD_KeyValueIterator)iterator, iterator_cls);
}

struct MHD_Response *cifm_mhd_create_response(size_t size, void *buffer, void (*free_callback)(void *), void *free_cls) {
    return mhd.create_response(size, buffer, free_callback, free_cls);
}

int cifm_mhd_add_response_header(struct MHD_Response *response, const char *header, const char *content) {
    return mhd.add_response_header(response, header, content) == MHD_YES ? 0 : -1;
}

int cifm_mhd_queue_response(struct MHD_Connection *connection, unsigned int status, struct MHD_Response *response) {
    return mhd.queue_response(connection, status, response) == MHD_YES ? 1 : 0;
}

void cifm_mhd_destroy_response(struct MHD_Response *response) { mhd.destroy_response(response); }

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
    if (!mhd.start_daemon) {
        free(server);
        return NULL;
    }
    server->daemon = mhd.start_daemon(
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
    mhd.stop_daemon(server->daemon);
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

struct cifm_gzip {
    z_stream z;
    unsigned char *out;
    size_t capacity;
};

/// Makes room for at least `more` bytes of output.
static int gzip_reserve(struct cifm_gzip *gz, size_t more) {
    size_t used = gz->z.total_out;
    if (gz->capacity - used >= more)
        return 0;
    size_t capacity = gz->capacity ? gz->capacity : 64 * 1024;
    while (capacity - used < more)
        capacity *= 2;
    unsigned char *grown = realloc(gz->out, capacity);
    if (!grown)
        return Z_MEM_ERROR;
    gz->out = grown;
    gz->capacity = capacity;
    return 0;
}

static int gzip_run(struct cifm_gzip *gz, int flush) {
    for (;;) {
        int rc = gzip_reserve(gz, 32 * 1024);
        if (rc != 0)
            return rc;
        gz->z.next_out = gz->out + gz->z.total_out;
        gz->z.avail_out = (uInt)(gz->capacity - gz->z.total_out);
        rc = deflate(&gz->z, flush);
        if (rc == Z_STREAM_END)
            return 0;
        if (rc != Z_OK && rc != Z_BUF_ERROR)
            return rc;
        if (flush == Z_NO_FLUSH && gz->z.avail_in == 0)
            return 0;
    }
}

cifm_gzip *cifm_gzip_begin(int level) {
    struct cifm_gzip *gz = calloc(1, sizeof *gz);
    if (!gz)
        return NULL;
    if (deflateInit2(&gz->z, level, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) {
        free(gz);
        return NULL;
    }
    return gz;
}

int cifm_gzip_write(cifm_gzip *gz, const void *data, size_t len) {
    gz->z.next_in = (Bytef *)data;
    gz->z.avail_in = (uInt)len;
    return gzip_run(gz, Z_NO_FLUSH);
}

int cifm_gzip_end(cifm_gzip *gz, void **output, size_t *output_len) {
    gz->z.next_in = NULL;
    gz->z.avail_in = 0;
    int rc = gzip_run(gz, Z_FINISH);
    if (rc == 0) {
        *output = gz->out;
        *output_len = gz->z.total_out;
        gz->out = NULL;
    }
    cifm_gzip_abort(gz);
    return rc;
}

void cifm_gzip_abort(cifm_gzip *gz) {
    if (!gz)
        return;
    deflateEnd(&gz->z);
    free(gz->out);
    free(gz);
}

struct gunzip_reader {
    z_stream z;
    void (*release)(void *);
    void *release_cls;
    int done;
};

static ssize_t gunzip_read(void *cls, uint64_t pos, char *buf, size_t max) {
    (void)pos;  // libmicrohttpd reads in order
    struct gunzip_reader *r = cls;
    if (r->done)
        return MHD_CONTENT_READER_END_OF_STREAM;
    r->z.next_out = (Bytef *)buf;
    r->z.avail_out = (uInt)max;
    int rc = inflate(&r->z, Z_NO_FLUSH);
    ssize_t produced = (ssize_t)(max - r->z.avail_out);
    if (rc == Z_STREAM_END)
        r->done = 1;
    else if (rc != Z_OK && !(rc == Z_BUF_ERROR && produced > 0))
        return MHD_CONTENT_READER_END_WITH_ERROR;
    if (produced == 0)
        return r->done ? MHD_CONTENT_READER_END_OF_STREAM : MHD_CONTENT_READER_END_WITH_ERROR;
    return produced;
}

static void gunzip_free(void *cls) {
    struct gunzip_reader *r = cls;
    inflateEnd(&r->z);
    if (r->release)
        r->release(r->release_cls);
    free(r);
}

struct MHD_Response *cifm_mhd_create_gunzip_response(const void *gz, size_t gz_len, uint64_t size,
                                                     void (*release)(void *), void *release_cls) {
    struct gunzip_reader *r = calloc(1, sizeof *r);
    if (!r)
        return NULL;
    if (inflateInit2(&r->z, 15 + 16) != Z_OK) {
        free(r);
        return NULL;
    }
    r->z.next_in = (Bytef *)gz;
    r->z.avail_in = (uInt)gz_len;
    r->release = release;
    r->release_cls = release_cls;
    struct MHD_Response *response = mhd.create_callback_response(size, 32 * 1024, gunzip_read, r, gunzip_free);
    if (!response) {
        inflateEnd(&r->z);
        free(r);
    }
    return response;
}
