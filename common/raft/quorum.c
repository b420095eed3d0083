/*
 * The quorum arithmetic of the KRaft core: see include/kq/quorum.h.
 */
#include "kq/quorum.h"

#include "kq/raft.h" /* KQ_RAFT_MAX_VOTERS */

int kq_quorum_majority(int n_voters)
{
    return n_voters > 0 ? n_voters / 2 + 1 : 1;
}

int64_t kq_quorum_majority_end(const int64_t *ends, int n)
{
    int64_t best = -1;
    int need = kq_quorum_majority(n);

    if (n <= 0 || n > KQ_RAFT_MAX_VOTERS)
        return -1;
    /* the largest e that at least `need` voters have reached (n is small: no sort needed) */
    for (int i = 0; i < n; i++) {
        int reached = 0;

        for (int j = 0; j < n; j++)
            reached += ends[j] >= ends[i];
        if (reached >= need && ends[i] > best)
            best = ends[i];
    }
    return best;
}

int64_t kq_quorum_high_watermark(const int64_t *ends, int n, int64_t leo, int64_t epoch_start,
                                 int64_t hw)
{
    int64_t cand = kq_quorum_majority_end(ends, n);

    if (cand > leo)
        cand = leo;
    return cand > epoch_start && cand > hw ? cand : hw;
}

kq_vote_tally kq_quorum_tally(int granted, int rejected, int n_voters)
{
    int need = kq_quorum_majority(n_voters);

    if (granted >= need)
        return KQ_VOTE_WON;
    return n_voters - rejected < need ? KQ_VOTE_LOST : KQ_VOTE_OPEN;
}

bool kq_quorum_heard(int fetched, int n_voters)
{
    return fetched >= kq_quorum_majority(n_voters);
}
