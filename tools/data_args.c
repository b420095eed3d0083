/*
 * kq produce / kq consume: argument parsing, error classification and output lines (pure;
 * contract in tools/data_client.h).
 */
#include <getopt.h>
#include <inttypes.h>
#include <stdarg.h>
#include <string.h>
#include <strings.h>

#include "data_client.h"
#include "kq/error.h"
#include "kq/records.h"

const char kq_dc_produce_usage[] =
    "Usage: kq produce --bootstrap-server HOST:PORT[,...] --topic TOPIC [options]\n"
    "Writes one record per line of stdin (without the newline), or the single --value, to one\n"
    "partition, idempotently, and prints one result line per record in input order.\n"
    "  --bootstrap-server LIST     brokers to ask for metadata (HOST:PORT[,...])\n"
    "  --topic TOPIC               topic to write to\n"
    "  --partition P               partition (default 0)\n"
    "  --acks all|-1|1|0           acknowledgement (default all)\n"
    "  --request-timeout-ms N      wait for one answer (default 30000)\n"
    "  --delivery-timeout-ms N     retry one record for at most this long (default 120000)\n"
    "  --value V                   write V instead of reading stdin\n"
    "  --command-config FILE       client properties: security.protocol=SSL and the ssl.* keys\n"
    "Exit status: 0 all written, 1 a record failed or no broker answered, 2 usage error.\n";

const char kq_dc_consume_usage[] =
    "Usage: kq consume --bootstrap-server HOST:PORT[,...] --topic TOPIC [options]\n"
    "Prints the committed records (below the high watermark) of one partition, one per line.\n"
    "  --bootstrap-server LIST     brokers to ask for metadata (HOST:PORT[,...])\n"
    "  --topic TOPIC               topic to read\n"
    "  --partition P               partition (default 0)\n"
    "  --from-beginning            start at the log start (default: the latest offset)\n"
    "  --max-records N             stop after N records\n"
    "  --timeout-ms N              stop when no record arrived for N ms (default: wait forever)\n"
    "  --print-offsets             print OFFSET<TAB>VALUE\n"
    "  --command-config FILE       client properties: security.protocol=SSL and the ssl.* keys\n"
    "Prints \"Processed a total of N messages\" on stderr at the end.\n"
    "Exit status: 0 done, 1 failure, 2 usage error.\n";

enum {
    OPT_BOOTSTRAP = 1000,
    OPT_TOPIC,
    OPT_PARTITION,
    OPT_ACKS,
    OPT_REQUEST_TIMEOUT,
    OPT_DELIVERY_TIMEOUT,
    OPT_VALUE,
    OPT_FROM_BEGINNING,
    OPT_MAX_RECORDS,
    OPT_TIMEOUT,
    OPT_PRINT_OFFSETS,
    OPT_COMMAND_CONFIG,
    OPT_HELP,
};

__attribute__((format(printf, 3, 4))) static int bad(char *errbuf, size_t errlen, const char *fmt,
                                                     ...)
{
    if (errbuf && errlen > 0) {
        va_list ap;

        va_start(ap, fmt);
        vsnprintf(errbuf, errlen, fmt, ap);
        va_end(ap);
    }
    return KQ_ERR_CONFIG;
}

static int parse_number(const char *flag, const char *v, int64_t min, int64_t max, int64_t *out,
                        char *errbuf, size_t errlen)
{
    if (!kq_tools_parse_int(v, min, max, out))
        return bad(errbuf, errlen, "%s: '%s' is not an integer in [%" PRId64 ", %" PRId64 "]", flag,
                   v, min, max);
    return 0;
}

static int parse_bootstrap(const char *v, kq_tools_addr *addrs, int *n, char *errbuf, size_t errlen)
{
    char e[256];

    if (kq_tools_parse_addrs(v, addrs, KQ_TOOLS_MAX_ADDRS, n, e, sizeof e) != 0)
        return bad(errbuf, errlen, "--bootstrap-server: %s", e);
    return 0;
}

static int parse_topic(const char *v, const char **out, char *errbuf, size_t errlen)
{
    if (!kq_topic_name_valid(v))
        return bad(errbuf, errlen,
                   "--topic: '%.260s' is not a valid topic name (1 to 249 of a-z A-Z 0-9 . _ -, "
                   "not . or ..)",
                   v);
    *out = v;
    return 0;
}

/* getopt_long over opts; handles the errors common to both commands. Returns the option, -1
 * at the end, or -2 after an error (errbuf set). */
static int next_opt(int argc, char **argv, const struct option *opts, char *errbuf, size_t errlen)
{
    char ob[64];
    int o = getopt_long(argc, argv, ":h", opts, NULL);

    if (o == '?') {
        bad(errbuf, errlen, "unknown option '%s'", kq_tools_bad_option(argv, ob, sizeof ob));
        return -2;
    }
    if (o == ':') {
        bad(errbuf, errlen, "option '%s' needs a value", kq_tools_bad_option(argv, ob, sizeof ob));
        return -2;
    }
    return o;
}

