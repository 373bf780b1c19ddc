// C shims for remote write: libcurl (HTTP; curl_easy_setopt is variadic)
// and libsnappy (block compression), both loaded with dlopen when remote
// write starts, so other commands do not pay for them; and the thread and
// wait primitives the sender needs (the queue's files go through
// IfmeterSystem). Every name is prefixed `cifm_rw_`.
#ifndef CIFMETER_REMOTE_WRITE_H
#define CIFMETER_REMOTE_WRITE_H

#include <stddef.h>
#include <stdint.h>

/// Loads libcurl (libcurl.so.4) and libsnappy (libsnappy.so.1). Returns 0,
/// or -1 with the reason in `error`.
int cifm_rw_load(char *error, size_t error_len);

/// Snappy's block format (after cifm_rw_load).
size_t cifm_rw_snappy_max_compressed(size_t length);
/// Returns 0 and sets `*output_len`, or -1.
int cifm_rw_snappy_compress(const void *input, size_t length, void *output, size_t *output_len);
int cifm_rw_snappy_uncompressed_length(const void *input, size_t length, size_t *result);
int cifm_rw_snappy_uncompress(const void *input, size_t length, void *output, size_t *output_len);

/// One POST's settings; NULL strings are unset.
typedef struct cifm_rw_request {
    const char *url;
    const void *body;
    size_t body_len;
    const char *user_agent;
    const char *username;       // basic auth, with password
    const char *password;
    const char *bearer_token;   // Authorization: Bearer
    const char *ca_file;
    const char *cert_file;
    const char *key_file;
    int insecure_skip_verify;
    long timeout_ms;
} cifm_rw_request;

typedef struct cifm_rw_result {
    long status;                 // 0: no HTTP response (network error)
    double retry_after;          // seconds, or -1 when absent
    char error[256];             // libcurl's message when status is 0
    char body[256];              // the start of the response body
    long long uploaded;          // bytes of the body libcurl sent, even on an error
    int body_cut;                // the response body passed 64 KiB and was not read further
    long redirects;              // redirects followed
} cifm_rw_result;

typedef struct cifm_rw_client cifm_rw_client;
cifm_rw_client *cifm_rw_client_new(void);
void cifm_rw_client_free(cifm_rw_client *client);
/// POSTs with the remote write headers (Content-Encoding: snappy,
/// Content-Type: application/x-protobuf, X-Prometheus-Remote-Write-Version:
/// 0.1.0). Returns 0 when an HTTP response came, -1 otherwise.
int cifm_rw_post(cifm_rw_client *client, const cifm_rw_request *request, cifm_rw_result *result);

/// errno after a failed cifm_rw_thread.
int cifm_rw_errno(void);

/// A detached thread running `body(context)`.
int cifm_rw_thread(void (*body)(void *), void *context);

/// A wake-up flag with a timed wait.
typedef struct cifm_rw_event cifm_rw_event;
cifm_rw_event *cifm_rw_event_new(void);
void cifm_rw_event_signal(cifm_rw_event *event);
/// Waits until signalled or `seconds` pass; returns 1 if signalled (and clears it).
int cifm_rw_event_wait(cifm_rw_event *event, double seconds);
void cifm_rw_event_free(cifm_rw_event *event);

#endif
