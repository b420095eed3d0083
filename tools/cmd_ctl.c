/* kq topics, kq cluster, kq leader-election, kq configs, kq features, kq acls: the controller
 * metadata commands. Each sends one controller RPC (include/kq/ctl_codec.h) through
 * kq_tools_call_controller, which follows NOT_CONTROLLER leader hints and retries retriable
 * failures until --timeout-ms. */
#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "kq/ctl_codec.h"
#include "kq/error.h"
#include "kq/util.h"
#include "kq_tools.h"

#define DEFAULT_TIMEOUT_MS KQ_TOOLS_DEFAULT_TIMEOUT_MS
#define ATTEMPT_TIMEOUT_MS 5000 /* one request to one controller */
#define MAX_TIMEOUT_MS 86400000
#define MAX_HOPS 3
#define MAX_CONFIGS 256

enum {
    OPT_BOOTSTRAP = 1000,
    OPT_TIMEOUT,
    OPT_VERBOSE,
    OPT_JSON,
    OPT_HELP,
    OPT_COMMAND_CONFIG,
    OPT_CREATE,
    OPT_LIST,
    OPT_DESCRIBE,
    OPT_DELETE,
    OPT_ALTER,
    OPT_TOPIC,
    OPT_PARTITIONS,
    OPT_RF,
    OPT_ASSIGNMENT,
    OPT_CONFIG,
    OPT_UNDER_REPLICATED,
    OPT_UNDER_MIN_ISR,
    OPT_AT_MIN_ISR,
    OPT_UNAVAILABLE,
    OPT_ELECTION_TYPE,
    OPT_PARTITION,
    OPT_ALL_PARTITIONS,
    OPT_ENTITY_TYPE,
    OPT_ENTITY_NAME,
    OPT_ENTITY_DEFAULT,
    OPT_ADD_CONFIG,
    OPT_DELETE_CONFIG,
    OPT_ALL,
    OPT_FEATURE,
    OPT_UNSAFE,
    OPT_DRY_RUN,
    OPT_ID,
    OPT_ADD,
    OPT_REMOVE,
    OPT_ALLOW_PRINCIPAL,
    OPT_DENY_PRINCIPAL,
    OPT_PRINCIPAL,
    OPT_ALLOW_HOST,
    OPT_DENY_HOST,
    OPT_OPERATION,
    OPT_CLUSTER,
    OPT_PATTERN_TYPE,
    OPT_FORCE,
};

#define CONN_OPTIONS                                                                               \
    {"bootstrap-controller", required_argument, NULL, OPT_BOOTSTRAP},                              \
        {"bootstrap-server", required_argument, NULL, OPT_BOOTSTRAP},                              \
        {"timeout-ms", required_argument, NULL, OPT_TIMEOUT},                                      \
        {"command-config", required_argument, NULL, OPT_COMMAND_CONFIG},                           \
        {"verbose", no_argument, NULL, OPT_VERBOSE}, {"json", no_argument, NULL, OPT_JSON},        \
    {                                                                                              \
        "help", no_argument, NULL, OPT_HELP                                                        \
    }

#define CONN_USAGE                                                                                 \
    "  --bootstrap-controller LIST  controllers to ask (HOST:PORT[,...]); leader hints are\n"      \
    "                               followed (--bootstrap-server is accepted too)\n"               \
    "  --timeout-ms MS              give up after MS (default 60000); until then failures\n"       \
    "                               that may pass (no active controller, timeouts,\n"              \
    "                               refused connections) are retried\n"                            \
    "  --command-config FILE        client properties: security.protocol=SSL and the ssl.*\n"      \
    "                               keys (docs/security.md)\n"                                     \
    "  --verbose                    say on stderr what is retried\n"

typedef struct conn {
    kq_tools_addr addrs[KQ_TOOLS_MAX_ADDRS];
    int n_addrs;
    int64_t timeout_ms;
    bool verbose;
    bool json;
} conn;

/* Handle a connection option; 1 if handled, 0 if not, -1 on a usage error (printed). */
static int conn_opt(const char *cmd, const char *usage, conn *c, int opt, const char *v)
{
    char errbuf[2048];

    switch (opt) {
    case OPT_BOOTSTRAP:
        if (kq_tools_parse_addrs(v, c->addrs, KQ_TOOLS_MAX_ADDRS, &c->n_addrs, errbuf,
                                 sizeof errbuf) != 0) {
            kq_tools_usage_error(cmd, usage, "--bootstrap-controller: %s", errbuf);
            return -1;
        }
        return 1;
    case OPT_TIMEOUT:
        if (!kq_tools_parse_int(v, 1, MAX_TIMEOUT_MS, &c->timeout_ms)) {
            kq_tools_usage_error(cmd, usage, "--timeout-ms: '%s' is not an integer in [1, %d]", v,
                                 MAX_TIMEOUT_MS);
            return -1;
        }
        return 1;
    case OPT_COMMAND_CONFIG:
        if (kq_tools_command_config(v, errbuf, sizeof errbuf) != 0) {
            kq_tools_usage_error(cmd, NULL, "%s", errbuf);
            return -1;
        }
        return 1;
    case OPT_VERBOSE:
        c->verbose = true;
        return 1;
    case OPT_JSON:
        c->json = true;
        return 1;
    default:
        return 0;
    }
}

/* The next option that is not a connection option (those are applied to c); -1 at the end,
 * '?' after a usage error (printed). */
static int next_opt(const char *cmd, const char *usage, int argc, char **argv,
                    const struct option *opts, conn *c)
{
    for (;;) {
        char ob[64];
        int o = getopt_long(argc, argv, ":h", opts, NULL), h;

        if (o == '?') {
            kq_tools_usage_error(cmd, usage, "unknown option '%s'",
                                 kq_tools_bad_option(argv, ob, sizeof ob));
            return '?';
        }
        if (o == ':') {
            kq_tools_usage_error(cmd, usage, "option '%s' needs a value",
                                 kq_tools_bad_option(argv, ob, sizeof ob));
            return '?';
        }
        if (o == -1)
            return o;
        h = conn_opt(cmd, usage, c, o, optarg);
        if (h < 0)
            return '?';
        if (!h)
            return o;
    }
}

/* Send req to the active controller; on success *resp holds the answer (free it). */
static int call(const conn *c, const kq_ctl_request *req, kq_response *resp)
{
    kq_tools_call_opts o = {.bootstrap = c->addrs,
                            .n_bootstrap = c->n_addrs,
                            .timeout_ms = (uint32_t)c->timeout_ms,
                            .attempt_timeout_ms = ATTEMPT_TIMEOUT_MS,
                            .max_hops = MAX_HOPS,
                            .verbose = c->verbose ? stderr : NULL};
    kq_buf b = {NULL, 0};
    int rc = kq_ctl_encode_request("", -1, req, &b);

    if (rc) {
        kq_tools_errorf("cannot encode the request: %s", kq_err_message(rc));
        return KQ_EXIT_FAILURE;
    }
    rc = kq_tools_call_controller(&o, req->api_key, &b, resp);
    kq_buf_free(&b);
    return rc;
}

/* Send req and decode the answer into out, whose type follows req->api_key: kq_ctl_topics_desc
 * (DescribeTopics), kq_ctl_cluster_desc (DescribeCluster), kq_ctl_configs_desc
 * (DescribeConfigs), kq_ctl_features_desc (DescribeFeatures), otherwise kq_ctl_item_results
 * (per-item results of a write RPC). The caller owns and frees out. Returns the exit code. */
