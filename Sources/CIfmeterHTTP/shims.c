#include "CIfmeterHTTP.h"

#include <crypt.h>
#include <dlfcn.h>
#include <gnutls/crypto.h>
#include <gnutls/gnutls.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static cifm_mhd_functions mhd;
static struct MHD_Daemon *(*start_daemon)(unsigned int, uint16_t, MHD_AcceptPolicyCallback, void *,
                                          MHD_AccessHandlerCallback, void *, ...);
static const union MHD_ConnectionInfo *(*get_connection_info)(struct MHD_Connection *, enum MHD_ConnectionInfoType, ...);

// GnuTLS, as loaded by libmicrohttpd (nothing when it was built without).
static struct {
    int loaded;
#define F(name) __typeof__(gnutls_##name) *name
    F(certificate_allocate_credentials); F(certificate_free_credentials); F(certificate_set_x509_key_mem);
    F(certificate_set_x509_trust_mem); F(priority_init); F(priority_deinit); F(strerror);
    F(certificate_server_set_request); F(session_set_verify_cert); F(certificate_get_peers);
    F(certificate_verify_peers2); F(hmac_fast);
#undef F
} tls;

// libcrypt (libxcrypt).
static char *(*crypt_rn_fn)(const char *, const char *, void *, int);

#define RESOLVE(lib, field, symbol) (*(void **)&(field) = dlsym(lib, symbol))

