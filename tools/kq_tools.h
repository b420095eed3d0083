/*
 * kq_tools: the kq command-line tool's internals.
 *
 * Two layers:
 *   - lib kq_tools (tools/format.c, json.c, args.c, client.c): output formatting, a tiny JSON
 *     emitter, argument parsing (all pure) and the controller client, unit-tested in
 *     tests/unit/tools;
 *   - the commands (tools/cmd_*.c) and the dispatcher (tools/kq.c), linked into the `kq`
 *     executable only.
 *
 * Ownership: every function borrows its pointer arguments for the duration of the call; none
 * keeps them. Output goes to the FILE * given (stdout in the tool, a memstream in tests).
 */
#ifndef KQ_TOOLS_H
#define KQ_TOOLS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "kq/codec.h"

/* Exit codes of every kq command. */
enum {
    KQ_EXIT_OK = 0,
    KQ_EXIT_FAILURE = 1, /* runtime failure: message on stderr */
    KQ_EXIT_USAGE = 2,   /* bad command line: message and usage on stderr */
};

/* The zero uuid, printed by --replication for an unknown directory id (as Kafka does). */
#define KQ_TOOLS_ZERO_UUID "AAAAAAAAAAAAAAAAAAAAAA"

/* ---- JSON emitter (json.c) ------------------------------------------------------------ */

#define KQ_JSON_MAX_DEPTH 16

/* Writes compact JSON to f. Commas between members and elements are inserted automatically;
 * inside an object call kq_json_key before each value. Nesting deeper than KQ_JSON_MAX_DEPTH
 * is ignored (a programming error, asserted in debug builds). */
typedef struct kq_json {
    FILE *f;
    int depth;
    bool need_comma[KQ_JSON_MAX_DEPTH + 1];
    bool after_key;
} kq_json;

void kq_json_init(kq_json *j, FILE *f);
void kq_json_begin_object(kq_json *j);
void kq_json_end_object(kq_json *j);
void kq_json_begin_array(kq_json *j);
void kq_json_end_array(kq_json *j);
void kq_json_key(kq_json *j, const char *key);
/* s NULL writes null. Every string is written as valid JSON: '"', '\\' and control bytes are
 * escaped, and a byte that does not belong to a valid UTF-8 sequence becomes U+FFFD. */
void kq_json_string(kq_json *j, const char *s);
/* n bytes of s (NUL bytes included, escaped) as a string. */
void kq_json_string_n(kq_json *j, const char *s, size_t n);
/* Length of the valid UTF-8 sequence that starts p[0..n) (1 for ASCII), 0 if there is none. */
size_t kq_json_utf8_len(const uint8_t *p, size_t n);
void kq_json_int(kq_json *j, int64_t v);
void kq_json_bool(kq_json *j, bool v);
void kq_json_null(kq_json *j);
/* Write s as a JSON string literal (quotes included), escaped as kq_json_string does. */
void kq_json_write_escaped(FILE *f, const char *s);

/* ---- describe output (format.c) --------------------------------------------------------- */

/* Index of the leader in d->voters, or -1 if leader_id is not among the voters. */
int kq_tools_leader_index(const kq_quorum_description *d);

/* MaxFollowerLag and MaxFollowerLagTimeMs as kafka-metadata-quorum computes them: the most
 * lagging voter is the first one with the smallest log end offset, looking at the leader
 * first; lag = leader LEO - its LEO; lag time = leader lastCaughtUp - its lastCaughtUp, 0 if
 * it is the leader, -1 if a timestamp is unknown. Both are -1 when the leader is not a voter
 * in d. */
void kq_tools_follower_lag(const kq_quorum_description *d, int64_t *max_lag,
                           int64_t *max_lag_time_ms);

/* `describe --status`: the 8 labelled lines, or with json one JSON object and a newline. */
void kq_tools_print_status(FILE *f, const kq_quorum_description *d, bool json);

