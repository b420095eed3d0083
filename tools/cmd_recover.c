/*
 * kq metadata-quorum unsafe-recover (KIP-853's last resort, issue 12): on one stopped controller
 * of a quorum that lost a majority for good, make that controller a one-voter quorum. Guarded:
 * it refuses while the node itself runs, and while this node and the voters that still answer
 * could form a quorum of the voter set in force; it says what survives and what may be lost and
 * asks before it writes anything.
 *
 * What it writes, in one LMDB transaction of the node's store: a batch at the log end, in an
 * epoch above every epoch the node has seen, holding a KRaftVersionRecord(1) and a
 * VotersRecord marked unsafe_recovery with this node alone under a NEW directory id (with
 * dynamic voters, requests meant for its old incarnation then get INVALID_VOTER_KEY); the
 * quorum state moves to that epoch with no vote and no leader. Started, the node elects itself
 * at once; the operator re-adds controllers with add-controller. Nothing here can stop the
 * "lost" voters from forming their old quorum again if they come back (a partition looks like
 * a loss): the command says that every other voter's directory must be wiped first.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kq/codec.h"
#include "kq/error.h"
#include "kq/records.h"
#include "kq/rpc.h"
#include "kq/store.h"
#include "kq/util.h"
#include "kq_tools.h"

#include "ctl_config.h"

#define PROBE_TIMEOUT_MS 2000

/* Whether a kq node answers at host:port (any answer to DescribeQuorum counts). */
static bool answers(const char *host, int port)
{
    char url[300], err[256];
    kq_rpc_client *cl = NULL;
    kq_buf req = {0};
    uint8_t *resp = NULL;
    size_t len = 0;
    bool ok = false;

    kq_rpc_url(url, sizeof url, kq_tools_tls(), host, port);
    if (kq_rpc_client_open(url, 1 << 20, &cl, err, sizeof err) != 0)
        return false;
    if (kq_codec_encode_describe_request("", &req) == 0 &&
        kq_rpc_call(cl, req.data, req.len, PROBE_TIMEOUT_MS, &resp, &len) == 0)
        ok = true;
    free(resp);
    kq_buf_free(&req);
    kq_rpc_client_close(cl);
    return ok;
}

/* The voter set in force in the store: its bootstrap, its snapshot's head, its log. *set is
 * the latest Voters record's (n 0 when the quorum is static, kraft.version 0). */
static int current_set(kq_store *s, const kq_store_recovered *rec, kq_voter_set *set,
                       int64_t *set_offset, char *err, size_t errlen)
{
    kq_control_list l = {0};
    uint8_t *buf = NULL;
    size_t len = 0;
    int32_t count = 0;
    int rc = kq_store_get_bootstrap(s, &buf, &len, &count);

    if (rc == 0 && count > 0)
        rc = kq_control_list_add_batch(&l, -1, count, buf, len, err, errlen);
    free(buf);
    buf = NULL;
    if (rc == 0 && rec->snapshot.end_offset > 0) {
        rc = kq_store_snapshot_load(s, rec->snapshot, &buf, &len, err, errlen);
        if (rc == 0)
            rc = kq_control_list_add_snapshot(&l, rec->snapshot.end_offset, buf, len, err, errlen);
        free(buf);
    }
    if (rc == 0)
        rc = kq_store_verify(s, rec, kq_control_check_batch, &l, err, errlen);
    set->n = 0;
    *set_offset = -2;
    for (size_t i = 0; rc == 0 && i < l.n; i++)
        if (l.c[i].voters && l.c[i].offset >= *set_offset) {
            *set = *l.c[i].voters;
            *set_offset = l.c[i].offset;
        }
    kq_control_list_free(&l);
    return rc;
}

