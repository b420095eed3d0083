/*
 * kq_daemon: process scaffolding shared by the daemons (kq-controller, kq-broker-agent):
 * command line, shutdown signals, and the teardown watchdog.
 *
 * Ownership: strings passed in (usage text, module name) must stay valid for the life of the
 * process (string literals); *config points into argv. The signal thread keeps stop and q.
 */
#ifndef KQ_DAEMON_H
#define KQ_DAEMON_H

#include <signal.h>

#include "kq/loopq.h"

/* Exit code of a daemon for a usage or configuration error, or damaged storage found before
 * it served: a restart cannot fix either (the systemd units do not restart on it). */
#define KQ_DAEMON_EXIT_CONFIG 2
/* Exit code when a write failed because the data directory's file system is full: free space,
 * then start the node again (the systemd units do not restart on it either). */
#define KQ_DAEMON_EXIT_NO_SPACE 3

/* Ends the process with KQ_DAEMON_EXIT_NO_SPACE and a message naming dir and its config key
 * when dir's file system is full (kq_store_dir_full); returns otherwise. For a daemon's fatal
 * error path after a failed write. */
void kq_daemon_exit_if_no_space(const char *daemon, const char *dir, const char *dir_key);

/* Parses "--config FILE" / "-c FILE" and "--help" / "-h". Returns 0 with *config set when the
 * daemon should run; otherwise returns 1 and sets *exit_code: 0 after --help (usage printed
 * to stdout), KQ_DAEMON_EXIT_CONFIG for anything else (usage printed to stderr). */
int kq_daemon_args(int argc, char **argv, const char *usage, const char **config, int *exit_code);

/* Blocks SIGTERM, SIGINT and SIGHUP in the calling thread (call before any thread exists, so
 * every thread inherits the mask) and ignores SIGPIPE. */
void kq_daemon_block_signals(void);

/* Starts the thread that sigwait()s for SIGTERM/SIGINT/SIGHUP; on SIGTERM or SIGINT it sets
 * *stop = 1 and pushes
 * an event of type `event` (ptr NULL) to q. One per process. 0 or KQ_ERR_INTERNAL. */
int kq_daemon_signal_thread(volatile sig_atomic_t *stop, kq_loopq *q, int event);

/* What SIGHUP does: the signal thread calls fn(arg) (on its own thread, so fn must be
 * thread-safe; it re-reads the TLS files). Without one, SIGHUP is logged and ignored. */
typedef void (*kq_daemon_reload_fn)(void *arg);
void kq_daemon_on_reload(kq_daemon_reload_fn fn, void *arg);

/* nng 1.5.2 can hang closing a socket whose peer vanished mid-message (upstream #1636, fixed
 * after 1.5.2). Call once everything durable is committed, before network teardown: if the
 * process is still alive KQ_DAEMON_TEARDOWN_MS later, it logs a warning under `module` and
 * calls _exit(exit_code). */
#define KQ_DAEMON_TEARDOWN_MS 3000
void kq_daemon_teardown_watchdog(const char *module, int exit_code);

#endif
