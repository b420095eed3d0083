/*
 * The voter set and its history (include/kq/voters.h). Pure: no I/O, no clock.
 */
#include "kq/voters.h"

#include "kq/error.h"
#include "kq/util.h"

#include <stdlib.h>
#include <string.h>

bool kq_voter_key_equal(const kq_voter_key *a, const kq_voter_key *b)
{
    return a->id == b->id && memcmp(a->dir, b->dir, sizeof a->dir) == 0;
}

bool kq_voter_key_matches(const kq_voter_key *entry, const kq_voter_key *k)
{
    return entry->id == k->id &&
           (kq_uuid_is_zero(entry->dir) || memcmp(entry->dir, k->dir, sizeof k->dir) == 0);
}

int kq_voters_find(const kq_voter_set *s, const kq_voter_key *k)
{
    for (int i = 0; i < s->n; i++)
        if (kq_voter_key_matches(&s->v[i].key, k))
            return i;
    return -1;
}

int kq_voters_find_id(const kq_voter_set *s, int32_t id)
{
    for (int i = 0; i < s->n; i++)
        if (s->v[i].key.id == id)
            return i;
    return -1;
}

static int voter_check(const kq_voter *v, char *errbuf, size_t errlen)
{
    if (v->key.id < 0) {
        kq_errf(errbuf, errlen, "voter id %d is negative", v->key.id);
        return KQ_ERR_INVALID_REQUEST;
    }
    if (memchr(v->host, '\0', sizeof v->host) == NULL) {
        kq_errf(errbuf, errlen, "voter %d: host name longer than %d bytes", v->key.id,
                KQ_VOTER_HOST_MAX - 1);
        return KQ_ERR_INVALID_REQUEST;
    }
    if (v->port < 0 || v->port > 65535) {
        kq_errf(errbuf, errlen, "voter %d: port %d is not in 0..65535", v->key.id, v->port);
        return KQ_ERR_INVALID_REQUEST;
    }
    if (v->kraft_min < 0 || v->kraft_min > v->kraft_max) {
        kq_errf(errbuf, errlen, "voter %d: kraft.version range %d..%d is not a range", v->key.id,
                v->kraft_min, v->kraft_max);
        return KQ_ERR_INVALID_REQUEST;
    }
    return 0;
}

int kq_voters_check(const kq_voter_set *s, char *errbuf, size_t errlen)
{
    if (s->n < 1 || s->n > KQ_RAFT_MAX_VOTERS) {
        kq_errf(errbuf, errlen, "a voter set holds 1 to %d voters, not %d", KQ_RAFT_MAX_VOTERS,
                s->n);
        return KQ_ERR_INVALID_REQUEST;
    }
    for (int i = 0; i < s->n; i++) {
        int rc = voter_check(&s->v[i], errbuf, errlen);

        if (rc)
            return rc;
        for (int j = 0; j < i; j++)
            if (s->v[j].key.id == s->v[i].key.id) {
                kq_errf(errbuf, errlen, "voter id %d appears twice", s->v[i].key.id);
                return KQ_ERR_INVALID_REQUEST;
            }
    }
    return 0;
}

/* A voter that can be added or updated: a valid entry with an endpoint. */
static int endpoint_check(const kq_voter *v, char *errbuf, size_t errlen)
{
    int rc = voter_check(v, errbuf, errlen);

    if (rc)
        return rc;
    if (!v->host[0] || v->port <= 0) {
        kq_errf(errbuf, errlen, "voter %d has no controller listener endpoint", v->key.id);
        return KQ_ERR_INVALID_REQUEST;
    }
    return 0;
}

int kq_voters_add(kq_voter_set *s, const kq_voter *v, char *errbuf, size_t errlen)
{
    int rc = endpoint_check(v, errbuf, errlen);

    if (rc)
        return rc;
    if (kq_uuid_is_zero(v->key.dir)) {
        kq_errf(errbuf, errlen, "voter %d has no directory id", v->key.id);
        return KQ_ERR_INVALID_REQUEST;
    }
    if (kq_voters_find_id(s, v->key.id) >= 0) {
        kq_errf(errbuf, errlen,
                "node %d is a voter already (replacing its directory takes a remove-controller "
                "first)",
                v->key.id);
        return KQ_ERR_DUPLICATE_VOTER;
    }
    if (s->n >= KQ_RAFT_MAX_VOTERS) {
        kq_errf(errbuf, errlen, "the quorum has %d voters, the most it can have", s->n);
        return KQ_ERR_INVALID_REQUEST;
    }
    s->v[s->n++] = *v;
    return 0;
}

