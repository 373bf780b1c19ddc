#include "CIfmeterHTTP.h"

#include <crypt.h>
#include <dlfcn.h>
#include <gnutls/gnutls.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/random.h>
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
    void (*suspend_connection)(struct MHD_Connection *);
    void (*resume_connection)(struct MHD_Connection *);
} mhd;

// GnuTLS, as loaded by libmicrohttpd (nothing when it was built without).
static struct {
    int loaded;
    int (*allocate_credentials)(gnutls_certificate_credentials_t *);
    void (*free_credentials)(gnutls_certificate_credentials_t);
    int (*set_x509_key_mem)(gnutls_certificate_credentials_t, const gnutls_datum_t *, const gnutls_datum_t *,
                            gnutls_x509_crt_fmt_t);
    int (*set_x509_trust_mem)(gnutls_certificate_credentials_t, const gnutls_datum_t *, gnutls_x509_crt_fmt_t);
    int (*priority_init)(gnutls_priority_t *, const char *, const char **);
    void (*priority_deinit)(gnutls_priority_t);
    const char *(*strerror)(int);
    void (*server_set_request)(gnutls_session_t, gnutls_certificate_request_t);
    void (*session_set_verify_cert)(gnutls_session_t, const char *, unsigned);
    const gnutls_datum_t *(*get_peers)(gnutls_session_t, unsigned int *);
    int (*verify_peers2)(gnutls_session_t, unsigned int *);
    int (*hash_fast)(gnutls_digest_algorithm_t, const void *, size_t, void *);
    int (*hmac_fast)(gnutls_mac_algorithm_t, const void *, size_t, const void *, size_t, void *);
} tls;

static void load_gnutls(void) {
    void *lib = dlopen("libgnutls.so.30", RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
    if (!lib)
        return;
#define TLS_RESOLVE(field, symbol)                 \
    do {                                           \
        *(void **)&tls.field = dlsym(lib, symbol); \
        if (!tls.field)                            \
            return;                                \
    } while (0)
    TLS_RESOLVE(allocate_credentials, "gnutls_certificate_allocate_credentials");
    TLS_RESOLVE(free_credentials, "gnutls_certificate_free_credentials");
    TLS_RESOLVE(set_x509_key_mem, "gnutls_certificate_set_x509_key_mem");
    TLS_RESOLVE(set_x509_trust_mem, "gnutls_certificate_set_x509_trust_mem");
    TLS_RESOLVE(priority_init, "gnutls_priority_init");
    TLS_RESOLVE(priority_deinit, "gnutls_priority_deinit");
    TLS_RESOLVE(strerror, "gnutls_strerror");
    TLS_RESOLVE(server_set_request, "gnutls_certificate_server_set_request");
    TLS_RESOLVE(session_set_verify_cert, "gnutls_session_set_verify_cert");
    TLS_RESOLVE(get_peers, "gnutls_certificate_get_peers");
    TLS_RESOLVE(verify_peers2, "gnutls_certificate_verify_peers2");
    TLS_RESOLVE(hash_fast, "gnutls_hash_fast");
    TLS_RESOLVE(hmac_fast, "gnutls_hmac_fast");
#undef TLS_RESOLVE
    tls.loaded = 1;
}

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
    RESOLVE(suspend_connection, "MHD_suspend_connection");
    RESOLVE(resume_connection, "MHD_resume_connection");
    RESOLVE(start_daemon, "MHD_start_daemon");
#undef RESOLVE
    load_gnutls();
    return 0;
}

static gnutls_datum_t datum(const char *text) {
    gnutls_datum_t d = {(unsigned char *)text, (unsigned int)strlen(text)};
    return d;
}

