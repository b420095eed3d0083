/* Property test: random registrations, heartbeats, lease expiries, topic creations,
 * AlterPartitions and elections applied to an image; after every step the invariants of
 * kraft-semantics.md 3.5/3.6 must hold: ISR and ELR within the replicas, ELR disjoint from the
 * ISR, leader in the ISR or -1 and never fenced, partition epochs never decrease, and no
 * AlterPartition ever adds a fenced broker to an ISR. Every record must apply. */
#include "fixture.h"

#define SEEDS 300
#define STEPS 250
#define MAXP 64

/* Coverage counters: the random walk must really exercise the paths it checks. */
static long n_alter_ok, n_fences, n_unfences, n_changes, n_topics_made;

static void count(const kq_reclist *l)
{
    for (size_t i = 0; i < l->n; i++) {
        if (l->v[i].type == KQ_REC_PARTITION_CHANGE)
            n_changes++;
        if (l->v[i].type == KQ_REC_BROKER_REGISTRATION_CHANGE &&
            l->v[i].broker_change.fenced == KQ_FENCE_FENCE)
            n_fences++;
        if (l->v[i].type == KQ_REC_BROKER_REGISTRATION_CHANGE &&
            l->v[i].broker_change.fenced == KQ_FENCE_UNFENCE)
            n_unfences++;
    }
}

typedef struct world {
    fx *f;
    kq_prng rng;
    int64_t now;
    int gen[8];
    int32_t epochs[MAXP]; /* partition epoch per (topic index * 8 + partition) */
    char names[8][8];
    int n_topics;
} world;

static void check(world *w, const char *what)
{
    for (int ti = 0; ti < w->n_topics; ti++) {
        const kq_topic *t = kq_image_topic_by_name(w->f->img, w->names[ti]);

        assert_non_null(t);
        for (int32_t pid = 0; pid < t->n_partitions; pid++) {
            const kq_partition *p = &t->partitions[pid];
            const int32_t *rep = kq_partition_replicas(p), *isr = kq_partition_isr(p),
                          *elr = kq_partition_elr(p);
            int slot = ti * 8 + pid;

            for (int i = 0; i < p->n_isr; i++)
                if (!kq_ids_contain(rep, p->n_replicas, isr[i]))
                    fail_msg("%s: ISR member %d not a replica", what, isr[i]);
            for (int i = 0; i < p->n_elr; i++) {
                if (!kq_ids_contain(rep, p->n_replicas, elr[i]))
                    fail_msg("%s: ELR member %d not a replica", what, elr[i]);
                if (kq_ids_contain(isr, p->n_isr, elr[i]))
                    fail_msg("%s: %d in both ISR and ELR", what, elr[i]);
            }
            if (p->leader != KQ_NO_LEADER) {
                const kq_broker *b = kq_image_broker(w->f->img, p->leader);

                if (!kq_ids_contain(isr, p->n_isr, p->leader))
                    fail_msg("%s: leader %d not in ISR of %s-%d", what, p->leader, t->name, pid);
                if (!b || b->fenced)
                    fail_msg("%s: leader %d of %s-%d is fenced", what, p->leader, t->name, pid);
            }
            if (p->partition_epoch < w->epochs[slot])
                fail_msg("%s: partition epoch went back on %s-%d", what, t->name, pid);
            w->epochs[slot] = p->partition_epoch;
        }
    }
}

static uint64_t rnd(world *w, uint64_t n)
{
    return kq_prng_below(&w->rng, n);
}

static void step_register(world *w)
{
    int32_t id = (int32_t)rnd(w, 6) + 1;
    kq_rec_endpoint ep = {.name = "PLAINTEXT", .host = "h", .port = 1};
    kq_broker_registration req = {.broker_id = id,
                                  .cluster_id = "cluster-A",
                                  .endpoints = &ep,
                                  .n_endpoints = 1,
                                  .rack = rnd(w, 2) ? "r1" : "r2"};
    kq_registration_result res;

    if (rnd(w, 2))
        w->gen[id]++;
    fx_incarnation(id, w->gen[id], req.incarnation_id);
    kq_cc_register(w->f->cc, w->f->img, &req, w->f->next, w->now, &w->f->out, &res);
    count(&w->f->out);
    fx_apply(w->f);
}