/* `describe --replication`: the table (leader, followers, observers), or one JSON object.
 * human_readable prints known timestamps as "<now_ms - ts> ms ago". Returns 0, or
 * KQ_ERR_INVALID_TIMESTAMP (nothing printed, errbuf says which) when human_readable and a
 * timestamp lies in the future of now_ms. */
int kq_tools_print_replication(FILE *f, const kq_quorum_description *d, bool human_readable,
                               int64_t now_ms, bool json, char *errbuf, size_t errlen);

/* ---- argument helpers (args.c) ----------------------------------------------------------- */

/* Parse a decimal integer in [min, max]; false if s is empty, has trailing junk or is out of
 * range. */
bool kq_tools_parse_int(const char *s, int64_t min, int64_t max, int64_t *out);

#define KQ_TOOLS_MAX_ADDRS 16
typedef struct kq_tools_addr {
    char host[256];
    int port;
} kq_tools_addr;

/* "host:port[,host:port...]" (hosts may be [v6]); 0 or KQ_ERR_CONFIG with errbuf naming the
 * bad entry. Empty entries are rejected; at most max entries. */
int kq_tools_parse_addrs(const char *list, kq_tools_addr *out, int max, int *n, char *errbuf,
                         size_t errlen);
/* "host:port" with IPv6 hosts in brackets. */
void kq_tools_format_addr(const kq_tools_addr *a, char *out, size_t outlen);

/* getopt reported an unknown option or a missing value: name it ("-x" or "--foo"). */
const char *kq_tools_bad_option(char **argv, char *buf, size_t buflen);

/* ---- controller metadata output (ctl_format.c) ------------------------------------------- */

#include "kq/ctl_codec.h"

/* `kq topics --describe` partition filters (kraft-semantics.md 5). Any filter turns off the
 * topic line. */
typedef enum kq_tools_topic_filter {
    KQ_TOPIC_FILTER_NONE = 0,
    KQ_TOPIC_FILTER_UNDER_REPLICATED, /* RF - |ISR| > 0 */
    KQ_TOPIC_FILTER_UNDER_MIN_ISR,    /* no leader, or |ISR| < min.insync.replicas */
    KQ_TOPIC_FILTER_AT_MIN_ISR,       /* |ISR| == min.insync.replicas */
    KQ_TOPIC_FILTER_UNAVAILABLE,      /* no leader, or the leader is not a live broker */
} kq_tools_topic_filter;

/* 1 if partition p of topic t passes filter. `cluster` (may be NULL: every leader counts as
 * live) says which brokers are live (registered and unfenced). min ISR: the topic's
 * min_insync_replicas, 1 when unknown. */
bool kq_tools_partition_selected(const kq_ctl_topic_desc *t, const kq_ctl_partition_desc *p,
                                 kq_tools_topic_filter filter, const kq_ctl_cluster_desc *cluster);

/* `kq topics --describe`: Kafka's topic and partition lines (topics with an error are
 * skipped: the caller reports them), or with json one object {"topics": [...]}. */
void kq_tools_print_topics(FILE *f, const kq_ctl_topics_desc *d, kq_tools_topic_filter filter,
                           const kq_ctl_cluster_desc *cluster, bool json);
/* `kq topics --list`: names, sorted, one per line, or with json {"topics": ["a", ...]}. */
void kq_tools_print_topic_list(FILE *f, const kq_ctl_topics_desc *d, bool json);
/* `kq cluster describe`: one line per broker, or {"brokers": [...]}. */
void kq_tools_print_cluster(FILE *f, const kq_ctl_cluster_desc *d, bool json);
/* `kq configs --describe` for one resource: header and the dynamic entries (all entries with
 * all), or one JSON object. */
