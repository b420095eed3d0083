/*
 * kq-forge: a test client that claims to be another node (tests/integration/test_tls_identity.sh).
 *
 *   kq-forge --server HOST:PORT [--command-config FILE] --as ID MODE [--count N]
 *
 * MODE:
 *   raft-fetch   Raft Fetch requests as voter (or observer) ID, following the leader's log
 *                like a real follower (each fetch at the end of what the last answer held);
 *                N requests (default 20), 100 ms apart
 *   vote         one Vote request from candidate ID for the next epoch
 *   register     one BrokerRegistration for broker ID
 *   heartbeat    one BrokerHeartbeat for broker ID (broker epoch from --epoch, default 0)
 *   data-fetch   one follower Fetch as replica ID (partition 0 of --topic-id) to a broker
 *
 * Prints one line per answer: "error=NAME" (NONE when the request was served) and, for
 * raft-fetch, the offset it would fetch next. Exit 0 when every request got an answer, 1 when
 * one got none (no connection, timeout), 2 on a usage error.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kq/codec.h"
#include "kq/ctl_codec.h"
#include "kq/data_codec.h"
#include "kq/error.h"
#include "kq/rpc.h"
#include "kq/util.h"
#include "kq_tools.h"

#define CALL_TIMEOUT_MS 3000

/* Sends req (freed) and prints the answer's error; a data-plane Fetch answer (data) is
 * decoded as one. 0, or 1 when no answer came or it did not decode. */
static int call(kq_rpc_client *c, kq_buf *req, kq_response *resp, bool data)
{
    uint8_t *out = NULL;
    size_t len = 0;
    char err[256];
    int rc = kq_rpc_call(c, req->data, req->len, CALL_TIMEOUT_MS, &out, &len);

    kq_buf_free(req);
    memset(resp, 0, sizeof *resp);
    if (rc) {
        printf("no answer: %s\n", kq_err_message(rc));
        return 1;
    }
    if (data) {
        kq_data_fetch_response fr;

        memset(&fr, 0, sizeof fr);
        rc = kq_data_decode_fetch_response(out, len, &fr, err, sizeof err);
        resp->error = fr.error;
        snprintf(resp->error_message, sizeof resp->error_message, "%s", fr.error_message);
        if (!rc)
            kq_data_fetch_response_free(&fr);
    } else {
        rc = kq_codec_decode_response(out, len, -1, resp, err, sizeof err);
    }
    free(out);
    if (rc) {
        printf("undecodable answer: %s\n", err);
        return 1;
    }
    printf("error=%s%s%s\n", kq_err_name(resp->error), resp->error_message[0] ? " message=" : "",
           resp->error_message);
    fflush(stdout);
    return 0;
}

