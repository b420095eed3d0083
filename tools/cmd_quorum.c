/* kq metadata-quorum (also kq-metadata-quorum) and kq metadata-write. */
#include <getopt.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "kq/codec.h"
#include "kq/error.h"
#include "kq/store.h"
#include "kq/util.h"
#include "kq_tools.h"

#include "ctl_config.h"

#define DEFAULT_TIMEOUT_MS KQ_TOOLS_DEFAULT_TIMEOUT_MS
#define ATTEMPT_TIMEOUT_MS 2000      /* one request: controller.quorum.request.timeout.ms */
#define VOTER_CHANGE_ATTEMPT_MS 5000 /* one AddRaftVoter / RemoveRaftVoter */
#define MAX_TIMEOUT_MS 86400000
#define MAX_HOPS 3
#define DEFAULT_WRITE_SIZE 100
#define MAX_WRITE_SIZE (1024 * 1024)
#define MAX_WRITE_TOTAL (32 * 1024 * 1024)

static const char QUORUM_USAGE[] =
    "Usage: kq metadata-quorum --bootstrap-controller HOST:PORT[,HOST:PORT...]\n"
    "                          [--timeout-ms MS] [--verbose] describe --status [--json]\n"
    "       kq metadata-quorum --bootstrap-controller HOST:PORT[,HOST:PORT...]\n"
    "                          [--timeout-ms MS] [--verbose] describe --replication\n"
    "                          [--human-readable] [--json]\n"
    "       kq metadata-quorum --bootstrap-controller LIST --command-config NEW.properties\n"
    "                          [--timeout-ms MS] add-controller\n"
    "       kq metadata-quorum --bootstrap-controller LIST [--timeout-ms MS]\n"
    "                          remove-controller --controller-id N\n"
    "                          --controller-directory-id DIRECTORY_ID\n"
    "       kq metadata-quorum unsafe-recover --config FILE [--yes]\n"
    "  (also installed as kq-metadata-quorum)\n"
    "\n"
    "  --bootstrap-controller LIST  controllers to ask, in order; leader hints are followed\n"
    "  --timeout-ms MS              give up after MS (default 60000); until then failures\n"
    "                               that may pass (no leader, timeouts, refused\n"
    "                               connections) are retried; one request waits at most\n"
    "                               2000 ms (controller.quorum.request.timeout.ms)\n"
    "  --command-config FILE        client properties: security.protocol=SSL and the ssl.*\n"
    "                               keys (docs/security.md)\n"
    "  --verbose                    say on stderr what is retried\n"
    "  describe --status            leader, epoch, high watermark, follower lag, voters,\n"
    "                               observers\n"
    "  describe --replication       one row per replica: log end offset, lag, timestamps\n"
    "  --human-readable             with --replication: timestamps as \"<n> ms ago\"\n"
    "  --json                       one JSON object instead of text\n"
    "  add-controller               make the controller of NEW.properties (its node.id, the\n"
    "                               directory id its formatted metadata.log.dir holds, its\n"
    "                               advertised listener) a voter (dynamic voters, KIP-853);\n"
    "                               it must run and fetch from the leader first: until it\n"
    "                               has caught up the leader answers REQUEST_TIMED_OUT and\n"
    "                               the request is retried until --timeout-ms\n"
    "  remove-controller            remove the voter with this id and directory id; a\n"
    "                               leader that removes itself hands leadership over\n"
    "  unsafe-recover               the last resort after losing a majority of the voters\n"
    "                               for good (docs/operations.md): on the STOPPED controller\n"
    "                               of FILE, make it the only voter, keeping its log; refused\n"
    "                               while it runs or while it and the voters that answer could\n"
    "                               form a quorum; asks for 'yes' unless --yes\n";

static const char WRITE_USAGE[] =
    "Usage: kq metadata-write --bootstrap-controller HOST:PORT[,HOST:PORT...]\n"
    "                         [--count N] [--size BYTES] [--timeout-ms MS] [--verbose]\n"
    "\n"
    "  Appends N opaque records of BYTES bytes each (default 1 x 100) to the metadata log\n"
    "  through the active controller and prints the offset of the first one once committed.\n"
    "  --timeout-ms, --command-config and --verbose as for metadata-quorum; a write whose\n"
    "  answer was lost is\n"
    "  sent again, so it is applied at least once.\n";