void kq_tools_print_configs(FILE *f, const kq_ctl_config_result *r, bool all, bool json);
/* `kq features describe`: Kafka's lines (metadata.version as a release string), or JSON. */
void kq_tools_print_features(FILE *f, const kq_ctl_features_desc *d, bool json);
/* `kq acls --list`: kafka-acls.sh's "Current ACLs for resource `ResourcePattern(...)`:" blocks,
 * one per resource (the bindings come sorted by resource), or with json one object
 * {"acls": [{"resourceType": "TOPIC", "resourceName", "patternType", "principal", "host",
 * "operation", "permissionType"}, ...]} with Kafka's upper-case enum names. */
void kq_tools_print_acls(FILE *f, const kq_acl *acls, int32_t n, bool json);
/* kafka-acls.sh's blocks, one per resource of the (sorted by resource) bindings:
 * "<verb> for resource `ResourcePattern(...)`: \n \t(entry)\n\t(entry) \n\n". */
void kq_tools_print_acl_blocks(FILE *f, const char *verb, const kq_acl *acls, int32_t n);
/* "ResourcePattern(resourceType=TOPIC, name=t, patternType=LITERAL)" into buf. */
void kq_tools_acl_resource(const kq_acl *a, char *buf, size_t cap);
/* metadata.version level as Kafka's release string ("3.9-IV0"); NULL if unknown. */
const char *kq_tools_metadata_version_name(int level);
/* `kq leader-election` result lines (`type` "PREFERRED" / "UNCLEAN"); returns the number of
 * partitions that could not be elected. */
int kq_tools_print_election(FILE *f, const kq_ctl_item_results *r, const char *type);

/* `kq topics --create`: did its CreateTopics result `it` create the topic? Yes for error NONE,
 * and for TOPIC_ALREADY_EXISTS naming sent_id, the (random, non-zero) topic id this command
 * sent: then an earlier attempt of the same command created it and its answer was lost. */
bool kq_tools_topic_created(const kq_ctl_item_result *it, const uint8_t sent_id[16]);

/* "1:2:3,2:3:1": one partition per comma, broker ids by colon. On success *ids is a malloc'd
 * array of n_partitions * rf ids (caller frees). KQ_ERR_CONFIG with errbuf naming the problem
 * (empty entry, bad id, partitions with different replica counts, a duplicate broker). */
int kq_tools_parse_replica_assignment(const char *s, int32_t **ids, int32_t *n_partitions,
                                      int32_t *rf, char *errbuf, size_t errlen);

/* ---- kq topics --alter, kq features upgrade / downgrade / disable (ctl_update.c) -------- */

/* The CreatePartitions assignments of `kq topics --alter --partitions total
 * --replica-assignment ...`. As in Kafka the assignment lists every partition (np entries of
 * rf broker ids, as filled by kq_tools_parse_replica_assignment); the first `current` (the
 * topic's existing partitions) are skipped. On success *out (malloc'd, caller frees; NULL when
 * *n_out is 0) holds total - current entries numbered current..total-1 whose broker_ids point
 * into ids (borrowed: keep ids alive while *out is used). When total <= current nothing is
 * returned (*n_out 0) so that the controller reports INVALID_PARTITIONS. KQ_ERR_CONFIG with
 * errbuf naming the problem when np != total, KQ_ERR_NOMEM. */
int kq_tools_new_partition_assignments(const int32_t *ids, int32_t np, int32_t rf, int32_t current,
                                       int32_t total, kq_partition_assignment **out, int32_t *n_out,
                                       char *errbuf, size_t errlen);

typedef enum kq_tools_feature_op {
    KQ_TOOLS_FEATURE_UPGRADE,   /* --feature NAME=LEVEL */
    KQ_TOOLS_FEATURE_DOWNGRADE, /* --feature NAME=LEVEL [--unsafe] */
    KQ_TOOLS_FEATURE_DISABLE,   /* --feature NAME (level 0) [--unsafe] */
} kq_tools_feature_op;

#define KQ_TOOLS_MAX_FEATURES 64
#define KQ_TOOLS_FEATURE_NAME_MAX 255

/* Parsed --feature values: ups[i].name points at names[i] (the struct owns every string, so
 * it must not be copied while ups is in use). */