static void step_heartbeat(world *w)
{
    int32_t id = (int32_t)rnd(w, 6) + 1;
    const kq_broker *b = kq_image_broker(w->f->img, id);
    kq_heartbeat req = {.broker_id = id,
                        .broker_epoch = b ? b->epoch : 0,
                        .current_metadata_offset = w->f->next - (int64_t)rnd(w, 3),
                        .want_fence = rnd(w, 10) == 0,
                        .want_shutdown = rnd(w, 12) == 0};
    kq_heartbeat_result res;

    kq_cc_heartbeat(w->f->cc, w->f->img, &req, w->f->next, w->now, &w->f->out, &res);
    count(&w->f->out);
    fx_apply(w->f);
}

static void step_expire(world *w)
{
    int32_t id;
    int64_t next;

    w->now += (int64_t)rnd(w, 6000);
    assert_int_equal(kq_cc_fence_stale(w->f->cc, w->f->img, w->now, &w->f->out, &id, &next), 0);
    count(&w->f->out);
    fx_apply(w->f);
}

static void step_create(world *w)
{
    kq_create_topic_result res;
    kq_create_topic t = {.num_partitions = (int32_t)rnd(w, 8) + 1,
                         .replication_factor = (int32_t)rnd(w, 3) + 1};
    kq_config_kv cfg = {"min.insync.replicas", rnd(w, 2) ? "2" : "1"};

    if (w->n_topics == 8)
        return;
    snprintf(w->names[w->n_topics], sizeof w->names[0], "t%d", w->n_topics);
    t.name = w->names[w->n_topics];
    t.configs = &cfg;
    t.n_configs = 1;
    assert_int_equal(
        kq_rc_create_topics(&w->f->s, w->f->img, &t, 1, NULL, &w->rng, &w->f->out, &res), 0);
    if (res.error == 0) {
        w->n_topics++;
        n_topics_made++;
    }
    count(&w->f->out);
    fx_apply(w->f);
}

static void step_alter(world *w)
{
    const kq_topic *t;
    const kq_partition *p;
    kq_ap_isr_member m[8];
    int n = 0;
    int32_t pid;

    if (!w->n_topics)
        return;
    t = kq_image_topic_by_name(w->f->img, w->names[rnd(w, (uint64_t)w->n_topics)]);
    pid = (int32_t)rnd(w, (uint64_t)t->n_partitions);
    p = &t->partitions[pid];
    /* a random subset of the replicas, the leader usually included */
    for (int i = 0; i < p->n_replicas; i++) {
        int32_t id = kq_partition_replicas(p)[i];

        if (id == p->leader ? rnd(w, 20) != 0 : rnd(w, 2) == 0)
            m[n++] = (kq_ap_isr_member){id, -1};
    }
    kq_ap_partition ap = {.partition_index = pid,
                          .leader_epoch = p->leader_epoch - (int32_t)(rnd(w, 8) == 0),
                          .partition_epoch = p->partition_epoch - (int32_t)(rnd(w, 8) == 0),
                          .new_isr = m,
                          .n_new_isr = n};
    int32_t sender = p->leader >= 0 && rnd(w, 10) ? p->leader : (int32_t)rnd(w, 6) + 1;
    const kq_broker *b = kq_image_broker(w->f->img, sender);
    kq_ap_topic at = {.partitions = &ap, .n_partitions = 1};
    kq_alter_partition req = {.version = 3,
                              .broker_id = sender,
                              .broker_epoch = b ? b->epoch : 0,
                              .topics = &at,
                              .n_topics = 1};
    kq_ap_ctx ctx = {.s = &w->f->s, .active = true};
    kq_alter_partition_result res;
    int32_t old_isr[KQ_REC_MAX_REPLICAS];
    int n_old = p->n_isr;
    uint8_t tid[16];

    memcpy(old_isr, kq_partition_isr(p), (size_t)n_old * sizeof(int32_t));
    memcpy(tid, t->id, 16);
    memcpy(at.topic_id, t->id, 16);
    kq_rc_alter_partition(&ctx, w->f->img, &req, &w->f->out, &res);
    bool ok = res.error == 0 && res.n_results == 1 && res.results[0].error == 0;
    n_alter_ok += ok;
    kq_alter_partition_result_free(&res);
    if (!ok)
        assert_int_equal(w->f->out.n, 0);
    count(&w->f->out);
    fx_apply(w->f);
    /* no fenced broker was added to the ISR */
    p = kq_image_partition(w->f->img, tid, pid);
    for (int i = 0; i < p->n_isr; i++) {
        int32_t id = kq_partition_isr(p)[i];
        const kq_broker *mb = kq_image_broker(w->f->img, id);

        if (!kq_ids_contain(old_isr, n_old, id) && (!mb || mb->fenced))
            fail_msg("AlterPartition added fenced broker %d to the ISR", id);
    }
}

