/* Output of `kq metadata-quorum describe` (--status, --replication, --json). */
#include <inttypes.h>
#include <string.h>

#include "kq/error.h"
#include "kq_tools.h"

#define STATUS_LABEL_WIDTH 24
#define N_COLS 7
#define CELL_LEN 48
#define MAX_ROWS (KQ_RAFT_MAX_VOTERS + KQ_RAFT_MAX_OBSERVERS)

int kq_tools_leader_index(const kq_quorum_description *d)
{
    for (int i = 0; i < d->n_voters; i++)
        if (d->voters[i].id == d->leader_id)
            return i;
    return -1;
}

void kq_tools_follower_lag(const kq_quorum_description *d, int64_t *max_lag,
                           int64_t *max_lag_time_ms)
{
    int li = kq_tools_leader_index(d);
    if (li < 0) {
        *max_lag = -1;
        *max_lag_time_ms = -1;
        return;
    }
    const kq_quorum_replica *leader = &d->voters[li];
    const kq_quorum_replica *laggiest = leader;
    for (int i = 0; i < d->n_voters; i++)
        if (d->voters[i].log_end_offset < laggiest->log_end_offset)
            laggiest = &d->voters[i];
    *max_lag = leader->log_end_offset - laggiest->log_end_offset;
    if (laggiest == leader)
        *max_lag_time_ms = 0;
    else if (leader->last_caught_up_timestamp < 0 || laggiest->last_caught_up_timestamp < 0)
        *max_lag_time_ms = -1;
    else
        *max_lag_time_ms = leader->last_caught_up_timestamp - laggiest->last_caught_up_timestamp;
}

static bool has_directory_id(const kq_quorum_replica *r)
{
    return r->directory_id[0] != '\0' && strcmp(r->directory_id, KQ_TOOLS_ZERO_UUID) != 0;
}

/* "LISTENER://host:port", IPv6 hosts in brackets. */
static void format_endpoint(const kq_quorum_node *n, char *out, size_t outlen)
{
    kq_tools_addr a;
    snprintf(a.host, sizeof a.host, "%s", n->host);
    a.port = n->port;
    char hp[300];
    kq_tools_format_addr(&a, hp, sizeof hp);
    if (n->listener[0])
        snprintf(out, outlen, "%s://%s", n->listener, hp);
    else
        snprintf(out, outlen, "%s", hp);
}

/* One line: [{"id": 1, "directoryId": "...", "endpoints": ["CONTROLLER://h:p"]}, ...] */
static void print_replica_list(FILE *f, const kq_quorum_description *d,
                               const kq_quorum_replica *const *rs, int n)
{
    fputc('[', f);
    for (int i = 0; i < n; i++) {
        const kq_quorum_replica *r = rs[i];
        if (i > 0)
            fputs(", ", f);
        fprintf(f, "{\"id\": %" PRId32, r->id);
        if (has_directory_id(r)) {
            fputs(", \"directoryId\": ", f);
            kq_json_write_escaped(f, r->directory_id);
        }
        int n_ep = 0;
        for (int k = 0; k < d->n_nodes; k++) {
            if (d->nodes[k].id != r->id)
                continue;
            char ep[400];
            format_endpoint(&d->nodes[k], ep, sizeof ep);
            fputs(n_ep == 0 ? ", \"endpoints\": [" : ", ", f);
            kq_json_write_escaped(f, ep);
            n_ep++;
        }
        if (n_ep > 0)
            fputc(']', f);
        fputc('}', f);
    }
    fputc(']', f);
}

static void json_replica_list(kq_json *j, const kq_quorum_description *d,
                              const kq_quorum_replica *const *rs, int n)
{
    kq_json_begin_array(j);
    for (int i = 0; i < n; i++) {
        const kq_quorum_replica *r = rs[i];
        kq_json_begin_object(j);
        kq_json_key(j, "id");
        kq_json_int(j, r->id);
        if (has_directory_id(r)) {
            kq_json_key(j, "directoryId");
            kq_json_string(j, r->directory_id);
        }
        int n_ep = 0;
        for (int k = 0; k < d->n_nodes; k++) {
            if (d->nodes[k].id != r->id)
                continue;
            char ep[400];
            format_endpoint(&d->nodes[k], ep, sizeof ep);
            if (n_ep++ == 0) {
                kq_json_key(j, "endpoints");
                kq_json_begin_array(j);
            }
            kq_json_string(j, ep);
        }
        if (n_ep > 0)
            kq_json_end_array(j);
        kq_json_end_object(j);
    }
    kq_json_end_array(j);
}

