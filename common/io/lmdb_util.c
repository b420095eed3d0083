/*
 * Helpers shared by kq_store and kq_plog; see lmdb_util.h.
 */
#include "lmdb_util.h"

#include <errno.h>
#include <signal.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kq/error.h"
#include "kq/log.h"

int kq_lmdb_err(int rc)
{
    switch (rc) {
    case 0:
        return 0;
    case MDB_MAP_FULL:
        return KQ_ERR_FULL;
    case ENOMEM:
        return KQ_ERR_NOMEM;
    default:
        return KQ_ERR_IO;
    }
}

/* ---- start-up read guard (kq_store_guard_reads, include/kq/store.h) ---- */

static char guard_msg[2048];
static size_t guard_len;
static struct sigaction guard_old_bus, guard_old_segv;
static int guard_on;

static void guard_handler(int sig)
{
    (void)sig;
    ssize_t w = write(2, guard_msg, guard_len);
    (void)w;
    _exit(2);
}

void kq_store_guard_reads(const char *dir)
{
    int n = snprintf(guard_msg, sizeof(guard_msg),
                     "kq: reading the LMDB store (data.mdb) under %s crashed: a damaged page made "
                     "LMDB read outside its file, so the file is damaged; the node has not served "
                     "or voted with it. Recover (docs/storage.md): move the directory aside, "
                     "re-format it with the same cluster id and node id (a broker: delete "
                     "__cluster_metadata) and start it\n",
                     dir);
    guard_len = n < 0 ? 0 : (size_t)n < sizeof(guard_msg) ? (size_t)n : sizeof(guard_msg) - 1;
    if (guard_on)
        return;
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = guard_handler;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGBUS, &sa, &guard_old_bus);
    sigaction(SIGSEGV, &sa, &guard_old_segv);
    guard_on = 1;
}

void kq_store_unguard_reads(void)
{
    if (!guard_on)
        return;
    sigaction(SIGBUS, &guard_old_bus, NULL);
    sigaction(SIGSEGV, &guard_old_segv, NULL);
    guard_on = 0;
}

/* LMDB asserts (and then aborts) when it meets a page that cannot be what the tree says, i.e.
 * a damaged data.mdb. At start-up (the read guard is on), say so, name the file and the way out,
 * and exit 2 (the exit status of a problem a restart cannot fix: the systemd units do not restart
 * on it) instead of a SIGABRT and a core dump. */
static void lmdb_assert_exit(MDB_env *env, const char *msg)
{
    const char *path = NULL;
    if (!guard_on) {
        /* While the daemon runs, an assertion may be a kq bug (a misused transaction or
         * cursor): keep the crash and its core, as LMDB would. */
        KQ_ERROR("store", "LMDB assertion failed", "lmdb=\"%s\"", msg ? msg : "");
        abort();
    }
    if (env == NULL || mdb_env_get_path(env, &path) != 0 || path == NULL)
        path = "(unknown directory)";
    KQ_ERROR("store", "the LMDB file is damaged; stopping",
             "file=%s/data.mdb lmdb=\"%s\" recover=\"see docs/storage.md: move the directory "
             "aside, re-format it with the same cluster id and node id, restart; the node "
             "fetches everything from the other replicas\"",
             path, msg ? msg : "");
    fprintf(stderr,
            "kq: %s/data.mdb is damaged (LMDB: %s); stop this node, move the directory aside, "
            "re-format it with the same cluster id and node id and restart it (docs/storage.md)\n",
            path, msg ? msg : "assertion failed");
    _exit(2);
}

int kq_lmdb_read_err(int rc)
{
    switch (rc) {
    case MDB_CORRUPTED:
    case MDB_PAGE_NOTFOUND:
    case MDB_INVALID:
    case MDB_NOTFOUND:
    case MDB_BAD_DBI:
    case MDB_INCOMPATIBLE:
    case MDB_VERSION_MISMATCH:
    case MDB_BAD_VALSIZE:
    case MDB_MAP_RESIZED: /* a damaged meta page claims a larger map */
    case MDB_BAD_TXN:
        return KQ_ERR_CORRUPT_MESSAGE;
    default:
        return kq_lmdb_err(rc);
    }
}