int main(int argc, char **argv)
{
    static const struct option opts[] = {
        {"server", required_argument, NULL, 's'},
        {"command-config", required_argument, NULL, 'c'},
        {"as", required_argument, NULL, 'a'},
        {"count", required_argument, NULL, 'n'},
        {"epoch", required_argument, NULL, 'e'},
        {"topic-id", required_argument, NULL, 't'},
        {NULL, 0, NULL, 0},
    };
    const char *server = NULL, *mode = NULL, *topic = NULL;
    int32_t as = -1;
    int count = 20, o, bad = 0;
    int64_t epoch = 0;
    char err[2048], url[400];
    kq_rpc_client *c = NULL;
    kq_response resp;
    kq_buf req = {0};

    while ((o = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (o) {
        case 's':
            server = optarg;
            break;
        case 'c':
            if (kq_tools_command_config(optarg, err, sizeof err)) {
                fprintf(stderr, "kq-forge: %s\n", err);
                return 2;
            }
            break;
        case 'a':
            as = atoi(optarg);
            break;
        case 'n':
            count = atoi(optarg);
            break;
        case 'e':
            epoch = atoll(optarg);
            break;
        case 't':
            topic = optarg;
            break;
        default:
            bad = 1;
        }
    }
    mode = optind < argc ? argv[optind] : NULL;
    if (bad || !server || !mode || as < 0) {
        fprintf(stderr, "usage: kq-forge --server HOST:PORT [--command-config FILE] --as ID "
                        "raft-fetch|vote|register|heartbeat|data-fetch [--count N] [--epoch E] "
                        "[--topic-id ID]\n");
        return 2;
    }
    snprintf(url, sizeof url, "%s%s", kq_tools_scheme(), server);
    if (kq_rpc_client_open(url, 0, &c, err, sizeof err)) {
        fprintf(stderr, "kq-forge: %s\n", err);
        return 1;
    }
    int rc = 0;
    if (!strcmp(mode, "raft-fetch") || !strcmp(mode, "vote")) {
        /* learn the leader's epoch the way a node does: from an answer (a Fetch at 0 answers
         * with the current epoch, or refuses us) */
        int32_t leader_epoch = 0;
        int64_t offset = 0;
        int32_t last_epoch = 0;
        bool vote = !strcmp(mode, "vote");

        for (int i = 0; i < (vote ? 1 : count) && rc == 0; i++) {
            kq_raft_msg m;

            memset(&m, 0, sizeof m);
            m.from = as;
            m.epoch = leader_epoch;
            if (vote) {
                m.type = KQ_RAFT_VOTE_REQ;
                m.epoch = 1000;
                m.u.vote_req.candidate_id = as;
                m.u.vote_req.last_epoch = 999;
                m.u.vote_req.last_offset = 1 << 30;
            } else {
                m.type = KQ_RAFT_FETCH_REQ;
                m.u.fetch_req.fetch_offset = offset;
                m.u.fetch_req.last_fetched_epoch = last_epoch;
                m.u.fetch_req.max_wait_ms = 0;
            }
            if (kq_codec_encode_raft_request(&m, "", &req)) {
                fprintf(stderr, "kq-forge: cannot encode\n");
                return 1;
            }
            if ((rc = call(c, &req, &resp, false)) != 0)
                break;
            if (!vote && resp.error == 0) {
                if (resp.raft.epoch > leader_epoch)
                    leader_epoch = resp.raft.epoch;
                for (size_t b = 0; b < resp.n_batches; b++) {
                    offset = resp.batches[b].base_offset + resp.batches[b].count;
                    last_epoch = resp.batches[b].epoch;
                }
                printf("next_offset=%lld epoch=%d\n", (long long)offset, leader_epoch);
            } else if (!vote && resp.error == KQ_ERR_FENCED_LEADER_EPOCH && resp.leader_epoch > 0) {
                leader_epoch = resp.leader_epoch;
            }
            kq_response_free(&resp);
            if (!vote)
                usleep(100 * 1000);
        }
    } else if (!strcmp(mode, "register") || !strcmp(mode, "heartbeat")) {
        kq_rec_endpoint ep = {.name = "SSL", .host = "127.0.0.1", .port = 1};
        kq_ctl_request r;

        memset(&r, 0, sizeof r);
        if (!strcmp(mode, "register")) {
            r.api_key = KQ_API_BROKER_REGISTRATION;
            r.broker_registration.broker_id = as;
            r.broker_registration.cluster_id = "";
            char inc[KQ_UUID_STR_LEN + 1];
            if (kq_uuid_random(inc) || !kq_uuid_parse(inc, r.broker_registration.incarnation_id))
                return 1;
            r.broker_registration.endpoints = &ep;
            r.broker_registration.n_endpoints = 1;
        } else {
            r.api_key = KQ_API_BROKER_HEARTBEAT;
            r.broker_heartbeat.broker_id = as;
            r.broker_heartbeat.broker_epoch = epoch;
        }
        if (kq_ctl_encode_request("", as, &r, &req)) {
            fprintf(stderr, "kq-forge: cannot encode\n");
            return 1;
        }
        rc = call(c, &req, &resp, false);
        if (!rc)
            kq_response_free(&resp);
    } else if (!strcmp(mode, "data-fetch")) {
        kq_data_fetch_partition p = {.partition = 0,
                                     .current_leader_epoch = -1,
                                     .fetch_offset = 0,
                                     .last_fetched_epoch = -1,
                                     .log_start_offset = 0,
                                     .partition_max_bytes = 1 << 20};
        kq_data_fetch_request f = {.replica_id = as,
                                   .broker_epoch = epoch,
                                   .max_wait_ms = 0,
                                   .max_bytes = 1 << 20,
                                   .partitions = &p,
                                   .n_partitions = 1};

        if (!topic || !kq_uuid_parse(topic, p.topic_id)) {
            fprintf(stderr, "kq-forge: data-fetch needs --topic-id (a topic id)\n");
            return 2;
        }
        if (kq_data_encode_fetch_request("", as, &f, &req)) {
            fprintf(stderr, "kq-forge: cannot encode\n");
            return 1;
        }
        rc = call(c, &req, &resp, true);
    } else {
        fprintf(stderr, "kq-forge: unknown mode '%s'\n", mode);
        rc = 2;
    }
    kq_rpc_client_close(c);
    return rc;
}
