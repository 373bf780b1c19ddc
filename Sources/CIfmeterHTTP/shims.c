#include "CIfmeterHTTP.h"

#include <dlfcn.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
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
    const union MHD_ConnectionInfo *(*get_connection_info)(struct MHD_Connection *, enum MHD_ConnectionInfoType, ...);
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
    RESOLVE(get_connection_info, "MHD_get_connection_info");
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

static void mark_busy(struct MHD_Connection *connection);

int cifm_mhd_queue_response(struct MHD_Connection *connection, unsigned int status, struct MHD_Response *response) {
    if (mhd.queue_response(connection, status, response) != MHD_YES)
        return 0;
    mark_busy(connection);
    return 1;
}

void cifm_mhd_destroy_response(struct MHD_Response *response) { mhd.destroy_response(response); }

// Every open connection, in a list under the server's lock: when it
// started waiting for a request, whether a whole request has arrived (then
// it is busy with the response, which the idle timeout guards), and its
// client address. A sweeper thread closes connections whose request is not
// whole by the deadline, however steadily they trickle bytes (libmicrohttpd's
// own timeout restarts on every byte); a new connection past the limits
// closes the oldest unfinished one, so a fresh client is always served.
// Closing is shutdown(2) of the socket: libmicrohttpd sees the end of the
// stream and cleans up as usual. The socket cannot be reused meanwhile:
// libmicrohttpd reports the connection closed (which takes the lock) before
// it closes the descriptor.
struct cifm_http_server;
struct cifm_conn {
    struct cifm_conn *prev, *next;
    struct cifm_http_server *server;
    int fd;
    uint64_t since_ms;  // start of the wait for the current request
    int busy;           // a whole request arrived; the response is going out
    int shut;           // already shut down by ifmeter
    struct sockaddr_storage addr;
};

struct cifm_http_server {
    struct MHD_Daemon *daemon;
    cifm_http_logger logger;
    void *logger_cls;
    cifm_http_limits limits;
    pthread_mutex_t lock;
    pthread_cond_t wake;
    pthread_t sweeper;
    int sweeper_running;
    int stopping;
    struct cifm_conn *head;
    unsigned int open;          // listed and not shut down
    uint64_t deadline_closed;
    uint64_t evicted;
};

static uint64_t now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static int same_client(const struct sockaddr_storage *a, const struct sockaddr_storage *b) {
    if (a->ss_family != b->ss_family)
        return 0;
    if (a->ss_family == AF_INET)
        return memcmp(&((const struct sockaddr_in *)a)->sin_addr, &((const struct sockaddr_in *)b)->sin_addr,
                      sizeof(struct in_addr)) == 0;
    if (a->ss_family == AF_INET6)
        return memcmp(&((const struct sockaddr_in6 *)a)->sin6_addr, &((const struct sockaddr_in6 *)b)->sin6_addr,
                      sizeof(struct in6_addr)) == 0;
    return 0;
}

/// Shuts `c` down; with the lock held.
static void shut_locked(struct cifm_http_server *server, struct cifm_conn *c) {
    shutdown(c->fd, SHUT_RDWR);
    c->shut = 1;
    server->open--;
}

/// The oldest connection still waiting for its request (of `client` when
/// given), other than `except`; with the lock held.
static struct cifm_conn *oldest_waiting_locked(struct cifm_http_server *server, const struct sockaddr_storage *client,
                                               const struct cifm_conn *except) {
    struct cifm_conn *oldest = NULL;
    for (struct cifm_conn *c = server->head; c; c = c->next) {
        if (c == except || c->busy || c->shut)
            continue;
        if (client && !same_client(&c->addr, client))
            continue;
        if (!oldest || c->since_ms < oldest->since_ms)
            oldest = c;
    }
    return oldest;
}

