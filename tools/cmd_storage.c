/* kq storage random-uuid | format */
#include <getopt.h>
#include <inttypes.h>
#include <string.h>

#include "kq/config.h"
#include "kq/error.h"
#include "kq/store.h"
#include "kq/util.h"
#include "kq_tools.h"

#include "broker_config.h"
#include "ctl_config.h"

static const char STORAGE_USAGE[] =
    "Usage: kq storage random-uuid\n"
    "       kq storage format --config FILE --cluster-id ID [--ignore-formatted]\n"
    "\n"
    "  random-uuid               print a new cluster id (22-character base64 uuid)\n"
    "  format                    check FILE as the node's daemon would (process.roles\n"
    "                            picks kq-controller or kq-broker-agent), then create and\n"
    "                            stamp its directory for the node.id given there: a\n"
    "                            controller's metadata.log.dir (default: the first entry of\n"
    "                            log.dirs), a broker's log.dirs\n"
    "    -c, --config FILE       the node's .properties file\n"
    "    -t, --cluster-id ID     the cluster id (from kq storage random-uuid)\n"
    "    -g, --ignore-formatted  succeed when the directory is already formatted\n";

enum { OPT_HELP = 1000 };

static int random_uuid(int argc, char **argv)
{
    if (argc > 1) {
        if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
            fputs(STORAGE_USAGE, stdout);
            return KQ_EXIT_OK;
        }
        return kq_tools_usage_error("storage random-uuid", STORAGE_USAGE,
                                    "unexpected argument '%s'", argv[1]);
    }
    char id[KQ_UUID_STR_LEN + 1];
    int rc = kq_uuid_random(id);
    if (rc != 0) {
        kq_tools_errorf("cannot generate a uuid: %s", kq_err_message(rc));
        return KQ_EXIT_FAILURE;
    }
    printf("%s\n", id);
    return KQ_EXIT_OK;
}

/* The directory to format, found by the daemon's own validation of the whole file (one
 * validation: format refuses what kq-controller or kq-broker-agent would refuse to start on).
 * process.roles picks the daemon: controller → metadata.log.dir (default: the first entry of
 * log.dirs), broker → log.dirs. Copied into dir; prints the error and returns non-zero. */
static int format_dir(kq_config *cfg, const char *path, int32_t *node_id, char *dir, size_t dirlen)
{
    char errbuf[1024] = "";
    const char *roles = kq_config_get(cfg, "process.roles");
    int rc;
    if (roles != NULL && strcmp(roles, "broker") == 0) {
        kq_broker_config b;
        rc = kq_broker_config_load(path, &b, errbuf, sizeof errbuf);
        if (rc == 0) {
            *node_id = b.node_id;
            snprintf(dir, dirlen, "%s", b.log_dir);
        }
    } else {
        kq_ctl_config c;
        rc = kq_ctl_config_load(path, &c, errbuf, sizeof errbuf);
        if (rc == 0) {
            *node_id = c.node_id;
            snprintf(dir, dirlen, "%s", c.log_dir);
        }
    }
    if (rc != 0)
        kq_tools_errorf("%s: %s", path, errbuf[0] ? errbuf : kq_err_message(rc));
    return rc;
}