/* Voters with the leader first, then observers; returns the number of voters placed. */
static int ordered_replicas(const kq_quorum_description *d, const kq_quorum_replica **out,
                            int *n_out)
{
    int n = 0;
    int li = kq_tools_leader_index(d);
    if (li >= 0)
        out[n++] = &d->voters[li];
    for (int i = 0; i < d->n_voters && i < KQ_RAFT_MAX_VOTERS; i++)
        if (i != li)
            out[n++] = &d->voters[i];
    int n_voters = n;
    for (int i = 0; i < d->n_observers && i < KQ_RAFT_MAX_OBSERVERS; i++)
        out[n++] = &d->observers[i];
    *n_out = n;
    return n_voters;
}

void kq_tools_print_status(FILE *f, const kq_quorum_description *d, bool json)
{
    int64_t lag, lag_ms;
    kq_tools_follower_lag(d, &lag, &lag_ms);
    const kq_quorum_replica *rs[MAX_ROWS];
    int n_all;
    int n_voters = ordered_replicas(d, rs, &n_all);

    if (json) {
        kq_json j;
        kq_json_init(&j, f);
        kq_json_begin_object(&j);
        kq_json_key(&j, "clusterId");
        kq_json_string(&j, d->cluster_id);
        kq_json_key(&j, "leaderId");
        kq_json_int(&j, d->leader_id);
        kq_json_key(&j, "leaderEpoch");
        kq_json_int(&j, d->leader_epoch);
        kq_json_key(&j, "highWatermark");
        kq_json_int(&j, d->high_watermark);
        kq_json_key(&j, "maxFollowerLag");
        kq_json_int(&j, lag);
        kq_json_key(&j, "maxFollowerLagTimeMs");
        kq_json_int(&j, lag_ms);
        kq_json_key(&j, "currentVoters");
        json_replica_list(&j, d, rs, n_voters);
        kq_json_key(&j, "currentObservers");
        json_replica_list(&j, d, rs + n_voters, n_all - n_voters);
        kq_json_end_object(&j);
        fputc('\n', f);
        return;
    }
    fprintf(f, "%-*s%s\n", STATUS_LABEL_WIDTH, "ClusterId:", d->cluster_id);
    fprintf(f, "%-*s%" PRId32 "\n", STATUS_LABEL_WIDTH, "LeaderId:", d->leader_id);
    fprintf(f, "%-*s%" PRId32 "\n", STATUS_LABEL_WIDTH, "LeaderEpoch:", d->leader_epoch);
    fprintf(f, "%-*s%" PRId64 "\n", STATUS_LABEL_WIDTH, "HighWatermark:", d->high_watermark);
    fprintf(f, "%-*s%" PRId64 "\n", STATUS_LABEL_WIDTH, "MaxFollowerLag:", lag);
    fprintf(f, "%-*s%" PRId64 "\n", STATUS_LABEL_WIDTH, "MaxFollowerLagTimeMs:", lag_ms);
    fprintf(f, "%-*s", STATUS_LABEL_WIDTH, "CurrentVoters:");
    print_replica_list(f, d, rs, n_voters);
    fputc('\n', f);
    fprintf(f, "%-*s", STATUS_LABEL_WIDTH, "CurrentObservers:");
    print_replica_list(f, d, rs + n_voters, n_all - n_voters);
    fputc('\n', f);
}

static const char *const COLUMNS[N_COLS] = {
    "NodeId", "DirectoryId", "LogEndOffset", "Lag", "LastFetchTimestamp", "LastCaughtUpTimestamp",
    "Status",
};

/* A timestamp cell: -1, epoch ms, or "<n> ms ago". */
static int format_timestamp(char *out, size_t outlen, int64_t ts, bool human, int64_t now_ms,
                            int32_t node, const char *what, char *errbuf, size_t errlen)
{
    if (ts < 0 || !human) {
        snprintf(out, outlen, "%" PRId64, ts < 0 ? (int64_t)-1 : ts);
        return 0;
    }
    if (ts > now_ms) {
        snprintf(errbuf, errlen,
                 "error while computing relative time, possible drift in system clock: "
                 "current timestamp is %" PRId64 ", %s timestamp of node %" PRId32 " is %" PRId64,
                 now_ms, what, node, ts);
        return KQ_ERR_INVALID_TIMESTAMP;
    }
    snprintf(out, outlen, "%" PRId64 " ms ago", now_ms - ts);
    return 0;
}