static void notify_connection(void *cls, struct MHD_Connection *connection, void **socket_context,
                              enum MHD_ConnectionNotificationCode code) {
    struct cifm_http_server *server = cls;
    if (code == MHD_CONNECTION_NOTIFY_STARTED) {
        const union MHD_ConnectionInfo *fd_info = mhd.get_connection_info(connection, MHD_CONNECTION_INFO_CONNECTION_FD);
        const union MHD_ConnectionInfo *addr_info = mhd.get_connection_info(connection, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
        struct cifm_conn *c = calloc(1, sizeof *c);
        if (!c || !fd_info) {
            free(c);
            return;  // untracked: only libmicrohttpd's own limits apply to it
        }
        c->fd = fd_info->connect_fd;
        c->server = server;
        c->since_ms = now_ms();
        if (addr_info && addr_info->client_addr) {
            socklen_t len = addr_info->client_addr->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6)
                                                                          : sizeof(struct sockaddr_in);
            memcpy(&c->addr, addr_info->client_addr, len);
        }
        pthread_mutex_lock(&server->lock);
        c->next = server->head;
        if (server->head)
            server->head->prev = c;
        server->head = c;
        server->open++;
        unsigned int same = 0;
        for (struct cifm_conn *o = server->head; o; o = o->next)
            if (!o->shut && same_client(&o->addr, &c->addr))
                same++;
        if (same > server->limits.per_ip) {
            struct cifm_conn *victim = oldest_waiting_locked(server, &c->addr, c);
            shut_locked(server, victim ? victim : c);
            server->evicted++;
        }
        if (server->open > server->limits.connections) {
            struct cifm_conn *victim = oldest_waiting_locked(server, NULL, c);
            shut_locked(server, victim ? victim : c);
            server->evicted++;
        }
        pthread_mutex_unlock(&server->lock);
        *socket_context = c;
    } else if (code == MHD_CONNECTION_NOTIFY_CLOSED) {
        struct cifm_conn *c = *socket_context;
        if (!c)
            return;
        *socket_context = NULL;
        pthread_mutex_lock(&server->lock);
        if (c->prev)
            c->prev->next = c->next;
        else
            server->head = c->next;
        if (c->next)
            c->next->prev = c->prev;
        if (!c->shut)
            server->open--;
        pthread_mutex_unlock(&server->lock);
        free(c);
    }
}