static int call_decode(const conn *c, const kq_ctl_request *req, void *out)
{
    kq_response resp;
    char err[256] = "";
    const char *what = "";
    int rc;

    if (call(c, req, &resp) != KQ_EXIT_OK)
        return KQ_EXIT_FAILURE;
    switch (req->api_key) {
    case KQ_API_DESCRIBE_TOPICS:
        what = "DescribeTopics ";
        rc = kq_ctl_decode_describe_topics_response(&resp, out, err, sizeof err);
        break;
    case KQ_API_DESCRIBE_CLUSTER:
        what = "DescribeCluster ";
        rc = kq_ctl_decode_describe_cluster_response(&resp, out, err, sizeof err);
        break;
    case KQ_API_DESCRIBE_CONFIGS:
        what = "DescribeConfigs ";
        rc = kq_ctl_decode_describe_configs_response(&resp, out, err, sizeof err);
        break;
    case KQ_API_DESCRIBE_FEATURES:
        what = "DescribeFeatures ";
        rc = kq_ctl_decode_describe_features_response(&resp, out, err, sizeof err);
        break;
    case KQ_API_DESCRIBE_ACLS:
        what = "DescribeAcls ";
        rc = kq_ctl_decode_describe_acls_response(&resp, out, err, sizeof err);
        break;
    case KQ_API_DELETE_ACLS:
        what = "DeleteAcls ";
        rc = kq_ctl_decode_delete_acls_response(&resp, out, err, sizeof err);
        break;
    default:
        rc = kq_ctl_decode_item_results(&resp, out, err, sizeof err);
        break;
    }
    kq_response_free(&resp);
    if (rc) {
        kq_tools_errorf("malformed %sresponse: %s", what, err);
        return KQ_EXIT_FAILURE;
    }
    return KQ_EXIT_OK;
}

static int describe_topics(const conn *c, const char *const *names, int32_t n,
                           kq_ctl_topics_desc *out)
{
    kq_ctl_request req = {.api_key = KQ_API_DESCRIBE_TOPICS};

    req.describe_topics.names = names;
    req.describe_topics.n = n;
    return call_decode(c, &req, out);
}

static int describe_cluster(const conn *c, kq_ctl_cluster_desc *out)
{
    kq_ctl_request req = {.api_key = KQ_API_DESCRIBE_CLUSTER};

    return call_decode(c, &req, out);
}

static const char *item_message(const kq_ctl_item_result *it)
{
    return it->message && it->message[0] ? it->message : kq_err_message(it->error);
}

/* "Error while executing topic command : ..." for a topic's result; an authorization error
 * is named (TOPIC_AUTHORIZATION_FAILED: principal ... is not allowed to ...). */
static void print_topic_error(const kq_ctl_item_result *it)
{
    bool authz = it->error == KQ_ERR_TOPIC_AUTHORIZATION_FAILED ||
                 it->error == KQ_ERR_CLUSTER_AUTHORIZATION_FAILED;

    printf("Error while executing topic command : %s%s%s\n", authz ? kq_err_name(it->error) : "",
           authz ? ": " : "", item_message(it));
}

/* ---- kq topics ----------------------------------------------------------------------------- */

static const char TOPICS_USAGE[] =
    "Usage: kq topics --bootstrap-controller HOST:PORT[,...] ACTION [options]\n"
    "  --create --topic T (--partitions N --replication-factor R |\n"
    "           --replica-assignment 1:2:3,2:3:1,...) [--config k=v ...]\n"
    "  --describe [--topic T] [--under-replicated-partitions | --under-min-isr-partitions |\n"
    "             --at-min-isr-partitions | --unavailable-partitions] [--json]\n"
    "  --list [--json]\n"
    "  --alter --topic T --partitions N [--replica-assignment 1:2:3,...]\n"
    "           N is the new total (more than now); an assignment lists every partition\n"
    "  --delete --topic T\n" CONN_USAGE
    "  --json                       --describe, --list: one JSON object\n";

/* td answers a DescribeTopics for the one topic; if it does not exist, say so as Kafka does. */
static bool topic_found(const kq_ctl_topics_desc *td, const char *topic)
{
    if (td->n_topics >= 1 && !td->topics[0].error)
        return true;
    if (td->n_topics >= 1 && td->topics[0].error == KQ_ERR_TOPIC_AUTHORIZATION_FAILED)
        printf("Error while executing topic command : TOPIC_AUTHORIZATION_FAILED: not allowed to "
               "Describe topic '%s'\n",
               topic);
    else
        printf("Error while executing topic command : Topic '%s' does not exist as expected\n",
               topic);
    return false;
}

/* kq topics --alter: CreatePartitions up to `total`. Kafka prints nothing on success. */
static int alter_topic(const conn *c, const char *topic, int32_t total, const char *assignment)
{
    kq_create_partitions cp = {.topic = topic, .count = total};
    kq_ctl_request req = {.api_key = KQ_API_CREATE_PARTITIONS};
    kq_ctl_item_results items = {0};
    kq_ctl_topics_desc td = {0};
    kq_partition_assignment *as = NULL;
    int32_t *ids = NULL, np = 0, rf = 0, n_as = 0;
    char err[256] = "";
    int ret = KQ_EXIT_OK, rc;

    if (assignment) {
        if (kq_tools_parse_replica_assignment(assignment, &ids, &np, &rf, err, sizeof err)) {
            ret = kq_tools_usage_error("topics", TOPICS_USAGE, "%s", err);
            goto out;
        }
        /* The assignment names every partition: find how many exist already. */
        ret = describe_topics(c, &topic, 1, &td);
        if (ret)
            goto out;
        if (!topic_found(&td, topic)) {
            ret = KQ_EXIT_FAILURE;
            goto out;
        }
        rc = kq_tools_new_partition_assignments(ids, np, rf, td.topics[0].n_partitions, total, &as,
                                                &n_as, err, sizeof err);
        if (rc) {
            printf("Error while executing topic command : %s\n", err);
            ret = KQ_EXIT_FAILURE;
            goto out;
        }
        cp.assignments = as;
        cp.n_assignments = n_as;
    }
    req.create_partitions.topics = &cp;
    req.create_partitions.n = 1;
    ret = call_decode(c, &req, &items);
    if (ret)
        goto out;
    if (items.n != 1) {
        kq_tools_errorf("the controller answered %d results for one topic", items.n);
        ret = KQ_EXIT_FAILURE;
    } else if (items.items[0].error) {
        printf("Error while executing topic command : %s: %s\n", kq_err_name(items.items[0].error),
               item_message(&items.items[0]));
        ret = KQ_EXIT_FAILURE;
    }
out:
    kq_ctl_item_results_free(&items);
    kq_ctl_topics_desc_free(&td);
    free(as);
    free(ids);
    return ret;
}

