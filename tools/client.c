/* Finding the active controller: bootstrap list, leader hints, per-attempt timeouts. */
#include <stdlib.h>
#include <string.h>

#include "kq/error.h"
#include "kq/rpc.h"
#include "kq_tools.h"

#define MAX_ATTEMPTS 64

typedef struct attempt {
    char addr[300];
    bool answered; /* an error answer (not a timeout or network failure) */
    char reason[400];
} attempt;

/* One request/response exchange with addr. Returns 0 with *resp decoded (any error code), or
 * a kq error with reason set (timeout, network, malformed answer). */
static int call_one(const kq_tools_addr *addr, uint32_t api_key, const kq_buf *req,
                    uint32_t timeout_ms, kq_response *resp, char *reason, size_t reason_len)
{
    kq_rpc_client *c = NULL;
    uint8_t *data = NULL;
    size_t len = 0;
    char hp[300], url[320], errbuf[256] = "";
    kq_tools_format_addr(addr, hp, sizeof hp);
    snprintf(url, sizeof url, "tcp://%s", hp);

    int rc = kq_rpc_client_open(url, KQ_RPC_DEFAULT_MAX_MSG, &c, errbuf, sizeof errbuf);
    if (rc != 0) {
        snprintf(reason, reason_len, "%s", errbuf[0] ? errbuf : kq_err_message(rc));
        goto out;
    }
    rc = kq_rpc_call(c, req->data, req->len, timeout_ms, &data, &len);
    if (rc != 0) {
        snprintf(reason, reason_len, "%s (%s)", kq_err_name(rc), kq_err_message(rc));
        goto out;
    }
    rc = kq_codec_decode_response(data, len, -1, resp, errbuf, sizeof errbuf);
    if (rc != 0) {
        snprintf(reason, reason_len, "malformed response: %s",
                 errbuf[0] ? errbuf : kq_err_message(rc));
        goto out;
    }
    if (resp->api_key != api_key) {
        snprintf(reason, reason_len, "response is for api key %u, not %u", resp->api_key, api_key);
        kq_response_free(resp);
        rc = KQ_ERR_MALFORMED;
        goto out;
    }
out:
    free(data);
    if (c != NULL)
        kq_rpc_client_close(c);
    return rc;
}

/* Parse a leader hint: "host:port", tolerating a "LISTENER://" or "tcp://" prefix. */
static bool parse_hint(const char *endpoint, kq_tools_addr *out)
{
    const char *p = strstr(endpoint, "://");
    p = p ? p + 3 : endpoint;
    char errbuf[128];
    int n = 0;
    return kq_tools_parse_addrs(p, out, 1, &n, errbuf, sizeof errbuf) == 0 && n == 1;
}

static void add_attempt(attempt *at, int *n, const kq_tools_addr *addr)
{
    if (*n >= MAX_ATTEMPTS)
        return;
    kq_tools_format_addr(addr, at[*n].addr, sizeof at[*n].addr);
    at[*n].answered = false;
    at[*n].reason[0] = '\0';
    (*n)++;
}

int kq_tools_call_controller(const kq_tools_call_opts *o, uint32_t api_key, const kq_buf *req,
                             kq_response *resp)
{
    attempt at[MAX_ATTEMPTS];
    int n_at = 0;

    for (int b = 0; b < o->n_bootstrap; b++) {
        kq_tools_addr addr = o->bootstrap[b];
        for (int hops = 0;; hops++) {
            add_attempt(at, &n_at, &addr);
            attempt *a = &at[n_at - 1];
            memset(resp, 0, sizeof *resp);
            int rc =
                call_one(&addr, api_key, req, o->timeout_ms, resp, a->reason, sizeof a->reason);
            if (rc != 0)
                break; /* no usable answer: next bootstrap address */
            if (resp->error == KQ_ERR_NONE)
                return KQ_EXIT_OK;

            int err = resp->error;
            a->answered = true;
            snprintf(a->reason, sizeof a->reason, "%s: %s", kq_err_name(err),
                     resp->error_message[0] ? resp->error_message : kq_err_message(err));
            kq_tools_addr hint;
            bool follow = (err == KQ_ERR_NOT_CONTROLLER || err == KQ_ERR_NOT_LEADER_OR_FOLLOWER) &&
                          resp->leader_endpoint[0] != '\0' &&
                          parse_hint(resp->leader_endpoint, &hint);
            kq_response_free(resp);
            memset(resp, 0, sizeof *resp);
            if (follow && hops < o->max_hops) {
                addr = hint;
                continue;
            }
            if (!kq_err_retriable(err)) {
                kq_tools_errorf("controller %s answered %s", a->addr, a->reason);
                return KQ_EXIT_FAILURE;
            }
            break;
        }
    }

    char tried[2048] = "";
    size_t used = 0;
    for (int i = 0; i < n_at && used < sizeof tried; i++) {
        bool dup = false;
        for (int k = 0; k < i; k++)
            dup = dup || strcmp(at[k].addr, at[i].addr) == 0;
        if (dup)
            continue;
        int w = snprintf(tried + used, sizeof tried - used, "%s%s", used ? ", " : "", at[i].addr);
        if (w < 0)
            break;
        used += (size_t)w;
    }
    kq_tools_errorf("no controller answered within %u ms (tried %s)", o->timeout_ms, tried);
    for (int i = 0; i < n_at; i++) {
        bool dup = !at[i].answered;
        for (int k = 0; k < i && !dup; k++)
            dup = at[k].answered && strcmp(at[k].addr, at[i].addr) == 0 &&
                  strcmp(at[k].reason, at[i].reason) == 0;
        if (!dup)
            fprintf(stderr, "  %s answered %s\n", at[i].addr, at[i].reason);
    }
    return KQ_EXIT_FAILURE;
}