int kq_voters_remove(kq_voter_set *s, const kq_voter_key *k, char *errbuf, size_t errlen)
{
    char dir[KQ_UUID_STR_LEN + 1];
    int i = 0;

    while (i < s->n && !kq_voter_key_equal(&s->v[i].key, k))
        i++;
    if (i == s->n) {
        kq_uuid_format(k->dir, dir);
        kq_errf(errbuf, errlen, "no voter with id %d and directory id %s", k->id, dir);
        return KQ_ERR_VOTER_NOT_FOUND;
    }
    if (s->n == 1) {
        kq_errf(errbuf, errlen, "voter %d is the last voter: a quorum cannot be empty", k->id);
        return KQ_ERR_VOTER_NOT_FOUND;
    }
    memmove(&s->v[i], &s->v[i + 1], (size_t)(s->n - i - 1) * sizeof s->v[0]);
    s->n--;
    return 0;
}

int kq_voters_update(kq_voter_set *s, const kq_voter *v, char *errbuf, size_t errlen)
{
    int rc = endpoint_check(v, errbuf, errlen);
    int i;

    if (rc)
        return rc;
    i = kq_voters_find(s, &v->key);
    if (i < 0) {
        kq_errf(errbuf, errlen, "node %d with this directory id is not a voter", v->key.id);
        return KQ_ERR_VOTER_NOT_FOUND;
    }
    s->v[i] = *v;
    return 0;
}

/* Keys of a that are not in b. */
static int keys_missing(const kq_voter_set *a, const kq_voter_set *b)
{
    int missing = 0;

    for (int i = 0; i < a->n; i++) {
        bool found = false;

        for (int j = 0; j < b->n && !found; j++)
            found = kq_voter_key_equal(&a->v[i].key, &b->v[j].key);
        missing += !found;
    }
    return missing;
}

bool kq_voters_overlap(const kq_voter_set *a, const kq_voter_set *b)
{
    return keys_missing(a, b) <= 1 && keys_missing(b, a) <= 1;
}

/* ---- history */

void kq_voter_history_init(kq_voter_history *h, const kq_voter_set *static_set)
{
    memset(h, 0, sizeof *h);
    if (static_set)
        h->static_set = *static_set;
}

void kq_voter_history_free(kq_voter_history *h)
{
    free(h->e);
    h->e = NULL;
    h->n = h->cap = 0;
}

/* The entry for a record at `offset`: the last one when it is at that offset (a batch of the
 * bootstrap holds both records at -1), else a copy of it appended. NULL with errbuf set when
 * the offset goes back or memory ran out (rc says which). The caller counts it (h->n) when
 * `*fresh`. */
static kq_voter_history_entry *entry_for(kq_voter_history *h, int64_t offset, bool *fresh, int *rc,
                                         char *errbuf, size_t errlen)
{
    kq_voter_history_entry *last = h->n ? &h->e[h->n - 1] : NULL;

    *fresh = false;
    if (offset < -1 || (last && offset < last->offset)) {
        kq_errf(errbuf, errlen, "a quorum record at offset %lld does not follow the one at %lld",
                (long long)offset, (long long)(last ? last->offset : -2));
        *rc = KQ_ERR_INVALID_REQUEST;
        return NULL;
    }
    if (last && offset == last->offset)
        return last;
    if (h->n == h->cap) {
        size_t cap = h->cap ? h->cap * 2 : 4;
        kq_voter_history_entry *e = realloc(h->e, cap * sizeof *e);

        if (!e) {
            kq_errf(errbuf, errlen, "out of memory for the voter history");
            *rc = KQ_ERR_NOMEM;
            return NULL;
        }
        h->e = e;
        h->cap = cap;
    }
    kq_voter_history_entry *n = &h->e[h->n];
    if (h->n)
        *n = h->e[h->n - 1];
    else
        memset(n, 0, sizeof *n);
    n->offset = offset;
    *fresh = true;
    return n;
}

