/* kq storage random-uuid | format */
#include <getopt.h>
#include <inttypes.h>
#include <string.h>

#include "kq/config.h"
#include "kq/error.h"
#include "kq/records.h"
#include "kq/store.h"
#include "kq/util.h"
#include "kq_tools.h"

#include "broker_config.h"
#include "ctl_config.h"

static const char STORAGE_USAGE[] =
    "Usage: kq storage random-uuid\n"
    "       kq storage format --config FILE --cluster-id ID [--ignore-formatted]\n"
    "                         [--standalone | --initial-controllers LIST |\n"
    "                          --no-initial-controllers]\n"
    "\n"
    "  random-uuid               print a new cluster id (22-character base64 uuid)\n"
    "  format                    check FILE as the node's daemon would (process.roles\n"
    "                            picks kq-controller or kq-broker-agent), then create and\n"
    "                            stamp its directory for the node.id given there: a\n"
    "                            controller's metadata.log.dir (default: the first entry of\n"
    "                            log.dirs), a broker's log.dirs\n"
    "    -c, --config FILE       the node's .properties file\n"
    "    -t, --cluster-id ID     the cluster id (from kq storage random-uuid)\n"
    "    -g, --ignore-formatted  succeed when the directory is already formatted\n"
    "  A controller configured with controller.quorum.bootstrap.servers instead of\n"
    "  controller.quorum.voters (dynamic voters, kraft.version 1) needs exactly one of:\n"
    "    -s, --standalone        a quorum of this one controller (add others with\n"
    "                            kq metadata-quorum add-controller)\n"
    "    -I, --initial-controllers ID@HOST:PORT:DIRECTORY_ID,...\n"
    "                            the first voters (this node among them, its directory\n"
    "                            id taken from its entry); the same list on each of them\n"
    "    -N, --no-initial-controllers\n"
    "                            a controller that will join with add-controller\n";

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
static int format_dir(kq_config *cfg, const char *path, int32_t *node_id, char *dir, size_t dirlen,
                      kq_ctl_config *ctl, bool *is_controller)
{
    char errbuf[1024] = "";
    const char *roles = kq_config_get(cfg, "process.roles");
    int rc;
    *is_controller = !(roles != NULL && strcmp(roles, "broker") == 0);
    if (roles != NULL && strcmp(roles, "broker") == 0) {
        kq_broker_config b;
        rc = kq_broker_config_load(path, &b, errbuf, sizeof errbuf);
        if (rc == 0) {
            *node_id = b.node_id;
            snprintf(dir, dirlen, "%s", b.log_dir);
        }
    } else {
        rc = kq_ctl_config_load(path, ctl, errbuf, sizeof errbuf);
        if (rc == 0) {
            *node_id = ctl->node_id;
            snprintf(dir, dirlen, "%s", ctl->log_dir);
        }
    }
    if (rc != 0)
        kq_tools_errorf("%s: %s", path, errbuf[0] ? errbuf : kq_err_message(rc));
    return rc;
}

enum { VOTERS_STATIC, VOTERS_STANDALONE, VOTERS_INITIAL, VOTERS_NONE };

/* KIP-853: the bootstrap records of a dynamic quorum (KRaftVersion 1, then the first voter set)
 * into b, and this node's directory id into dir_id; nothing for --no-initial-controllers.
 * Prints the error and returns non-zero. */
static int bootstrap_records(const kq_ctl_config *ctl, int mode, const char *initial, kq_buf *b,
                             char dir_id[KQ_UUID_STR_LEN + 1])
{
    static kq_voter_set set; /* large: not on the stack */
    kq_initial_controller ic[KQ_INITIAL_CONTROLLERS_MAX];
    char err[512];
    int n = 0;

    memset(&set, 0, sizeof set);
    dir_id[0] = '\0';
    if (mode == VOTERS_NONE || mode == VOTERS_STATIC)
        return 0;
    if (mode == VOTERS_STANDALONE) {
        kq_voter *v = &set.v[set.n++];
        if (!ctl->raft.host[0]) {
            kq_tools_errorf("--standalone needs this controller's address: set "
                            "advertised.listeners to the host:port the other controllers and "
                            "the brokers reach it at (not a wildcard address)");
            return KQ_ERR_CONFIG;
        }
        if (kq_uuid_random(dir_id) != 0 || !kq_uuid_parse(dir_id, v->key.dir)) {
            kq_tools_errorf("cannot generate a directory id");
            return KQ_ERR_IO;
        }
        v->key.id = ctl->node_id;
        snprintf(v->host, sizeof v->host, "%s", ctl->raft.host);
        v->port = ctl->raft.port;
        v->kraft_min = ctl->raft.kraft_min;
        v->kraft_max = ctl->raft.kraft_max;
    } else {
        if (kq_config_parse_initial_controllers(initial, ic, KQ_INITIAL_CONTROLLERS_MAX, &n, err,
                                                sizeof err) != 0) {
            kq_tools_errorf("%s", err);
            return KQ_ERR_CONFIG;
        }
        for (int i = 0; i < n; i++) {
            kq_voter *v = &set.v[set.n++];
            v->key.id = ic[i].addr.id;
            memcpy(v->key.dir, ic[i].dir, sizeof v->key.dir);
            snprintf(v->host, sizeof v->host, "%s", ic[i].addr.host);
            v->port = ic[i].addr.port;
            v->kraft_min = 0;
            v->kraft_max = 1;
            if (v->key.id == ctl->node_id)
                kq_uuid_format(v->key.dir, dir_id);
        }
        if (!dir_id[0]) {
            kq_tools_errorf("--initial-controllers does not list this node (node.id %" PRId32
                            "): every initial controller is formatted with the same list, "
                            "which names each of them",
                            ctl->node_id);
            return KQ_ERR_CONFIG;
        }
    }
    kq_raft_control kv = {.offset = -1, .kraft_version = 1};
    kq_raft_control vs = {.offset = -1, .kraft_version = -1, .voters = &set};
    if (kq_control_append(b, &kv, err, sizeof err) != 0 ||
        kq_control_append(b, &vs, err, sizeof err) != 0) {
        kq_tools_errorf("the initial voter set is not valid: %s", err);
        return KQ_ERR_CONFIG;
    }
    return 0;
}

