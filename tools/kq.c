/*
 * kq: the command-line tool. `kq <command> [options]`; a command may also be reached through
 * its own program name (argv[0] basename, e.g. kq-metadata-quorum, a symlink to kq).
 *
 * New commands (topics, cluster, configs, ...) are one kq_cmd_* function and one row below.
 */
#include <stdio.h>
#include <string.h>

#include "data_client.h"
#include "kq_tools.h"

#ifndef KQ_VERSION
#define KQ_VERSION "unknown"
#endif

typedef struct command {
    const char *name;    /* kq <name> */
    const char *program; /* also run as this program name, or NULL */
    int (*run)(int argc, char **argv);
    const char *summary;
} command;

static const command COMMANDS[] = {
    {"storage", NULL, kq_cmd_storage, "make a cluster id, format a metadata directory"},
    {"metadata-quorum", "kq-metadata-quorum", kq_cmd_metadata_quorum,
     "describe the controller quorum (--status, --replication)"},
    {"log-dump", NULL, kq_cmd_log_dump,
     "print a metadata log, a snapshot or a broker's partition logs, decoded"},
    {"metadata-write", NULL, kq_cmd_metadata_write,
     "append opaque test records through the active controller"},
    {"topics", NULL, kq_cmd_topics, "create, list, describe, alter and delete topics"},
    {"cluster", NULL, kq_cmd_cluster, "describe the registered brokers"},
    {"leader-election", NULL, kq_cmd_leader_election, "run a PREFERRED or UNCLEAN leader election"},
    {"configs", NULL, kq_cmd_configs, "describe and alter topic and broker configs"},
    {"features", NULL, kq_cmd_features, "describe, upgrade, downgrade and disable feature levels"},
    {"acls", NULL, kq_cmd_acls, "add, remove and list ACLs (kafka-acls.sh)"},
    {"produce", NULL, kq_cmd_produce, "write records (stdin lines or --value) to a partition"},
    {"consume", NULL, kq_cmd_consume, "print the committed records of a partition"},
};
#define N_COMMANDS (sizeof COMMANDS / sizeof COMMANDS[0])

static void usage(FILE *f)
{
    fprintf(f, "Usage: kq <command> [options]   (kq <command> --help for details)\n\n"
               "Commands:\n");
    for (size_t i = 0; i < N_COMMANDS; i++)
        fprintf(f, "  %-18s %s\n", COMMANDS[i].name, COMMANDS[i].summary);
    fprintf(f, "\nExit status: 0 success, 1 failure (message on stderr), 2 usage error.\n");
}

static const command *find_command(const char *name)
{
    for (size_t i = 0; i < N_COMMANDS; i++)
        if (strcmp(COMMANDS[i].name, name) == 0)
            return &COMMANDS[i];
    return NULL;
}

static int dispatch(int argc, char **argv)
{
    const char *prog = argv[0] ? strrchr(argv[0], '/') : NULL;
    prog = prog ? prog + 1 : (argv[0] ? argv[0] : "kq");
    for (size_t i = 0; i < N_COMMANDS; i++)
        if (COMMANDS[i].program != NULL && strcmp(COMMANDS[i].program, prog) == 0)
            return COMMANDS[i].run(argc, argv);

    if (argc < 2) {
        fprintf(stderr, "kq: missing command\n");
        usage(stderr);
        return KQ_EXIT_USAGE;
    }
    const char *name = argv[1];
    if (strcmp(name, "--help") == 0 || strcmp(name, "-h") == 0) {
        usage(stdout);
        return KQ_EXIT_OK;
    }
    if (strcmp(name, "--version") == 0 || strcmp(name, "version") == 0) {
        printf("kq %s\n", KQ_VERSION);
        return KQ_EXIT_OK;
    }
    if (strcmp(name, "help") == 0) {
        if (argc < 3) {
            usage(stdout);
            return KQ_EXIT_OK;
        }
        const command *c = find_command(argv[2]);
        if (c == NULL) {
            fprintf(stderr, "kq: unknown command '%s'\n", argv[2]);
            usage(stderr);
            return KQ_EXIT_USAGE;
        }
        char help[] = "--help";
        char *args[] = {argv[2], help, NULL};
        return c->run(2, args);
    }
    const command *c = find_command(name);
    if (c == NULL) {
        fprintf(stderr, "kq: unknown command '%s'\n", name);
        usage(stderr);
        return KQ_EXIT_USAGE;
    }
    return c->run(argc - 1, argv + 1);
}

int main(int argc, char **argv)
{
    int rc = dispatch(argc, argv);
    if (fflush(stdout) != 0 || ferror(stdout)) {
        fprintf(stderr, "Error: cannot write the output\n");
        if (rc == KQ_EXIT_OK)
            rc = KQ_EXIT_FAILURE;
    }
    return rc;
}
