/* kq_rpc: stop a server and close a client right after start/open, while the client's TCP
 * connection is still being set up, in both orders. Must not crash or hang (ASan/UBSan too).
 *
 * nng 1.5.2 leaks its own pipe and connection objects when a socket is closed while a TCP
 * connection to it is still negotiating (plain nng programs show the same). LeakSanitizer is
 * therefore told to ignore leaks allocated inside libnng in this binary only; kq_rpc's own
 * allocations (server, slots, client, call pool) are still checked, and every other kq_rpc
 * test runs with leak checking unrestricted.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "rpc_testlib.h"

const char *__lsan_default_suppressions(void);
const char *__lsan_default_suppressions(void)
{
    return "leak:libnng.so\n";
}

/* Stop and close with nothing outstanding, right after start/open. */
static void test_immediate_stop_close(void **state)
{
    char url[64], errbuf[256] = "";
    rt_echo echo;
    kq_rpc_server *srv = NULL;
    kq_rpc_client *cli = NULL;

    rt_echo_init(&echo);
    for (int i = 0; i < 20; i++) {
        rt_url(url, sizeof(url), rt_free_port());
        assert_int_equal(
            kq_rpc_server_start(url, 8, 0, rt_echo_cb, &echo, &srv, errbuf, sizeof(errbuf)), 0);
        assert_int_equal(kq_rpc_client_open(url, 0, &cli, errbuf, sizeof(errbuf)), 0);
        if (i % 2)
            kq_rpc_server_stop(srv);
        kq_rpc_client_close(cli);
        if (!(i % 2))
            kq_rpc_server_stop(srv);
    }
    assert_int_equal(echo.served, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_immediate_stop_close),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
