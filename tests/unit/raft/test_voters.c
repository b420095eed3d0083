/* The voter set and its history (include/kq/voters.h): key matching, the three changes with
 * their refusals, the single-server overlap rule, and the offset → set history through
 * appends, truncation and compaction. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "kq/error.h"
#include "kq/voters.h"

/* A voter with id `id` and directory id byte `dir` (0: unknown), listening on port 9000+id. */
static kq_voter voter(int32_t id, uint8_t dir)
{
    kq_voter v;

    memset(&v, 0, sizeof v);
    v.key.id = id;
    if (dir)
        memset(v.key.dir, dir, sizeof v.key.dir);
    snprintf(v.host, sizeof v.host, "c%d.example", id);
    v.port = 9000 + id;
    v.kraft_min = 0;
    v.kraft_max = 1;
    return v;
}

static kq_voter_key key(int32_t id, uint8_t dir)
{
    return voter(id, dir).key;
}

/* A set of n voters: ids[i] with directory byte dirs[i]. */
static kq_voter_set set_of(int n, const int32_t *ids, const uint8_t *dirs)
{
    kq_voter_set s;

    memset(&s, 0, sizeof s);
    for (int i = 0; i < n; i++)
        s.v[s.n++] = voter(ids[i], dirs ? dirs[i] : 0);
    return s;
}

#define SET(...) set_of(sizeof((int32_t[]){__VA_ARGS__}) / 4, (int32_t[]){__VA_ARGS__}, NULL)

static void test_key_matching(void **state)
{
    static const struct {
        int32_t eid;
        uint8_t edir;
        int32_t kid;
        uint8_t kdir;
        bool matches, equal;
    } t[] = {
        {1, 0, 1, 0, true, true},   /* static voter, static replica */
        {1, 0, 1, 7, true, false},  /* a static entry stands for any directory */
        {1, 7, 1, 7, true, true},   /* the same directory */
        {1, 7, 1, 8, false, false}, /* a re-formatted node is another voter */
        {1, 7, 1, 0, false, false}, /* a replica that names no directory is not this voter */
        {1, 7, 2, 7, false, false}, /* another id */
    };

    (void)state;
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        kq_voter_key e = key(t[i].eid, t[i].edir), k = key(t[i].kid, t[i].kdir);

        assert_int_equal(kq_voter_key_matches(&e, &k), t[i].matches);
        assert_int_equal(kq_voter_key_equal(&e, &k), t[i].equal);
    }
    kq_voter_set s = set_of(3, (int32_t[]){1, 2, 3}, (uint8_t[]){1, 2, 0});
    kq_voter_key k2 = key(2, 2), k2x = key(2, 9), k3 = key(3, 5);
    assert_int_equal(kq_voters_find(&s, &k2), 1);
    assert_int_equal(kq_voters_find(&s, &k2x), -1);
    assert_int_equal(kq_voters_find(&s, &k3), 2);
    assert_int_equal(kq_voters_find_id(&s, 3), 2);
    assert_int_equal(kq_voters_find_id(&s, 4), -1);
}

static void test_check(void **state)
{
    char err[256];
    kq_voter_set s = SET(1, 2, 3);

    (void)state;
    assert_int_equal(kq_voters_check(&s, err, sizeof err), 0);
    s.n = 0;
    assert_int_equal(kq_voters_check(&s, err, sizeof err), KQ_ERR_INVALID_REQUEST);
    assert_non_null(strstr(err, "1 to 16 voters"));
    s = SET(1, 2, 1);
    assert_int_equal(kq_voters_check(&s, err, sizeof err), KQ_ERR_INVALID_REQUEST);
    assert_string_equal(err, "voter id 1 appears twice");
    s = SET(1, -4);
    assert_int_equal(kq_voters_check(&s, err, sizeof err), KQ_ERR_INVALID_REQUEST);
    s = SET(1, 2);
    s.v[1].port = 70000;
    assert_int_equal(kq_voters_check(&s, err, sizeof err), KQ_ERR_INVALID_REQUEST);
    assert_non_null(strstr(err, "port 70000"));
    s = SET(1, 2);
    s.v[0].kraft_min = 1;
    s.v[0].kraft_max = 0;
    assert_int_equal(kq_voters_check(&s, err, sizeof err), KQ_ERR_INVALID_REQUEST);
    s = SET(1);
    memset(s.v[0].host, 'h', sizeof s.v[0].host); /* not terminated */
    assert_int_equal(kq_voters_check(&s, err, sizeof err), KQ_ERR_INVALID_REQUEST);
    assert_non_null(strstr(err, "host name longer"));
}