/* Options shared by both commands. */
enum {
    OPT_BOOTSTRAP = 1000,
    OPT_TIMEOUT,
    OPT_STATUS,
    OPT_REPLICATION,
    OPT_HUMAN,
    OPT_JSON,
    OPT_COUNT,
    OPT_SIZE,
    OPT_HELP,
    OPT_VERBOSE,
    OPT_COMMAND_CONFIG,
    OPT_CONTROLLER_ID,
    OPT_CONTROLLER_DIR,
    OPT_CONFIG,
    OPT_YES,
};

/* getopt_long with our own messages; returns the option, -1 at the end, or '?' after
 * printing a usage error. */
static int next_opt(const char *cmd, const char *usage, int argc, char **argv,
                    const struct option *opts)
{
    char ob[64];
    int c = getopt_long(argc, argv, ":h", opts, NULL);
    if (c == '?') {
        kq_tools_usage_error(cmd, usage, "unknown option '%s'",
                             kq_tools_bad_option(argv, ob, sizeof ob));
        return '?';
    }
    if (c == ':') {
        kq_tools_usage_error(cmd, usage, "option '%s' needs a value",
                             kq_tools_bad_option(argv, ob, sizeof ob));
        return '?';
    }
    return c;
}

typedef struct conn_args {
    kq_tools_addr addrs[KQ_TOOLS_MAX_ADDRS];
    int n_addrs;
    int64_t timeout_ms;
    bool verbose;
} conn_args;

static int set_bootstrap(const char *cmd, const char *usage, conn_args *ca, const char *v)
{
    char errbuf[256];
    if (kq_tools_parse_addrs(v, ca->addrs, KQ_TOOLS_MAX_ADDRS, &ca->n_addrs, errbuf,
                             sizeof errbuf) != 0)
        return kq_tools_usage_error(cmd, usage, "--bootstrap-controller: %s", errbuf);
    return 0;
}

static int set_timeout(const char *cmd, const char *usage, conn_args *ca, const char *v)
{
    if (!kq_tools_parse_int(v, 1, MAX_TIMEOUT_MS, &ca->timeout_ms))
        return kq_tools_usage_error(cmd, usage, "--timeout-ms: '%s' is not an integer in [1, %d]",
                                    v, MAX_TIMEOUT_MS);
    return 0;
}

static int set_command_config(const char *cmd, const char *path)
{
    char errbuf[2048];
    if (kq_tools_command_config(path, errbuf, sizeof errbuf) != 0)
        return kq_tools_usage_error(cmd, NULL, "%s", errbuf);
    return 0;
}

static kq_tools_call_opts call_opts(const conn_args *ca)
{
    kq_tools_call_opts o = {
        .bootstrap = ca->addrs,
        .n_bootstrap = ca->n_addrs,
        .timeout_ms = (uint32_t)ca->timeout_ms,
        .attempt_timeout_ms = ATTEMPT_TIMEOUT_MS,
        .max_hops = MAX_HOPS,
        .verbose = ca->verbose ? stderr : NULL,
    };
    return o;
}

/* Whether the voter set in force (DescribeQuorum through the leader) holds exactly key k;
 * -1 when nobody answered. */
static int voter_in_force(const conn_args *ca, const kq_voter_key *k)
{
    kq_buf req = {NULL, 0};
    kq_response resp;
    char dir[KQ_UUID_STR_LEN + 1];
    int found = 0;

    if (kq_codec_encode_describe_request("", &req) != 0)
        return -1;
    kq_tools_call_opts o = call_opts(ca);
    int ret = kq_tools_call_controller(&o, KQ_API_DESCRIBE_QUORUM, &req, &resp);
    kq_buf_free(&req);
    if (ret != KQ_EXIT_OK)
        return -1;
    kq_uuid_format(k->dir, dir);
    for (int i = 0; i < resp.describe.n_voters; i++)
        found |= resp.describe.voters[i].id == k->id &&
                 strcmp(resp.describe.voters[i].directory_id, dir) == 0;
    kq_response_free(&resp);
    return found;
}

