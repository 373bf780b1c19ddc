// C shims for the HTTP server: libmicrohttpd's start function is variadic
// and zlib's deflateInit2 is a macro; Swift can call neither. Every name is
// prefixed `cifm_http_`.
#ifndef CIFMETER_HTTP_H
#define CIFMETER_HTTP_H

#include <stddef.h>
#include <stdint.h>

struct MHD_Daemon;
struct MHD_Connection;

typedef int (*cifm_http_handler)(void *cls, struct MHD_Connection *connection, const char *url,
                                 const char *method, const char *version, const char *upload_data,
                                 size_t *upload_data_size, void **req_cls);
typedef void (*cifm_http_logger)(void *cls, const char *message);

/// Limits that keep slow or broken clients from starving the others.
typedef struct cifm_http_limits {
    unsigned int threads;           // epoll threads in the pool
    unsigned int connections;       // open connections; past it the oldest unfinished request is closed
    unsigned int per_ip;            // the same, per client address
    unsigned int timeout_seconds;   // idle connections are closed after this
    size_t memory_per_connection;   // bounds request headers
    unsigned int request_deadline_ms;  // a whole request (TLS handshake included) must arrive within this
    size_t max_query_bytes;         // longer query strings are refused (414)
    unsigned int max_query_params;  // so are query strings with more parameters
    size_t send_budget;             // memory of responses being inflated; past it the oldest one's connection is closed
} cifm_http_limits;

/// What ifmeter knows of one request; libmicrohttpd's `req_cls` points to
/// it from the request line on, and it is freed when the request ends.
typedef struct cifm_http_request {
    int seen;              // the handler has been called for it
    int uri_too_long;      // the query string is over the limits (its parameters were not parsed)
    uint64_t body_bytes;   // request body received so far
    int auth_waiting;      // suspended until its credentials are judged (cifm_http_wait_begin)
    int auth_result;       // CIFM_AUTH_*, set by cifm_http_wait_finish or the stopping server
} cifm_http_request;

/// What a wait for a verdict on credentials ended with.
enum {
    CIFM_AUTH_PENDING = 0,
    CIFM_AUTH_ALLOWED = 1,
    CIFM_AUTH_REFUSED = 2,
    CIFM_AUTH_BUSY = 3,      // no room to verify now: 503
    CIFM_AUTH_STOPPING = 4,  // the server stops
};

/// Loads libmicrohttpd (`library`, such as libmicrohttpd.so.12) and
/// resolves what ifmeter uses. Returns 0, or -1 with the reason in `error`.
int cifm_http_load(const char *library, char *error, size_t error_len);

// libmicrohttpd's functions, called through the loaded library.
enum MHD_ValueKind;
struct MHD_Response;
int cifm_mhd_get_connection_values(struct MHD_Connection *connection, int kind,
                                   int (*iterator)(void *cls, int kind, const char *key, const char *value),
                                   void *iterator_cls);
struct MHD_Response *cifm_mhd_create_response(size_t size, void *buffer, void (*free_callback)(void *), void *free_cls);
int cifm_mhd_add_response_header(struct MHD_Response *response, const char *header, const char *content);
int cifm_mhd_queue_response(struct MHD_Connection *connection, unsigned int status, struct MHD_Response *response);
void cifm_mhd_destroy_response(struct MHD_Response *response);

/// A running daemon and its logger.
typedef struct cifm_http_server cifm_http_server;

/// HTTPS through libmicrohttpd's GnuTLS: PEM text, a GnuTLS priority
/// string, and whether clients must show a certificate signed by `trust_pem`.
typedef struct cifm_http_tls {
    const char *cert_pem;
    const char *key_pem;
    const char *trust_pem;   // NULL: no client certificates asked for
    const char *priorities;  // such as "NORMAL:-VERS-ALL:+VERS-TLS1.3:+VERS-TLS1.2"
    int client_auth;         // 0 none, 1 verified if given, 2 required and verified
} cifm_http_tls;

/// Whether `tls` loads in GnuTLS (certificate and key match, the CA and the
/// priorities parse). Needs `cifm_http_load` first. Returns 0, or -1 with
/// the reason in `error`.
int cifm_tls_check(const cifm_http_tls *tls, char *error, size_t error_len);

/// Starts a daemon on an already bound and listening socket `fd`, serving
/// HTTPS when `tls` is given. Returns NULL on failure (the logger has the
/// reason).
cifm_http_server *cifm_http_start(int fd, cifm_http_limits limits, const cifm_http_tls *tls, cifm_http_handler handler,
                                  void *handler_cls, cifm_http_logger logger, void *logger_cls);

/// Whether the connection's client certificate satisfies `client_auth`
/// (as in cifm_http_tls): 1 yes, 0 no.
int cifm_http_client_cert_ok(struct MHD_Connection *connection, int client_auth);

/// Whether `password` matches the crypt(3) hash `hash` (bcrypt $2y$...),
/// through libxcrypt's crypt_rn, compared in constant time: 1 yes, 0 no,
/// -1 when libcrypt cannot be loaded or does not know the hash.
int cifm_crypt_matches(const char *password, const char *hash);

/// SHA-256 of `data` (GnuTLS's, loaded with libmicrohttpd) into `digest`.
/// Returns 0, or -1 when GnuTLS is not there.
int cifm_sha256(const void *data, size_t len, unsigned char digest[32]);

/// HMAC-SHA256 of `data` under `key` (GnuTLS's) into `digest`. Returns 0,
/// or -1 when GnuTLS is not there.
int cifm_hmac_sha256(const void *key, size_t key_len, const void *data, size_t len, unsigned char digest[32]);