static void test_add(void **state)
{
    char err[256];
    kq_voter_set s = set_of(2, (int32_t[]){1, 2}, (uint8_t[]){1, 2});
    kq_voter v = voter(3, 3);

    (void)state;
    assert_int_equal(kq_voters_add(&s, &v, err, sizeof err), 0);
    assert_int_equal(s.n, 3);
    assert_int_equal(s.v[2].key.id, 3);
    assert_string_equal(s.v[2].host, "c3.example");

    /* the same id with another directory: remove first */
    v = voter(2, 9);
    assert_int_equal(kq_voters_add(&s, &v, err, sizeof err), KQ_ERR_DUPLICATE_VOTER);
    assert_non_null(strstr(err, "node 2 is a voter already"));
    assert_int_equal(s.n, 3);
    /* no directory id, no endpoint */
    v = voter(4, 0);
    assert_int_equal(kq_voters_add(&s, &v, err, sizeof err), KQ_ERR_INVALID_REQUEST);
    assert_string_equal(err, "voter 4 has no directory id");
    v = voter(4, 4);
    v.host[0] = '\0';
    assert_int_equal(kq_voters_add(&s, &v, err, sizeof err), KQ_ERR_INVALID_REQUEST);
    assert_string_equal(err, "voter 4 has no controller listener endpoint");
    v = voter(4, 4);
    v.port = 0;
    assert_int_equal(kq_voters_add(&s, &v, err, sizeof err), KQ_ERR_INVALID_REQUEST);
    assert_int_equal(s.n, 3);
    /* full */
    for (int32_t id = 4; s.n < KQ_RAFT_MAX_VOTERS; id++) {
        v = voter(id, (uint8_t)id);
        assert_int_equal(kq_voters_add(&s, &v, err, sizeof err), 0);
    }
    v = voter(100, 100);
    assert_int_equal(kq_voters_add(&s, &v, err, sizeof err), KQ_ERR_INVALID_REQUEST);
    assert_non_null(strstr(err, "the most it can have"));
}

static void test_remove(void **state)
{
    char err[256];
    kq_voter_set s = set_of(3, (int32_t[]){1, 2, 3}, (uint8_t[]){1, 2, 3});
    kq_voter_key k;

    (void)state;
    k = key(2, 9); /* the id, another directory */
    assert_int_equal(kq_voters_remove(&s, &k, err, sizeof err), KQ_ERR_VOTER_NOT_FOUND);
    assert_non_null(strstr(err, "no voter with id 2 and directory id"));
    k = key(2, 0); /* no directory: removal needs the exact key */
    assert_int_equal(kq_voters_remove(&s, &k, err, sizeof err), KQ_ERR_VOTER_NOT_FOUND);
    assert_int_equal(s.n, 3);
    k = key(2, 2);
    assert_int_equal(kq_voters_remove(&s, &k, err, sizeof err), 0);
    assert_int_equal(s.n, 2);
    assert_int_equal(s.v[0].key.id, 1);
    assert_int_equal(s.v[1].key.id, 3);
    assert_string_equal(s.v[1].host, "c3.example");
    k = key(1, 1);
    assert_int_equal(kq_voters_remove(&s, &k, err, sizeof err), 0);
    k = key(3, 3);
    assert_int_equal(kq_voters_remove(&s, &k, err, sizeof err), KQ_ERR_VOTER_NOT_FOUND);
    assert_non_null(strstr(err, "the last voter"));
    assert_int_equal(s.n, 1);
}

static void test_update(void **state)
{
    char err[256];
    kq_voter_set s = set_of(2, (int32_t[]){1, 2}, (uint8_t[]){0, 2});
    kq_voter v = voter(2, 2);

    (void)state;
    strcpy(v.host, "moved.example");
    v.port = 19093;
    assert_int_equal(kq_voters_update(&s, &v, err, sizeof err), 0);
    assert_string_equal(s.v[1].host, "moved.example");
    assert_int_equal(s.v[1].port, 19093);
    /* a static entry learns its directory id */
    v = voter(1, 1);
    assert_int_equal(kq_voters_update(&s, &v, err, sizeof err), 0);
    assert_int_equal(s.v[0].key.dir[0], 1);
    v = voter(2, 9);
    assert_int_equal(kq_voters_update(&s, &v, err, sizeof err), KQ_ERR_VOTER_NOT_FOUND);
    v = voter(3, 3);
    assert_int_equal(kq_voters_update(&s, &v, err, sizeof err), KQ_ERR_VOTER_NOT_FOUND);
    v = voter(2, 2);
    v.host[0] = '\0';
    assert_int_equal(kq_voters_update(&s, &v, err, sizeof err), KQ_ERR_INVALID_REQUEST);
    assert_string_equal(s.v[1].host, "moved.example");
}