static void load_gnutls(void) {
    void *lib = dlopen("libgnutls.so.30", RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
    if (!lib)
        return;
#define T(name) if (!RESOLVE(lib, tls.name, "gnutls_" #name)) return
    T(certificate_allocate_credentials); T(certificate_free_credentials); T(certificate_set_x509_key_mem);
    T(certificate_set_x509_trust_mem); T(priority_init); T(priority_deinit); T(strerror);
    T(certificate_server_set_request); T(session_set_verify_cert); T(certificate_get_peers);
    T(certificate_verify_peers2); T(hmac_fast);
#undef T
    tls.loaded = 1;
}

int cifm_http_load(const char *library, char *error, size_t error_len) {
    if (start_daemon)
        return 0;
    void *lib = dlopen(library, RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        snprintf(error, error_len, "%s", dlerror());
        return -1;
    }
    const char *missing = NULL;
#define NEED(field, symbol) \
    if (!missing && !RESOLVE(lib, field, symbol)) missing = symbol
    NEED(mhd.stop_daemon, "MHD_stop_daemon");
    NEED(mhd.get_connection_values, "MHD_get_connection_values");
    NEED(mhd.create_response, "MHD_create_response_from_buffer_with_free_callback_cls");
    NEED(mhd.create_callback_response, "MHD_create_response_from_callback");
    NEED(mhd.add_response_header, "MHD_add_response_header");
    NEED(mhd.queue_response, "MHD_queue_response");
    NEED(mhd.destroy_response, "MHD_destroy_response");
    NEED(mhd.suspend_connection, "MHD_suspend_connection");
    NEED(mhd.resume_connection, "MHD_resume_connection");
    NEED(get_connection_info, "MHD_get_connection_info");
    NEED(start_daemon, "MHD_start_daemon");  // last: set only when all are
#undef NEED
    if (missing) {
        snprintf(error, error_len, "libmicrohttpd lacks %s", missing);
        return -1;
    }
    load_gnutls();
    return 0;
}

const cifm_mhd_functions *cifm_mhd(void) { return &mhd; }

const union MHD_ConnectionInfo *cifm_mhd_info(struct MHD_Connection *connection, enum MHD_ConnectionInfoType kind) {
    return get_connection_info(connection, kind);
}

static void (*log_line)(void *, const char *);

static void log_adapter(void *cls, const char *fmt, va_list ap) {
    char line[512];
    vsnprintf(line, sizeof line, fmt, ap);
    size_t n = strlen(line);
    while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r'))
        line[--n] = 0;
    if (log_line)
        log_line(cls, line);
}

struct MHD_Daemon *cifm_http_start(const cifm_http_options *o) {
    if (!start_daemon)
        return NULL;
    log_line = o->logger;
    unsigned int flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL | MHD_USE_ERROR_LOG | MHD_ALLOW_SUSPEND_RESUME;
    struct MHD_OptionItem tls_options[5];
    int n = 0;
    if (o->cert_pem) {
        flags |= MHD_USE_TLS;
        tls_options[n++] = (struct MHD_OptionItem){MHD_OPTION_HTTPS_MEM_CERT, 0, (void *)o->cert_pem};
        tls_options[n++] = (struct MHD_OptionItem){MHD_OPTION_HTTPS_MEM_KEY, 0, (void *)o->key_pem};
        tls_options[n++] = (struct MHD_OptionItem){MHD_OPTION_HTTPS_PRIORITIES, 0, (void *)o->priorities};
        if (o->trust_pem)
            tls_options[n++] = (struct MHD_OptionItem){MHD_OPTION_HTTPS_MEM_TRUST, 0, (void *)o->trust_pem};
    }
    tls_options[n] = (struct MHD_OptionItem){MHD_OPTION_END, 0, NULL};
    return start_daemon(flags, 0, NULL, NULL, o->handler, o->cls, MHD_OPTION_EXTERNAL_LOGGER, log_adapter, o->cls,
                        MHD_OPTION_LISTEN_SOCKET, (MHD_socket)o->fd, MHD_OPTION_THREAD_POOL_SIZE, o->threads,
                        MHD_OPTION_CONNECTION_LIMIT, o->connection_limit, MHD_OPTION_PER_IP_CONNECTION_LIMIT,
                        o->per_ip_limit, MHD_OPTION_CONNECTION_TIMEOUT, o->timeout_seconds,
                        MHD_OPTION_CONNECTION_MEMORY_LIMIT, o->memory_per_connection, MHD_OPTION_NOTIFY_CONNECTION,
                        o->notify, o->cls, MHD_OPTION_NOTIFY_COMPLETED, o->completed, o->cls,
                        MHD_OPTION_URI_LOG_CALLBACK, o->uri, o->cls, MHD_OPTION_ARRAY, tls_options, MHD_OPTION_END);
}

static gnutls_datum_t datum(const char *text) {
    gnutls_datum_t d = {(unsigned char *)text, (unsigned int)strlen(text)};
    return d;
}

int cifm_tls_check(const char *cert_pem, const char *key_pem, const char *trust_pem, const char *priorities,
                   char *error, size_t error_len) {
    if (!tls.loaded) {
        snprintf(error, error_len, "this libmicrohttpd has no GnuTLS (libgnutls.so.30 is not loaded with it)");
        return -1;
    }
    gnutls_certificate_credentials_t credentials;
    int rc = tls.certificate_allocate_credentials(&credentials);
    if (rc < 0) {
        snprintf(error, error_len, "GnuTLS: %s", tls.strerror(rc));
        return -1;
    }
    int result = 0;
    gnutls_datum_t cert = datum(cert_pem), key = datum(key_pem);
    if ((rc = tls.certificate_set_x509_key_mem(credentials, &cert, &key, GNUTLS_X509_FMT_PEM)) < 0) {
        snprintf(error, error_len, "cert_file and key_file: %s", tls.strerror(rc));
        result = -1;
    }
    if (result == 0 && trust_pem) {
        gnutls_datum_t trust = datum(trust_pem);
        if ((rc = tls.certificate_set_x509_trust_mem(credentials, &trust, GNUTLS_X509_FMT_PEM)) <= 0) {
            snprintf(error, error_len, "client_ca_file: %s", rc < 0 ? tls.strerror(rc) : "no certificate in it");
            result = -1;
        }
    }
    tls.certificate_free_credentials(credentials);
    gnutls_priority_t priority;
    const char *where = NULL;
    if (result == 0 && (rc = tls.priority_init(&priority, priorities, &where)) < 0) {
        snprintf(error, error_len, "TLS versions: GnuTLS priorities '%s': %s", priorities, tls.strerror(rc));
        result = -1;
    } else if (result == 0) {
        tls.priority_deinit(priority);
    }
    return result;
}

static gnutls_session_t session_of(struct MHD_Connection *connection) {
    const union MHD_ConnectionInfo *info = get_connection_info(connection, MHD_CONNECTION_INFO_GNUTLS_SESSION);
    return info ? (gnutls_session_t)info->tls_session : NULL;
}

void cifm_tls_ask_client_cert(struct MHD_Connection *connection, int client_auth) {
    gnutls_session_t s = tls.loaded && client_auth ? session_of(connection) : NULL;
    if (!s)
        return;
    // Required: GnuTLS verifies it in the handshake (which then fails
    // without one). The handler checks every given certificate again (403).
    tls.certificate_server_set_request(s, client_auth == 2 ? GNUTLS_CERT_REQUIRE : GNUTLS_CERT_REQUEST);
    if (client_auth == 2)
        tls.session_set_verify_cert(s, NULL, 0);
}

int cifm_tls_client_cert_ok(struct MHD_Connection *connection, int client_auth) {
    if (client_auth == 0)
        return 1;
    gnutls_session_t session = tls.loaded ? session_of(connection) : NULL;
    if (!session)
        return 0;
    unsigned int count = 0, status = 0;
    if (!tls.certificate_get_peers(session, &count) || count == 0)
        return client_auth == 1;  // none given: fine only when optional
    return tls.certificate_verify_peers2(session, &status) == 0 && status == 0;
}

int cifm_hmac_sha256(const void *key, size_t key_len, const void *data, size_t len, unsigned char digest[32]) {
    return tls.loaded && tls.hmac_fast(GNUTLS_MAC_SHA256, key, key_len, data, len, digest) == 0 ? 0 : -1;
}

int cifm_crypt_load(void) {
    if (!crypt_rn_fn) {
        void *lib = dlopen("libcrypt.so.1", RTLD_NOW | RTLD_LOCAL);
        if (lib)
            RESOLVE(lib, crypt_rn_fn, "crypt_rn");
    }
    return crypt_rn_fn ? 0 : -1;
}

int cifm_crypt_matches(const char *password, const char *hash) {
    struct crypt_data *data = crypt_rn_fn ? calloc(1, sizeof *data) : NULL;
    if (!data)
        return -1;
    int result = -1;
    const char *computed = crypt_rn_fn(password, hash, data, (int)sizeof *data);
    if (computed && computed[0] != '*') {
        size_t a = strlen(computed), b = strlen(hash), n = a < b ? a : b;
        unsigned char diff = (unsigned char)(a != b);
        for (size_t i = 0; i < n; i++)
            diff |= (unsigned char)(computed[i] ^ hash[i]);
        result = diff == 0;
    }
    explicit_bzero(data, sizeof *data);
    free(data);
    return result;
}

int cifm_deflate_init(z_stream *z, int level, int window_bits, int mem_level) {
    return deflateInit2(z, level, Z_DEFLATED, window_bits, mem_level, Z_DEFAULT_STRATEGY);
}

int cifm_inflate_init(z_stream *z, int window_bits) { return inflateInit2(z, window_bits); }