static int add_voters(kq_voter_history *h, int64_t offset, const kq_voter_set *s, bool forced,
                      char *errbuf, size_t errlen)
{
    const kq_voter_history_entry *last = h->n ? &h->e[h->n - 1] : NULL;
    kq_voter_history_entry *n;
    bool fresh;
    int rc = kq_voters_check(s, errbuf, errlen);

    if (rc)
        return rc;
    if (last && last->has_set && last->set_offset == offset) {
        kq_errf(errbuf, errlen, "two voter sets at offset %lld", (long long)offset);
        return KQ_ERR_INVALID_REQUEST;
    }
    if (!forced && last && last->has_set && last->set_offset >= 0 &&
        !kq_voters_overlap(&last->set, s)) {
        kq_errf(errbuf, errlen,
                "the voter set at offset %lld changes more than one voter from the one at %lld",
                (long long)offset, (long long)last->set_offset);
        return KQ_ERR_INVALID_REQUEST;
    }
    n = entry_for(h, offset, &fresh, &rc, errbuf, errlen);
    if (!n)
        return rc;
    n->has_set = true;
    n->set_offset = offset;
    n->set = *s;
    h->n += fresh;
    return 0;
}

int kq_voter_history_add_voters(kq_voter_history *h, int64_t offset, const kq_voter_set *s,
                                char *errbuf, size_t errlen)
{
    return add_voters(h, offset, s, false, errbuf, errlen);
}

int kq_voter_history_force_voters(kq_voter_history *h, int64_t offset, const kq_voter_set *s,
                                  char *errbuf, size_t errlen)
{
    return add_voters(h, offset, s, true, errbuf, errlen);
}

int kq_voter_history_add_kraft_version(kq_voter_history *h, int64_t offset, int16_t version,
                                       char *errbuf, size_t errlen)
{
    int16_t cur = kq_voter_history_kraft_version(h);
    kq_voter_history_entry *n;
    bool fresh;
    int rc = 0;

    if (version < 0 || version > 1 || version < cur) {
        kq_errf(errbuf, errlen, "kraft.version %d at offset %lld: %s", version, (long long)offset,
                version < cur ? "kraft.version never goes down" : "known versions are 0 and 1");
        return KQ_ERR_INVALID_REQUEST;
    }
    n = entry_for(h, offset, &fresh, &rc, errbuf, errlen);
    if (!n)
        return rc;
    n->kraft_version = version;
    h->n += fresh;
    return 0;
}

bool kq_voter_history_truncate_new(kq_voter_history *h, int64_t end)
{
    size_t n = h->n;

    while (h->n && h->e[h->n - 1].offset >= 0 && h->e[h->n - 1].offset >= end)
        h->n--;
    return h->n != n;
}

void kq_voter_history_truncate_old(kq_voter_history *h, int64_t start)
{
    size_t keep = 0; /* index of the last entry below start */

    while (keep + 1 < h->n && h->e[keep + 1].offset < start)
        keep++;
    if (keep && h->e[keep].offset < start) {
        memmove(h->e, &h->e[keep], (h->n - keep) * sizeof h->e[0]);
        h->n -= keep;
    }
}

/* The last entry at or before offset, or NULL. */
static const kq_voter_history_entry *entry_at(const kq_voter_history *h, int64_t offset)
{
    for (size_t i = h->n; i > 0; i--)
        if (h->e[i - 1].offset <= offset)
            return &h->e[i - 1];
    return NULL;
}

const kq_voter_set *kq_voter_history_set_at(const kq_voter_history *h, int64_t offset)
{
    const kq_voter_history_entry *e = entry_at(h, offset);

    return e && e->has_set ? &e->set : &h->static_set;
}

const kq_voter_set *kq_voter_history_last(const kq_voter_history *h, int64_t *offset)
{
    const kq_voter_history_entry *e = h->n ? &h->e[h->n - 1] : NULL;

    if (offset)
        *offset = e && e->has_set ? e->set_offset : -2;
    return e && e->has_set ? &e->set : &h->static_set;
}

int16_t kq_voter_history_kraft_version_at(const kq_voter_history *h, int64_t offset)
{
    const kq_voter_history_entry *e = entry_at(h, offset);

    return e ? e->kraft_version : 0;
}

int16_t kq_voter_history_kraft_version(const kq_voter_history *h)
{
    return h->n ? h->e[h->n - 1].kraft_version : 0;
}