int kq_tools_print_replication(FILE *f, const kq_quorum_description *d, bool human_readable,
                               int64_t now_ms, bool json, char *errbuf, size_t errlen)
{
    static char cells[MAX_ROWS][N_COLS][CELL_LEN];
    const kq_quorum_replica *rs[MAX_ROWS];
    int n_rows;
    int n_voters = ordered_replicas(d, rs, &n_rows);
    int li = kq_tools_leader_index(d);
    int64_t leader_leo = li >= 0 ? d->voters[li].log_end_offset : -1;

    for (int r = 0; r < n_rows; r++) {
        const kq_quorum_replica *x = rs[r];
        char(*c)[CELL_LEN] = cells[r];
        snprintf(c[0], CELL_LEN, "%" PRId32, x->id);
        snprintf(c[1], CELL_LEN, "%s", x->directory_id[0] ? x->directory_id : KQ_TOOLS_ZERO_UUID);
        snprintf(c[2], CELL_LEN, "%" PRId64, x->log_end_offset);
        if (li >= 0)
            snprintf(c[3], CELL_LEN, "%" PRId64, leader_leo - x->log_end_offset);
        else
            snprintf(c[3], CELL_LEN, "-1");
        int rc = format_timestamp(c[4], CELL_LEN, x->last_fetch_timestamp, human_readable, now_ms,
                                  x->id, "last fetch", errbuf, errlen);
        if (rc == 0)
            rc = format_timestamp(c[5], CELL_LEN, x->last_caught_up_timestamp, human_readable,
                                  now_ms, x->id, "last caught-up", errbuf, errlen);
        if (rc != 0)
            return rc;
        const char *status = "Observer";
        if (r < n_voters)
            status = (li >= 0 && r == 0) ? "Leader" : "Follower";
        snprintf(c[6], CELL_LEN, "%s", status);
    }

    if (json) {
        kq_json j;
        kq_json_init(&j, f);
        kq_json_begin_object(&j);
        kq_json_key(&j, "replicas");
        kq_json_begin_array(&j);
        for (int r = 0; r < n_rows; r++) {
            const kq_quorum_replica *x = rs[r];
            kq_json_begin_object(&j);
            kq_json_key(&j, "nodeId");
            kq_json_int(&j, x->id);
            kq_json_key(&j, "directoryId");
            kq_json_string(&j, cells[r][1]);
            kq_json_key(&j, "logEndOffset");
            kq_json_int(&j, x->log_end_offset);
            kq_json_key(&j, "lag");
            kq_json_int(&j, li >= 0 ? leader_leo - x->log_end_offset : -1);
            kq_json_key(&j, "lastFetchTimestamp");
            if (human_readable && x->last_fetch_timestamp >= 0)
                kq_json_string(&j, cells[r][4]);
            else
                kq_json_int(&j, x->last_fetch_timestamp < 0 ? -1 : x->last_fetch_timestamp);
            kq_json_key(&j, "lastCaughtUpTimestamp");
            if (human_readable && x->last_caught_up_timestamp >= 0)
                kq_json_string(&j, cells[r][5]);
            else
                kq_json_int(&j, x->last_caught_up_timestamp < 0 ? -1 : x->last_caught_up_timestamp);
            kq_json_key(&j, "status");
            kq_json_string(&j, cells[r][6]);
            if (r >= n_voters) {
                /* an observer that sends a directory id is a controller formatted for dynamic
                 * voters (kq brokers send none): add-controller can add it once caught up */
                kq_json_key(&j, "candidateVoter");
                kq_json_bool(&j, has_directory_id(x));
            }
            kq_json_end_object(&j);
        }
        kq_json_end_array(&j);
        kq_json_end_object(&j);
        fputc('\n', f);
        return 0;
    }

    size_t width[N_COLS];
    for (int c = 0; c < N_COLS; c++) {
        width[c] = strlen(COLUMNS[c]);
        for (int r = 0; r < n_rows; r++)
            if (strlen(cells[r][c]) > width[c])
                width[c] = strlen(cells[r][c]);
    }
    for (int c = 0; c < N_COLS; c++)
        fprintf(f, "%-*s\t", (int)width[c], COLUMNS[c]);
    fputc('\n', f);
    for (int r = 0; r < n_rows; r++) {
        for (int c = 0; c < N_COLS; c++)
            fprintf(f, "%-*s\t", (int)width[c], cells[r][c]);
        fputc('\n', f);
    }
    return 0;
}
