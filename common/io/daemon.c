/*
 * kq_daemon: command line, shutdown signals and teardown watchdog of the daemons; see
 * include/kq/daemon.h.
 */
#include "kq/daemon.h"

#include <getopt.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

#include "kq/error.h"
#include "kq/log.h"
#include "kq/store.h"

int kq_daemon_args(int argc, char **argv, const char *usage, const char **config, int *exit_code)
{
    static const struct option opts[] = {{"config", required_argument, NULL, 'c'},
                                         {"help", no_argument, NULL, 'h'},
                                         {NULL, 0, NULL, 0}};
    int o;
    *config = NULL;
    while ((o = getopt_long(argc, argv, "c:h", opts, NULL)) != -1) {
        switch (o) {
        case 'c':
            *config = optarg;
            break;
        case 'h':
            fputs(usage, stdout);
            *exit_code = 0;
            return 1;
        default:
            fputs(usage, stderr);
            *exit_code = KQ_DAEMON_EXIT_CONFIG;
            return 1;
        }
    }
    if (*config == NULL || optind != argc) {
        fputs(usage, stderr);
        *exit_code = KQ_DAEMON_EXIT_CONFIG;
        return 1;
    }
    return 0;
}

static void shutdown_signals(sigset_t *set)
{
    sigemptyset(set);
    sigaddset(set, SIGTERM);
    sigaddset(set, SIGINT);
    sigaddset(set, SIGHUP);
}

void kq_daemon_block_signals(void)
{
    sigset_t set;
    shutdown_signals(&set);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    signal(SIGPIPE, SIG_IGN);
}

static struct {
    volatile sig_atomic_t *stop;
    kq_loopq *q;
    int event;
    pthread_mutex_t mu; /* guards reload and reload_arg */
    kq_daemon_reload_fn reload;
    void *reload_arg;
} sig_target = {.mu = PTHREAD_MUTEX_INITIALIZER};

void kq_daemon_on_reload(kq_daemon_reload_fn fn, void *arg)
{
    pthread_mutex_lock(&sig_target.mu);
    sig_target.reload = fn;
    sig_target.reload_arg = arg;
    pthread_mutex_unlock(&sig_target.mu);
}

static void *signal_thread(void *arg)
{
    sigset_t set;
    int sig = 0;
    (void)arg;
    shutdown_signals(&set);
    for (;;) {
        if (sigwait(&set, &sig) != 0)
            continue;
        if (sig == SIGHUP) {
            pthread_mutex_lock(&sig_target.mu);
            if (sig_target.reload)
                sig_target.reload(sig_target.reload_arg);
            else
                KQ_INFO("daemon", "nothing to reload (no TLS listener or connection)", "signal=%s",
                        "SIGHUP");
            pthread_mutex_unlock(&sig_target.mu);
            continue;
        }
        *sig_target.stop = 1;
        kq_loopq_push(sig_target.q, sig_target.event, NULL);
    }
    return NULL;
}

int kq_daemon_signal_thread(volatile sig_atomic_t *stop, kq_loopq *q, int event)
{
    pthread_t th;
    sig_target.stop = stop;
    sig_target.q = q;
    sig_target.event = event;
    return pthread_create(&th, NULL, signal_thread, NULL) == 0 ? 0 : KQ_ERR_INTERNAL;
}

static const char *watchdog_module;

static void *teardown_watchdog(void *arg)
{
    int code = (int)(intptr_t)arg;
    struct timespec ts = {KQ_DAEMON_TEARDOWN_MS / 1000, (KQ_DAEMON_TEARDOWN_MS % 1000) * 1000000L};
    nanosleep(&ts, NULL);
    KQ_WARN(watchdog_module, "shutdown: network teardown is stuck, exiting anyway", "after_ms=%d",
            KQ_DAEMON_TEARDOWN_MS);
    _exit(code);
    return NULL;
}

void kq_daemon_teardown_watchdog(const char *module, int exit_code)
{
    pthread_t wd;
    watchdog_module = module;
    if (pthread_create(&wd, NULL, teardown_watchdog, (void *)(intptr_t)exit_code) == 0)
        pthread_detach(wd);
}

void kq_daemon_exit_if_no_space(const char *daemon, const char *dir, const char *dir_key)
{
    if (dir == NULL || dir[0] == '\0' || !kq_store_dir_full(dir))
        return;
    fprintf(stderr,
            "%s: no space left on the file system of %s (%s); free space there, then start "
            "the node again\n",
            daemon, dir, dir_key);
    KQ_ERROR("storage", "no space left on device; stopping", "dir=%s key=%s exit_status=%d", dir,
             dir_key, KQ_DAEMON_EXIT_NO_SPACE);
    _exit(KQ_DAEMON_EXIT_NO_SPACE);
}