/// The connection's entry, when it has one.
static struct cifm_conn *conn_of(struct MHD_Connection *connection) {
    const union MHD_ConnectionInfo *info = mhd.get_connection_info(connection, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    return info ? info->socket_context : NULL;
}

/// A request ended (answered or aborted): the connection waits for the
/// next one, under the deadline again.
static void request_completed(void *cls, struct MHD_Connection *connection, void **req_cls,
                              enum MHD_RequestTerminationCode code) {
    (void)code;
    struct cifm_http_server *server = cls;
    free(*req_cls);
    *req_cls = NULL;
    struct cifm_conn *c = conn_of(connection);
    if (!c)
        return;
    pthread_mutex_lock(&server->lock);
    c->busy = 0;
    c->since_ms = now_ms();
    pthread_mutex_unlock(&server->lock);
}

/// The request line arrived: a request record, and a query string checked
/// before libmicrohttpd stores its parameters (hundreds of them would run
/// the connection out of memory).
static void *uri_arrived(void *cls, const char *uri, struct MHD_Connection *connection) {
    (void)connection;
    struct cifm_http_server *server = cls;
    cifm_http_request *request = calloc(1, sizeof *request);
    if (!request)
        return NULL;
    const char *query = strchr(uri, '?');
    if (query) {
        size_t length = strlen(query + 1);
        unsigned int params = 1;
        for (const char *p = query + 1; *p; p++)
            if (*p == '&')
                params++;
        if (length > server->limits.max_query_bytes || params > server->limits.max_query_params) {
            request->uri_too_long = 1;
            // libmicrohttpd hands the request line's own buffer here and
            // parses the parameters from it afterwards: cut them off, so
            // none is stored; the handler answers 414.
            ((char *)query)[1] = '\0';
        }
    }
    return request;
}

/// A response is queued: the request is whole, the deadline no longer
/// applies (the idle timeout does).
static void mark_busy(struct MHD_Connection *connection) {
    struct cifm_conn *c = conn_of(connection);
    if (!c)
        return;
    pthread_mutex_lock(&c->server->lock);
    c->busy = 1;
    pthread_mutex_unlock(&c->server->lock);
}

static void *sweep(void *cls) {
    struct cifm_http_server *server = cls;
    pthread_mutex_lock(&server->lock);
    while (!server->stopping) {
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_nsec += 100 * 1000000L;
        if (until.tv_nsec >= 1000000000L) {
            until.tv_sec++;
            until.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait(&server->wake, &server->lock, &until);
        uint64_t now = now_ms();
        for (struct cifm_conn *c = server->head; c; c = c->next) {
            if (!c->busy && !c->shut && now - c->since_ms > server->limits.request_deadline_ms) {
                shut_locked(server, c);
                server->deadline_closed++;
            }
        }
    }
    pthread_mutex_unlock(&server->lock);
    return NULL;
}

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

static void server_free(struct cifm_http_server *server) {
    if (server->sweeper_running) {
        pthread_mutex_lock(&server->lock);
        server->stopping = 1;
        pthread_cond_signal(&server->wake);
        pthread_mutex_unlock(&server->lock);
        pthread_join(server->sweeper, NULL);
    }
    if (server->daemon)
        mhd.stop_daemon(server->daemon);  // reports every connection closed
    pthread_cond_destroy(&server->wake);
    pthread_mutex_destroy(&server->lock);
    free(server);
}

cifm_http_server *cifm_http_start(int fd, cifm_http_limits limits, cifm_http_handler handler, void *handler_cls,
                                  cifm_http_logger logger, void *logger_cls) {
    if (!mhd.start_daemon)
        return NULL;
    struct cifm_http_server *server = calloc(1, sizeof *server);
    if (!server)
        return NULL;
    server->logger = logger;
    server->logger_cls = logger_cls;
    server->limits = limits;
    pthread_mutex_init(&server->lock, NULL);
    pthread_cond_init(&server->wake, NULL);
    // libmicrohttpd's own limits sit above ifmeter's, which make room by
    // closing: connections shut down but not yet cleaned up still count
    // there for a moment.
    unsigned int headroom = limits.connections / 4 > 64 ? limits.connections / 4 : 64;
    unsigned int flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL | MHD_USE_ERROR_LOG;
    server->daemon = mhd.start_daemon(
        flags, 0, NULL, NULL, (MHD_AccessHandlerCallback)handler, handler_cls,
        MHD_OPTION_EXTERNAL_LOGGER, log_adapter, server,
        MHD_OPTION_LISTEN_SOCKET, (MHD_socket)fd,
        MHD_OPTION_THREAD_POOL_SIZE, limits.threads,
        MHD_OPTION_CONNECTION_LIMIT, limits.connections + headroom,
        MHD_OPTION_PER_IP_CONNECTION_LIMIT, limits.per_ip + headroom,
        MHD_OPTION_CONNECTION_TIMEOUT, limits.timeout_seconds,
        MHD_OPTION_CONNECTION_MEMORY_LIMIT, limits.memory_per_connection,
        MHD_OPTION_NOTIFY_CONNECTION, notify_connection, server,
        MHD_OPTION_NOTIFY_COMPLETED, request_completed, server,
        MHD_OPTION_URI_LOG_CALLBACK, uri_arrived, server,
        MHD_OPTION_END);
    if (!server->daemon) {
        server_free(server);
        return NULL;
    }
    if (pthread_create(&server->sweeper, NULL, sweep, server) != 0) {
        server_free(server);
        return NULL;
    }
    server->sweeper_running = 1;
    return server;
}

void cifm_http_counts(cifm_http_server *server, uint64_t *deadline_closed, uint64_t *evicted) {
    pthread_mutex_lock(&server->lock);
    *deadline_closed = server->deadline_closed;
    *evicted = server->evicted;
    pthread_mutex_unlock(&server->lock);
}

void cifm_http_stop(cifm_http_server *server) {
    if (!server)
        return;
    server_free(server);
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