int kq_quorum_unsafe_recover(const char *config_path, bool yes)
{
    static kq_ctl_config c; /* large */
    static kq_voter_set set, next;
    kq_store *s = NULL;
    kq_store_recovered rec;
    char err[1500] = "";
    int64_t set_offset;
    int ret = KQ_EXIT_FAILURE, rc;

    memset(&rec, 0, sizeof rec);
    if (kq_ctl_config_load(config_path, &c, err, sizeof err) != 0) {
        kq_tools_errorf("%s: %s", config_path, err);
        return KQ_EXIT_USAGE;
    }
    if (answers(c.raft.host, c.raft.port)) {
        kq_tools_errorf("node %" PRId32 " answers at %s:%d: stop it first (unsafe-recover works on "
                        "a stopped controller's directory)",
                        c.node_id, c.raft.host, c.raft.port);
        return KQ_EXIT_FAILURE;
    }
    if ((rc = kq_store_open(c.log_dir, NULL, c.node_id, &s, err, sizeof err)) != 0 ||
        (rc = kq_store_recover(s, &rec)) != 0 ||
        (rc = current_set(s, &rec, &set, &set_offset, err, sizeof err)) != 0) {
        kq_tools_errorf("cannot read the metadata log in %s: %s", c.log_dir,
                        err[0] ? err : kq_err_message(rc));
        goto out;
    }
    if (set.n == 0) { /* static voters: the configuration's */
        for (int i = 0; i < c.n_voters; i++) {
            set.v[i].key.id = c.voters[i].id;
            snprintf(set.v[i].host, sizeof set.v[i].host, "%s", c.voters[i].host);
            set.v[i].port = c.voters[i].port;
        }
        set.n = c.n_voters;
    }
    if (kq_voters_find_id(&set, c.node_id) < 0) {
        kq_tools_errorf("node %" PRId32 " is not a voter of the set in force; recover on one of "
                        "the voters",
                        c.node_id);
        goto out;
    }
    /* The guard: this node plus the voters that answer must not be able to form a quorum. */
    int up = 1, need = set.n / 2 + 1;
    printf("Voters in force (%s): ", set_offset == -2 ? "controller.quorum.voters" : "the log");
    for (int i = 0; i < set.n; i++) {
        const kq_voter *v = &set.v[i];
        bool self = v->key.id == c.node_id;
        bool alive = !self && v->port > 0 && answers(v->host, v->port);

        up += alive;
        printf("%s%d (%s)", i ? ", " : "", (int)v->key.id,
               self    ? "this node, stopped"
               : alive ? "answers"
                       : "does not answer");
    }
    printf("\n");
    if (up >= need) {
        kq_tools_errorf("%d of the %d voters answer or can start (a quorum needs %d): the quorum "
                        "is not lost. Start this node again, and change voters with "
                        "add-controller / remove-controller instead",
                        up, set.n, need);
        goto out;
    }
    int32_t epoch = rec.last_epoch > rec.qstate.epoch ? rec.last_epoch : rec.qstate.epoch;
    if (rec.snapshot.end_offset > 0)
        printf("Known committed here: every offset below %" PRId64 " (this node's snapshot).\n",
               rec.snapshot.end_offset);
    else
        printf("This node has no snapshot: it does not know which of its records were "
               "committed.\n");
    printf("This node keeps every record of its log: offsets %" PRId64 " to %" PRId64
           " (last epoch %" PRId32 "); all of them stay, committed or not.\n"
           "Records the lost voters committed beyond offset %" PRId64
           " are lost. This node becomes "
           "the only voter, at epoch %" PRId32 ", under a new directory id.\n"
           "The other voters must never run again on their old directories: if they are only "
           "cut off, they could form their old quorum and the metadata would fork. Wipe each "
           "of them (or make sure it is gone) before you go on; re-add them formatted "
           "--no-initial-controllers.\n",
           rec.log_start_offset, rec.log_end_offset - 1, rec.last_epoch, rec.log_end_offset - 1,
           epoch + 1);
    if (!yes) {
        char answer[16] = "";
        printf("Type 'yes' to go on: ");
        fflush(stdout);
        if (!fgets(answer, sizeof answer, stdin) || strcmp(answer, "yes\n") != 0) {
            printf("Nothing was changed.\n");
            ret = KQ_EXIT_FAILURE;
            goto out;
        }
    }
    char dir_id[KQ_UUID_STR_LEN + 1];
    kq_voter *self = &next.v[0];
    memset(&next, 0, sizeof next);
    next.n = 1;
    if (kq_uuid_random(dir_id) != 0 || !kq_uuid_parse(dir_id, self->key.dir)) {
        kq_tools_errorf("cannot generate a directory id");
        goto out;
    }
    self->key.id = c.node_id;
    snprintf(self->host, sizeof self->host, "%s", c.raft.host);
    self->port = c.raft.port;
    self->kraft_min = c.raft.kraft_min;
    self->kraft_max = c.raft.kraft_max;
    kq_buf b = {0};
    kq_raft_control kv = {.offset = rec.log_end_offset, .kraft_version = 1};
    kq_raft_control vs = {.offset = rec.log_end_offset + 1,
                          .kraft_version = -1,
                          .voters = &next,
                          .unsafe_recovery = true};
    kq_raft_qstate qs = {.epoch = epoch + 1, .voted_id = -1, .leader_id = -1};
    if ((rc = kq_control_append(&b, &kv, err, sizeof err)) != 0 ||
        (rc = kq_control_append(&b, &vs, err, sizeof err)) != 0 || (rc = kq_store_begin(s)) != 0 ||
        (rc = kq_store_append(s, rec.log_end_offset, epoch + 1, 2, b.data, b.len)) != 0 ||
        (rc = kq_store_put_qstate(s, &qs)) != 0 ||
        (rc = kq_store_put_directory_id(s, dir_id)) != 0 || (rc = kq_store_commit(s)) != 0) {
        kq_buf_free(&b);
        kq_tools_errorf("cannot write the recovery into %s: %s", c.log_dir,
                        err[0] ? err : kq_err_message(rc));
        goto out;
    }
    kq_buf_free(&b);
    if (kq_store_write_meta_properties(s, err, sizeof err) != 0)
        fprintf(stderr, "Warning: %s (informational copy only)\n", err);
    printf("Recovered: node %" PRId32 " is the only voter (directory id %s) from offset %" PRId64
           ", epoch %" PRId32 ". Start it, then add controllers with kq metadata-quorum "
           "add-controller.\n",
           c.node_id, dir_id, rec.log_end_offset, epoch + 1);
    ret = KQ_EXIT_OK;
out:
    free(rec.epochs);
    kq_store_close(s);
    return ret;
}