static int format(int argc, char **argv)
{
    static const char cmd[] = "storage format";
    static const struct option opts[] = {
        {"config", required_argument, NULL, 'c'},
        {"cluster-id", required_argument, NULL, 't'},
        {"ignore-formatted", no_argument, NULL, 'g'},
        {"help", no_argument, NULL, OPT_HELP},
        {NULL, 0, NULL, 0},
    };
    const char *config_path = NULL, *cluster_id = NULL;
    bool ignore_formatted = false;
    kq_config *cfg = NULL;
    char errbuf[512] = "";
    char dir[4096];
    char ob[64];
    int ret = KQ_EXIT_FAILURE;

    optind = 0;
    for (;;) {
        int c = getopt_long(argc, argv, ":c:t:gh", opts, NULL);
        if (c == -1)
            break;
        switch (c) {
        case 'c':
            config_path = optarg;
            break;
        case 't':
            cluster_id = optarg;
            break;
        case 'g':
            ignore_formatted = true;
            break;
        case 'h':
        case OPT_HELP:
            fputs(STORAGE_USAGE, stdout);
            return KQ_EXIT_OK;
        case ':':
            return kq_tools_usage_error(cmd, STORAGE_USAGE, "option '%s' needs a value",
                                        kq_tools_bad_option(argv, ob, sizeof ob));
        default:
            return kq_tools_usage_error(cmd, STORAGE_USAGE, "unknown option '%s'",
                                        kq_tools_bad_option(argv, ob, sizeof ob));
        }
    }
    if (optind < argc)
        return kq_tools_usage_error(cmd, STORAGE_USAGE, "unexpected argument '%s'", argv[optind]);
    if (config_path == NULL)
        return kq_tools_usage_error(cmd, STORAGE_USAGE, "missing --config FILE");
    if (cluster_id == NULL)
        return kq_tools_usage_error(cmd, STORAGE_USAGE, "missing --cluster-id ID");
    uint8_t raw[16];
    if (!kq_uuid_parse(cluster_id, raw))
        return kq_tools_usage_error(cmd, STORAGE_USAGE,
                                    "invalid cluster id '%s': cluster id must be a 22-character "
                                    "base64 uuid, e.g. from kq storage random-uuid",
                                    cluster_id);

    int rc = kq_config_load(config_path, &cfg, errbuf, sizeof errbuf);
    if (rc != 0) {
        if (errbuf[0])
            kq_tools_errorf("%s", errbuf);
        else
            kq_tools_errorf("cannot read config %s: %s", config_path, kq_err_message(rc));
        goto out;
    }
    int32_t node_id = -1;
    if (format_dir(cfg, config_path, &node_id, dir, sizeof dir) != 0)
        goto out;

    kq_store_identity id;
    memset(&id, 0, sizeof id);
    errbuf[0] = '\0';
    rc = kq_store_format(dir, cluster_id, node_id, &id, errbuf, sizeof errbuf);
    if (rc == KQ_ERR_ALREADY_FORMATTED) {
        if (ignore_formatted) {
            printf("All of the log directories are already formatted.\n");
            ret = KQ_EXIT_OK;
        } else {
            fprintf(stderr,
                    "Log directory %s is already formatted. Use --ignore-formatted to ignore "
                    "this directory and format the others.\n",
                    dir);
        }
        goto out;
    }
    if (rc != 0) {
        kq_tools_errorf("cannot format metadata directory %s: %s", dir,
                        errbuf[0] ? errbuf : kq_err_message(rc));
        goto out;
    }
    printf("Formatting metadata directory %s with cluster id %s, node id %" PRId32
           ", directory id %s.\n",
           dir, cluster_id, node_id, id.directory_id);
    ret = KQ_EXIT_OK;
out:
    if (cfg != NULL)
        kq_config_free(cfg);
    return ret;
}

int kq_cmd_storage(int argc, char **argv)
{
    if (argc < 2)
        return kq_tools_usage_error("storage", STORAGE_USAGE,
                                    "missing subcommand (random-uuid or format)");
    const char *sub = argv[1];
    if (strcmp(sub, "random-uuid") == 0)
        return random_uuid(argc - 1, argv + 1);
    if (strcmp(sub, "format") == 0)
        return format(argc - 1, argv + 1);
    if (strcmp(sub, "--help") == 0 || strcmp(sub, "-h") == 0 || strcmp(sub, "help") == 0) {
        fputs(STORAGE_USAGE, stdout);
        return KQ_EXIT_OK;
    }
    return kq_tools_usage_error("storage", STORAGE_USAGE, "unknown subcommand '%s'", sub);
}