/// `len` random bytes from the kernel (getrandom). Returns 0, or -1 with errno.
int cifm_random_bytes(void *buffer, size_t len);

/// The connection's client as 16 bytes, for counting per client: an IPv4
/// address as ::ffff:a.b.c.d, an IPv6 address cut to its /64 (one host
/// usually has a whole /64). Returns 0, or -1 when unknown.
int cifm_http_client_key(struct MHD_Connection *connection, unsigned char key[16]);

/// bcrypt verifications on a few threads of their own, off the request
/// path: a queue of at most `max_queued` checks, `workers` at a time.
typedef struct cifm_crypt_pool cifm_crypt_pool;
/// Called on a pool thread when a check is done: whether the password
/// matched (1, 0, or -1 when libcrypt refused the hash) and how long the
/// check took.
typedef void (*cifm_crypt_done)(void *cls, int matched, uint64_t nanoseconds);
/// NULL when no thread could be started.
cifm_crypt_pool *cifm_crypt_pool_create(unsigned int workers, unsigned int max_queued);
/// Queues a check of `password` (`len` bytes, no NUL; copied, and wiped
/// after) against `hash` (copied). With `only_if_idle`, refused unless a
/// worker is free now. Returns 0 when queued (`done` will run once), -1
/// when refused (full, busy, or out of memory; `done` will not run).
int cifm_crypt_pool_submit(cifm_crypt_pool *pool, const char *password, size_t len, const char *hash, int only_if_idle,
                           cifm_crypt_done done, void *cls);
/// Checks queued or running.
unsigned int cifm_crypt_pool_load(cifm_crypt_pool *pool);
/// The pool's threads finish what is queued and end; the last frees it.
void cifm_crypt_pool_release(cifm_crypt_pool *pool);

/// A request suspended until a verdict on its credentials: its connection
/// leaves libmicrohttpd's polling (no thread waits) until
/// `cifm_http_wait_finish`, and the request deadline does not apply.
typedef struct cifm_http_wait cifm_http_wait;
/// Suspends `connection` (from its access handler) and marks `request` as
/// waiting. NULL when it cannot wait (the server is stopping, or the
/// connection is not tracked): answer at once then.
cifm_http_wait *cifm_http_wait_begin(struct MHD_Connection *connection, cifm_http_request *request);
/// Gives the request its verdict `result` (CIFM_AUTH_*) and resumes its
/// connection, after `delay_ms` (on the server's timer thread) when not 0.
/// Call exactly once per wait, from any thread; it frees `wait`. When the
/// server stopped meanwhile (it resumed the connection itself, with
/// CIFM_AUTH_STOPPING), it only frees `wait`.
void cifm_http_wait_finish(cifm_http_wait *wait, int result, unsigned int delay_ms);
/// The request's verdict as the wait left it (CIFM_AUTH_PENDING while it waits).
int cifm_http_wait_result(const cifm_http_request *request);

/// Connections closed so far for being too slow (the request deadline), for
/// sending no request line by the deadline after a response (idle: kept
/// alive between scrapes), to make room (evicted), and to keep responses
/// being inflated within the send budget (budget), since the start.
void cifm_http_counts(cifm_http_server *server, uint64_t *deadline_closed, uint64_t *idle_closed, uint64_t *evicted,
                      uint64_t *budget_closed);

/// Stops the daemon (in-flight responses finish first) and frees it.
void cifm_http_stop(cifm_http_server *server);

/// gzip-compresses `input`. On success returns 0 and *output (malloc'd,
/// free with free()) and *output_len; otherwise a zlib error code.
int cifm_http_gzip(const void *input, size_t input_len, int level, void **output, size_t *output_len);

/// gzip compression in pieces: begin, write each piece, end. The output
/// grows in one malloc'd buffer, handed over by `cifm_gzip_end` cut to its
/// size. `expected` (0: unknown) is the output size to make room for at
/// once, such as the last output's: a buffer grown by doubling holds up to
/// twice the output, and a copy of the half while it grows.
typedef struct cifm_gzip cifm_gzip;
/// The window these streams are deflated with (16 KiB): inflating one
/// needs no bigger one.
#define CIFM_GZIP_WINDOW_BITS 14
cifm_gzip *cifm_gzip_begin(int level, size_t expected);
/// Returns 0, or a zlib error code (then only `cifm_gzip_abort` remains).
int cifm_gzip_write(cifm_gzip *gz, const void *data, size_t len);
/// Finishes the stream and frees `gz`. Returns 0 with *output (malloc'd)
/// and *output_len, or a zlib error code (`gz` is freed either way).
int cifm_gzip_end(cifm_gzip *gz, void **output, size_t *output_len);
void cifm_gzip_abort(cifm_gzip *gz);

/// A response for `connection` that sends the inflated contents of a gzip
/// body, inflated piece by piece as the client reads, so the whole is never
/// held. `size` is the inflated length. `release(release_cls)` runs when
/// the response is done with `gz`. NULL when libmicrohttpd or zlib fails.
/// `window_bits`: the window `gz` was deflated with (15 for zlib's
/// default, CIFM_GZIP_WINDOW_BITS for cifm_gzip's). What it holds
/// meanwhile (zlib's state and window, libmicrohttpd's block, and the
/// connection's own memory) counts against the server's send budget:
/// past it, the connection whose response started first is closed.
struct MHD_Response *cifm_mhd_create_gunzip_response(struct MHD_Connection *connection, const void *gz, size_t gz_len,
                                                     uint64_t size, int window_bits, void (*release)(void *),
                                                     void *release_cls);

#endif