static void test_overlap(void **state)
{
    static const struct {
        int na;
        int32_t a[5];
        int nb;
        int32_t b[5];
        bool overlap;
    } t[] = {
        {3, {1, 2, 3}, 3, {1, 2, 3}, true},        /* unchanged */
        {3, {1, 2, 3}, 4, {1, 2, 3, 4}, true},     /* one added */
        {3, {1, 2, 3}, 2, {1, 3}, true},           /* one removed */
        {3, {1, 2, 3}, 3, {1, 2, 4}, true},        /* one of each (a replacement) */
        {3, {1, 2, 3}, 5, {1, 2, 3, 4, 5}, false}, /* two added */
        {3, {1, 2, 3}, 1, {1}, false},             /* two removed */
        {3, {1, 2, 3}, 3, {1, 4, 5}, false},       /* two replaced */
        {1, {1}, 2, {1, 2}, true},                 /* standalone grows */
        {1, {1}, 1, {2}, true},                    /* one removed and one added */
    };

    (void)state;
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        kq_voter_set a = set_of(t[i].na, t[i].a, NULL), b = set_of(t[i].nb, t[i].b, NULL);

        assert_int_equal(kq_voters_overlap(&a, &b), t[i].overlap);
        assert_int_equal(kq_voters_overlap(&b, &a), t[i].overlap);
    }
    /* the directory is part of the key: replacing node 2's directory is a replacement */
    kq_voter_set a = set_of(3, (int32_t[]){1, 2, 3}, (uint8_t[]){1, 2, 3});
    kq_voter_set b = set_of(3, (int32_t[]){1, 2, 3}, (uint8_t[]){1, 9, 3});
    kq_voter_set c = set_of(3, (int32_t[]){1, 2, 3}, (uint8_t[]){1, 9, 8});
    assert_true(kq_voters_overlap(&a, &b));
    assert_false(kq_voters_overlap(&a, &c));
}

static void test_history(void **state)
{
    char err[256];
    kq_voter_set stat = SET(1, 2, 3), s4 = SET(1, 2, 3, 4), s3 = SET(2, 3, 4);
    kq_voter_set far = SET(1, 5, 6);
    kq_voter_history h;
    int64_t at = 0;

    (void)state;
    kq_voter_history_init(&h, &stat);
    assert_ptr_equal(kq_voter_history_last(&h, &at), &h.static_set);
    assert_int_equal(at, -2);
    assert_int_equal(kq_voter_history_kraft_version(&h), 0);

    /* the upgrade: kraft.version 1, then the first VotersRecord, in one batch */
    assert_int_equal(kq_voter_history_add_kraft_version(&h, 10, 1, err, sizeof err), 0);
    assert_int_equal(kq_voter_history_last(&h, &at)->n, 3);
    assert_int_equal(at, -2); /* still the static set */
    assert_int_equal(kq_voter_history_add_voters(&h, 11, &stat, err, sizeof err), 0);
    assert_int_equal(kq_voter_history_add_voters(&h, 20, &s4, err, sizeof err), 0);
    assert_int_equal(kq_voter_history_add_voters(&h, 30, &s3, err, sizeof err), 0);
    assert_int_equal(kq_voter_history_last(&h, &at)->v[0].key.id, 2);
    assert_int_equal(at, 30);

    /* two changes at once and records out of order are refused, the history unchanged */
    assert_int_equal(kq_voter_history_add_voters(&h, 40, &far, err, sizeof err),
                     KQ_ERR_INVALID_REQUEST);
    assert_non_null(strstr(err, "changes more than one voter from the one at 30"));
    assert_int_equal(kq_voter_history_add_voters(&h, 25, &s4, err, sizeof err),
                     KQ_ERR_INVALID_REQUEST);
    assert_non_null(strstr(err, "does not follow the one at 30"));
    assert_int_equal(kq_voter_history_add_voters(&h, 30, &s4, err, sizeof err),
                     KQ_ERR_INVALID_REQUEST);
    assert_string_equal(err, "two voter sets at offset 30");
    assert_int_equal(kq_voter_history_add_kraft_version(&h, 41, 0, err, sizeof err),
                     KQ_ERR_INVALID_REQUEST);
    assert_non_null(strstr(err, "never goes down"));
    assert_int_equal(kq_voter_history_add_kraft_version(&h, 41, 2, err, sizeof err),
                     KQ_ERR_INVALID_REQUEST);
    assert_int_equal(h.n, 4);

    /* the set in force at each offset */
    static const struct {
        int64_t offset;
        int n, first;
        int16_t kraft;
    } t[] = {{0, 3, 1, 0},  {9, 3, 1, 0},  {10, 3, 1, 1}, {11, 3, 1, 1},
             {19, 3, 1, 1}, {20, 4, 1, 1}, {29, 4, 1, 1}, {1000, 3, 2, 1}};
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        const kq_voter_set *s = kq_voter_history_set_at(&h, t[i].offset);

        assert_int_equal(s->n, t[i].n);
        assert_int_equal(s->v[0].key.id, t[i].first);
        assert_int_equal(kq_voter_history_kraft_version_at(&h, t[i].offset), t[i].kraft);
    }

    /* a truncated log takes its sets with it: the removal at 30 is undone */
    assert_false(kq_voter_history_truncate_new(&h, 31));
    assert_true(kq_voter_history_truncate_new(&h, 25));
    assert_int_equal(kq_voter_history_last(&h, &at)->n, 4);
    assert_int_equal(at, 20);
    assert_true(kq_voter_history_truncate_new(&h, 10));
    assert_ptr_equal(kq_voter_history_last(&h, &at), &h.static_set);
    assert_int_equal(kq_voter_history_kraft_version(&h), 0);
    kq_voter_history_free(&h);
}