typedef struct kq_tools_feature_updates {
    kq_feature_update ups[KQ_TOOLS_MAX_FEATURES];
    char names[KQ_TOOLS_MAX_FEATURES][KQ_TOOLS_FEATURE_NAME_MAX + 1];
    int32_t n;
} kq_tools_feature_updates;

/* Parse the n --feature values of subcommand op. upgrade_type: UPGRADE, or SAFE_DOWNGRADE
 * (UNSAFE_DOWNGRADE with unsafe) for downgrade and disable. KQ_ERR_CONFIG with errbuf naming
 * the problem: no value, more than KQ_TOOLS_MAX_FEATURES, a value not of the form NAME=LEVEL
 * (NAME for disable), an empty or too long name, a level outside 0..32767, a feature given
 * twice, --unsafe with upgrade. */
int kq_tools_parse_feature_updates(kq_tools_feature_op op, const char *const *values, int n,
                                   bool unsafe, kq_tools_feature_updates *out, char *errbuf,
                                   size_t errlen);

/* One line per requested feature, in request order, matched to the UpdateFeatures results by
 * name: "NAME was upgraded to LEVEL." / "NAME was downgraded to LEVEL." / "NAME was
 * disabled." (dry_run: "NAME can be upgraded to LEVEL." / "NAME can be disabled."), or
 * "Could not upgrade NAME to LEVEL. ERROR_NAME: message" / "Could not disable NAME. ...".
 * A feature without a result counts as failed. Returns the number that failed. */
int kq_tools_print_feature_results(FILE *f, kq_tools_feature_op op,
                                   const kq_tools_feature_updates *u, const kq_ctl_item_results *r,
                                   bool dry_run);

/* ---- kq log-dump output (logdump.c) ------------------------------------------------------ */

#include "kq/plog.h"
#include "kq/records.h"

/* Kafka's name for a record type, as kafka-dump-log.sh --cluster-metadata-decoder prints it:
 * "REGISTER_BROKER_RECORD", "TOPIC_RECORD", "PARTITION_CHANGE_RECORD", "NO_OP_RECORD", ...,
 * "LEADER_CHANGE" for the Raft control record, "OPAQUE_RECORD" for kq's test payloads, and
 * "UNKNOWN" otherwise. Static string. */
const char *kq_tools_record_type_name(kq_rec_type t);

/* The fields of r as one JSON object with the field names of Kafka's JSON schemas (camelCase;
 * topic and incarnation ids as base64 uuids; replica lists as arrays; LeaderChange voters as
 * [{"voterId": n}]). PartitionChange fields that the record leaves unchanged are left out. */
void kq_tools_record_data_json(kq_json *j, const kq_record *r);

typedef enum kq_tools_dump_format {
    KQ_TOOLS_DUMP_TEXT,  /* kafka-dump-log.sh's shape: a line per batch, "| offset: ..." per record
                          */
    KQ_TOOLS_DUMP_LINES, /* metadata records only: "offset=O epoch=E batch=B <description>" */
    KQ_TOOLS_DUMP_JSON,  /* one JSON object and a newline */
} kq_tools_dump_format;

/* Longest record description kept (kq_record_render); longer ones end with "...". */
#define KQ_TOOLS_DUMP_DESC_MAX (96 * 1024)

/* A dump being written to f. Fill it with kq_tools_dump_init, then call the functions of one
 * kind of dump in order: log_begin, log_batch..., log_end (a metadata log); snapshot (a
 * snapshot file); plog_begin, { plog_partition, plog_batch..., plog_partition_end }...,
 * plog_end (a broker's partition logs). A call that fails (returns non-zero) leaves d->err
 * naming the problem and the output incomplete (the caller reports it and exits 1). The
 * struct owns no memory. */
