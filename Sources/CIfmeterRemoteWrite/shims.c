#include "CIfmeterRemoteWrite.h"

#include <curl/curl.h>
#include <snappy-c.h>

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

static struct {
    CURLcode (*global_init)(long);
    CURL *(*easy_init)(void);
    void (*easy_cleanup)(CURL *);
    void (*easy_reset)(CURL *);
    CURLcode (*easy_setopt)(CURL *, CURLoption, ...);
    CURLcode (*easy_perform)(CURL *);
    CURLcode (*easy_getinfo)(CURL *, CURLINFO, ...);
    const char *(*easy_strerror)(CURLcode);
    struct curl_slist *(*slist_append)(struct curl_slist *, const char *);
    void (*slist_free_all)(struct curl_slist *);
    time_t (*getdate)(const char *, const time_t *);
    snappy_status (*compress)(const char *, size_t, char *, size_t *);
    snappy_status (*uncompress)(const char *, size_t, char *, size_t *);
    size_t (*max_compressed)(size_t);
    snappy_status (*uncompressed_length)(const char *, size_t, size_t *);
} rw;

static pthread_mutex_t load_lock = PTHREAD_MUTEX_INITIALIZER;
static int loaded = 0;

int cifm_rw_load(char *error, size_t error_len) {
    pthread_mutex_lock(&load_lock);
    if (loaded) {
        pthread_mutex_unlock(&load_lock);
        return 0;
    }
    void *curl = dlopen("libcurl.so.4", RTLD_NOW | RTLD_LOCAL);
    if (!curl) {
        snprintf(error, error_len, "cannot load libcurl.so.4 (%s); install libcurl4", dlerror());
        pthread_mutex_unlock(&load_lock);
        return -1;
    }
    void *snappy = dlopen("libsnappy.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!snappy) {
        snprintf(error, error_len, "cannot load libsnappy.so.1 (%s); install libsnappy1v5", dlerror());
        pthread_mutex_unlock(&load_lock);
        return -1;
    }
#define RESOLVE(lib, field, symbol)                                                   \
    do {                                                                              \
        *(void **)&rw.field = dlsym(lib, symbol);                                     \
        if (!rw.field) {                                                              \
            snprintf(error, error_len, "%s lacks %s", #lib, symbol);                  \
            pthread_mutex_unlock(&load_lock);                                         \
            return -1;                                                                \
        }                                                                             \
    } while (0)
    RESOLVE(curl, global_init, "curl_global_init");
    RESOLVE(curl, easy_init, "curl_easy_init");
    RESOLVE(curl, easy_cleanup, "curl_easy_cleanup");
    RESOLVE(curl, easy_reset, "curl_easy_reset");
    RESOLVE(curl, easy_setopt, "curl_easy_setopt");
    RESOLVE(curl, easy_perform, "curl_easy_perform");
    RESOLVE(curl, easy_getinfo, "curl_easy_getinfo");
    RESOLVE(curl, easy_strerror, "curl_easy_strerror");
    RESOLVE(curl, slist_append, "curl_slist_append");
    RESOLVE(curl, slist_free_all, "curl_slist_free_all");
    RESOLVE(curl, getdate, "curl_getdate");
    RESOLVE(snappy, compress, "snappy_compress");
    RESOLVE(snappy, uncompress, "snappy_uncompress");
    RESOLVE(snappy, max_compressed, "snappy_max_compressed_length");
    RESOLVE(snappy, uncompressed_length, "snappy_uncompressed_length");
#undef RESOLVE
    if (rw.global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
        snprintf(error, error_len, "curl_global_init failed");
        pthread_mutex_unlock(&load_lock);
        return -1;
    }
    loaded = 1;
    pthread_mutex_unlock(&load_lock);
    return 0;
}

size_t cifm_rw_snappy_max_compressed(size_t length) { return rw.max_compressed(length); }

int cifm_rw_snappy_compress(const void *input, size_t length, void *output, size_t *output_len) {
    return rw.compress(input, length, output, output_len) == SNAPPY_OK ? 0 : -1;
}

int cifm_rw_snappy_uncompressed_length(const void *input, size_t length, size_t *result) {
    return rw.uncompressed_length(input, length, result) == SNAPPY_OK ? 0 : -1;
}

int cifm_rw_snappy_uncompress(const void *input, size_t length, void *output, size_t *output_len) {
    return rw.uncompress(input, length, output, output_len) == SNAPPY_OK ? 0 : -1;
}

struct cifm_rw_client {
    CURL *curl;
};

cifm_rw_client *cifm_rw_client_new(void) {
    if (!loaded) return NULL;
    cifm_rw_client *client = calloc(1, sizeof *client);
    if (!client) return NULL;
    client->curl = rw.easy_init();
    if (!client->curl) {
        free(client);
        return NULL;
    }
    return client;
}

void cifm_rw_client_free(cifm_rw_client *client) {
    if (!client) return;
    rw.easy_cleanup(client->curl);
    free(client);
}

typedef struct {
    cifm_rw_result *result;
    size_t body_used;
    long long body_total;
} response_state;

/// The most of a response body read: what follows the start kept for the
/// log is only counted, and past this the transfer is cut (an endless body
/// cannot hold the sender).
#define CIFM_RW_BODY_CAP (64 * 1024)

static size_t on_header(char *buffer, size_t size, size_t count, void *context) {
    response_state *state = context;
    size_t length = size * count;
    static const char name[] = "retry-after:";
    if (length > sizeof name - 1 && strncasecmp(buffer, name, sizeof name - 1) == 0) {
        char value[128];
        size_t n = length - (sizeof name - 1);
        if (n >= sizeof value) n = sizeof value - 1;
        memcpy(value, buffer + sizeof name - 1, n);
        value[n] = 0;
        char *start = value;
        while (*start == ' ' || *start == '\t') start++;
        char *end = start + strlen(start);
        while (end > start && (end[-1] == '\r' || end[-1] == '\n' || end[-1] == ' ')) *--end = 0;
        char *rest = NULL;
        double seconds = strtod(start, &rest);
        if (rest != start && *rest == 0 && seconds >= 0) {
            state->result->retry_after = seconds;
        } else {
            time_t when = rw.getdate(start, NULL);
            if (when != -1) {
                double delta = difftime(when, time(NULL));
                state->result->retry_after = delta > 0 ? delta : 0;
            }
        }
    }
    return length;
}

static size_t on_body(char *buffer, size_t size, size_t count, void *context) {
    response_state *state = context;
    size_t length = size * count;
    state->body_total += (long long)length;
    if (state->body_total > CIFM_RW_BODY_CAP) {
        state->result->body_cut = 1;
        return 0;
    }
    size_t room = sizeof state->result->body - 1 - state->body_used;
    size_t n = length < room ? length : room;
    memcpy(state->result->body + state->body_used, buffer, n);
    state->body_used += n;
    state->result->body[state->body_used] = 0;
    return length;
}

int cifm_rw_post(cifm_rw_client *client, const cifm_rw_request *request, cifm_rw_result *result) {
    memset(result, 0, sizeof *result);
    result->retry_after = -1;
    CURL *curl = client->curl;
    rw.easy_reset(curl);
    response_state state = {result, 0, 0};
    // libcurl's detailed message ("SSL certificate problem: ..."), where
    // curl_easy_strerror only names the error's kind.
    char detail[CURL_ERROR_SIZE] = {0};
    rw.easy_setopt(curl, CURLOPT_ERRORBUFFER, detail);
    struct curl_slist *headers = NULL;
    headers = rw.slist_append(headers, "Content-Encoding: snappy");
    headers = rw.slist_append(headers, "Content-Type: application/x-protobuf");
    headers = rw.slist_append(headers, "X-Prometheus-Remote-Write-Version: 0.1.0");
    headers = rw.slist_append(headers, "Expect:");
    rw.easy_setopt(curl, CURLOPT_URL, request->url);
    // Redirects are followed as Prometheus' own sender does, a bounded
    // number, never from https to http, the POST and its body kept; curl
    // sends credentials only to the host (and port) they were given for.
    rw.easy_setopt(curl, CURLOPT_FOLLOWLOCATION, 1L);
    rw.easy_setopt(curl, CURLOPT_MAXREDIRS, 10L);
    rw.easy_setopt(curl, CURLOPT_POSTREDIR, (long)CURL_REDIR_POST_ALL);
    rw.easy_setopt(curl, CURLOPT_REDIR_PROTOCOLS_STR, strncmp(request->url, "https:", 6) == 0 ? "https" : "http,https");
    rw.easy_setopt(curl, CURLOPT_POST, 1L);
    rw.easy_setopt(curl, CURLOPT_POSTFIELDS, request->body);
    rw.easy_setopt(curl, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)request->body_len);
    rw.easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
    rw.easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
    rw.easy_setopt(curl, CURLOPT_TIMEOUT_MS, request->timeout_ms);
    rw.easy_setopt(curl, CURLOPT_CONNECTTIMEOUT_MS, request->timeout_ms);
    rw.easy_setopt(curl, CURLOPT_PROTOCOLS_STR, "http,https");
    rw.easy_setopt(curl, CURLOPT_HEADERFUNCTION, on_header);
    rw.easy_setopt(curl, CURLOPT_HEADERDATA, &state);
    rw.easy_setopt(curl, CURLOPT_WRITEFUNCTION, on_body);
    rw.easy_setopt(curl, CURLOPT_WRITEDATA, &state);
    if (request->user_agent) rw.easy_setopt(curl, CURLOPT_USERAGENT, request->user_agent);
    if (request->bearer_token) {
        rw.easy_setopt(curl, CURLOPT_HTTPAUTH, (long)CURLAUTH_BEARER);
        rw.easy_setopt(curl, CURLOPT_XOAUTH2_BEARER, request->bearer_token);
    } else if (request->username) {
        rw.easy_setopt(curl, CURLOPT_HTTPAUTH, (long)CURLAUTH_BASIC);
        rw.easy_setopt(curl, CURLOPT_USERNAME, request->username);
        rw.easy_setopt(curl, CURLOPT_PASSWORD, request->password ? request->password : "");
    }
    if (request->ca_file) rw.easy_setopt(curl, CURLOPT_CAINFO, request->ca_file);
    if (request->cert_file) rw.easy_setopt(curl, CURLOPT_SSLCERT, request->cert_file);
    if (request->key_file) rw.easy_setopt(curl, CURLOPT_SSLKEY, request->key_file);
    if (request->insecure_skip_verify) {
        rw.easy_setopt(curl, CURLOPT_SSL_VERIFYPEER, 0L);
        rw.easy_setopt(curl, CURLOPT_SSL_VERIFYHOST, 0L);
    }
    CURLcode code = rw.easy_perform(curl);
    rw.slist_free_all(headers);
    curl_off_t uploaded = 0;
    if (rw.easy_getinfo(curl, CURLINFO_SIZE_UPLOAD_T, &uploaded) == CURLE_OK) result->uploaded = (long long)uploaded;
    if (code == CURLE_WRITE_ERROR && result->body_cut) {
        // A response came; only its body was cut.
        code = CURLE_OK;
    }
    long redirects = 0;
    if (rw.easy_getinfo(curl, CURLINFO_REDIRECT_COUNT, &redirects) == CURLE_OK) result->redirects = redirects;
    if (code != CURLE_OK) {
        snprintf(result->error, sizeof result->error, "%s", detail[0] ? detail : rw.easy_strerror(code));
        rw.easy_setopt(curl, CURLOPT_ERRORBUFFER, NULL);
        result->status = 0;
        return -1;
    }
    rw.easy_setopt(curl, CURLOPT_ERRORBUFFER, NULL);
    long status = 0;
    rw.easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status);
    result->status = status;
    return 0;
}