int cifm_tls_check(const cifm_http_tls *settings, char *error, size_t error_len) {
    if (!tls.loaded) {
        snprintf(error, error_len, "this libmicrohttpd has no GnuTLS (libgnutls.so.30 is not loaded with it)");
        return -1;
    }
    gnutls_certificate_credentials_t credentials;
    int rc = tls.allocate_credentials(&credentials);
    if (rc < 0) {
        snprintf(error, error_len, "GnuTLS: %s", tls.strerror(rc));
        return -1;
    }
    int result = 0;
    gnutls_datum_t cert = datum(settings->cert_pem), key = datum(settings->key_pem);
    rc = tls.set_x509_key_mem(credentials, &cert, &key, GNUTLS_X509_FMT_PEM);
    if (rc < 0) {
        snprintf(error, error_len, "cert_file and key_file: %s", tls.strerror(rc));
        result = -1;
    }
    if (result == 0 && settings->trust_pem) {
        gnutls_datum_t trust = datum(settings->trust_pem);
        rc = tls.set_x509_trust_mem(credentials, &trust, GNUTLS_X509_FMT_PEM);
        if (rc <= 0) {
            snprintf(error, error_len, "client_ca_file: %s", rc < 0 ? tls.strerror(rc) : "no certificate in it");
            result = -1;
        }
    }
    tls.free_credentials(credentials);
    if (result == 0) {
        gnutls_priority_t priority;
        const char *where = NULL;
        rc = tls.priority_init(&priority, settings->priorities, &where);
        if (rc < 0) {
            snprintf(error, error_len, "TLS versions: GnuTLS priorities '%s': %s", settings->priorities, tls.strerror(rc));
            result = -1;
        } else {
            tls.priority_deinit(priority);
        }
    }
    return result;
}

int cifm_http_client_cert_ok(struct MHD_Connection *connection, int client_auth) {
    if (client_auth == 0)
        return 1;
    if (!tls.loaded)
        return 0;
    const union MHD_ConnectionInfo *info = mhd.get_connection_info(connection, MHD_CONNECTION_INFO_GNUTLS_SESSION);
    if (!info || !info->tls_session)
        return 0;
    gnutls_session_t session = (gnutls_session_t)info->tls_session;
    unsigned int count = 0;
    if (!tls.get_peers(session, &count) || count == 0)
        return client_auth == 1;  // none given: fine only when optional
    unsigned int status = 0;
    return tls.verify_peers2(session, &status) == 0 && status == 0;
}

// libcrypt (libxcrypt), loaded the first time a password is checked.
static pthread_once_t crypt_once = PTHREAD_ONCE_INIT;
static char *(*crypt_rn_fn)(const char *, const char *, void *, int);

static void load_crypt(void) {
    void *lib = dlopen("libcrypt.so.1", RTLD_NOW | RTLD_LOCAL);
    if (lib)
        *(void **)&crypt_rn_fn = dlsym(lib, "crypt_rn");
}

int cifm_crypt_matches(const char *password, const char *hash) {
    pthread_once(&crypt_once, load_crypt);
    if (!crypt_rn_fn)
        return -1;
    struct crypt_data *data = calloc(1, sizeof *data);
    if (!data)
        return -1;
    int result = -1;
    const char *computed = crypt_rn_fn(password, hash, data, (int)sizeof *data);
    if (computed && computed[0] != '*') {
        size_t a = strlen(computed), b = strlen(hash);
        unsigned char diff = (unsigned char)(a != b);
        size_t n = a < b ? a : b;
        for (size_t i = 0; i < n; i++)
            diff |= (unsigned char)(computed[i] ^ hash[i]);
        result = diff == 0;
    }
    explicit_bzero(data, sizeof *data);
    free(data);
    return result;
}

int cifm_sha256(const void *data, size_t len, unsigned char digest[32]) {
    if (!tls.loaded)
        return -1;
    return tls.hash_fast(GNUTLS_DIG_SHA256, data, len, digest) == 0 ? 0 : -1;
}

int cifm_hmac_sha256(const void *key, size_t key_len, const void *data, size_t len, unsigned char digest[32]) {
    if (!tls.loaded)
        return -1;
    return tls.hmac_fast(GNUTLS_MAC_SHA256, key, key_len, data, len, digest) == 0 ? 0 : -1;
}

