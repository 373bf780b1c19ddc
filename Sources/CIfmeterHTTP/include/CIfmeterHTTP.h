// C for the HTTP server, only what Swift cannot express: the dlopen tables of
// libmicrohttpd, its GnuTLS and libcrypt, variadic calls, the va_list logger,
// zlib's init macros. The policy is Swift's (IfmeterServe). Prefix: `cifm_`.
#ifndef CIFMETER_HTTP_H
#define CIFMETER_HTTP_H

#include <stdarg.h>
#include <stdint.h>
#include <sys/socket.h>
#include <microhttpd.h>
#include <zlib.h>

/// libmicrohttpd's functions, as `cifm_http_load` resolved them.
typedef struct cifm_mhd_functions {
    void (*stop_daemon)(struct MHD_Daemon *);
    int (*get_connection_values)(struct MHD_Connection *, enum MHD_ValueKind, MHD_KeyValueIterator, void *);
    struct MHD_Response *(*create_response)(size_t, const void *, MHD_ContentReaderFreeCallback, void *);
    struct MHD_Response *(*create_callback_response)(uint64_t, size_t, MHD_ContentReaderCallback, void *,
                                                     MHD_ContentReaderFreeCallback);
    enum MHD_Result (*add_response_header)(struct MHD_Response *, const char *, const char *);
    enum MHD_Result (*queue_response)(struct MHD_Connection *, unsigned int, struct MHD_Response *);
    void (*destroy_response)(struct MHD_Response *);
    void (*suspend_connection)(struct MHD_Connection *);
    void (*resume_connection)(struct MHD_Connection *);
} cifm_mhd_functions;

/// Loads libmicrohttpd (`library`, such as libmicrohttpd.so.12), the GnuTLS
/// it loaded, and libcrypt. Returns 0, or -1 with the reason in `error`.
int cifm_http_load(const char *library, char *error, size_t error_len);
/// The loaded functions (call `cifm_http_load` first).
const cifm_mhd_functions *cifm_mhd(void);
/// MHD_get_connection_info (variadic) for kinds that take no argument.
const union MHD_ConnectionInfo *cifm_mhd_info(struct MHD_Connection *connection, enum MHD_ConnectionInfoType kind);

/// What MHD_start_daemon is given, already decided by Swift.
typedef struct cifm_http_options {
    int fd;  // bound and listening
    unsigned int threads, connection_limit, per_ip_limit, timeout_seconds;
    size_t memory_per_connection;
    MHD_AccessHandlerCallback handler;
    MHD_NotifyConnectionCallback notify;
    MHD_RequestCompletedCallback completed;
    void *(*uri)(void *cls, const char *uri, struct MHD_Connection *connection);
    void (*logger)(void *cls, const char *line);  // the same for every server
    void *cls;                                     // every callback's
    const char *cert_pem, *key_pem, *trust_pem, *priorities;  // NULL: plain HTTP; kept until the stop
} cifm_http_options;
/// Starts a daemon (epoll threads, suspend and resume); NULL on failure (the
/// logger has the reason).
struct MHD_Daemon *cifm_http_start(const cifm_http_options *options);

/// Whether the PEM text loads in GnuTLS (the certificate and key match, the
/// CA and the priorities parse). Returns 0, or -1 with the reason in `error`.
int cifm_tls_check(const char *cert_pem, const char *key_pem, const char *trust_pem, const char *priorities,
                   char *error, size_t error_len);
/// Asks the connection's TLS session for a client certificate (`client_auth`
/// 1: optional, 2: required and verified in the handshake).
void cifm_tls_ask_client_cert(struct MHD_Connection *connection, int client_auth);
/// Whether the connection's client certificate satisfies `client_auth`
/// (0 none, 1 verified if given, 2 required): 1 yes, 0 no.
int cifm_tls_client_cert_ok(struct MHD_Connection *connection, int client_auth);
/// HMAC-SHA256 (GnuTLS's) into `digest`; 0, or -1 without GnuTLS.
int cifm_hmac_sha256(const void *key, size_t key_len, const void *data, size_t len, unsigned char digest[32]);

/// Loads libcrypt (libxcrypt) once; 0, or -1 when it is not there.
int cifm_crypt_load(void);
/// Whether `password` matches the crypt(3) hash `hash` (bcrypt), through
/// crypt_rn, compared in constant time: 1 yes, 0 no, -1 when libcrypt is
/// not loaded or does not know the hash.
int cifm_crypt_matches(const char *password, const char *hash);

/// zlib's deflateInit2 and inflateInit2 (macros).
int cifm_deflate_init(z_stream *z, int level, int window_bits, int mem_level);
int cifm_inflate_init(z_stream *z, int window_bits);

#endif
