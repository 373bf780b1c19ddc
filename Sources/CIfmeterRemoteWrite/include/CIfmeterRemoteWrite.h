// What Swift cannot express of remote write's libraries: libcurl and
// libsnappy, loaded with dlopen when remote write starts (other commands do
// not pay for them), and curl_easy_setopt, which is variadic. What a
// response means (Retry-After, the body kept) is decided in Swift.
#ifndef CIFMETER_REMOTE_WRITE_H
#define CIFMETER_REMOTE_WRITE_H
#include <stddef.h>

/// Loads both libraries (one caller at a time): 0, or -1 with the reason.
int cifm_rw_load(char *error, size_t error_len);
/// Snappy's block format: 0 (SNAPPY_OK, and the length) or snappy's error.
size_t cifm_rw_snappy_max_compressed(size_t length);
int cifm_rw_snappy_compress(const void *in, size_t n, void *out, size_t *out_n);
int cifm_rw_snappy_uncompressed_length(const void *in, size_t n, size_t *result);
int cifm_rw_snappy_uncompress(const void *in, size_t n, void *out, size_t *out_n);
/// curl_getdate: seconds since the epoch, or -1.
long long cifm_rw_getdate(const char *text);

/// Takes a header line or a body chunk: returns `count`, or 0 to stop.
typedef size_t (*cifm_rw_receiver)(char *data, size_t one, size_t count, void *context);
/// One POST's settings; NULL strings are unset.
typedef struct cifm_rw_request {
    const char *url, *user_agent, *username, *password, *bearer_token, *ca_file, *cert_file, *key_file;
    const void *body;
    size_t body_len;
    int insecure_skip_verify;
    long timeout_ms;
    cifm_rw_receiver on_header, on_body;
    void *context;
} cifm_rw_request;
typedef struct cifm_rw_result {
    int failed, stopped; // the transfer failed; because a receiver said stop
    long status;         // the last HTTP status (0: none)
    char error[256];     // libcurl's message when it failed
    long long uploaded;  // bytes of the body sent, even on an error
} cifm_rw_result;

void *cifm_rw_client_new(void); // a curl handle (after cifm_rw_load), or NULL
void cifm_rw_client_free(void *client);
/// POSTs with remote write's headers (snappy, protobuf, version 0.1.0).
void cifm_rw_post(void *client, const cifm_rw_request *request, cifm_rw_result *result);
#endif