int kq_cmd_topics(int argc, char **argv)
{
    static const char cmd[] = "topics";
    static const struct option opts[] = {
        CONN_OPTIONS,
        {"create", no_argument, NULL, OPT_CREATE},
        {"list", no_argument, NULL, OPT_LIST},
        {"describe", no_argument, NULL, OPT_DESCRIBE},
        {"delete", no_argument, NULL, OPT_DELETE},
        {"alter", no_argument, NULL, OPT_ALTER},
        {"topic", required_argument, NULL, OPT_TOPIC},
        {"partitions", required_argument, NULL, OPT_PARTITIONS},
        {"replication-factor", required_argument, NULL, OPT_RF},
        {"replica-assignment", required_argument, NULL, OPT_ASSIGNMENT},
        {"config", required_argument, NULL, OPT_CONFIG},
        {"under-replicated-partitions", no_argument, NULL, OPT_UNDER_REPLICATED},
        {"under-min-isr-partitions", no_argument, NULL, OPT_UNDER_MIN_ISR},
        {"at-min-isr-partitions", no_argument, NULL, OPT_AT_MIN_ISR},
        {"unavailable-partitions", no_argument, NULL, OPT_UNAVAILABLE},
        {NULL, 0, NULL, 0},
    };
    conn c = {.timeout_ms = DEFAULT_TIMEOUT_MS};
    int action = 0, n_actions = 0, n_filters = 0;
    kq_tools_topic_filter filter = KQ_TOPIC_FILTER_NONE;
    const char *topic = NULL, *assignment = NULL;
    int64_t partitions = -1, rf = -1;
    kq_config_kv configs[MAX_CONFIGS];
    int n_configs = 0;
    int32_t *ids = NULL;
    kq_partition_assignment *as = NULL;
    kq_ctl_topics_desc td = {0};
    kq_ctl_cluster_desc cd = {0};
    kq_ctl_item_results items = {0};
    int ret = KQ_EXIT_OK;

    optind = 0;
    for (;;) {
        int o = next_opt(cmd, TOPICS_USAGE, argc, argv, opts, &c);

        if (o == -1)
            break;
        switch (o) {
        case OPT_CREATE:
        case OPT_LIST:
        case OPT_DESCRIBE:
        case OPT_DELETE:
        case OPT_ALTER:
            if (action != o)
                n_actions++;
            action = o;
            break;
        case OPT_TOPIC:
            topic = optarg;
            break;
        case OPT_PARTITIONS:
            if (!kq_tools_parse_int(optarg, INT32_MIN, INT32_MAX, &partitions) || partitions < 1) {
                ret = kq_tools_usage_error(cmd, TOPICS_USAGE,
                                           "The partitions must be greater than 0");
                goto out;
            }
            break;
        case OPT_RF:
            if (!kq_tools_parse_int(optarg, INT32_MIN, INT32_MAX, &rf) || rf < 1 || rf > 32767) {
                ret = kq_tools_usage_error(
                    cmd, TOPICS_USAGE,
                    "The replication factor must be between 1 and 32767 inclusive");
                goto out;
            }
            break;
        case OPT_ASSIGNMENT:
            assignment = optarg;
            break;
        case OPT_CONFIG: {
            char *eq = strchr(optarg, '=');

            if (!eq || eq == optarg) {
                ret = kq_tools_usage_error(cmd, TOPICS_USAGE,
                                           "--config: '%s' is not of the form key=value", optarg);
                goto out;
            }
            if (n_configs >= MAX_CONFIGS) {
                ret = kq_tools_usage_error(cmd, TOPICS_USAGE, "too many --config options");
                goto out;
            }
            *eq = '\0';
            configs[n_configs].name = optarg;
            configs[n_configs].value = eq + 1;
            n_configs++;
            break;
        }
        case OPT_UNDER_REPLICATED:
        case OPT_UNDER_MIN_ISR:
        case OPT_AT_MIN_ISR:
        case OPT_UNAVAILABLE:
            n_filters++;
            filter = o == OPT_UNDER_REPLICATED ? KQ_TOPIC_FILTER_UNDER_REPLICATED
                     : o == OPT_UNDER_MIN_ISR  ? KQ_TOPIC_FILTER_UNDER_MIN_ISR
                     : o == OPT_AT_MIN_ISR     ? KQ_TOPIC_FILTER_AT_MIN_ISR
                                               : KQ_TOPIC_FILTER_UNAVAILABLE;
            break;
        case 'h':
        case OPT_HELP:
            fputs(TOPICS_USAGE, stdout);
            goto out;
        default:
            ret = KQ_EXIT_USAGE;
            goto out;
        }
    }
    if (optind < argc) {
        ret = kq_tools_usage_error(cmd, TOPICS_USAGE, "unexpected argument '%s'", argv[optind]);
        goto out;
    }
    if (n_actions != 1) {
        ret = kq_tools_usage_error(cmd, TOPICS_USAGE,
                                   "exactly one of --create, --list, --describe, --alter or "
                                   "--delete is required");
        goto out;
    }
    if (c.n_addrs == 0) {
        ret = kq_tools_usage_error(cmd, TOPICS_USAGE, "missing --bootstrap-controller");
        goto out;
    }
    if (n_filters > 1 || (n_filters && action != OPT_DESCRIBE)) {
        ret = kq_tools_usage_error(cmd, TOPICS_USAGE,
                                   "at most one partition filter, and only with --describe");
        goto out;
    }
    if (c.json && action != OPT_DESCRIBE && action != OPT_LIST) {
        ret = kq_tools_usage_error(cmd, TOPICS_USAGE, "--json goes with --describe and --list");
        goto out;
    }
    if ((action == OPT_CREATE || action == OPT_DELETE || action == OPT_ALTER) && !topic) {
        ret = kq_tools_usage_error(cmd, TOPICS_USAGE, "--topic is required with --%s",
                                   action == OPT_CREATE   ? "create"
                                   : action == OPT_DELETE ? "delete"
                                                          : "alter");
        goto out;
    }
    if (action == OPT_ALTER) {
        if (partitions < 0) {
            ret = kq_tools_usage_error(cmd, TOPICS_USAGE,
                                       "--alter needs --partitions (the new partition count)");
            goto out;
        }
        if (rf >= 0 || n_configs) {
            ret = kq_tools_usage_error(cmd, TOPICS_USAGE,
                                       "--replication-factor and --config go with --create "
                                       "(use kq configs --alter for configs)");
            goto out;
        }
        ret = alter_topic(&c, topic, (int32_t)partitions, assignment);
        goto out;
    }
    if (action != OPT_CREATE && (partitions >= 0 || rf >= 0 || assignment || n_configs)) {
        ret = kq_tools_usage_error(cmd, TOPICS_USAGE,
                                   "--partitions, --replication-factor, --replica-assignment and "
                                   "--config go with --create (--partitions and "
                                   "--replica-assignment also with --alter)");
        goto out;
    }

    if (action == OPT_CREATE) {
        kq_create_topic ct = {.name = topic,
                              .num_partitions = (int32_t)partitions,
                              .replication_factor = (int32_t)rf,
                              .configs = n_configs ? configs : NULL,
                              .n_configs = n_configs};
        kq_ctl_request req = {.api_key = KQ_API_CREATE_TOPICS};
        char id[KQ_UUID_STR_LEN + 1];

        /* Our own topic id: if an attempt whose answer was lost created the topic, the retry's
         * TOPIC_ALREADY_EXISTS names this id and the create has succeeded. */
        if (kq_uuid_random(id) != 0 || !kq_uuid_parse(id, ct.topic_id)) {
            kq_tools_errorf("cannot draw a random topic id");
            ret = KQ_EXIT_FAILURE;
            goto out;
        }
        if (assignment) {
            char err[256];
            int32_t np, w, n_as;

            if (partitions >= 0 || rf >= 0) {
                ret = kq_tools_usage_error(cmd, TOPICS_USAGE,
                                           "--replica-assignment excludes --partitions and "
                                           "--replication-factor");
                goto out;
            }
            if (kq_tools_parse_replica_assignment(assignment, &ids, &np, &w, err, sizeof err)) {
                ret = kq_tools_usage_error(cmd, TOPICS_USAGE, "%s", err);
                goto out;
            }
            /* Every partition is new: partitions 0..np-1 (fails only without memory). */
            if (kq_tools_new_partition_assignments(ids, np, w, 0, np, &as, &n_as, err,
                                                   sizeof err)) {
                kq_tools_errorf("%s", err);
                ret = KQ_EXIT_FAILURE;
                goto out;
            }
            ct.assignments = as;
            ct.n_assignments = n_as;
        }
        if (strchr(topic, '.') && strchr(topic, '_'))
            fprintf(stderr, "WARNING: Due to limitations in metric names, topics with a period "
                            "('.') or underscore ('_') could collide. To avoid issues it is best "
                            "to use either, but not both.\n");
        req.create_topics.topics = &ct;
        req.create_topics.n = 1;
        ret = call_decode(&c, &req, &items);
        if (ret)
            goto out;
        if (items.n != 1) {
            kq_tools_errorf("the controller answered %d results for one topic", items.n);
            ret = KQ_EXIT_FAILURE;
        } else if (kq_tools_topic_created(&items.items[0], ct.topic_id)) {
            if (items.items[0].error && c.verbose)
                fprintf(stderr,
                        "kq: topic %s already exists with topic id %s, the id this command "
                        "sent: an earlier attempt created it\n",
                        topic, id);
            printf("Created topic %s.\n", topic);
        } else {
            print_topic_error(&items.items[0]);
            ret = KQ_EXIT_FAILURE;
        }
        goto out;
    }
    if (action == OPT_DELETE) {
        kq_delete_topic dt = {.name = topic};
        kq_ctl_request req = {.api_key = KQ_API_DELETE_TOPICS};

        req.delete_topics.topics = &dt;
        req.delete_topics.n = 1;
        ret = call_decode(&c, &req, &items);
        if (ret)
            goto out;
        if (items.n != 1) {
            printf("Error while executing topic command : unexpected response\n");
            ret = KQ_EXIT_FAILURE;
        } else if (items.items[0].error) {
            print_topic_error(&items.items[0]);
            ret = KQ_EXIT_FAILURE;
        }
        goto out;
    }
    /* --list / --describe */
    ret = describe_topics(&c, topic ? &topic : NULL, topic ? 1 : 0, &td);
    if (ret)
        goto out;
    if (topic && !topic_found(&td, topic)) {
        ret = KQ_EXIT_FAILURE;
        goto out;
    }
    if (action == OPT_LIST) {
        kq_tools_print_topic_list(stdout, &td, c.json);
        goto out;
    }
    if (filter == KQ_TOPIC_FILTER_UNAVAILABLE) {
        ret = describe_cluster(&c, &cd);
        if (ret)
            goto out;
    }
    kq_tools_print_topics(stdout, &td, filter, filter == KQ_TOPIC_FILTER_UNAVAILABLE ? &cd : NULL,
                          c.json);
out:
    kq_ctl_item_results_free(&items);
    kq_ctl_topics_desc_free(&td);
    kq_ctl_cluster_desc_free(&cd);
    free(as);
    free(ids);
    return ret;
}