/* AddRaftVoter / RemoveRaftVoter through the active controller (KIP-853). */
static int change_voter(const conn_args *ca, kq_raft_msg_type type, const kq_voter *v)
{
    kq_raft_msg m;
    kq_buf req = {NULL, 0};
    kq_response resp;
    char dir[KQ_UUID_STR_LEN + 1];
    bool add = type == KQ_RAFT_ADD_VOTER_REQ;

    memset(&m, 0, sizeof m);
    m.type = type;
    m.from = -1;
    m.to = -1;
    m.leader_id = -1;
    m.u.voter_req.voter = v;
    int rc = kq_codec_encode_raft_request(&m, "", &req);
    if (rc != 0) {
        kq_tools_errorf("cannot encode the %s request: %s",
                        add ? "AddRaftVoter" : "RemoveRaftVoter", kq_err_message(rc));
        return KQ_EXIT_FAILURE;
    }
    kq_tools_call_opts o = call_opts(ca);
    /* longer than the leader's own wait for the change to commit
     * (controller.quorum.request.timeout.ms), so its answer comes first */
    o.attempt_timeout_ms = VOTER_CHANGE_ATTEMPT_MS;
    int ret = kq_tools_call_controller(&o, add ? KQ_API_ADD_RAFT_VOTER : KQ_API_REMOVE_RAFT_VOTER,
                                       &req, &resp);
    kq_buf_free(&req);
    kq_uuid_format(v->key.dir, dir);
    if (ret != KQ_EXIT_OK) {
        /* an attempt that timed out may have made the change, and its retry was then refused
         * (DUPLICATE_VOTER / VOTER_NOT_FOUND): what counts is the set in force */
        int in = voter_in_force(ca, &v->key);
        if (in < 0 || in != add)
            return ret;
        printf("Controller %d with directory id %s %s\n", (int)v->key.id, dir,
               add ? "is a voter (an earlier attempt of this command added it)"
                   : "is not a voter (nothing to remove, or an earlier attempt removed it)");
        return KQ_EXIT_OK;
    }
    if (add)
        printf("Added controller %d with directory id %s and endpoint CONTROLLER://%s:%d\n",
               (int)v->key.id, dir, v->host, (int)v->port);
    else
        printf("Removed controller %d with directory id %s\n", (int)v->key.id, dir);
    kq_response_free(&resp);
    return KQ_EXIT_OK;
}

/* The controller of `path` as a voter: node.id, the directory id of its formatted
 * metadata.log.dir, its advertised listener and kraft.version range. */
static int voter_of_config(const char *path, kq_voter *v)
{
    static kq_ctl_config c; /* large */
    kq_store *s = NULL;
    char err[1024] = "";

    if (kq_ctl_config_load(path, &c, err, sizeof err) != 0) {
        kq_tools_errorf("%s: %s", path, err);
        return KQ_EXIT_USAGE;
    }
    if (!c.raft.host[0]) {
        kq_tools_errorf("%s: set advertised.listeners to the host:port the other controllers "
                        "and the brokers reach this controller at (not a wildcard address)",
                        path);
        return KQ_EXIT_USAGE;
    }
    if (kq_store_open_readonly(c.log_dir, &s, err, sizeof err) != 0) {
        kq_tools_errorf("the metadata.log.dir of %s (%s) is not formatted: %s", path, c.log_dir,
                        err);
        return KQ_EXIT_FAILURE;
    }
    memset(v, 0, sizeof *v);
    v->key.id = c.node_id;
    bool ok = kq_uuid_parse(kq_store_identity_of(s)->directory_id, v->key.dir);
    kq_store_close(s);
    if (!ok) {
        kq_tools_errorf("%s holds no valid directory id", c.log_dir);
        return KQ_EXIT_FAILURE;
    }
    snprintf(v->host, sizeof v->host, "%s", c.raft.host);
    v->port = c.raft.port;
    v->kraft_min = c.raft.kraft_min;
    v->kraft_max = c.raft.kraft_max;
    return KQ_EXIT_OK;
}

