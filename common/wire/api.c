/*
 * The API table (include/kq/api.h) with the oneof case numbers the generated code gives each
 * body. Lookups are linear: 28 entries.
 */
#include "kq/api.h"

#include "kq_rpc.pb-c.h"

const kq_api_info kq_apis[] = {
#define KQ_API_INFO_(id, key, name, body, kind)                                                    \
    {key, name, #body, KQ__REQUEST__BODY_##id, KQ_API_KIND_##kind},
    KQ_API_TABLE(KQ_API_INFO_)
#undef KQ_API_INFO_
};
const size_t kq_n_apis = sizeof kq_apis / sizeof kq_apis[0];

/* The request and response oneofs number their bodies alike (checked at build time). */
#define KQ_API_SAME_CASE_(id, key, name, body, kind)                                               \
    _Static_assert((int)KQ__REQUEST__BODY_##id == (int)KQ__RESPONSE__BODY_##id,                    \
                   #body " has different case numbers in Request and Response");
KQ_API_TABLE(KQ_API_SAME_CASE_)
#undef KQ_API_SAME_CASE_

const kq_api_info *kq_api_find(uint32_t key)
{
    for (size_t i = 0; i < kq_n_apis; i++)
        if (kq_apis[i].key == key)
            return &kq_apis[i];
    return NULL;
}

const kq_api_info *kq_api_by_body(int body_case)
{
    for (size_t i = 0; i < kq_n_apis; i++)
        if (kq_apis[i].body_case == body_case)
            return &kq_apis[i];
    return NULL;
}