int kq_lmdb_env_open(const char *dir, unsigned flags, unsigned max_dbs, MDB_env **out)
{
    MDB_env *env = NULL;
    int rc = mdb_env_create(&env);
    if (rc != 0)
        return rc;
    mdb_env_set_assert(env, lmdb_assert_exit);
    if ((rc = mdb_env_set_mapsize(env, KQ_LMDB_MAP_SIZE)) != 0 ||
        (rc = mdb_env_set_maxdbs(env, max_dbs)) != 0 ||
        (rc = mdb_env_open(env, dir, flags | MDB_NOTLS, 0640)) != 0) {
        mdb_env_close(env);
        return rc;
    }
    int dead = 0;
    mdb_reader_check(env, &dead);
    *out = env;
    return 0;
}

int kq_lmdb_check_identity(const kq_store_identity *id, const char *dir, const char *dir_key,
                           const char *expect_cluster_id, int32_t expect_node_id, char *errbuf,
                           size_t errlen)
{
    if (expect_cluster_id != NULL && strcmp(expect_cluster_id, id->cluster_id) != 0) {
        kq_errf(errbuf, errlen,
                "stored cluster.id %s does not match configured cluster id %s in %s; this "
                "directory belongs to another cluster: point %s at this cluster's "
                "directory, or wipe it and run kq storage format with --cluster-id %s",
                id->cluster_id, expect_cluster_id, dir, dir_key, expect_cluster_id);
        return KQ_ERR_MISMATCH;
    }
    if (expect_node_id >= 0 && expect_node_id != id->node_id) {
        kq_errf(errbuf, errlen,
                "stored node.id %" PRId32 " does not match configured node.id %" PRId32
                " in %s; point %s at this node's own directory",
                id->node_id, expect_node_id, dir, dir_key);
        return KQ_ERR_MISMATCH;
    }
    return 0;
}

void kq_lmdb_not_formatted(char *errbuf, size_t errlen, const char *kind, const char *dir)
{
    kq_errf(errbuf, errlen,
            "%s directory %s is not formatted; run: kq storage format --config <file> "
            "--cluster-id <id>",
            kind, dir);
}

int kq_lmdb_txn_begin(MDB_env *env, MDB_txn **txn, const char *comp, const char *dir)
{
    int rc = mdb_txn_begin(env, NULL, 0, txn);
    if (rc != 0) {
        *txn = NULL;
        KQ_ERROR(comp, "cannot begin a write transaction", "dir=%s err=\"%s\"", dir,
                 mdb_strerror(rc));
    }
    return rc;
}

int kq_lmdb_txn_commit(MDB_txn **txn, int bad, int *failed, const char *comp, const char *dir)
{
    MDB_txn *t = *txn;
    *txn = NULL;
    if (bad) {
        mdb_txn_abort(t);
        *failed = 1;
        KQ_ERROR(comp, "commit refused after a failed write", "dir=%s", dir);
        return KQ_ERR_IO;
    }
    int rc = mdb_txn_commit(t);
    if (rc != 0) {
        *failed = 1;
        KQ_ERROR(comp, "commit failed", "dir=%s err=\"%s\"", dir, mdb_strerror(rc));
        return KQ_ERR_IO;
    }
    return 0;
}

int kq_lmdb_delete_tail(MDB_txn *txn, MDB_dbi dbi, kq_lmdb_seek_fn seek, const void *seek_arg,
                        kq_lmdb_offset_fn offset_of, int64_t from)
{
    MDB_cursor *c = NULL;
    MDB_val k, v;
    int64_t off;
    int rc = mdb_cursor_open(txn, dbi, &c);
    if (rc != 0)
        return rc;
    for (;;) {
        rc = seek != NULL ? seek(c, &k, &v, seek_arg) : mdb_cursor_get(c, &k, &v, MDB_LAST);
        if (rc != 0)
            break;
        if ((rc = offset_of(&k, &v, &off)) != 0 || off < from)
            break;
        if ((rc = mdb_cursor_del(c, 0)) != 0)
            break;
    }
    mdb_cursor_close(c);
    return rc == MDB_NOTFOUND ? 0 : rc;
}