int cifm_random_bytes(void *buffer, size_t len) {
    unsigned char *p = buffer;
    while (len > 0) {
        ssize_t n = getrandom(p, len, 0);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

// The bcrypt pool: a queue under one lock, held only to take or add a job,
// never while a job runs.
struct crypt_job {
    struct crypt_job *next;
    char *password;
    size_t password_len;
    char *hash;
    cifm_crypt_done done;
    void *cls;
};

struct cifm_crypt_pool {
    pthread_mutex_t lock;
    pthread_cond_t wake;
    struct crypt_job *head, *tail;
    unsigned int queued, running, workers, max_queued, alive;
    int released;
};

static void crypt_job_free(struct crypt_job *job) {
    if (job->password) {
        explicit_bzero(job->password, job->password_len);
        free(job->password);
    }
    free(job->hash);
    free(job);
}

static uint64_t monotonic_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void *crypt_worker(void *cls) {
    struct cifm_crypt_pool *pool = cls;
    pthread_mutex_lock(&pool->lock);
    for (;;) {
        while (!pool->head && !pool->released)
            pthread_cond_wait(&pool->wake, &pool->lock);
        struct crypt_job *job = pool->head;
        if (!job)
            break;  // released, and nothing left to do
        pool->head = job->next;
        if (!pool->head)
            pool->tail = NULL;
        pool->queued--;
        pool->running++;
        pthread_mutex_unlock(&pool->lock);
        uint64_t started = monotonic_ns();
        int matched = cifm_crypt_matches(job->password, job->hash);
        uint64_t took = monotonic_ns() - started;
        cifm_crypt_done done = job->done;
        void *done_cls = job->cls;
        crypt_job_free(job);
        done(done_cls, matched, took);
        pthread_mutex_lock(&pool->lock);
        pool->running--;
    }
    int last = --pool->alive == 0;
    pthread_mutex_unlock(&pool->lock);
    if (last) {
        pthread_cond_destroy(&pool->wake);
        pthread_mutex_destroy(&pool->lock);
        free(pool);
    }
    return NULL;
}

cifm_crypt_pool *cifm_crypt_pool_create(unsigned int workers, unsigned int max_queued) {
    struct cifm_crypt_pool *pool = calloc(1, sizeof *pool);
    if (!pool)
        return NULL;
    pthread_mutex_init(&pool->lock, NULL);
    pthread_cond_init(&pool->wake, NULL);
    pool->workers = workers ? workers : 1;
    pool->max_queued = max_queued;
    // The workers take no signals: the thread that waits for them does.
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old);
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    pthread_mutex_lock(&pool->lock);
    for (unsigned int i = 0; i < pool->workers; i++) {
        pthread_t thread;
        if (pthread_create(&thread, &attr, crypt_worker, pool) == 0)
            pool->alive++;
    }
    pool->workers = pool->alive;
    int none = pool->alive == 0;
    pthread_mutex_unlock(&pool->lock);
    pthread_attr_destroy(&attr);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (none) {
        pthread_cond_destroy(&pool->wake);
        pthread_mutex_destroy(&pool->lock);
        free(pool);
        return NULL;
    }
    return pool;
}

int cifm_crypt_pool_submit(cifm_crypt_pool *pool, const char *password, size_t len, const char *hash, int only_if_idle,
                           cifm_crypt_done done, void *cls) {
    struct crypt_job *job = calloc(1, sizeof *job);
    if (!job)
        return -1;
    job->password = malloc(len + 1);
    job->hash = strdup(hash);
    if (!job->password || !job->hash) {
        crypt_job_free(job);
        return -1;
    }
    memcpy(job->password, password, len);
    job->password[len] = 0;
    job->password_len = len;
    job->done = done;
    job->cls = cls;
    pthread_mutex_lock(&pool->lock);
    int refused = pool->released || pool->queued >= pool->max_queued ||
                  (only_if_idle && (pool->head || pool->running >= pool->workers));
    if (!refused) {
        if (pool->tail)
            pool->tail->next = job;
        else
            pool->head = job;
        pool->tail = job;
        pool->queued++;
        pthread_cond_signal(&pool->wake);
    }
    pthread_mutex_unlock(&pool->lock);
    if (refused) {
        crypt_job_free(job);
        return -1;
    }
    return 0;
}

unsigned int cifm_crypt_pool_load(cifm_crypt_pool *pool) {
    pthread_mutex_lock(&pool->lock);
    unsigned int load = pool->queued + pool->running;
    pthread_mutex_unlock(&pool->lock);
    return load;
}

void cifm_crypt_pool_release(cifm_crypt_pool *pool) {
    if (!pool)
        return;
    pthread_mutex_lock(&pool->lock);
    pool->released = 1;
    pthread_cond_broadcast(&pool->wake);
    pthread_mutex_unlock(&pool->lock);
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
    int served;         // a response went out on it
    int started;        // a request line arrived since the last response
    struct sockaddr_storage addr;
    struct gunzip_reader *reader;  // its response being inflated, charged to the send budget
    uint64_t reader_since_ms;      // when that response started
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
    int client_auth;
    char *cert_pem, *key_pem, *trust_pem, *priorities;  // libmicrohttpd keeps pointers to them
    struct cifm_conn *head;
    unsigned int open;          // listed and not shut down
    uint64_t deadline_closed;
    uint64_t idle_closed;       // kept alive after a response, then no request line by the deadline
    uint64_t evicted;
    size_t send_bytes;          // charged by responses being inflated
    uint64_t budget_closed;
    // Requests waiting for a verdict on their credentials, under wait_lock;
    // the timer thread resumes those given one with a delay.
    struct cifm_http_wait *waits;
    int waits_closed;           // stopping: no new waits, the timer ends
    pthread_cond_t timer_wake;  // with wait_lock, on CLOCK_MONOTONIC
    pthread_t timer;
    int timer_running;
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
    // Once: a connection over the per-client limit may also be the only
    // one left to evict for the overall limit.
    if (c->shut)
        return;
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

static void reader_detach_locked(struct cifm_conn *c);

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
        if (server->client_auth && tls.loaded) {
            // Ask for a client certificate; when one is required, have
            // GnuTLS verify it in the handshake (which then fails without
            // one; with an optional one it would too). The handler checks
            // every given certificate again (403).
            const union MHD_ConnectionInfo *session = mhd.get_connection_info(connection, MHD_CONNECTION_INFO_GNUTLS_SESSION);
            if (session && session->tls_session) {
                gnutls_session_t s = (gnutls_session_t)session->tls_session;
                tls.server_set_request(s, server->client_auth == 2 ? GNUTLS_CERT_REQUIRE : GNUTLS_CERT_REQUEST);
                if (server->client_auth == 2)
                    tls.session_set_verify_cert(s, NULL, 0);
            }
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
        reader_detach_locked(c);
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

int cifm_http_client_key(struct MHD_Connection *connection, unsigned char key[16]) {
    const union MHD_ConnectionInfo *info = mhd.get_connection_info(connection, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    if (!info || !info->client_addr)
        return -1;
    memset(key, 0, 16);
    if (info->client_addr->sa_family == AF_INET) {
        key[10] = key[11] = 0xff;
        memcpy(key + 12, &((const struct sockaddr_in *)info->client_addr)->sin_addr, 4);
        return 0;
    }
    if (info->client_addr->sa_family == AF_INET6) {
        const struct in6_addr *a = &((const struct sockaddr_in6 *)info->client_addr)->sin6_addr;
        if (IN6_IS_ADDR_V4MAPPED(a))
            memcpy(key, a, 16);
        else
            memcpy(key, a, 8);
        return 0;
    }
    return -1;
}

// Waits for a verdict on credentials. One lock for every server's waits:
// held only to link, unlink and resume, never while a verdict is made.
// libmicrohttpd's own locks are taken under it (suspend, resume), never
// the other way round: none of its callbacks here takes it.
static pthread_mutex_t wait_lock = PTHREAD_MUTEX_INITIALIZER;

struct cifm_http_wait {
    struct cifm_http_wait *prev, *next;  // in server->waits
    struct cifm_http_server *server;     // NULL once the stopping server resumed it
    struct MHD_Connection *connection;
    cifm_http_request *request;
    int timed;                           // finished with a delay: the timer owns it
    int result;
    uint64_t due_ms;
};

/// Unlinks `w`, hands its request `result` and resumes its connection;
/// with wait_lock held.
static void wait_resume_locked(struct cifm_http_wait *w, int result) {
    struct cifm_http_server *server = w->server;
    if (w->prev)
        w->prev->next = w->next;
    else
        server->waits = w->next;
    if (w->next)
        w->next->prev = w->prev;
    w->prev = w->next = NULL;
    w->request->auth_result = result;
    mhd.resume_connection(w->connection);
}

cifm_http_wait *cifm_http_wait_begin(struct MHD_Connection *connection, cifm_http_request *request) {
    struct cifm_conn *c = conn_of(connection);
    if (!c)
        return NULL;
    struct cifm_http_server *server = c->server;
    struct cifm_http_wait *w = calloc(1, sizeof *w);
    if (!w)
        return NULL;
    pthread_mutex_lock(&wait_lock);
    if (server->waits_closed) {
        pthread_mutex_unlock(&wait_lock);
        free(w);
        return NULL;
    }
    w->server = server;
    w->connection = connection;
    w->request = request;
    request->auth_waiting = 1;
    request->auth_result = CIFM_AUTH_PENDING;
    w->next = server->waits;
    if (server->waits)
        server->waits->prev = w;
    server->waits = w;
    mhd.suspend_connection(connection);
    pthread_mutex_unlock(&wait_lock);
    // The request is whole: while ifmeter judges it, the deadline for
    // sending one does not apply.
    pthread_mutex_lock(&server->lock);
    c->busy = 1;
    pthread_mutex_unlock(&server->lock);
    return w;
}

void cifm_http_wait_finish(cifm_http_wait *w, int result, unsigned int delay_ms) {
    pthread_mutex_lock(&wait_lock);
    struct cifm_http_server *server = w->server;
    if (!server) {
        pthread_mutex_unlock(&wait_lock);
        free(w);
        return;
    }
    if (delay_ms > 0) {
        w->timed = 1;
        w->result = result;
        w->due_ms = now_ms() + delay_ms;
        pthread_cond_signal(&server->timer_wake);
        pthread_mutex_unlock(&wait_lock);
        return;
    }
    wait_resume_locked(w, result);
    pthread_mutex_unlock(&wait_lock);
    free(w);
}

int cifm_http_wait_result(const cifm_http_request *request) {
    pthread_mutex_lock(&wait_lock);
    int result = request->auth_result;
    pthread_mutex_unlock(&wait_lock);
    return result;
}

/// Resumes the waits given a delay when it is up.
static void *wait_timer(void *cls) {
    struct cifm_http_server *server = cls;
    pthread_mutex_lock(&wait_lock);
    while (!server->waits_closed) {
        uint64_t now = now_ms(), next = 0;
        struct cifm_http_wait *w = server->waits;
        while (w) {
            struct cifm_http_wait *after = w->next;
            if (w->timed) {
                if (w->due_ms <= now) {
                    wait_resume_locked(w, w->result);
                    free(w);
                } else if (next == 0 || w->due_ms < next) {
                    next = w->due_ms;
                }
            }
            w = after;
        }
        if (next == 0) {
            pthread_cond_wait(&server->timer_wake, &wait_lock);
        } else {
            struct timespec until;
            until.tv_sec = (time_t)(next / 1000);
            until.tv_nsec = (long)(next % 1000) * 1000000L;
            pthread_cond_timedwait(&server->timer_wake, &wait_lock, &until);
        }
    }
    pthread_mutex_unlock(&wait_lock);
    return NULL;
}

/// Stopping: no new waits; every request still waiting is resumed (with
/// CIFM_AUTH_STOPPING, or the verdict it was given), as libmicrohttpd must
/// have no suspended connection when it stops. A verification still
/// running finds its wait let go of and only frees it.
static void waits_close(struct cifm_http_server *server) {
    pthread_mutex_lock(&wait_lock);
    server->waits_closed = 1;
    while (server->waits) {
        struct cifm_http_wait *w = server->waits;
        int timed = w->timed;
        wait_resume_locked(w, timed ? w->result : CIFM_AUTH_STOPPING);
        w->server = NULL;
        if (timed)
            free(w);
    }
    pthread_cond_signal(&server->timer_wake);
    pthread_mutex_unlock(&wait_lock);
    if (server->timer_running) {
        pthread_join(server->timer, NULL);
        server->timer_running = 0;
    }
}

/// A request ended (answered or aborted): the connection waits for the
/// next one, under the deadline again.
static void request_completed(void *cls, struct MHD_Connection *connection, void **req_cls,
                              enum MHD_RequestTerminationCode code) {
    struct cifm_http_server *server = cls;
    free(*req_cls);
    *req_cls = NULL;
    struct cifm_conn *c = conn_of(connection);
    if (!c)
        return;
    pthread_mutex_lock(&server->lock);
    c->busy = 0;
    c->since_ms = now_ms();
    if (code == MHD_REQUEST_TERMINATED_COMPLETED_OK)
        c->served = 1;
    c->started = 0;
    pthread_mutex_unlock(&server->lock);
}

/// The request line arrived: a request record, and a query string checked
/// before libmicrohttpd stores its parameters (hundreds of them would run
/// the connection out of memory).
static void *uri_arrived(void *cls, const char *uri, struct MHD_Connection *connection) {
    struct cifm_http_server *server = cls;
    struct cifm_conn *c = conn_of(connection);
    if (c) {
        // A request has begun: a deadline from here on is a slow request,
        // not a kept-alive connection left idle.
        pthread_mutex_lock(&server->lock);
        c->started = 1;
        pthread_mutex_unlock(&server->lock);
    }
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
                // After a response with no request line since: a kept-alive
                // connection left idle (a scraper between scrapes).
                if (c->served && !c->started)
                    server->idle_closed++;
                else
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
    waits_close(server);
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
    pthread_cond_destroy(&server->timer_wake);
    pthread_mutex_destroy(&server->lock);
    free(server->cert_pem);
    free(server->key_pem);
    free(server->trust_pem);
    free(server->priorities);
    free(server);
}

cifm_http_server *cifm_http_start(int fd, cifm_http_limits limits, const cifm_http_tls *tls_settings,
                                  cifm_http_handler handler, void *handler_cls, cifm_http_logger logger,
                                  void *logger_cls) {
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
    pthread_condattr_t monotonic;
    pthread_condattr_init(&monotonic);
    pthread_condattr_setclock(&monotonic, CLOCK_MONOTONIC);
    pthread_cond_init(&server->timer_wake, &monotonic);
    pthread_condattr_destroy(&monotonic);
    if (pthread_create(&server->timer, NULL, wait_timer, server) != 0) {
        server_free(server);
        return NULL;
    }
    server->timer_running = 1;
    // libmicrohttpd's own limits sit above ifmeter's, which make room by
    // closing: connections shut down but not yet cleaned up still count
    // there for a moment.
    unsigned int headroom = limits.connections / 4 > 64 ? limits.connections / 4 : 64;
    // Suspend and resume: a request waits for a verdict on its credentials
    // without holding a thread.
    unsigned int flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL | MHD_USE_ERROR_LOG | MHD_ALLOW_SUSPEND_RESUME;
    struct MHD_OptionItem tls_options[5];
    int n = 0;
    if (tls_settings) {
        flags |= MHD_USE_TLS;
        server->client_auth = tls_settings->client_auth;
        server->cert_pem = strdup(tls_settings->cert_pem);
        server->key_pem = strdup(tls_settings->key_pem);
        server->priorities = strdup(tls_settings->priorities);
        server->trust_pem = tls_settings->trust_pem ? strdup(tls_settings->trust_pem) : NULL;
        if (!server->cert_pem || !server->key_pem || !server->priorities || (tls_settings->trust_pem && !server->trust_pem)) {
            server_free(server);
            return NULL;
        }
        tls_options[n++] = (struct MHD_OptionItem){MHD_OPTION_HTTPS_MEM_CERT, 0, server->cert_pem};
        tls_options[n++] = (struct MHD_OptionItem){MHD_OPTION_HTTPS_MEM_KEY, 0, server->key_pem};
        tls_options[n++] = (struct MHD_OptionItem){MHD_OPTION_HTTPS_PRIORITIES, 0, server->priorities};
        if (server->trust_pem)
            tls_options[n++] = (struct MHD_OptionItem){MHD_OPTION_HTTPS_MEM_TRUST, 0, server->trust_pem};
    }
    tls_options[n] = (struct MHD_OptionItem){MHD_OPTION_END, 0, NULL};
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
        MHD_OPTION_ARRAY, tls_options,
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

void cifm_http_counts(cifm_http_server *server, uint64_t *deadline_closed, uint64_t *idle_closed, uint64_t *evicted,
                      uint64_t *budget_closed) {
    pthread_mutex_lock(&server->lock);
    *deadline_closed = server->deadline_closed;
    *idle_closed = server->idle_closed;
    *evicted = server->evicted;
    *budget_closed = server->budget_closed;
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

/// Makes room for at least `more` bytes of output, growing by a quarter:
/// past malloc's mmap threshold realloc moves no bytes (mremap), and a
/// buffer grown by doubling held up to twice the output at its end.
static int gzip_reserve(struct cifm_gzip *gz, size_t more) {
    size_t used = gz->z.total_out;
    if (gz->capacity - used >= more)
        return 0;
    size_t capacity = gz->capacity ? gz->capacity : 64 * 1024;
    // (+ 1: a room of under 4 bytes, as a tiny expected size gives, grows
    // by a quarter of nothing.)
    while (capacity - used < more)
        capacity += capacity / 4 + 1;
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

cifm_gzip *cifm_gzip_begin(int level, size_t expected) {
    struct cifm_gzip *gz = calloc(1, sizeof *gz);
    if (!gz)
        return NULL;
    // A 16 KiB window and memLevel 7: half zlib's default state (about 130
    // KB instead of 260), for exposition text whose repeats lie within a
    // few lines of each other.
    if (deflateInit2(&gz->z, level, Z_DEFLATED, CIFM_GZIP_WINDOW_BITS + 16, 7, Z_DEFAULT_STRATEGY) != Z_OK) {
        free(gz);
        return NULL;
    }
    if (expected > 0) {
        gz->out = malloc(expected);
        gz->capacity = gz->out ? expected : 0;
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
        size_t used = gz->z.total_out;
        // Kept until the next sample: no room beyond the output.
        if (used > 0 && gz->capacity - used >= 4096) {
            unsigned char *cut = realloc(gz->out, used);
            if (cut)
                gz->out = cut;
        }
        *output = gz->out;
        *output_len = used;
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

// Plain-text responses are inflated from the gzip render as the client
// reads: each holds zlib's state and window and libmicrohttpd's block,
// and its connection's memory, until it is sent, so a thousand readers
// that never read held 90 MB. Each is charged to the server's send
// budget; a new one past it closes the connection whose response started
// first (the oldest one still being sent: a reader too slow, as a whole
// scrape here takes milliseconds) until it fits, the new one served in
// any case.
#define GUNZIP_BLOCK (32 * 1024)

struct gunzip_reader {
    z_stream z;
    void (*release)(void *);
    void *release_cls;
    int done;
    size_t zlib_bytes;                 // what zlib allocated for it
    struct cifm_http_server *server;   // charged there, when tracked
    struct cifm_conn *conn;            // its connection, until that closes
    size_t charge;
    int charged;
};

static void *gunzip_alloc(void *opaque, unsigned int items, unsigned int size) {
    struct gunzip_reader *r = opaque;
    r->zlib_bytes += (size_t)items * size;
    return calloc(items, size);
}

static void gunzip_zfree(void *opaque, void *address) {
    (void)opaque;
    free(address);
}

/// Takes `r`'s charge off the budget; with the server's lock held.
static void reader_uncharge_locked(struct gunzip_reader *r) {
    if (r->charged) {
        r->server->send_bytes -= r->charge;
        r->charged = 0;
    }
}

/// The connection closes: its reader (freed later, with its response)
/// no longer points to it. With the server's lock held.
static void reader_detach_locked(struct cifm_conn *c) {
    if (c->reader) {
        c->reader->conn = NULL;
        c->reader = NULL;
    }
}

/// Charges `r` to its connection `c`'s server, closing the oldest other
/// connections with a response being inflated while it does not fit.
static void reader_charge(struct gunzip_reader *r, struct cifm_conn *c) {
    struct cifm_http_server *server = c->server;
    pthread_mutex_lock(&server->lock);
    while (server->send_bytes + r->charge > server->limits.send_budget) {
        struct cifm_conn *oldest = NULL;
        for (struct cifm_conn *o = server->head; o; o = o->next)
            if (o != c && o->reader && o->reader->charged && (!oldest || o->reader_since_ms < oldest->reader_since_ms))
                oldest = o;
        if (!oldest)
            break;
        // Its memory goes when libmicrohttpd sees the end of the stream
        // and lets go of the response, a moment later: not counted since.
        reader_uncharge_locked(oldest->reader);
        if (!oldest->shut)
            shut_locked(server, oldest);
        server->budget_closed++;
    }
    if (c->reader)
        c->reader->conn = NULL;  // (a response of its before: not sent)
    c->reader = r;
    c->reader_since_ms = now_ms();
    r->server = server;
    r->conn = c;
    server->send_bytes += r->charge;
    r->charged = 1;
    pthread_mutex_unlock(&server->lock);
}

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
    if (r->server) {
        pthread_mutex_lock(&r->server->lock);
        reader_uncharge_locked(r);
        if (r->conn && r->conn->reader == r)
            r->conn->reader = NULL;
        pthread_mutex_unlock(&r->server->lock);
    }
    inflateEnd(&r->z);
    if (r->release)
        r->release(r->release_cls);
    free(r);
}

struct MHD_Response *cifm_mhd_create_gunzip_response(struct MHD_Connection *connection, const void *gz, size_t gz_len,
                                                     uint64_t size, int window_bits, void (*release)(void *),
                                                     void *release_cls) {
    if (window_bits < 9 || window_bits > 15)
        window_bits = 15;
    struct gunzip_reader *r = calloc(1, sizeof *r);
    if (!r)
        return NULL;
    r->z.zalloc = gunzip_alloc;
    r->z.zfree = gunzip_zfree;
    r->z.opaque = r;
    if (inflateInit2(&r->z, window_bits + 16) != Z_OK) {
        free(r);
        return NULL;
    }
    r->z.next_in = (Bytef *)gz;
    r->z.avail_in = (uInt)gz_len;
    r->release = release;
    r->release_cls = release_cls;
    // Its state now, the window zlib allocates at the first inflate, the
    // block libmicrohttpd reads into, and the connection's memory (its
    // pool, up to the limit), which closing it frees too.
    r->charge = sizeof *r + r->zlib_bytes + ((size_t)1 << window_bits) + GUNZIP_BLOCK;
    struct MHD_Response *response = mhd.create_callback_response(size, GUNZIP_BLOCK, gunzip_read, r, gunzip_free);
    if (!response) {
        inflateEnd(&r->z);
        free(r);
        return NULL;
    }
    struct cifm_conn *c = connection ? conn_of(connection) : NULL;
    if (c) {
        r->charge += c->server->limits.memory_per_connection;
        reader_charge(r, c);
    }
    return response;
}