/* ---- kq cluster ---------------------------------------------------------------------------- */

static const char CLUSTER_USAGE[] =
    "Usage: kq cluster --bootstrap-controller HOST:PORT[,...] describe [--json]\n"
    "       kq cluster --bootstrap-controller HOST:PORT[,...] unregister --id B\n"
    "  describe                     every registered broker: id, epoch, fenced, in controlled\n"
    "                               shutdown, rack, endpoints\n"
    "  unregister --id B            forget broker B: it leaves every ISR and ELR (do this\n"
    "                               before starting B on an empty, re-formatted "
    "log.dirs)\n" CONN_USAGE;

/* UnregisterBroker: the answer has no body; an error comes in the envelope. */
static int unregister_broker(const conn *c, int32_t id)
{
    kq_ctl_request req = {.api_key = KQ_API_UNREGISTER_BROKER};
    kq_response resp;

    req.unregister_broker.broker_id = id;
    if (call(c, &req, &resp) != KQ_EXIT_OK)
        return KQ_EXIT_FAILURE;
    int err = resp.error;
    if (err) {
        kq_tools_errorf("cannot unregister broker %d: %s%s%s", (int)id, kq_err_name(err),
                        resp.error_message[0] ? ": " : "", resp.error_message);
    } else {
        printf("Unregistered broker %d.\n", (int)id);
    }
    kq_response_free(&resp);
    return err ? KQ_EXIT_FAILURE : KQ_EXIT_OK;
}

int kq_cmd_cluster(int argc, char **argv)
{
    static const char cmd[] = "cluster";
    static const struct option opts[] = {
        CONN_OPTIONS, {"id", required_argument, NULL, OPT_ID}, {NULL, 0, NULL, 0}};
    conn c = {.timeout_ms = DEFAULT_TIMEOUT_MS};
    kq_ctl_cluster_desc cd = {0};
    bool describe = false, unregister = false;
    int64_t id = -1;
    int ret;

    optind = 0;
    for (;;) {
        int o = next_opt(cmd, CLUSTER_USAGE, argc, argv, opts, &c);

        if (o == -1)
            break;
        if (o == 'h' || o == OPT_HELP) {
            fputs(CLUSTER_USAGE, stdout);
            return KQ_EXIT_OK;
        }
        if (o == OPT_ID) {
            if (!kq_tools_parse_int(optarg, 0, INT32_MAX, &id))
                return kq_tools_usage_error(cmd, CLUSTER_USAGE,
                                            "--id '%s' is not a broker id (0..2147483647)", optarg);
            continue;
        }
        return KQ_EXIT_USAGE;
    }
    for (; optind < argc; optind++) {
        if (strcmp(argv[optind], "describe") == 0 && !describe && !unregister)
            describe = true;
        else if (strcmp(argv[optind], "unregister") == 0 && !describe && !unregister)
            unregister = true;
        else
            return kq_tools_usage_error(cmd, CLUSTER_USAGE, "unexpected argument '%s'",
                                        argv[optind]);
    }
    if (!describe && !unregister)
        return kq_tools_usage_error(cmd, CLUSTER_USAGE,
                                    "missing subcommand 'describe' or 'unregister'");
    if (c.n_addrs == 0)
        return kq_tools_usage_error(cmd, CLUSTER_USAGE, "missing --bootstrap-controller");
    if (unregister) {
        if (id < 0)
            return kq_tools_usage_error(cmd, CLUSTER_USAGE, "unregister needs --id B");
        if (c.json)
            return kq_tools_usage_error(cmd, CLUSTER_USAGE, "--json goes with describe");
        return unregister_broker(&c, (int32_t)id);
    }
    if (id >= 0)
        return kq_tools_usage_error(cmd, CLUSTER_USAGE, "--id goes with 'unregister'");
    ret = describe_cluster(&c, &cd);
    if (ret == KQ_EXIT_OK)
        kq_tools_print_cluster(stdout, &cd, c.json);
    kq_ctl_cluster_desc_free(&cd);
    return ret;
}

/* ---- kq leader-election -------------------------------------------------------------------- */

static const char ELECT_USAGE[] =
    "Usage: kq leader-election --bootstrap-controller HOST:PORT[,...]\n"
    "                          --election-type PREFERRED|UNCLEAN\n"
    "                          (--topic T --partition P | --all-topic-partitions)\n" CONN_USAGE;

int kq_cmd_leader_election(int argc, char **argv)
{
    static const char cmd[] = "leader-election";
    static const struct option opts[] = {
        CONN_OPTIONS,
        {"election-type", required_argument, NULL, OPT_ELECTION_TYPE},
        {"topic", required_argument, NULL, OPT_TOPIC},
        {"partition", required_argument, NULL, OPT_PARTITION},
        {"all-topic-partitions", no_argument, NULL, OPT_ALL_PARTITIONS},
        {NULL, 0, NULL, 0},
    };
    conn c = {.timeout_ms = DEFAULT_TIMEOUT_MS};
    const char *type = NULL, *topic = NULL;
    int64_t partition = -1;
    bool all = false;
    kq_ctl_item_results items = {0};
    kq_ctl_request req = {.api_key = KQ_API_ELECT_LEADERS};
    kq_elect_target target;
    int ret, failed;

    optind = 0;
    for (;;) {
        int o = next_opt(cmd, ELECT_USAGE, argc, argv, opts, &c);

        if (o == -1)
            break;
        switch (o) {
        case OPT_ELECTION_TYPE:
            if (strcasecmp(optarg, "PREFERRED") == 0)
                type = "PREFERRED";
            else if (strcasecmp(optarg, "UNCLEAN") == 0)
                type = "UNCLEAN";
            else
                return kq_tools_usage_error(
                    cmd, ELECT_USAGE, "--election-type: '%s' is not PREFERRED or UNCLEAN", optarg);
            break;
        case OPT_TOPIC:
            topic = optarg;
            break;
        case OPT_PARTITION:
            if (!kq_tools_parse_int(optarg, 0, INT32_MAX, &partition))
                return kq_tools_usage_error(cmd, ELECT_USAGE,
                                            "--partition: '%s' is not an integer >= 0", optarg);
            break;
        case OPT_ALL_PARTITIONS:
            all = true;
            break;
        case 'h':
        case OPT_HELP:
            fputs(ELECT_USAGE, stdout);
            return KQ_EXIT_OK;
        default:
            return KQ_EXIT_USAGE;
        }
    }
    if (optind < argc)
        return kq_tools_usage_error(cmd, ELECT_USAGE, "unexpected argument '%s'", argv[optind]);
    if (!type)
        return kq_tools_usage_error(cmd, ELECT_USAGE, "missing --election-type");
    if (all == (topic != NULL) || (topic && partition < 0) || (all && partition >= 0))
        return kq_tools_usage_error(cmd, ELECT_USAGE,
                                    "give either --all-topic-partitions or --topic with "
                                    "--partition");
    if (c.json)
        return kq_tools_usage_error(cmd, ELECT_USAGE,
                                    "--json is not supported: the result is Kafka's text lines "
                                    "and the exit status");
    if (c.n_addrs == 0)
        return kq_tools_usage_error(cmd, ELECT_USAGE, "missing --bootstrap-controller");
    req.elect_leaders.election_type =
        strcmp(type, "PREFERRED") == 0 ? KQ_ELECTION_TYPE_PREFERRED : KQ_ELECTION_TYPE_UNCLEAN;
    req.elect_leaders.all_partitions = all;
    if (!all) {
        target.topic = topic;
        target.partition = (int32_t)partition;
        req.elect_leaders.targets = &target;
        req.elect_leaders.n_targets = 1;
    }
    ret = call_decode(&c, &req, &items);
    if (ret)
        return ret;
    failed = kq_tools_print_election(stdout, &items, type);
    kq_ctl_item_results_free(&items);
    if (failed) {
        kq_tools_errorf("%d replica(s) could not be elected", failed);
        return KQ_EXIT_FAILURE;
    }
    return KQ_EXIT_OK;
}

