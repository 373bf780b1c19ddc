#include "CIfmeterRemoteWrite.h"

#include <curl/curl.h>
#include <dlfcn.h>
#include <snappy-c.h>
#include <stdio.h>
#include <string.h>

// Filled in the order of `names` (POSIX lets dlsym's pointer be a function's).
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
static const char *const names[] = {
    "curl_global_init", "curl_easy_init", "curl_easy_cleanup", "curl_easy_reset", "curl_easy_setopt", "curl_easy_perform",
    "curl_easy_getinfo", "curl_easy_strerror", "curl_slist_append", "curl_slist_free_all", "curl_getdate",
    "snappy_compress", "snappy_uncompress", "snappy_max_compressed_length", "snappy_uncompressed_length"};
static const char *const libraries[][2] = {{"libcurl.so.4", "libcurl4"}, {"libsnappy.so.1", "libsnappy1v5"}};

int cifm_rw_load(char *error, size_t error_len) {
    void *handles[2];
    for (int i = 0; i < 2; i++) {
        if (!(handles[i] = dlopen(libraries[i][0], RTLD_NOW | RTLD_LOCAL))) {
            snprintf(error, error_len, "cannot load %s (%s); install %s", libraries[i][0], dlerror(), libraries[i][1]);
            return -1;
        }
    }
    void **slots = (void **)&rw;
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        int snappy = strncmp(names[i], "snappy", 6) == 0;
        if (!(slots[i] = dlsym(handles[snappy], names[i]))) {
            snprintf(error, error_len, "%s lacks %s", snappy ? "snappy" : "curl", names[i]);
            return -1;
        }
    }
    if (rw.global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
        snprintf(error, error_len, "curl_global_init failed");
        return -1;
    }
    return 0;
}

size_t cifm_rw_snappy_max_compressed(size_t length) { return rw.max_compressed(length); }
int cifm_rw_snappy_compress(const void *in, size_t n, void *out, size_t *out_n) { return rw.compress(in, n, out, out_n); }
int cifm_rw_snappy_uncompressed_length(const void *in, size_t n, size_t *result) { return rw.uncompressed_length(in, n, result); }
int cifm_rw_snappy_uncompress(const void *in, size_t n, void *out, size_t *out_n) { return rw.uncompress(in, n, out, out_n); }
long long cifm_rw_getdate(const char *text) { return (long long)rw.getdate(text, NULL); }
void *cifm_rw_client_new(void) { return rw.easy_init ? rw.easy_init() : NULL; }
void cifm_rw_client_free(void *client) { rw.easy_cleanup(client); }

void cifm_rw_post(void *curl, const cifm_rw_request *request, cifm_rw_result *result) {
    memset(result, 0, sizeof *result);
    rw.easy_reset(curl);
    // libcurl's detailed message ("SSL certificate problem: ..."), not only the kind curl_easy_strerror names.
    char detail[CURL_ERROR_SIZE] = {0};
    rw.easy_setopt(curl, CURLOPT_ERRORBUFFER, detail);
    struct curl_slist *headers = NULL;
    static const char *const fixed[] = {"Content-Encoding: snappy", "Content-Type: application/x-protobuf",
                                        "X-Prometheus-Remote-Write-Version: 0.1.0", "Expect:"};
    for (int i = 0; i < 4; i++) headers = rw.slist_append(headers, fixed[i]);
    // Redirects as Prometheus' sender follows them: at most 10, never https to http, the POST and its body kept;
    // curl sends credentials only to the host (and port) they were given for.
    int https = strncmp(request->url, "https:", 6) == 0, bearer = request->bearer_token != NULL;
    int auth = bearer || request->username, insecure = request->insecure_skip_verify;
    const struct { CURLoption option; long value; int set; } numbers[] = {
        {CURLOPT_FOLLOWLOCATION, 1, 1}, {CURLOPT_MAXREDIRS, 10, 1}, {CURLOPT_POSTREDIR, CURL_REDIR_POST_ALL, 1},
        {CURLOPT_POST, 1, 1}, {CURLOPT_NOSIGNAL, 1, 1}, {CURLOPT_TIMEOUT_MS, request->timeout_ms, 1},
        {CURLOPT_CONNECTTIMEOUT_MS, request->timeout_ms, 1},
        {CURLOPT_HTTPAUTH, bearer ? (long)CURLAUTH_BEARER : (long)CURLAUTH_BASIC, auth},
        {CURLOPT_SSL_VERIFYPEER, 0, insecure}, {CURLOPT_SSL_VERIFYHOST, 0, insecure}};
    for (size_t i = 0; i < sizeof numbers / sizeof *numbers; i++)
        if (numbers[i].set) rw.easy_setopt(curl, numbers[i].option, numbers[i].value);
    const struct { CURLoption option; const void *value; } pointers[] = {
        {CURLOPT_URL, request->url}, {CURLOPT_REDIR_PROTOCOLS_STR, https ? "https" : "http,https"},
        {CURLOPT_POSTFIELDS, request->body}, {CURLOPT_HTTPHEADER, headers}, {CURLOPT_PROTOCOLS_STR, "http,https"},
        {CURLOPT_HEADERDATA, request->context}, {CURLOPT_WRITEDATA, request->context},
        {CURLOPT_USERAGENT, request->user_agent}, {CURLOPT_XOAUTH2_BEARER, request->bearer_token},
        {CURLOPT_USERNAME, bearer ? NULL : request->username},
        {CURLOPT_PASSWORD, bearer || !request->username ? NULL : request->password ? request->password : ""},
        {CURLOPT_CAINFO, request->ca_file}, {CURLOPT_SSLCERT, request->cert_file}, {CURLOPT_SSLKEY, request->key_file}};
    for (size_t i = 0; i < sizeof pointers / sizeof *pointers; i++)
        if (pointers[i].value) rw.easy_setopt(curl, pointers[i].option, pointers[i].value);
    rw.easy_setopt(curl, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)request->body_len);
    rw.easy_setopt(curl, CURLOPT_HEADERFUNCTION, request->on_header);
    rw.easy_setopt(curl, CURLOPT_WRITEFUNCTION, request->on_body);
    CURLcode code = rw.easy_perform(curl);
    rw.slist_free_all(headers);
    rw.easy_setopt(curl, CURLOPT_ERRORBUFFER, NULL);
    curl_off_t uploaded = 0;
    if (rw.easy_getinfo(curl, CURLINFO_SIZE_UPLOAD_T, &uploaded) == CURLE_OK) result->uploaded = (long long)uploaded;
    rw.easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &result->status);
    result->failed = code != CURLE_OK;
    result->stopped = code == CURLE_WRITE_ERROR;
    if (code != CURLE_OK) snprintf(result->error, sizeof result->error, "%s", detail[0] ? detail : rw.easy_strerror(code));
}