int kq_cmd_metadata_quorum(int argc, char **argv)
{
    static const char cmd[] = "metadata-quorum";
    static const struct option opts[] = {
        {"bootstrap-controller", required_argument, NULL, OPT_BOOTSTRAP},
        {"timeout-ms", required_argument, NULL, OPT_TIMEOUT},
        {"command-config", required_argument, NULL, OPT_COMMAND_CONFIG},
        {"verbose", no_argument, NULL, OPT_VERBOSE},
        {"status", no_argument, NULL, OPT_STATUS},
        {"replication", no_argument, NULL, OPT_REPLICATION},
        {"human-readable", no_argument, NULL, OPT_HUMAN},
        {"json", no_argument, NULL, OPT_JSON},
        {"controller-id", required_argument, NULL, OPT_CONTROLLER_ID},
        {"controller-directory-id", required_argument, NULL, OPT_CONTROLLER_DIR},
        {"config", required_argument, NULL, OPT_CONFIG},
        {"yes", no_argument, NULL, OPT_YES},
        {"help", no_argument, NULL, OPT_HELP},
        {NULL, 0, NULL, 0},
    };
    conn_args ca = {.n_addrs = 0, .timeout_ms = DEFAULT_TIMEOUT_MS};
    bool status = false, replication = false, human = false, json = false;
    const char *command_config = NULL, *controller_dir = NULL, *config = NULL;
    bool yes = false;
    int64_t controller_id = -1;
    kq_buf req = {NULL, 0};
    kq_response resp;
    bool have_resp = false;
    int ret = KQ_EXIT_OK;

    optind = 0;
    for (;;) {
        int c = next_opt(cmd, QUORUM_USAGE, argc, argv, opts);
        if (c == -1)
            break;
        switch (c) {
        case OPT_BOOTSTRAP:
            if (set_bootstrap(cmd, QUORUM_USAGE, &ca, optarg) != 0)
                return KQ_EXIT_USAGE;
            break;
        case OPT_TIMEOUT:
            if (set_timeout(cmd, QUORUM_USAGE, &ca, optarg) != 0)
                return KQ_EXIT_USAGE;
            break;
        case OPT_COMMAND_CONFIG:
            if (set_command_config(cmd, optarg) != 0)
                return KQ_EXIT_USAGE;
            command_config = optarg;
            break;
        case OPT_CONTROLLER_ID:
            if (!kq_tools_parse_int(optarg, 0, INT32_MAX, &controller_id))
                return kq_tools_usage_error(cmd, QUORUM_USAGE,
                                            "--controller-id: '%s' is not a node id", optarg);
            break;
        case OPT_CONTROLLER_DIR:
            controller_dir = optarg;
            break;
        case OPT_CONFIG:
            config = optarg;
            break;
        case OPT_YES:
            yes = true;
            break;
        case OPT_VERBOSE:
            ca.verbose = true;
            break;
        case OPT_STATUS:
            status = true;
            break;
        case OPT_REPLICATION:
            replication = true;
            break;
        case OPT_HUMAN:
            human = true;
            break;
        case OPT_JSON:
            json = true;
            break;
        case 'h':
        case OPT_HELP:
            fputs(QUORUM_USAGE, stdout);
            return KQ_EXIT_OK;
        default:
            return KQ_EXIT_USAGE;
        }
    }
    if (optind >= argc)
        return kq_tools_usage_error(cmd, QUORUM_USAGE,
                                    "missing subcommand (describe, add-controller or "
                                    "remove-controller)");
    bool adding = strcmp(argv[optind], "add-controller") == 0;
    bool removing = strcmp(argv[optind], "remove-controller") == 0;
    bool recovering = strcmp(argv[optind], "unsafe-recover") == 0;
    if (strcmp(argv[optind], "describe") != 0 && !adding && !removing && !recovering)
        return kq_tools_usage_error(cmd, QUORUM_USAGE, "unknown subcommand '%s'", argv[optind]);
    if (optind + 1 < argc)
        return kq_tools_usage_error(cmd, QUORUM_USAGE, "unexpected argument '%s'",
                                    argv[optind + 1]);
    if (recovering) {
        if (!config)
            return kq_tools_usage_error(cmd, QUORUM_USAGE,
                                        "unsafe-recover needs --config (the stopped "
                                        "controller's .properties file)");
        return kq_quorum_unsafe_recover(config, yes);
    }
    if ((adding || removing) && ca.n_addrs == 0)
        return kq_tools_usage_error(cmd, QUORUM_USAGE, "missing --bootstrap-controller");
    if (adding) {
        kq_voter v;
        if (!command_config)
            return kq_tools_usage_error(cmd, QUORUM_USAGE,
                                        "add-controller needs --command-config (the new "
                                        "controller's own .properties file)");
        int r = voter_of_config(command_config, &v);
        return r != KQ_EXIT_OK ? r : change_voter(&ca, KQ_RAFT_ADD_VOTER_REQ, &v);
    }
    if (removing) {
        kq_voter v;
        memset(&v, 0, sizeof v);
        if (controller_id < 0 || !controller_dir)
            return kq_tools_usage_error(cmd, QUORUM_USAGE,
                                        "remove-controller needs --controller-id and "
                                        "--controller-directory-id");
        if (strlen(controller_dir) != KQ_UUID_STR_LEN ||
            !kq_uuid_parse(controller_dir, v.key.dir) || kq_uuid_is_zero(v.key.dir))
            return kq_tools_usage_error(cmd, QUORUM_USAGE,
                                        "--controller-directory-id: '%s' is not a directory id "
                                        "(22 characters, as describe --status prints it)",
                                        controller_dir);
        v.key.id = (int32_t)controller_id;
        return change_voter(&ca, KQ_RAFT_REMOVE_VOTER_REQ, &v);
    }
    if (optind + 1 < argc)
        return kq_tools_usage_error(cmd, QUORUM_USAGE, "unexpected argument '%s'",
                                    argv[optind + 1]);
    if (ca.n_addrs == 0)
        return kq_tools_usage_error(cmd, QUORUM_USAGE, "missing --bootstrap-controller");
    if (status == replication)
        return kq_tools_usage_error(cmd, QUORUM_USAGE,
                                    "describe needs exactly one of --status or --replication");
    if (human && !replication)
        return kq_tools_usage_error(cmd, QUORUM_USAGE,
                                    "--human-readable is only valid with --replication");

    int rc = kq_codec_encode_describe_request("", &req);
    if (rc != 0) {
        kq_tools_errorf("cannot encode the DescribeQuorum request: %s", kq_err_message(rc));
        ret = KQ_EXIT_FAILURE;
        goto out;
    }
    kq_tools_call_opts o = call_opts(&ca);
    ret = kq_tools_call_controller(&o, KQ_API_DESCRIBE_QUORUM, &req, &resp);
    if (ret != KQ_EXIT_OK)
        goto out;
    have_resp = true;
    if (status) {
        kq_tools_print_status(stdout, &resp.describe, json);
    } else {
        char errbuf[512];
        if (kq_tools_print_replication(stdout, &resp.describe, human, kq_wall_ms(), json, errbuf,
                                       sizeof errbuf) != 0) {
            kq_tools_errorf("%s", errbuf);
            ret = KQ_EXIT_FAILURE;
        }
    }
out:
    if (have_resp)
        kq_response_free(&resp);
    if (req.data != NULL)
        kq_buf_free(&req);
    return ret;
}