typedef struct kq_tools_dump {
    FILE *f;
    kq_tools_dump_format format;
    bool print_values; /* partition logs: print the record values */
    kq_json j;
    int64_t n_partitions, n_batches, n_records;
    char err[512];
    char desc[KQ_TOOLS_DUMP_DESC_MAX];
} kq_tools_dump;

void kq_tools_dump_init(kq_tools_dump *d, FILE *f, kq_tools_dump_format format, bool print_values);

/* One batch of a metadata log as the store holds it. */
typedef struct kq_tools_log_batch {
    int64_t base_offset;
    int32_t epoch;
    int32_t count;
    uint32_t crc32c;
    const uint8_t *records; /* borrowed for the call: count length-prefixed kq.Records */
    size_t len;
    size_t size; /* stored bytes, header included */
} kq_tools_log_batch;

/* The summary line of a metadata log: the store's log state (kq_store_recovered). */
typedef struct kq_tools_log_summary {
    int64_t log_start, log_end;
    int32_t last_epoch, qstate_epoch, voted_id, leader_id;
} kq_tools_log_summary;

void kq_tools_dump_log_begin(kq_tools_dump *d);
/* Decodes every record of b before printing any. A record that parses as a kq.Record but is
 * not one this build can decode (an unknown or invalid body) is printed as type "UNKNOWN"
 * with the codec's description and the decoder's error. KQ_ERR_MALFORMED (nothing printed)
 * when the records do not frame into exactly b->count kq.Records; KQ_ERR_NOMEM. */
int kq_tools_dump_log_batch(kq_tools_dump *d, const kq_tools_log_batch *b);
void kq_tools_dump_log_end(kq_tools_dump *d, const kq_tools_log_summary *s);

/* A snapshot file: its id (from its header), its size, and its payload (length-prefixed
 * kq.Records, borrowed). Prints every record (numbered by index: snapshot records have no
 * offsets), then the summary. KQ_ERR_MALFORMED when the payload does not frame or a record
 * does not parse (the records before it have been printed). */
typedef struct kq_tools_snapshot_info {
    int64_t end_offset;
    int32_t epoch;
    int64_t size;
} kq_tools_snapshot_info;
int kq_tools_dump_snapshot(kq_tools_dump *d, const kq_tools_snapshot_info *info,
                           const uint8_t *payload, size_t len);

/* One partition of a broker's log directory. */
typedef struct kq_tools_plog_partition {
    kq_plog_tp tp;
    const char *topic; /* its name from the broker's metadata, NULL when unknown */
    kq_plog_state state;
    const kq_epoch_entry *epochs; /* the leader-epoch cache, ascending (borrowed) */
    size_t n_epochs;
} kq_tools_plog_partition;

/* KQ_TOOLS_DUMP_LINES prints as KQ_TOOLS_DUMP_TEXT here. */
void kq_tools_dump_plog_begin(kq_tools_dump *d);
void kq_tools_dump_plog_partition(kq_tools_dump *d, const kq_tools_plog_partition *p);
/* KQ_ERR_MALFORMED (nothing printed) when the records do not frame into b->count values. */
int kq_tools_dump_plog_batch(kq_tools_dump *d, const kq_plog_batch *b);
void kq_tools_dump_plog_partition_end(kq_tools_dump *d);
void kq_tools_dump_plog_end(kq_tools_dump *d);

/* ---- commands (kq executable) ------------------------------------------------------------ */
int kq_cmd_topics(int argc, char **argv);
int kq_cmd_cluster(int argc, char **argv);
int kq_cmd_leader_election(int argc, char **argv);
int kq_cmd_configs(int argc, char **argv);
int kq_cmd_features(int argc, char **argv);
int kq_cmd_acls(int argc, char **argv);

/* Each takes the arguments after the command name (argv[0] is the command name) and returns
 * a KQ_EXIT_* code. */
int kq_cmd_storage(int argc, char **argv);
int kq_cmd_metadata_quorum(int argc, char **argv);
int kq_cmd_log_dump(int argc, char **argv);
int kq_cmd_metadata_write(int argc, char **argv);
/* kq metadata-quorum unsafe-recover --config FILE [--yes] (tools/cmd_recover.c). */
int kq_quorum_unsafe_recover(const char *config_path, bool yes);