static int check_end(int argc, char **argv, int n_bootstrap, const char *topic, char *errbuf,
                     size_t errlen)
{
    if (optind < argc)
        return bad(errbuf, errlen, "unexpected argument '%s'", argv[optind]);
    if (n_bootstrap == 0)
        return bad(errbuf, errlen, "--bootstrap-server is required");
    if (!topic)
        return bad(errbuf, errlen, "--topic is required");
    return 0;
}

int kq_dc_parse_produce_args(int argc, char **argv, kq_dc_produce_args *out, char *errbuf,
                             size_t errlen)
{
    static const struct option opts[] = {
        {"bootstrap-server", required_argument, NULL, OPT_BOOTSTRAP},
        {"topic", required_argument, NULL, OPT_TOPIC},
        {"partition", required_argument, NULL, OPT_PARTITION},
        {"acks", required_argument, NULL, OPT_ACKS},
        {"request-timeout-ms", required_argument, NULL, OPT_REQUEST_TIMEOUT},
        {"delivery-timeout-ms", required_argument, NULL, OPT_DELIVERY_TIMEOUT},
        {"value", required_argument, NULL, OPT_VALUE},
        {"command-config", required_argument, NULL, OPT_COMMAND_CONFIG},
        {"help", no_argument, NULL, OPT_HELP},
        {NULL, 0, NULL, 0},
    };
    bool delivery_set = false;
    int64_t v;
    int o, rc = 0;

    memset(out, 0, sizeof *out);
    out->acks = KQ_DATA_ACKS_ALL;
    out->request_timeout_ms = KQ_DC_DEFAULT_REQUEST_TIMEOUT_MS;
    out->delivery_timeout_ms = KQ_DC_DEFAULT_DELIVERY_TIMEOUT_MS;
    optind = 0;
    while (rc == 0 && (o = next_opt(argc, argv, opts, errbuf, errlen)) != -1) {
        switch (o) {
        case OPT_BOOTSTRAP:
            rc = parse_bootstrap(optarg, out->bootstrap, &out->n_bootstrap, errbuf, errlen);
            break;
        case OPT_COMMAND_CONFIG:
            out->command_config = optarg;
            break;
        case OPT_TOPIC:
            rc = parse_topic(optarg, &out->topic, errbuf, errlen);
            break;
        case OPT_PARTITION:
            if ((rc = parse_number("--partition", optarg, 0, INT32_MAX, &v, errbuf, errlen)) == 0)
                out->partition = (int32_t)v;
            break;
        case OPT_ACKS:
            if (strcasecmp(optarg, "all") == 0 || strcmp(optarg, "-1") == 0)
                out->acks = KQ_DATA_ACKS_ALL;
            else if (strcmp(optarg, "1") == 0)
                out->acks = 1;
            else if (strcmp(optarg, "0") == 0)
                out->acks = 0;
            else
                rc = bad(errbuf, errlen, "--acks: '%s' is not all, -1, 1 or 0", optarg);
            break;
        case OPT_REQUEST_TIMEOUT:
            rc = parse_number("--request-timeout-ms", optarg, 1, KQ_DC_MAX_TIMEOUT_MS,
                              &out->request_timeout_ms, errbuf, errlen);
            break;
        case OPT_DELIVERY_TIMEOUT:
            rc = parse_number("--delivery-timeout-ms", optarg, 1, KQ_DC_MAX_TIMEOUT_MS,
                              &out->delivery_timeout_ms, errbuf, errlen);
            delivery_set = true;
            break;
        case OPT_VALUE:
            out->value = optarg;
            break;
        case OPT_HELP:
        case 'h':
            out->help = true;
            return 0;
        default:
            rc = KQ_ERR_CONFIG; /* -2: errbuf set */
            break;
        }
    }
    if (rc)
        return rc;
    if ((rc = check_end(argc, argv, out->n_bootstrap, out->topic, errbuf, errlen)) != 0)
        return rc;
    if (out->delivery_timeout_ms < out->request_timeout_ms) {
        if (delivery_set)
            return bad(errbuf, errlen,
                       "--delivery-timeout-ms %" PRId64
                       " must be at least --request-timeout-ms %" PRId64,
                       out->delivery_timeout_ms, out->request_timeout_ms);
        out->delivery_timeout_ms = out->request_timeout_ms; /* as Kafka's default adapts */
    }
    return 0;
}