static int format(int argc, char **argv)
{
    static const char cmd[] = "storage format";
    static const struct option opts[] = {
        {"config", required_argument, NULL, 'c'},
        {"cluster-id", required_argument, NULL, 't'},
        {"ignore-formatted", no_argument, NULL, 'g'},
        {"standalone", no_argument, NULL, 's'},
        {"initial-controllers", required_argument, NULL, 'I'},
        {"no-initial-controllers", no_argument, NULL, 'N'},
        {"help", no_argument, NULL, OPT_HELP},
        {NULL, 0, NULL, 0},
    };
    const char *config_path = NULL, *cluster_id = NULL, *initial = NULL;
    bool ignore_formatted = false;
    int mode = VOTERS_STATIC, n_modes = 0;
    static kq_ctl_config ctl; /* large: not on the stack */
    bool is_controller = false;
    kq_buf boot = {0};
    char dir_id[KQ_UUID_STR_LEN + 1] = "";
    kq_config *cfg = NULL;
    char errbuf[512] = "";
    char dir[4096];
    char ob[64];
    int ret = KQ_EXIT_FAILURE;

    optind = 0;
    for (;;) {
        int c = getopt_long(argc, argv, ":c:t:gsI:Nh", opts, NULL);
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
        case 's':
            mode = VOTERS_STANDALONE;
            n_modes++;
            break;
        case 'I':
            mode = VOTERS_INITIAL;
            initial = optarg;
            n_modes++;
            break;
        case 'N':
            mode = VOTERS_NONE;
            n_modes++;
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
    if (n_modes > 1)
        return kq_tools_usage_error(cmd, STORAGE_USAGE,
                                    "--standalone, --initial-controllers and "
                                    "--no-initial-controllers exclude each other");
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
    memset(&ctl, 0, sizeof ctl);
    if (format_dir(cfg, config_path, &node_id, dir, sizeof dir, &ctl, &is_controller) != 0)
        goto out;
    if (!is_controller && mode != VOTERS_STATIC) {
        ret = kq_tools_usage_error(cmd, STORAGE_USAGE,
                                   "--standalone, --initial-controllers and "
                                   "--no-initial-controllers are for controllers; %s is a "
                                   "broker's configuration",
                                   config_path);
        goto out;
    }
    if (is_controller && ctl.n_voters > 0 && mode != VOTERS_STATIC) {
        kq_tools_errorf("%s sets controller.quorum.voters (static voters, kraft.version 0): "
                        "--standalone, --initial-controllers and --no-initial-controllers are "
                        "for dynamic voters; remove it and set "
                        "controller.quorum.bootstrap.servers",
                        config_path);
        goto out;
    }
    if (is_controller && ctl.n_voters == 0 && mode == VOTERS_STATIC) {
        kq_tools_errorf("controller.quorum.voters is not set in %s (dynamic voters): give one "
                        "of --standalone, --initial-controllers or --no-initial-controllers",
                        config_path);
        goto out;
    }
    if (is_controller && bootstrap_records(&ctl, mode, initial, &boot, dir_id) != 0)
        goto out;

    kq_store_identity id;
    memset(&id, 0, sizeof id);
    errbuf[0] = '\0';
    kq_store_format_opts fo = {.directory_id = dir_id[0] ? dir_id : NULL,
                               .bootstrap = boot.len ? boot.data : NULL,
                               .bootstrap_len = boot.len,
                               .bootstrap_count = boot.len ? 2 : 0};
    rc = kq_store_format_opts_apply(dir, cluster_id, node_id, &fo, &id, errbuf, sizeof errbuf);
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
    if (mode == VOTERS_STANDALONE || mode == VOTERS_INITIAL)
        printf("Bootstrap metadata: kraft.version 1, initial voters %s.\n",
               mode == VOTERS_STANDALONE ? "this controller alone" : initial);
    ret = KQ_EXIT_OK;
out:
    kq_buf_free(&boot);
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
