/* The API table (include/kq/api.h) agrees with itself and with proto/kq_rpc.proto: keys and
 * bodies are unique, every body of the Request and Response oneofs is one API's (its field
 * name), and the classifications the codecs answer come from the table. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "kq/api.h"
#include "kq/ctl_codec.h"
#include "kq/data_codec.h"
#include "kq_rpc.pb-c.h"

static void test_keys_and_bodies_are_unique(void **state)
{
    (void)state;
    assert_int_equal(kq_n_apis, KQ_API_COUNT);
    for (size_t i = 0; i < kq_n_apis; i++) {
        assert_ptr_equal(kq_api_find(kq_apis[i].key), &kq_apis[i]);
        assert_ptr_equal(kq_api_by_body(kq_apis[i].body_case), &kq_apis[i]);
        for (size_t j = 0; j < i; j++)
            assert_string_not_equal(kq_apis[i].body, kq_apis[j].body);
    }
    assert_null(kq_api_find(0));
    assert_null(kq_api_find(4242));
    assert_null(kq_api_by_body(0));
}

/* Every field of a `body` oneof is the body of exactly the API the table says. */
static void check_oneof(const ProtobufCMessageDescriptor *d)
{
    size_t bodies = 0;

    for (unsigned i = 0; i < d->n_fields; i++) {
        const ProtobufCFieldDescriptor *f = &d->fields[i];
        const kq_api_info *api;

        if (!(f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF))
            continue;
        bodies++;
        api = kq_api_by_body((int)f->id);
        if (api == NULL)
            fail_msg("%s.%s (field %u) is no API's body", d->name, f->name, f->id);
        assert_string_equal(api->body, f->name);
    }
    assert_int_equal(bodies, kq_n_apis);
}

static void test_table_matches_the_proto(void **state)
{
    (void)state;
    check_oneof(&kq__request__descriptor);
    check_oneof(&kq__response__descriptor);
}

static void test_classification_reads_the_table(void **state)
{
    size_t controller = 0, data = 0;

    (void)state;
    for (size_t i = 0; i < kq_n_apis; i++) {
        bool is_ctl = kq_apis[i].kind == KQ_API_KIND_CONTROLLER;
        bool is_data = kq_apis[i].kind == KQ_API_KIND_DATA;

        assert_int_equal(kq_ctl_is_controller_api(kq_apis[i].key), is_ctl);
        assert_int_equal(kq_data_is_data_api(kq_apis[i].key), is_data);
        controller += is_ctl;
        data += is_data;
    }
    assert_int_equal(controller, 17);
    assert_int_equal(data, 4);
    assert_string_equal(kq_api_find(KQ_API_DESCRIBE_TOPICS)->name, "DescribeTopics");
    assert_int_equal(KQ_API_ALTER_PARTITION, 56); /* Kafka's key */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_keys_and_bodies_are_unique),
        cmocka_unit_test(test_table_matches_the_proto),
        cmocka_unit_test(test_classification_reads_the_table),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