int kq_cmd_metadata_write(int argc, char **argv)
{
    static const char cmd[] = "metadata-write";
    static const struct option opts[] = {
        {"bootstrap-controller", required_argument, NULL, OPT_BOOTSTRAP},
        {"timeout-ms", required_argument, NULL, OPT_TIMEOUT},
        {"command-config", required_argument, NULL, OPT_COMMAND_CONFIG},
        {"verbose", no_argument, NULL, OPT_VERBOSE},
        {"count", required_argument, NULL, OPT_COUNT},
        {"size", required_argument, NULL, OPT_SIZE},
        {"help", no_argument, NULL, OPT_HELP},
        {NULL, 0, NULL, 0},
    };
    conn_args ca = {.n_addrs = 0, .timeout_ms = DEFAULT_TIMEOUT_MS};
    int64_t count = 1, size = DEFAULT_WRITE_SIZE;
    uint8_t *payload = NULL;
    const uint8_t **recs = NULL;
    size_t *lens = NULL;
    kq_buf req = {NULL, 0};
    kq_response resp;
    int ret = KQ_EXIT_OK;

    optind = 0;
    for (;;) {
        int c = next_opt(cmd, WRITE_USAGE, argc, argv, opts);
        if (c == -1)
            break;
        switch (c) {
        case OPT_BOOTSTRAP:
            if (set_bootstrap(cmd, WRITE_USAGE, &ca, optarg) != 0)
                return KQ_EXIT_USAGE;
            break;
        case OPT_TIMEOUT:
            if (set_timeout(cmd, WRITE_USAGE, &ca, optarg) != 0)
                return KQ_EXIT_USAGE;
            break;
        case OPT_COMMAND_CONFIG:
            if (set_command_config(cmd, optarg) != 0)
                return KQ_EXIT_USAGE;
            break;
        case OPT_VERBOSE:
            ca.verbose = true;
            break;
        case OPT_COUNT:
            if (!kq_tools_parse_int(optarg, 1, KQ_CODEC_MAX_WRITE_RECORDS, &count))
                return kq_tools_usage_error(cmd, WRITE_USAGE,
                                            "--count: '%s' is not an integer in [1, %d]", optarg,
                                            KQ_CODEC_MAX_WRITE_RECORDS);
            break;
        case OPT_SIZE:
            if (!kq_tools_parse_int(optarg, 0, MAX_WRITE_SIZE, &size))
                return kq_tools_usage_error(cmd, WRITE_USAGE,
                                            "--size: '%s' is not an integer in [0, %d]", optarg,
                                            MAX_WRITE_SIZE);
            break;
        case 'h':
        case OPT_HELP:
            fputs(WRITE_USAGE, stdout);
            return KQ_EXIT_OK;
        default:
            return KQ_EXIT_USAGE;
        }
    }
    if (optind < argc)
        return kq_tools_usage_error(cmd, WRITE_USAGE, "unexpected argument '%s'", argv[optind]);
    if (ca.n_addrs == 0)
        return kq_tools_usage_error(cmd, WRITE_USAGE, "missing --bootstrap-controller");
    if (count * size > MAX_WRITE_TOTAL)
        return kq_tools_usage_error(cmd, WRITE_USAGE,
                                    "--count x --size must be at most %d bytes per request",
                                    MAX_WRITE_TOTAL);

    /* Each record: "kq-write <wall ms> <i>" then '.' padding, cut to `size` bytes. */
    payload = malloc((size_t)(count * size) + 1);
    recs = calloc((size_t)count, sizeof *recs);
    lens = calloc((size_t)count, sizeof *lens);
    if (payload == NULL || recs == NULL || lens == NULL) {
        kq_tools_errorf("out of memory for %" PRId64 " records of %" PRId64 " bytes", count, size);
        ret = KQ_EXIT_FAILURE;
        goto out;
    }
    int64_t stamp = kq_wall_ms();
    for (int64_t i = 0; i < count; i++) {
        uint8_t *p = payload + i * size;
        char head[64];
        int hl = snprintf(head, sizeof head, "kq-write %" PRId64 " %" PRId64 " ", stamp, i);
        for (int64_t k = 0; k < size; k++)
            p[k] = k < hl ? (uint8_t)head[k] : (uint8_t)'.';
        recs[i] = p;
        lens[i] = (size_t)size;
    }
    int rc = kq_codec_encode_write_request("", recs, lens, (size_t)count, &req);
    if (rc != 0) {
        kq_tools_errorf("cannot encode the Write request: %s", kq_err_message(rc));
        ret = KQ_EXIT_FAILURE;
        goto out;
    }
    kq_tools_call_opts o = call_opts(&ca);
    ret = kq_tools_call_controller(&o, KQ_API_WRITE, &req, &resp);
    if (ret != KQ_EXIT_OK)
        goto out;
    printf("written at offset %" PRId64 " epoch %" PRId32 "\n", resp.write_base_offset,
           resp.write_epoch);
    kq_response_free(&resp);
out:
    if (req.data != NULL)
        kq_buf_free(&req);
    free(lens);
    free(recs);
    free(payload);
    return ret;
}