int cifm_rw_errno(void) { return errno; }

typedef struct {
    void (*body)(void *);
    void *context;
} thread_start;

static void *thread_main(void *argument) {
    thread_start start = *(thread_start *)argument;
    free(argument);
    start.body(start.context);
    return NULL;
}

int cifm_rw_thread(void (*body)(void *), void *context) {
    thread_start *start = malloc(sizeof *start);
    if (!start) return -1;
    start->body = body;
    start->context = context;
    pthread_t thread;
    pthread_attr_t attributes;
    pthread_attr_init(&attributes);
    pthread_attr_setdetachstate(&attributes, PTHREAD_CREATE_DETACHED);
    int rc = pthread_create(&thread, &attributes, thread_main, start);
    pthread_attr_destroy(&attributes);
    if (rc != 0) {
        free(start);
        errno = rc;
        return -1;
    }
    return 0;
}

struct cifm_rw_event {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int set;
};

cifm_rw_event *cifm_rw_event_new(void) {
    cifm_rw_event *event = calloc(1, sizeof *event);
    if (!event) return NULL;
    pthread_mutex_init(&event->lock, NULL);
    pthread_condattr_t attributes;
    pthread_condattr_init(&attributes);
    pthread_condattr_setclock(&attributes, CLOCK_MONOTONIC);
    pthread_cond_init(&event->cond, &attributes);
    pthread_condattr_destroy(&attributes);
    return event;
}

void cifm_rw_event_signal(cifm_rw_event *event) {
    pthread_mutex_lock(&event->lock);
    event->set = 1;
    pthread_cond_broadcast(&event->cond);
    pthread_mutex_unlock(&event->lock);
}

int cifm_rw_event_wait(cifm_rw_event *event, double seconds) {
    struct timespec deadline;
    clock_gettime(CLOCK_MONOTONIC, &deadline);
    if (seconds < 0) seconds = 0;
    long long ns = (long long)(seconds * 1e9);
    deadline.tv_sec += (time_t)(ns / 1000000000LL);
    deadline.tv_nsec += (long)(ns % 1000000000LL);
    if (deadline.tv_nsec >= 1000000000L) {
        deadline.tv_sec += 1;
        deadline.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&event->lock);
    while (!event->set) {
        if (pthread_cond_timedwait(&event->cond, &event->lock, &deadline) == ETIMEDOUT) break;
    }
    int was = event->set;
    event->set = 0;
    pthread_mutex_unlock(&event->lock);
    return was;
}

void cifm_rw_event_free(cifm_rw_event *event) {
    pthread_cond_destroy(&event->cond);
    pthread_mutex_destroy(&event->lock);
    free(event);
}