int kq_dc_parse_consume_args(int argc, char **argv, kq_dc_consume_args *out, char *errbuf,
                             size_t errlen)
{
    static const struct option opts[] = {
        {"bootstrap-server", required_argument, NULL, OPT_BOOTSTRAP},
        {"topic", required_argument, NULL, OPT_TOPIC},
        {"partition", required_argument, NULL, OPT_PARTITION},
        {"from-beginning", no_argument, NULL, OPT_FROM_BEGINNING},
        {"max-records", required_argument, NULL, OPT_MAX_RECORDS},
        {"timeout-ms", required_argument, NULL, OPT_TIMEOUT},
        {"print-offsets", no_argument, NULL, OPT_PRINT_OFFSETS},
        {"command-config", required_argument, NULL, OPT_COMMAND_CONFIG},
        {"help", no_argument, NULL, OPT_HELP},
        {NULL, 0, NULL, 0},
    };
    int64_t v;
    int o, rc = 0;

    memset(out, 0, sizeof *out);
    out->max_records = -1;
    out->timeout_ms = -1;
    optind = 0;
    while (rc == 0 && (o = next_opt(argc, argv, opts, errbuf, errlen)) != -1) {
        switch (o) {
        case OPT_BOOTSTRAP:
            rc = parse_bootstrap(optarg, out->bootstrap, &out->n_bootstrap, errbuf, errlen);
            break;
        case OPT_COMMAND_CONFIG:
            out->command_config = optarg;
            break;
        case OPT_TOPIC:
            rc = parse_topic(optarg, &out->topic, errbuf, errlen);
            break;
        case OPT_PARTITION:
            if ((rc = parse_number("--partition", optarg, 0, INT32_MAX, &v, errbuf, errlen)) == 0)
                out->partition = (int32_t)v;
            break;
        case OPT_FROM_BEGINNING:
            out->from_beginning = true;
            break;
        case OPT_MAX_RECORDS:
            rc = parse_number("--max-records", optarg, 1, INT64_MAX, &out->max_records, errbuf,
                              errlen);
            break;
        case OPT_TIMEOUT:
            rc = parse_number("--timeout-ms", optarg, 1, KQ_DC_MAX_TIMEOUT_MS, &out->timeout_ms,
                              errbuf, errlen);
            break;
        case OPT_PRINT_OFFSETS:
            out->print_offsets = true;
            break;
        case OPT_HELP:
        case 'h':
            out->help = true;
            return 0;
        default:
            rc = KQ_ERR_CONFIG;
            break;
        }
    }
    if (rc)
        return rc;
    return check_end(argc, argv, out->n_bootstrap, out->topic, errbuf, errlen);
}

bool kq_dc_produce_retriable(int err)
{
    switch (err) {
    case KQ_ERR_NOT_LEADER_OR_FOLLOWER:
    case KQ_ERR_LEADER_NOT_AVAILABLE:
    case KQ_ERR_NOT_ENOUGH_REPLICAS:
    case KQ_ERR_NOT_ENOUGH_REPLICAS_AFTER_APPEND:
    case KQ_ERR_REQUEST_TIMED_OUT:
    case KQ_ERR_NETWORK_EXCEPTION:
    case KQ_ERR_UNKNOWN_TOPIC_OR_PARTITION:
    case KQ_ERR_FENCED_LEADER_EPOCH:
    case KQ_ERR_KAFKA_STORAGE_ERROR:
        return true;
    default:
        return false;
    }
}

bool kq_dc_refresh_needed(int err)
{
    switch (err) {
    case KQ_ERR_NOT_LEADER_OR_FOLLOWER:
    case KQ_ERR_UNKNOWN_TOPIC_OR_PARTITION:
    case KQ_ERR_LEADER_NOT_AVAILABLE:
    case KQ_ERR_FENCED_LEADER_EPOCH:
    case KQ_ERR_UNKNOWN_LEADER_EPOCH:
    case KQ_ERR_NETWORK_EXCEPTION:
    case KQ_ERR_REQUEST_TIMED_OUT:
        return true;
    default:
        return false;
    }
}

bool kq_dc_consume_retriable(int err)
{
    return kq_dc_refresh_needed(err) || err == KQ_ERR_BROKER_NOT_AVAILABLE ||
           err == KQ_ERR_KAFKA_STORAGE_ERROR || err == KQ_ERR_CORRUPT_MESSAGE;
}

void kq_dc_print_produce_result(FILE *f, const kq_dc_produce_result *r)
{
    if (r->error == 0 && r->acks == 0)
        fprintf(f, "sent (acks=0, offset unknown)\n");
    else if (r->error == 0)
        fprintf(f, "written at offset %" PRId64 "\n", r->offset);
    else
        fprintf(f, "error: %s (after %d attempt%s in %" PRIu64 " ms)\n", kq_err_name(r->error),
                r->attempts, r->attempts == 1 ? "" : "s", r->elapsed_ms);
}

void kq_dc_print_record(FILE *f, int64_t offset, const uint8_t *value, size_t len,
                        bool print_offsets)
{
    if (print_offsets)
        fprintf(f, "%" PRId64 "\t", offset);
    if (len > 0)
        fwrite(value, 1, len, f);
    fputc('\n', f);
}