static void step_elect(world *w)
{
    bool more;
    kq_elect_result *r = NULL;
    int32_t n;

    switch (rnd(w, 3)) {
    case 0:
        assert_int_equal(kq_rc_preferred_rebalance(&w->f->s, w->f->img, 5, &w->f->out, &more), 0);
        break;
    case 1:
        assert_int_equal(kq_rc_elect_leaderless(&w->f->s, w->f->img, 5, &w->f->out, &more), 0);
        break;
    default:
        assert_int_equal(
            kq_rc_elect_leaders(&w->f->s, w->f->img, (int)rnd(w, 2), NULL, 0, &w->f->out, &r, &n),
            0);
        free(r);
        break;
    }
    count(&w->f->out);
    fx_apply(w->f);
}

static void run_seed(uint64_t seed, bool elr)
{
    world w = {0};

    w.f = fx_new();
    w.f->s.elr_enabled = elr;
    kq_prng_seed(&w.rng, seed);
    for (int i = 0; i < STEPS; i++) {
        static const char *names[] = {"register", "heartbeat", "expire",
                                      "create",   "alter",     "elect"};
        int k = (int)rnd(&w, 10);
        int what = k < 1 ? 0 : k < 4 ? 1 : k < 5 ? 2 : k < 6 ? 3 : k < 9 ? 4 : 5;
        char label[64];

        w.now += (int64_t)rnd(&w, 1500);
        kq_reclist_free(&w.f->out);
        switch (what) {
        case 0:
            step_register(&w);
            break;
        case 1:
            step_heartbeat(&w);
            break;
        case 2:
            step_expire(&w);
            break;
        case 3:
            step_create(&w);
            break;
        case 4:
            step_alter(&w);
            break;
        default:
            step_elect(&w);
            break;
        }
        snprintf(label, sizeof label, "seed %llu step %d (%s)", (unsigned long long)seed, i,
                 names[what]);
        check(&w, label);
    }
    fx_free(w.f);
}

static void test_random_sequences_elr(void **st)
{
    for (uint64_t s = 1; s <= SEEDS; s++)
        run_seed(s, true);
}

static void test_random_sequences_no_elr(void **st)
{
    for (uint64_t s = 1; s <= SEEDS; s++)
        run_seed(s * 7919, false);
}

static void test_walk_covered_the_paths(void **st)
{
    print_message("alter ok %ld, fences %ld, unfences %ld, partition changes %ld, topics %ld\n",
                  n_alter_ok, n_fences, n_unfences, n_changes, n_topics_made);
    assert_true(n_alter_ok > 100);
    assert_true(n_fences > 100);
    assert_true(n_unfences > 100);
    assert_true(n_changes > 1000);
    assert_true(n_topics_made > 100);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_random_sequences_elr),
        cmocka_unit_test(test_random_sequences_no_elr),
        cmocka_unit_test(test_walk_covered_the_paths),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