/* Runtime failure message: "Error: <message>" and a newline on stderr. */
void kq_tools_errorf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Usage error: "kq <cmd>: <message>", a newline, then `usage` (may be NULL), on stderr.
 * Returns KQ_EXIT_USAGE. */
int kq_tools_usage_error(const char *cmd, const char *usage, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* ---- --command-config (command_config.c) ------------------------------------------------- */

/* Loads a client properties file (--command-config): security.protocol (PLAINTEXT, the
 * default, or SSL) and, for SSL, ssl.keystore.location, ssl.key.password and
 * ssl.truststore.location (PEM). With SSL the process's TLS identity is set from it and
 * kq_tools_tls() is true from then on. 0, or KQ_ERR_CONFIG with errbuf naming the file and the
 * key. */
int kq_tools_command_config(const char *path, char *errbuf, size_t errlen);
/* Whether connections use TLS, and the URL scheme that says so ("tcp://", "tls+tcp://"). */
bool kq_tools_tls(void);
const char *kq_tools_scheme(void);

/* ---- controller client (client.c) -------------------------------------------------------- */

/* The retry policy that every kq command talking to controllers shares, as Kafka's admin
 * client: retriable failures are retried until default.api.timeout.ms (60 s) has passed, with
 * a backoff between passes over the bootstrap list growing from retry.backoff.ms to
 * retry.backoff.max.ms (here 100 ms to 1 s, +-20% jitter). */
#define KQ_TOOLS_DEFAULT_TIMEOUT_MS 60000u /* --timeout-ms */
#define KQ_TOOLS_BACKOFF_MIN_MS 100u
#define KQ_TOOLS_BACKOFF_MAX_MS 1000u

typedef struct kq_tools_call_opts {
    const kq_tools_addr *bootstrap;
    int n_bootstrap;
    uint32_t timeout_ms;         /* the whole call (--timeout-ms), retries included */
    uint32_t attempt_timeout_ms; /* one request to one controller, clamped to the time left
                                    (0: timeout_ms) */
    int max_hops;                /* leader hints followed per bootstrap address and pass */
    FILE *verbose;               /* --verbose: each failure that is retried, one line
                                    "kq: retrying in N ms after pass P: ADDR: REASON"; NULL:
                                    nothing (borrowed) */
    int *passes;                 /* if not NULL, set to the passes made (tests) */
} kq_tools_call_opts;

/* Send `req` to the active controller and store its answer, error NONE, in *resp (caller
 * frees with kq_response_free).
 *
 * One pass tries the bootstrap controllers, following NOT_CONTROLLER / NOT_LEADER_OR_FOLLOWER
 * leader hints (at most max_hops per address; not a hint naming the controller that just
 * answered). Addresses that refuse a TCP connection are skipped at once; reads (describes) are
 * staggered across controllers, writes go to one controller at a time (see tools/client.c).
 * When a pass ends without an answer and one of its failures is retriable (an error answer
 * that kq_err_retriable says is, e.g. NOT_CONTROLLER, LEADER_NOT_AVAILABLE,
 * BROKER_NOT_AVAILABLE; a timeout; a refused or reset connection), the next pass starts after
 * the backoff, until the next pass would start after timeout_ms. A non-retriable error answer
 * (e.g. INVALID_REQUEST) stops at once. On failure returns KQ_EXIT_FAILURE after printing the
 * error on stderr.
 *
 * A write whose answer was lost (timeout, connection reset, the controller lost the
 * leadership before the write committed) may have been applied and is sent again: the
 * caller makes it recognisable (kq topics --create sends its own topic id). */
int kq_tools_call_controller(const kq_tools_call_opts *o, uint32_t api_key, const kq_buf *req,
                             kq_response *resp);

#endif