/* ---- kq configs ---------------------------------------------------------------------------- */

static const char CONFIGS_USAGE[] =
    "Usage: kq configs --bootstrap-controller HOST:PORT[,...] --entity-type topics|brokers\n"
    "                  (--entity-name N | --entity-default)\n"
    "                  (--describe [--all] [--json] |\n"
    "                   --alter [--add-config k=v[,k=v...]] [--delete-config "
    "k[,k...]])\n" CONN_USAGE "  --entity-default             brokers: the cluster-wide default\n";

/* Split "a,b,c" in place into ops. */
static int split_ops(char *s, int8_t op, kq_config_op *ops, int *n, const char *cmd)
{
    for (char *save = NULL, *tok = strtok_r(s, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        if (*n >= MAX_CONFIGS)
            return kq_tools_usage_error(cmd, CONFIGS_USAGE, "too many configs");
        ops[*n].op = op;
        if (op == KQ_CONFIG_OP_SET) {
            char *eq = strchr(tok, '=');

            if (!eq || eq == tok)
                return kq_tools_usage_error(cmd, CONFIGS_USAGE,
                                            "--add-config: '%s' is not of the form key=value", tok);
            *eq = '\0';
            ops[*n].value = eq + 1;
        } else {
            ops[*n].value = NULL;
        }
        ops[*n].name = tok;
        (*n)++;
    }
    return 0;
}

int kq_cmd_configs(int argc, char **argv)
{
    static const char cmd[] = "configs";
    static const struct option opts[] = {
        CONN_OPTIONS,
        {"entity-type", required_argument, NULL, OPT_ENTITY_TYPE},
        {"entity-name", required_argument, NULL, OPT_ENTITY_NAME},
        {"entity-default", no_argument, NULL, OPT_ENTITY_DEFAULT},
        {"describe", no_argument, NULL, OPT_DESCRIBE},
        {"alter", no_argument, NULL, OPT_ALTER},
        {"add-config", required_argument, NULL, OPT_ADD_CONFIG},
        {"delete-config", required_argument, NULL, OPT_DELETE_CONFIG},
        {"all", no_argument, NULL, OPT_ALL},
        {NULL, 0, NULL, 0},
    };
    conn c = {.timeout_ms = DEFAULT_TIMEOUT_MS};
    int8_t type = 0;
    const char *name = NULL;
    bool dflt = false, describe = false, alter = false, all = false;
    char *add = NULL, *del = NULL;
    kq_config_op ops[MAX_CONFIGS];
    int n_ops = 0, ret = KQ_EXIT_OK;
    kq_ctl_item_results items = {0};
    kq_ctl_configs_desc cd = {0};

    optind = 0;
    for (;;) {
        int o = next_opt(cmd, CONFIGS_USAGE, argc, argv, opts, &c);

        if (o == -1)
            break;
        switch (o) {
        case OPT_ENTITY_TYPE:
            if (strcmp(optarg, "topics") == 0)
                type = KQ_CONFIG_RESOURCE_TOPIC;
            else if (strcmp(optarg, "brokers") == 0)
                type = KQ_CONFIG_RESOURCE_BROKER;
            else
                return kq_tools_usage_error(cmd, CONFIGS_USAGE,
                                            "--entity-type: '%s' is not topics or brokers", optarg);
            break;
        case OPT_ENTITY_NAME:
            name = optarg;
            break;
        case OPT_ENTITY_DEFAULT:
            dflt = true;
            break;
        case OPT_DESCRIBE:
            describe = true;
            break;
        case OPT_ALTER:
            alter = true;
            break;
        case OPT_ADD_CONFIG:
            add = optarg;
            break;
        case OPT_DELETE_CONFIG:
            del = optarg;
            break;
        case OPT_ALL:
            all = true;
            break;
        case 'h':
        case OPT_HELP:
            fputs(CONFIGS_USAGE, stdout);
            return KQ_EXIT_OK;
        default:
            return KQ_EXIT_USAGE;
        }
    }
    if (optind < argc)
        return kq_tools_usage_error(cmd, CONFIGS_USAGE, "unexpected argument '%s'", argv[optind]);
    if (!type)
        return kq_tools_usage_error(cmd, CONFIGS_USAGE, "missing --entity-type");
    if ((name != NULL) == dflt)
        return kq_tools_usage_error(cmd, CONFIGS_USAGE,
                                    "give exactly one of --entity-name or --entity-default");
    if (dflt && type == KQ_CONFIG_RESOURCE_TOPIC)
        return kq_tools_usage_error(cmd, CONFIGS_USAGE,
                                    "--entity-default is only for --entity-type brokers");
    if (describe == alter)
        return kq_tools_usage_error(cmd, CONFIGS_USAGE,
                                    "give exactly one of --describe or --alter");
    if (alter && !add && !del)
        return kq_tools_usage_error(cmd, CONFIGS_USAGE,
                                    "--alter needs --add-config and/or --delete-config");
    if (describe && (add || del))
        return kq_tools_usage_error(cmd, CONFIGS_USAGE,
                                    "--add-config and --delete-config go with --alter");
    if (alter && c.json)
        return kq_tools_usage_error(cmd, CONFIGS_USAGE, "--json goes with --describe");
    if (c.n_addrs == 0)
        return kq_tools_usage_error(cmd, CONFIGS_USAGE, "missing --bootstrap-controller");
    if (!name)
        name = "";

    if (alter) {
        kq_alter_config_resource r = {.resource_type = type, .resource_name = name};
        kq_ctl_request req = {.api_key = KQ_API_INCREMENTAL_ALTER_CONFIGS};

        if ((add && split_ops(add, KQ_CONFIG_OP_SET, ops, &n_ops, cmd)) ||
            (del && split_ops(del, KQ_CONFIG_OP_DELETE, ops, &n_ops, cmd)))
            return KQ_EXIT_USAGE;
        if (n_ops == 0)
            return kq_tools_usage_error(cmd, CONFIGS_USAGE, "no configs to change");
        r.ops = ops;
        r.n_ops = n_ops;
        req.alter_configs.resources = &r;
        req.alter_configs.n = 1;
        ret = call_decode(&c, &req, &items);
        if (ret)
            return ret;
        if (items.n != 1 || items.items[0].error) {
            kq_tools_errorf("%s",
                            items.n == 1 ? item_message(&items.items[0]) : "unexpected response");
            ret = KQ_EXIT_FAILURE;
        } else if (!name[0]) {
            printf("Completed updating default config for brokers in the cluster.\n");
        } else {
            printf("Completed updating config for %s %s.\n",
                   type == KQ_CONFIG_RESOURCE_TOPIC ? "topic" : "broker", name);
        }
        kq_ctl_item_results_free(&items);
        return ret;
    }

    kq_describe_config_resource r = {.resource_type = type, .resource_name = name};
    kq_ctl_request req = {.api_key = KQ_API_DESCRIBE_CONFIGS};

    req.describe_configs.resources = &r;
    req.describe_configs.n = 1;
    ret = call_decode(&c, &req, &cd);
    if (ret)
        return ret;
    if (cd.n_results != 1) {
        kq_tools_errorf("the controller answered %d results for one resource", cd.n_results);
        ret = KQ_EXIT_FAILURE;
    } else if (cd.results[0].error) {
        kq_tools_errorf("%s: %s", kq_err_name(cd.results[0].error),
                        cd.results[0].message ? cd.results[0].message
                                              : kq_err_message(cd.results[0].error));
        ret = KQ_EXIT_FAILURE;
    } else {
        kq_tools_print_configs(stdout, &cd.results[0], all, c.json);
    }
    kq_ctl_configs_desc_free(&cd);
    return ret;
}

/* ---- kq features --------------------------------------------------------------------------- */

static const char FEATURES_USAGE[] =
    "Usage: kq features --bootstrap-controller HOST:PORT[,...] SUBCOMMAND [options]\n"
    "  describe [--json]            supported and finalized feature levels\n"
    "  upgrade --feature NAME=LEVEL [--feature ...] [--dry-run]\n"
    "  downgrade --feature NAME=LEVEL [--feature ...] [--unsafe] [--dry-run]\n"
    "  disable --feature NAME [--feature ...] [--unsafe] [--dry-run]\n"
    "                               disable sets the level to 0; --dry-run only validates;\n"
    "                               --unsafe allows a downgrade that may lose "
    "metadata\n" CONN_USAGE;

static int describe_features(const conn *c)
{
    kq_ctl_request req = {.api_key = KQ_API_DESCRIBE_FEATURES};
    kq_ctl_features_desc fd = {0};

    if (call_decode(c, &req, &fd) != KQ_EXIT_OK)
        return KQ_EXIT_FAILURE;
    kq_tools_print_features(stdout, &fd, c->json);
    kq_ctl_features_desc_free(&fd);
    return KQ_EXIT_OK;
}

/* upgrade / downgrade / disable: one UpdateFeatures request, one line per feature. */
static int update_features(const conn *c, kq_tools_feature_op op, const char *const *values,
                           int n_values, bool unsafe, bool dry_run)
{
    kq_ctl_request req = {.api_key = KQ_API_UPDATE_FEATURES};
    kq_ctl_item_results items = {0};
    kq_tools_feature_updates *u = calloc(1, sizeof *u);
    char err[256] = "";
    int ret, failed;

    if (!u) {
        kq_tools_errorf("out of memory");
        return KQ_EXIT_FAILURE;
    }
    if (kq_tools_parse_feature_updates(op, values, n_values, unsafe, u, err, sizeof err)) {
        ret = kq_tools_usage_error("features", FEATURES_USAGE, "%s", err);
        goto out;
    }
    req.update_features.updates = u->ups;
    req.update_features.n = u->n;
    req.update_features.validate_only = dry_run;
    ret = call_decode(c, &req, &items);
    if (ret)
        goto out;
    failed = kq_tools_print_feature_results(stdout, op, u, &items, dry_run);
    if (failed) {
        kq_tools_errorf("%d out of %d operation(s) failed.", failed, (int)u->n);
        ret = KQ_EXIT_FAILURE;
    }
out:
    kq_ctl_item_results_free(&items);
    free(u);
    return ret;
}

int kq_cmd_features(int argc, char **argv)
{
    static const char cmd[] = "features";
    static const struct option opts[] = {
        CONN_OPTIONS,
        {"feature", required_argument, NULL, OPT_FEATURE},
        {"unsafe", no_argument, NULL, OPT_UNSAFE},
        {"dry-run", no_argument, NULL, OPT_DRY_RUN},
        {NULL, 0, NULL, 0},
    };
    conn c = {.timeout_ms = DEFAULT_TIMEOUT_MS};
    const char *values[KQ_TOOLS_MAX_FEATURES];
    const char *sub = NULL;
    int n_values = 0;
    bool unsafe = false, dry_run = false;
    kq_tools_feature_op op;

    optind = 0;
    for (;;) {
        int o = next_opt(cmd, FEATURES_USAGE, argc, argv, opts, &c);

        if (o == -1)
            break;
        switch (o) {
        case OPT_FEATURE:
            if (n_values >= KQ_TOOLS_MAX_FEATURES)
                return kq_tools_usage_error(cmd, FEATURES_USAGE, "at most %d --feature options",
                                            KQ_TOOLS_MAX_FEATURES);
            values[n_values++] = optarg;
            break;
        case OPT_UNSAFE:
            unsafe = true;
            break;
        case OPT_DRY_RUN:
            dry_run = true;
            break;
        case 'h':
        case OPT_HELP:
            fputs(FEATURES_USAGE, stdout);
            return KQ_EXIT_OK;
        default:
            return KQ_EXIT_USAGE;
        }
    }
    for (; optind < argc; optind++) {
        if (!sub &&
            (strcmp(argv[optind], "describe") == 0 || strcmp(argv[optind], "upgrade") == 0 ||
             strcmp(argv[optind], "downgrade") == 0 || strcmp(argv[optind], "disable") == 0))
            sub = argv[optind];
        else
            return kq_tools_usage_error(cmd, FEATURES_USAGE, "unexpected argument '%s'",
                                        argv[optind]);
    }
    if (!sub)
        return kq_tools_usage_error(cmd, FEATURES_USAGE,
                                    "missing subcommand: describe, upgrade, downgrade or disable");
    if (strcmp(sub, "describe") == 0) {
        if (n_values || unsafe || dry_run)
            return kq_tools_usage_error(cmd, FEATURES_USAGE,
                                        "--feature, --unsafe and --dry-run go with upgrade, "
                                        "downgrade and disable");
    } else if (c.json) {
        return kq_tools_usage_error(cmd, FEATURES_USAGE, "--json goes with describe");
    }
    if (c.n_addrs == 0)
        return kq_tools_usage_error(cmd, FEATURES_USAGE, "missing --bootstrap-controller");
    if (strcmp(sub, "describe") == 0)
        return describe_features(&c);
    op = strcmp(sub, "upgrade") == 0     ? KQ_TOOLS_FEATURE_UPGRADE
         : strcmp(sub, "downgrade") == 0 ? KQ_TOOLS_FEATURE_DOWNGRADE
                                         : KQ_TOOLS_FEATURE_DISABLE;
    return update_features(&c, op, values, n_values, unsafe, dry_run);
}

/* ---- kq acls ------------------------------------------------------------------------------- */

static const char ACLS_USAGE[] =
    "Usage: kq acls --bootstrap-controller HOST:PORT[,...] ACTION [options]\n"
    "  --add     (--allow-principal P | --deny-principal P)... [--operation OP]...\n"
    "            (--topic T | --cluster)... [--resource-pattern-type literal|prefixed]\n"
    "  --remove  [--allow-principal P | --deny-principal P]... [--operation OP]...\n"
    "            (--topic T | --cluster)... [--resource-pattern-type TYPE] [--force]\n"
    "  --list    [--topic T | --cluster]... [--principal P] [--resource-pattern-type TYPE]\n"
    "            [--json]\n"
    "  --allow-host H, --deny-host H  only * (kq does not scope ACLs by client address)\n"
    "  --operation OP     All, Read, Write, Create, Delete, Alter, Describe, ClusterAction,\n"
    "                     DescribeConfigs, AlterConfigs, IdempotentWrite (default All; a\n"
    "                     --remove without principals removes every ACL of the resource)\n"
    "  --resource-pattern-type  literal (default), prefixed; --list and --remove also any\n"
    "                     and match (the ACLs that apply to the named resource); --list\n"
    "                     without --topic/--cluster lists every ACL\n"
    "  --force            --remove without asking\n" CONN_USAGE
    "  --json                       --list: one JSON object\n";

#define ACL_MAX_ARGS 64

typedef struct acl_args {
    const char *principals[ACL_MAX_ARGS];
    int8_t permissions[ACL_MAX_ARGS]; /* per principal: ALLOW or DENY */
    int n_principals;
    const char *list_principal;
    int8_t ops[ACL_MAX_ARGS];
    int n_ops;
    kq_acl resources[ACL_MAX_ARGS]; /* type and name (pattern set after parsing) */
    int n_resources;
    int8_t pattern; /* 0 until given */
} acl_args;

static int acl_add_value(const char *cmd, int *n, const char *what)
{
    if (*n < ACL_MAX_ARGS)
        return 0;
    return kq_tools_usage_error(cmd, ACLS_USAGE, "at most %d %s options", ACL_MAX_ARGS, what);
}

/* The bindings of --add, or the filters of --remove, one per resource x principal x operation
 * (a filter with no principal or operation given takes any). */
static int acl_combinations(const acl_args *a, bool filters, kq_acl *bindings, kq_acl_filter *fs,
                            int max)
{
    int n = 0, np = a->n_principals ? a->n_principals : 1, no = a->n_ops ? a->n_ops : 1;

    for (int r = 0; r < a->n_resources; r++)
        for (int p = 0; p < np; p++)
            for (int o = 0; o < no && n < max; o++, n++) {
                const char *principal = a->n_principals ? a->principals[p] : NULL;
                int8_t perm = a->n_principals ? a->permissions[p] : KQ_ACL_ANY;
                /* as kafka-acls.sh: no --operation is All, except a --remove naming no
                 * principal, which removes every ACL on the resource */
                int8_t op = a->n_ops                      ? a->ops[o]
                            : filters && !a->n_principals ? KQ_ACL_ANY
                                                          : KQ_ACL_OP_ALL;

                if (filters)
                    fs[n] = (kq_acl_filter){a->resources[r].resource_type,
                                            a->resources[r].resource_name,
                                            a->pattern,
                                            principal,
                                            NULL,
                                            op,
                                            perm};
                else
                    bindings[n] = (kq_acl){.resource_type = a->resources[r].resource_type,
                                           .resource_name = a->resources[r].resource_name,
                                           .pattern_type = a->pattern,
                                           .principal = principal,
                                           .host = "*",
                                           .operation = op,
                                           .permission = perm};
            }
    return n;
}

static int describe_acls(const conn *c, const kq_acl_filter *f, kq_ctl_acls_desc *out)
{
    kq_ctl_request req = {.api_key = KQ_API_DESCRIBE_ACLS};

    req.describe_acls.filter = *f;
    return call_decode(c, &req, out);
}

/* After --add and --remove: the resources' ACLs as they now are, as kafka-acls.sh prints
 * them (a resource with none left prints nothing). */
static int print_current(const conn *c, const acl_args *a)
{
    for (int r = 0; r < a->n_resources; r++) {
        kq_acl_filter f = {a->resources[r].resource_type,
                           a->resources[r].resource_name,
                           a->pattern ? a->pattern : KQ_ACL_PATTERN_LITERAL, /* as given */
                           NULL,
                           NULL,
                           KQ_ACL_ANY,
                           KQ_ACL_ANY};
        kq_ctl_acls_desc d = {0};

        if (describe_acls(c, &f, &d) != KQ_EXIT_OK)
            return KQ_EXIT_FAILURE;
        kq_tools_print_acls(stdout, d.acls, d.n, false);
        kq_ctl_acls_desc_free(&d);
    }
    return KQ_EXIT_OK;
}

static int add_acls(const conn *c, const acl_args *a)
{
    int max = a->n_resources * a->n_principals * (a->n_ops ? a->n_ops : 1);
    kq_acl *b = calloc((size_t)max, sizeof *b);
    kq_ctl_request req = {.api_key = KQ_API_CREATE_ACLS};
    kq_ctl_item_results items = {0};
    char buf[1024];
    int ret, failed = 0;

    if (!b) {
        kq_tools_errorf("out of memory");
        return KQ_EXIT_FAILURE;
    }
    req.create_acls.acls = b;
    req.create_acls.n = acl_combinations(a, false, b, NULL, max);
    kq_tools_print_acl_blocks(stdout, "Adding ACLs", b, req.create_acls.n);
    ret = call_decode(c, &req, &items);
    for (int32_t i = 0; ret == KQ_EXIT_OK && i < items.n && i < req.create_acls.n; i++) {
        if (!items.items[i].error)
            continue;
        kq_acl_entry_format(&b[i], buf, sizeof buf);
        kq_tools_errorf("Error while adding ACL %s: %s", buf, item_message(&items.items[i]));
        failed++;
    }
    kq_ctl_item_results_free(&items);
    ret = ret == KQ_EXIT_OK ? print_current(c, a) : ret;
    free(b);
    return ret != KQ_EXIT_OK || failed ? KQ_EXIT_FAILURE : KQ_EXIT_OK;
}

static int remove_acls(const conn *c, const acl_args *a, bool force)
{
    int max = a->n_resources * (a->n_principals ? a->n_principals : 1) * (a->n_ops ? a->n_ops : 1);
    kq_acl_filter *f = calloc((size_t)max, sizeof *f);
    kq_ctl_request req = {.api_key = KQ_API_DELETE_ACLS};
    kq_ctl_delete_acls_desc d = {0};
    int ret, failed = 0;

    if (!f) {
        kq_tools_errorf("out of memory");
        return KQ_EXIT_FAILURE;
    }
    req.delete_acls.filters = f;
    req.delete_acls.n = acl_combinations(a, true, NULL, f, max);
    if (!force) {
        char answer[16] = "";

        printf("Are you sure you want to remove ACLs matching %d filter(s) from the cluster? "
               "(y/n)\n",
               (int)req.delete_acls.n);
        fflush(stdout);
        if (!fgets(answer, sizeof answer, stdin) || (answer[0] != 'y' && answer[0] != 'Y')) {
            free(f);
            return KQ_EXIT_OK;
        }
    }
    ret = call_decode(c, &req, &d);
    for (int32_t i = 0; ret == KQ_EXIT_OK && i < d.n; i++) {
        const kq_ctl_delete_acls_result *r = &d.results[i];

        if (r->error) {
            kq_tools_errorf("Error while removing ACLs: %s",
                            r->message && r->message[0] ? r->message : kq_err_message(r->error));
            failed++;
        }
    }
    kq_ctl_delete_acls_desc_free(&d);
    free(f);
    ret = ret == KQ_EXIT_OK ? print_current(c, a) : ret; /* as kafka-acls.sh: what is left */
    return ret != KQ_EXIT_OK || failed ? KQ_EXIT_FAILURE : KQ_EXIT_OK;
}

static int list_acls(const conn *c, const acl_args *a)
{
    kq_ctl_acls_desc all = {0};
    int n = a->n_resources ? a->n_resources : 1, ret = KQ_EXIT_OK;

    for (int r = 0; r < n && ret == KQ_EXIT_OK; r++) {
        /* as kafka-acls.sh: a named resource's literal ACLs unless told otherwise; with no
         * resource, every ACL (MATCH needs a name: any) */
        kq_acl_filter f = {KQ_ACL_ANY, NULL,       KQ_ACL_ANY, a->list_principal,
                           NULL,       KQ_ACL_ANY, KQ_ACL_ANY};
        kq_ctl_acls_desc d = {0};
        kq_acl *grown;

        if (a->n_resources) {
            f.resource_type = a->resources[r].resource_type;
            f.resource_name = a->resources[r].resource_name;
            f.pattern_type = a->pattern ? a->pattern : KQ_ACL_PATTERN_LITERAL;
        } else if (a->pattern && a->pattern != KQ_ACL_PATTERN_MATCH) {
            f.pattern_type = a->pattern;
        }
        if ((ret = describe_acls(c, &f, &d)) != KQ_EXIT_OK)
            break;
        grown = d.n ? realloc(all.acls, (size_t)(all.n + d.n) * sizeof *all.acls) : all.acls;
        if (d.n && !grown) {
            kq_tools_errorf("out of memory");
            ret = KQ_EXIT_FAILURE;
        } else if (d.n) {
            all.acls = grown;
            memcpy(all.acls + all.n, d.acls, (size_t)d.n * sizeof *d.acls);
            all.n += d.n;
            free(d.acls); /* the strings moved to `all` */
            d.acls = NULL;
            d.n = 0;
        }
        kq_ctl_acls_desc_free(&d);
    }
    if (ret == KQ_EXIT_OK && a->list_principal && !c->json)
        printf("ACLs for principal `%s`\n", a->list_principal);
    if (ret == KQ_EXIT_OK)
        kq_tools_print_acls(stdout, all.acls, all.n, c->json);
    kq_ctl_acls_desc_free(&all);
    return ret;
}

int kq_cmd_acls(int argc, char **argv)
{
    static const char cmd[] = "acls";
    static const struct option opts[] = {
        CONN_OPTIONS,
        {"add", no_argument, NULL, OPT_ADD},
        {"remove", no_argument, NULL, OPT_REMOVE},
        {"list", no_argument, NULL, OPT_LIST},
        {"allow-principal", required_argument, NULL, OPT_ALLOW_PRINCIPAL},
        {"deny-principal", required_argument, NULL, OPT_DENY_PRINCIPAL},
        {"principal", required_argument, NULL, OPT_PRINCIPAL},
        {"allow-host", required_argument, NULL, OPT_ALLOW_HOST},
        {"deny-host", required_argument, NULL, OPT_DENY_HOST},
        {"operation", required_argument, NULL, OPT_OPERATION},
        {"topic", required_argument, NULL, OPT_TOPIC},
        {"cluster", no_argument, NULL, OPT_CLUSTER},
        {"resource-pattern-type", required_argument, NULL, OPT_PATTERN_TYPE},
        {"force", no_argument, NULL, OPT_FORCE},
        {NULL, 0, NULL, 0},
    };
    conn c = {.timeout_ms = DEFAULT_TIMEOUT_MS};
    acl_args *a = calloc(1, sizeof *a);
    int action = 0, o, ret;
    bool force = false;

    if (!a) {
        kq_tools_errorf("out of memory");
        return KQ_EXIT_FAILURE;
    }
    optind = 0;
    while ((o = next_opt(cmd, ACLS_USAGE, argc, argv, opts, &c)) != -1) {
        ret = -1;
        switch (o) {
        case OPT_ADD:
        case OPT_REMOVE:
        case OPT_LIST:
            if (action && action != o)
                ret =
                    kq_tools_usage_error(cmd, ACLS_USAGE, "give one of --add, --remove and --list");
            action = o;
            break;
        case OPT_ALLOW_PRINCIPAL:
        case OPT_DENY_PRINCIPAL:
            if (!(ret = acl_add_value(cmd, &a->n_principals, "principal"))) {
                a->principals[a->n_principals] = optarg;
                a->permissions[a->n_principals++] =
                    o == OPT_ALLOW_PRINCIPAL ? KQ_ACL_ALLOW : KQ_ACL_DENY;
                ret = -1;
            }
            break;
        case OPT_PRINCIPAL:
            a->list_principal = optarg;
            break;
        case OPT_ALLOW_HOST:
        case OPT_DENY_HOST:
            if (strcmp(optarg, "*"))
                ret = kq_tools_usage_error(cmd, ACLS_USAGE,
                                           "--allow-host/--deny-host '%s': kq does not scope ACLs "
                                           "by client address; only * is accepted",
                                           optarg);
            break;
        case OPT_OPERATION: {
            int op = kq_acl_operation_parse(optarg, true);

            if (!op)
                ret = kq_tools_usage_error(cmd, ACLS_USAGE, "--operation: unknown operation '%s'",
                                           optarg);
            else if (!(ret = acl_add_value(cmd, &a->n_ops, "--operation"))) {
                a->ops[a->n_ops++] = (int8_t)op;
                ret = -1;
            }
            break;
        }
        case OPT_TOPIC:
        case OPT_CLUSTER:
            if (!(ret = acl_add_value(cmd, &a->n_resources, "--topic/--cluster"))) {
                kq_acl *r = &a->resources[a->n_resources++];

                r->resource_type = o == OPT_TOPIC ? KQ_ACL_RESOURCE_TOPIC : KQ_ACL_RESOURCE_CLUSTER;
                r->resource_name = o == OPT_TOPIC ? optarg : KQ_ACL_CLUSTER_NAME;
                ret = -1;
            }
            break;
        case OPT_PATTERN_TYPE:
            if (!(a->pattern = (int8_t)kq_acl_pattern_type_parse(optarg, true)))
                ret = kq_tools_usage_error(cmd, ACLS_USAGE,
                                           "--resource-pattern-type: '%s' is not literal, "
                                           "prefixed, any or match",
                                           optarg);
            break;
        case OPT_FORCE:
            force = true;
            break;
        case 'h':
        case OPT_HELP:
            fputs(ACLS_USAGE, stdout);
            ret = KQ_EXIT_OK;
            break;
        default:
            ret = KQ_EXIT_USAGE;
            break;
        }
        if (ret >= 0)
            goto out;
    }
    ret = -1;
    if (optind < argc)
        ret = kq_tools_usage_error(cmd, ACLS_USAGE, "unexpected argument '%s'", argv[optind]);
    else if (!action)
        ret = kq_tools_usage_error(cmd, ACLS_USAGE, "missing action: --add, --remove or --list");
    else if (c.n_addrs == 0)
        ret = kq_tools_usage_error(cmd, ACLS_USAGE, "missing --bootstrap-controller");
    else if (c.json && action != OPT_LIST)
        ret = kq_tools_usage_error(cmd, ACLS_USAGE, "--json goes with --list");
    else if (action != OPT_LIST && !a->n_resources)
        ret = kq_tools_usage_error(cmd, ACLS_USAGE, "--add and --remove need --topic or --cluster");
    else if (action != OPT_LIST && a->list_principal)
        ret = kq_tools_usage_error(cmd, ACLS_USAGE,
                                   "--principal goes with --list (--add and --remove take "
                                   "--allow-principal and --deny-principal)");
    else if (action == OPT_ADD && !a->n_principals)
        ret = kq_tools_usage_error(cmd, ACLS_USAGE,
                                   "--add needs --allow-principal or --deny-principal");
    else if (action == OPT_ADD && a->pattern && a->pattern != KQ_ACL_PATTERN_LITERAL &&
             a->pattern != KQ_ACL_PATTERN_PREFIXED)
        ret = kq_tools_usage_error(cmd, ACLS_USAGE,
                                   "--add needs --resource-pattern-type literal or prefixed");
    if (ret >= 0)
        goto out;
    if (!a->pattern && action != OPT_LIST)
        a->pattern = KQ_ACL_PATTERN_LITERAL;
    for (int i = 0; action == OPT_ADD && i < a->n_ops; i++)
        if (a->ops[i] == KQ_ACL_ANY) {
            ret = kq_tools_usage_error(cmd, ACLS_USAGE, "--add needs operations, not Any");
            goto out;
        }
    ret = action == OPT_ADD      ? add_acls(&c, a)
          : action == OPT_REMOVE ? remove_acls(&c, a, force)
                                 : list_acls(&c, a);
out:
    free(a);
    return ret;
}