static void test_history_bootstrap_and_compaction(void **state)
{
    char err[256];
    kq_voter_set one = SET(1), two = SET(1, 2), three = SET(1, 2, 3);
    kq_voter_history h;
    int64_t at = 0;

    (void)state;
    kq_voter_history_init(&h, NULL); /* no controller.quorum.voters */
    assert_int_equal(kq_voter_history_last(&h, NULL)->n, 0);
    /* kq storage format --standalone: both bootstrap records at -1, one entry */
    assert_int_equal(kq_voter_history_add_kraft_version(&h, -1, 1, err, sizeof err), 0);
    assert_int_equal(kq_voter_history_add_voters(&h, -1, &one, err, sizeof err), 0);
    assert_int_equal(h.n, 1);
    assert_int_equal(kq_voter_history_last(&h, &at)->n, 1);
    assert_int_equal(at, -1);
    assert_int_equal(kq_voter_history_kraft_version_at(&h, -1), 1);
    assert_int_equal(kq_voter_history_add_voters(&h, -2, &one, err, sizeof err),
                     KQ_ERR_INVALID_REQUEST);
    /* the bootstrap set may be replaced by any set (the first leader writes it into the log) */
    assert_int_equal(kq_voter_history_add_voters(&h, 0, &three, err, sizeof err), 0);
    kq_voter_history_free(&h);

    kq_voter_history_init(&h, NULL);
    assert_int_equal(kq_voter_history_add_voters(&h, -1, &one, err, sizeof err), 0);
    assert_int_equal(kq_voter_history_add_voters(&h, 1, &one, err, sizeof err), 0);
    assert_int_equal(kq_voter_history_add_voters(&h, 5, &two, err, sizeof err), 0);
    assert_int_equal(kq_voter_history_add_voters(&h, 9, &three, err, sizeof err), 0);
    /* truncation never drops the bootstrap entry */
    assert_true(kq_voter_history_truncate_new(&h, 0));
    assert_int_equal(h.n, 1);
    assert_int_equal(kq_voter_history_last(&h, &at)->n, 1);
    assert_int_equal(at, -1);
    assert_int_equal(kq_voter_history_add_voters(&h, 1, &one, err, sizeof err), 0);
    assert_int_equal(kq_voter_history_add_voters(&h, 5, &two, err, sizeof err), 0);
    assert_int_equal(kq_voter_history_add_voters(&h, 9, &three, err, sizeof err), 0);

    /* a snapshot ending at 7 keeps the entry in force at 6 and the later ones */
    kq_voter_history_truncate_old(&h, 7);
    assert_int_equal(h.n, 2);
    assert_int_equal(h.e[0].offset, 5);
    assert_int_equal(kq_voter_history_set_at(&h, 7)->n, 2);
    assert_int_equal(kq_voter_history_set_at(&h, 9)->n, 3);
    kq_voter_history_truncate_old(&h, 5); /* nothing below 5 */
    assert_int_equal(h.n, 2);
    kq_voter_history_truncate_old(&h, 100);
    assert_int_equal(h.n, 1);
    assert_int_equal(kq_voter_history_last(&h, &at)->n, 3);
    assert_int_equal(at, 9);
    kq_voter_history_free(&h);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_key_matching),
        cmocka_unit_test(test_check),
        cmocka_unit_test(test_add),
        cmocka_unit_test(test_remove),
        cmocka_unit_test(test_update),
        cmocka_unit_test(test_overlap),
        cmocka_unit_test(test_history),
        cmocka_unit_test(test_history_bootstrap_and_compaction),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
