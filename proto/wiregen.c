/*
 * kq-wiregen: writes the plain C structs and the wire tables (common/wire/wire.h) of the
 * messages of one .proto file from the annotations next to their fields, so a message, its C
 * mirror and its limits are written once, in the .proto file. Run by CMake at build time
 * (proto/CMakeLists.txt); nothing it writes is committed.
 *
 *   kq-wiregen IN.proto TYPES.h TABLES.h TABLES.c
 *
 * It reads the subset of proto2 kq's files use: `//` comments only (none inside a string),
 * one field per line, enums and services skipped whole, and the members of a oneof skipped (a
 * oneof holds the bodies a codec picks by api key).
 *
 * TYPES.h holds the structs (pure C: no protobuf), included by the module's public header;
 * TABLES.h declares one `const kq_wire_msg kq_wt_<message>` per struct and TABLES.c defines
 * them. Only messages annotated on their `message` line are generated.
 *
 * The annotations (after `@kq` in a `//` comment; the words before it document the member):
 *   on a message line:  c=STRUCT      the C struct (typedef'd)
 *                       use=STRUCT    a table over STRUCT, which is written elsewhere
 *                       inline=STRUCT the message's fields live in STRUCT (a parent's
 *                                     KQ_WF_INLINE field; no struct of its own)
 *                       const         pointers are const by default
 *                       inplace       decode without clearing the struct, encode without
 *                                     initialising the message (kq_wire_msg.in_place): an
 *                                     envelope's or a body's part of a larger struct
 *   a comment line `// @c+ TEXT` inside a message adds the raw member TEXT there;
 *   a comment line `// @kq include=HEADER` outside messages: TABLES.c includes HEADER.
 *   on a field line:    c=NAME t=CTYPE (int8_t, int16_t, int, int32_t, uint32_t, int64_t);
 *                       NAME may be a path (raft.epoch) into a member declared elsewhere
 *                       (by use= or `@c+`), which then gets no member of its own
 *                       min=LO max=HI range=LO..HI (integers; max is a length for strings and
 *                       bytes and a count for lists), absent=V (an optional scalar; on an
 *                       inline field: the value its integers take when it is absent), key,
 *                       const=V (no member: V is sent, the range accepted)
 *                       nonempty nonzero uuid text strict has=NAME req inline
 *                       n=NAME (the count or length member) nt=size_t|int|int32_t
 *                       list=STRUCT (a repeated integer kept as STRUCT{ids, n})
 *                       elem=MAX (each string or bytes value) lens=NAME fixed=N skip
 *                       sub=TABLE t=STRUCT (a message field through another table, written
 *                       elsewhere, over STRUCT: a second view of the same message)
 * An unknown annotation, a missing limit, or a shape the struct and the table would disagree
 * on (check_field) stops the build with the file and line, and leaves no output behind.
 *
 * Ownership: none of the output is owned; the structs' ownership rules are stated by the
 * public header that includes TYPES.h.
 */
#include <ctype.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAXF 64
#define MAXM 128
#define S 192

typedef struct field {
    char label[16], type[S], name[S], doc[2048], raw[S * 2];
    int line;
    char c[S], t[S], n[S], nt[S], lens[S], has[S], list[S], min[S], max[S], absent[S], cst[S],
        elem[S], fixed[S], sub[S];
    bool nonempty, nonzero, uuid, text, strict, key, inl, req, skip, is_const;
} field;

typedef struct msg {
    char name[S], path[S * 2]; /* path: Outer.Inner */
    int parent;
    char c[S], inl[S], doc[2048];
    bool is_const, emitted, in_place;
    field f[MAXF];
    int nf;
} msg;

static msg ms[MAXM];
static int nm;
static char includes[8][S]; /* `// @kq include=HEADER` lines: what TABLES.c includes */
static int n_includes;
/* The outputs are written as PATH.tmp and renamed once all three are complete, so a refused
 * annotation never leaves a half-written file that a build could take as up to date. */
static char tmp_paths[3][4096];
static const char *src;

__attribute__((format(printf, 2, 3))) static void die(int line, const char *fmt, ...)
{
    va_list ap;

    fprintf(stderr, "%s:%d: ", src, line);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    for (int i = 0; i < 3; i++)
        if (tmp_paths[i][0])
            remove(tmp_paths[i]);
    exit(1);
}

static char *trim(char *s)
{
    char *e;

    while (isspace((unsigned char)*s))
        s++;
    e = s + strlen(s);
    while (e > s && isspace((unsigned char)e[-1]))
        *--e = 0;
    return s;
}

/* Doc text goes into C comments: neither may open or close one. */
static void defuse_comment(char *s)
{
    for (; *s; s++)
        if ((s[0] == '*' && s[1] == '/') || (s[0] == '/' && s[1] == '*'))
            s[1] = ' ';
}

static void set(char *dst, const char *v, int line)
{
    if (strlen(v) >= S)
        die(line, "annotation value too long: %s", v);
    strcpy(dst, v);
}

/* Splits "doc @kq a=b c" into the doc and the annotation words. */
static char *annotations(char *comment, char *doc, size_t cap)
{
    char *at = strstr(comment, "@kq");
    char *words = NULL;

    if (at) {
        *at = 0;
        words = at + 3;
    }
    snprintf(doc, cap, "%s", trim(comment));
    defuse_comment(doc);
    return words;
}

static void field_word(field *f, char *w)
{
    char *eq = strchr(w, '='), *v = eq ? eq + 1 : NULL;
    struct {
        const char *k;
        char *dst;
    } vals[] = {{"c", f->c},         {"t", f->t},           {"n", f->n},       {"nt", f->nt},
                {"lens", f->lens},   {"has", f->has},       {"list", f->list}, {"min", f->min},
                {"max", f->max},     {"absent", f->absent}, {"const", f->cst}, {"elem", f->elem},
                {"fixed", f->fixed}, {"sub", f->sub}};
    struct {
        const char *k;
        bool *dst;
    } flags[] = {{"nonempty", &f->nonempty}, {"nonzero", &f->nonzero}, {"uuid", &f->uuid},
                 {"text", &f->text},         {"strict", &f->strict},   {"key", &f->key},
                 {"inline", &f->inl},        {"req", &f->req},         {"skip", &f->skip}};

    if (eq)
        *eq = 0;
    if (v && !strcmp(w, "range")) {
        char *dots = strstr(v, "..");

        if (!dots)
            die(f->line, "range=%s: want LO..HI", v);
        *dots = 0;
        set(f->min, v, f->line);
        set(f->max, dots + 2, f->line);
        return;
    }
    for (size_t i = 0; v && i < sizeof vals / sizeof vals[0]; i++)
        if (!strcmp(w, vals[i].k)) {
            set(vals[i].dst, v, f->line);
            return;
        }
    for (size_t i = 0; !v && i < sizeof flags / sizeof flags[0]; i++)
        if (!strcmp(w, flags[i].k)) {
            *flags[i].dst = true;
            return;
        }
    die(f->line, "unknown annotation '%s%s%s'", w, v ? "=" : "", v ? v : "");
}

static void parse(FILE *in)
{
    char buf[4096], pending[2048] = "";
    int stack[32], depth = 0, line = 0, skip_depth = 0;
    bool oneof[32] = {false}; /* oneof[d]: level d is a oneof block */

    while (fgets(buf, sizeof buf, in)) {
        bool whole = strchr(buf, '\n') || feof(in);
        char *s = trim(buf), *comment = strstr(s, "//"), *words, word[S];

        line++;
        if (!whole)
            die(line, "line longer than %zu bytes", sizeof buf - 2);
        if (comment)
            *comment = 0, comment += 2;
        s = trim(s);
        if (skip_depth) { /* inside an enum */
            skip_depth += (strchr(s, '{') != NULL) - (strchr(s, '}') != NULL);
            continue;
        }
        if (!*s && comment && !depth && strstr(comment, "@kq include=")) {
            if (n_includes == 8)
                die(line, "too many includes");
            sscanf(strstr(comment, "@kq include=") + 12, "%190s", includes[n_includes++]);
            continue;
        }
        if (!*s) {
            if (!comment)
                pending[0] = 0;
            else if (depth && strstr(comment, "@c+")) {
                msg *m = &ms[stack[depth - 1]];
                field *f;

                if (m->nf == MAXF)
                    die(line, "too many fields");
                f = &m->f[m->nf++];
                memset(f, 0, sizeof *f);
                snprintf(f->raw, sizeof f->raw, "%s", trim(strstr(comment, "@c+") + 3));
            } else if ((depth && strstr(comment, "@kq")) || !strncmp(trim(comment), "@kq", 3)) {
                die(line, "an @kq annotation goes on the line it annotates (the message or "
                          "field line), not on a comment line of its own");
            } else {
                size_t l = strlen(pending);

                snprintf(pending + l, sizeof pending - l, "%s%s", l ? "\n" : "", trim(comment));
                defuse_comment(pending);
            }
            continue;
        }
        if (!strncmp(s, "enum ", 5) || !strncmp(s, "service ", 8)) { /* skipped whole */
            for (const char *c = s; *c; c++)
                skip_depth += (*c == '{') - (*c == '}');
            if (!strchr(s, '{'))
                die(line, "put the { on the line that opens the block");
            continue;
        }
        if (!strncmp(s, "message ", 8)) {
            msg *m = &ms[nm];
            char name[S];

            if (nm == MAXM - 1 || depth == 31 || sscanf(s + 8, " %190[A-Za-z0-9_]", name) != 1)
                die(line, "bad message line (or too many or too deeply nested messages)");
            memset(m, 0, sizeof *m);
            snprintf(m->name, S, "%s", name);
            m->parent = depth ? stack[depth - 1] : -1;
            snprintf(m->path, sizeof m->path, "%.190s%s%.190s", depth ? ms[m->parent].path : "",
                     depth ? "." : "", name);
            snprintf(m->doc, sizeof m->doc, "%s", pending);
            pending[0] = 0;
            words = comment ? strstr(comment, "@kq") : NULL;
            for (char *w = words ? strtok(words + 3, " \t") : NULL; w; w = strtok(NULL, " \t")) {
                if (!strncmp(w, "c=", 2))
                    set(m->c, w + 2, line);
                else if (!strncmp(w, "use=", 4)) {
                    set(m->c, w + 4, line);
                    m->emitted = true; /* the struct is written elsewhere */
                } else if (!strncmp(w, "inline=", 7))
                    set(m->inl, w + 7, line);
                else if (!strcmp(w, "const"))
                    m->is_const = true;
                else if (!strcmp(w, "inplace"))
                    m->in_place = true;
                else
                    die(line, "unknown message annotation '%s'", w);
            }
            oneof[depth] = false;
            stack[depth++] = nm++;
            continue;
        }
        if (!strncmp(s, "oneof ", 6)) {
            if (!depth || depth == 31)
                die(line, "oneof outside a message");
            stack[depth] = stack[depth - 1];
            oneof[depth++] = true;
            continue;
        }
        if (!strcmp(s, "}")) {
            if (!depth)
                die(line, "unbalanced }");
            depth--;
            continue;
        }
        if (!depth || !strchr(s, '=') || !strchr(s, ';')) {
            pending[0] = 0;
            continue; /* syntax, package, import, option */
        }
        {
            msg *m = &ms[stack[depth - 1]];
            field *f;
            char a[S], b[S], c[S];
            int k;

            if (m->nf == MAXF)
                die(line, "too many fields");
            f = &m->f[m->nf++];
            memset(f, 0, sizeof *f);
            f->line = line;
            k = sscanf(s, "%190s %190s %190s", a, b, c);
            if (k == 3 &&
                (!strcmp(a, "optional") || !strcmp(a, "required") || !strcmp(a, "repeated"))) {
                snprintf(f->label, sizeof f->label, "%.10s", a);
                set(f->type, b, line);
                set(f->name, c, line);
            } else if (k >= 2) { /* a oneof member */
                set(f->type, a, line);
                set(f->name, b, line);
            } else
                die(line, "cannot parse field");
            words = comment ? annotations(comment, f->doc, sizeof f->doc) : NULL;
            if (pending[0]) {
                char joined[4200];

                snprintf(joined, sizeof joined, "%s%s%s", pending, f->doc[0] ? " " : "", f->doc);
                snprintf(f->doc, sizeof f->doc, "%.2040s", joined);
                pending[0] = 0;
            }
            for (char *w = words ? strtok(words, " \t") : NULL; w; w = strtok(NULL, " \t")) {
                if (strlen(w) >= sizeof word)
                    die(line, "annotation too long: %.40s...", w);
                snprintf(word, sizeof word, "%s", w);
                field_word(f, word);
            }
            if (!f->c[0])
                set(f->c, f->name, line);
            /* A oneof member is a body the codec picks by api key (kq_wire_body_slot), never a
             * member or a table row. */
            f->skip = f->skip || oneof[depth - 1];
            f->is_const = m->is_const;
        }
    }
    if (depth)
        die(line, "unbalanced {");
}

/* ---- names -------------------------------------------------------------------------------- */

/* protoc-c's lower-case form of a CamelCase name (an underscore before each capital that
 * follows a lower-case letter or a digit). */
static void lower(const char *camel, char *out, size_t cap)
{
    size_t o = 0;
    bool was_upper = true;

    for (; *camel && o + 2 < cap; camel++) {
        if (isupper((unsigned char)*camel)) {
            if (!was_upper)
                out[o++] = '_';
            out[o++] = (char)tolower((unsigned char)*camel);
            was_upper = true;
        } else {
            out[o++] = *camel;
            was_upper = false;
        }
    }
    out[o] = 0;
}

/* The path with each part lowered and joined by sep. */
static void path_name(const msg *m, const char *sep, char *out, size_t cap)
{
    char part[S];

    if (m->parent >= 0) {
        path_name(&ms[m->parent], sep, out, cap);
        strncat(out, sep, cap - strlen(out) - 1);
    } else
        out[0] = 0;
    lower(m->name, part, sizeof part);
    strncat(out, part, cap - strlen(out) - 1);
}

static void table_name(const msg *m, char *out, size_t cap)
{
    char p[S * 2];

    path_name(m, "_", p, sizeof p);
    snprintf(out, cap, "kq_wt_%.300s", p);
}

/* The message a field's type names: nested in the field's message or its parents first. */
static msg *resolve(const msg *m, const char *type)
{
    for (int scope = (int)(m - ms);; scope = ms[scope].parent) {
        for (int i = 0; i < nm; i++)
            if (ms[i].parent == scope && !strcmp(ms[i].name, type))
                return &ms[i];
        if (scope < 0)
            return NULL;
    }
}

static bool is_int(const char *t)
{
    static const char *const ints[] = {"int32", "sint32", "sfixed32", "uint32", "fixed32",
                                       "int64", "sint64", "sfixed64", "uint64", "fixed64"};

    for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++)
        if (!strcmp(t, ints[i]))
            return true;
    return false;
}

static const char *ctype(const field *f)
{
    if (f->t[0])
        return f->t;
    if (!strcmp(f->type, "bool"))
        return "bool";
    if (strstr(f->type, "64"))
        return "int64_t";
    if (!strcmp(f->type, "uint32") || !strcmp(f->type, "fixed32"))
        return "uint32_t";
    return "int32_t";
}

static const char *kind(const char *ct)
{
    if (!strcmp(ct, "int8_t"))
        return "KQ_WK_I8";
    if (!strcmp(ct, "int16_t"))
        return "KQ_WK_I16";
    if (!strcmp(ct, "int64_t"))
        return "KQ_WK_I64";
    if (!strcmp(ct, "bool"))
        return "KQ_WK_BOOL";
    return "KQ_WK_I32";
}

static void type_range(const char *ct, const char **lo, const char **hi)
{
    *lo = "INT32_MIN", *hi = "INT32_MAX";
    if (!strcmp(ct, "int8_t"))
        *lo = "INT8_MIN", *hi = "INT8_MAX";
    else if (!strcmp(ct, "int16_t"))
        *lo = "INT16_MIN", *hi = "INT16_MAX";
    else if (!strcmp(ct, "int64_t"))
        *lo = "INT64_MIN", *hi = "INT64_MAX";
    else if (!strcmp(ct, "uint32_t"))
        *lo = "0", *hi = "UINT32_MAX";
    else if (!strcmp(ct, "bool"))
        *lo = "0", *hi = "1";
}

static const char *count_name(const field *f, char *buf)
{
    if (f->n[0])
        return f->n;
    sprintf(buf, "n_%.180s", f->c);
    return buf;
}

/* ---- the structs -------------------------------------------------------------------------- */

static void put_doc(FILE *o, const char *doc, const char *indent)
{
    const char *p = doc;

    if (!*doc)
        return;
    fprintf(o, "%s/* ", indent);
    for (; *p; p++) {
        if (*p == '\n')
            fprintf(o, "\n%s * ", indent);
        else
            fputc(*p, o);
    }
    fprintf(o, " */\n");
}

static void emit_struct(FILE *o, msg *m);

static void member(FILE *o, const char *decl, const char *doc)
{
    if (strchr(doc, '\n') || strlen(decl) + strlen(doc) > 80) {
        put_doc(o, doc, "    ");
        fprintf(o, "    %s;\n", decl);
    } else if (*doc)
        fprintf(o, "    %s; /* %s */\n", decl, doc);
    else
        fprintf(o, "    %s;\n", decl);
}

/* Whether a raw `@c+` member of m declares name (a presence flag declared there is not
 * declared again next to its field). */
static bool declared(const msg *m, const char *name)
{
    size_t l = strlen(name);

    for (int i = 0; i < m->nf; i++)
        for (const char *p = m->f[i].raw; (p = strstr(p, name)); p += l)
            if ((p == m->f[i].raw || (!isalnum((unsigned char)p[-1]) && p[-1] != '_')) &&
                !isalnum((unsigned char)p[l]) && p[l] != '_')
                return true;
    return false;
}

static void members(FILE *o, const msg *m)
{
    for (int i = 0; i < m->nf; i++) {
        const field *f = &m->f[i];
        const char *cq = f->is_const ? "const " : "";
        char d[S * 4], nb[S];
        bool rep = !strcmp(f->label, "repeated");
        const char *nt = f->nt[0] ? f->nt : "int32_t";
        msg *sub;

        if (f->raw[0]) {
            fprintf(o, "    %s\n", f->raw);
            continue;
        }
        if (f->skip || f->cst[0] || strchr(f->c, '.'))
            continue; /* a path: inside a member declared by `@c+` */
        sub = resolve(m, f->type);
        if (sub && sub->inl[0]) {
            members(o, sub);
        } else if (sub && rep) {
            const char *st = f->t[0] ? f->t : sub->c;

            if (f->fixed[0])
                snprintf(d, sizeof d, "%s %s[%s]", st, f->c, f->fixed);
            else
                snprintf(d, sizeof d, "%s%s *%s", cq, st, f->c);
            member(o, d, f->doc);
            snprintf(d, sizeof d, "%s %s", nt, count_name(f, nb));
            member(o, d, "");
        } else if (sub) {
            snprintf(d, sizeof d, "%s %s", f->t[0] ? f->t : sub->c, f->c);
            member(o, d, f->doc);
        } else if (!strcmp(f->type, "string") && !rep) {
            if (f->text)
                snprintf(d, sizeof d, "char %s[%s + 1]", f->c, f->max);
            else
                snprintf(d, sizeof d, "%schar *%s", cq, f->c);
            member(o, d, f->doc);
        } else if (!strcmp(f->type, "bytes") && !rep) {
            if (f->uuid) {
                snprintf(d, sizeof d, "uint8_t %s[16]", f->c);
                member(o, d, f->doc);
            } else {
                snprintf(d, sizeof d, "%suint8_t *%s", cq, f->c);
                member(o, d, f->doc);
                snprintf(d, sizeof d, "size_t %s", count_name(f, nb));
                member(o, d, "");
            }
        } else if (rep && f->list[0]) {
            snprintf(d, sizeof d, "%s %s", f->list, f->c);
            member(o, d, f->doc);
        } else if (rep) {
            if (!strcmp(f->type, "string"))
                snprintf(d, sizeof d, "%s%s%s", f->is_const ? "const char *const *" : "char **", "",
                         f->c);
            else if (!strcmp(f->type, "bytes"))
                snprintf(d, sizeof d, "%s%s", f->is_const ? "const uint8_t *const *" : "uint8_t **",
                         f->c);
            else if (f->fixed[0])
                snprintf(d, sizeof d, "int32_t %s[%s]", f->c, f->fixed);
            else
                snprintf(d, sizeof d, "%sint32_t *%s", cq, f->c);
            member(o, d, f->doc);
            if (!strcmp(f->type, "bytes")) {
                snprintf(d, sizeof d, "%ssize_t *%s", cq, f->lens);
                member(o, d, "");
            }
            snprintf(d, sizeof d, "%s %s", nt, count_name(f, nb));
            member(o, d, "");
        } else {
            snprintf(d, sizeof d, "%s %s", ctype(f), f->c);
            member(o, d, f->doc);
        }
        if (f->has[0] && !strchr(f->has, '.') && !declared(m, f->has)) {
            snprintf(d, sizeof d, "bool %s", f->has);
            member(o, d, "");
        }
    }
}

static void emit_struct(FILE *o, msg *m)
{
    if (m->emitted || !m->c[0] || m->inl[0])
        return;
    m->emitted = true;
    for (int i = 0; i < m->nf; i++) { /* what it contains first */
        msg *sub = m->f[i].raw[0] ? NULL : resolve(m, m->f[i].type);

        if (sub && !m->f[i].skip)
            emit_struct(o, sub);
    }
    fputc('\n', o);
    put_doc(o, m->doc, "");
    fprintf(o, "typedef struct %s {\n", m->c);
    members(o, m);
    fprintf(o, "} %s;\n", m->c);
}

/* ---- the tables --------------------------------------------------------------------------- */

static bool one_of(const char *v, const char *const *list)
{
    for (; *list; list++)
        if (!strcmp(v, *list))
            return true;
    return false;
}

/* The shapes that would give a struct and a table that disagree, refused before any row. */
static void check_field(const msg *m, const field *f, const char *T)
{
    static const char *const ctypes[] = {"int8_t",   "int16_t", "int",  "int32_t",
                                         "uint32_t", "int64_t", "bool", NULL};
    static const char *const counts[] = {"", "size_t", "int", "int32_t", NULL};
    bool rep = !strcmp(f->label, "repeated"), str = !strcmp(f->type, "string");
    bool bytes = !strcmp(f->type, "bytes");
    const msg *sub = resolve(m, f->type);

    if (f->t[0] && !sub && !one_of(f->t, ctypes))
        die(f->line,
            "t=%s: an integer field's C type is one of int8_t, int16_t, int, int32_t, "
            "uint32_t, int64_t, bool",
            f->t);
    if (f->t[0] && sub && !f->sub[0])
        die(f->line, "t= on a message field needs sub= (the table over that struct)");
    if (!one_of(f->nt, counts) || (f->nt[0] && !rep) || (f->list[0] && f->nt[0]))
        die(f->line, "nt=%s: a list's count is size_t, int or int32_t (not with list=)", f->nt);
    if (f->list[0] && (!rep || !is_int(f->type) || f->fixed[0]))
        die(f->line, "list= is for a repeated integer field (without fixed=)");
    if (rep && is_int(f->type) && (strstr(f->type, "64") || f->t[0]))
        die(f->line, "a repeated integer field is a list of int32 (no 64-bit lists, no t=)");
    if (f->inl && rep)
        die(f->line, "inline is for a singular message field");
    if (f->sub[0] && !sub)
        die(f->line, "sub= is for a message field");
    if (f->fixed[0] && (!rep || (!sub && !is_int(f->type))))
        die(f->line, "fixed= is for a repeated integer or message field");
    if (f->has[0] && (rep || !(sub || (bytes && f->uuid))))
        die(f->line, "has= is for a uuid, a message or an inline message field");
    if (rep && (str || bytes) && !f->elem[0])
        die(f->line, "a repeated %s field needs elem= (the longest value)", f->type);
    if (f->lens[0] && !(rep && bytes))
        die(f->line, "lens= is for a repeated bytes field");
    if (f->inl && (!sub || strcmp(sub->inl, T)))
        die(f->line, "inline: %s must be annotated inline=%s", f->type, T);
    if (!f->inl && sub && sub->inl[0])
        die(f->line, "%s is inline=%s: mark the field inline", f->type, sub->inl);
    if (sub && !sub->c[0] && !sub->inl[0] && !f->sub[0])
        die(f->line, "%s has no @kq c=, use= or inline= (no table to name)", f->type);
}

static void emit_rows(FILE *o, const msg *m, const char *T)
{
    for (int i = 0; i < m->nf; i++) {
        const field *f = &m->f[i];
        bool rep = !strcmp(f->label, "repeated");
        char flags[S * 2] = "0", nb[S], sub_t[S * 2] = "";
        const char *lo, *hi, *k;
        msg *sub;

        if (f->raw[0] || f->skip)
            continue;
        check_field(m, f, T);
        sub = resolve(m, f->type);
        if (sub && f->sub[0])
            snprintf(sub_t, sizeof sub_t, "%s", f->sub);
        else if (sub)
            table_name(sub, sub_t, sizeof sub_t);
#define FLAG(cond, name)                                                                           \
    do {                                                                                           \
        if (cond) {                                                                                \
            if (!strcmp(flags, "0"))                                                               \
                flags[0] = 0;                                                                      \
            else                                                                                   \
                strcat(flags, " | ");                                                              \
            strcat(flags, name);                                                                   \
        }                                                                                          \
    } while (0)
        FLAG(f->nonempty, "KQ_WF_NONEMPTY");
        FLAG(f->nonzero, "KQ_WF_NONZERO");
        FLAG(f->has[0], "KQ_WF_HAS");
        FLAG(f->absent[0] && !f->inl, "KQ_WF_ABSENT");
        FLAG(f->key, "KQ_WF_KEY");
        FLAG(f->inl, "KQ_WF_INLINE");
        FLAG(f->strict, "KQ_WF_STRICT");
        FLAG(f->fixed[0], "KQ_WF_FIXED");
        FLAG(rep && !strcmp(f->nt, "size_t"), "KQ_WF_SIZE");
        fprintf(o, "    {.name = \"%s\", .flags = %s", f->name, flags);
        if (f->cst[0]) {
            if (!f->min[0] || !f->max[0])
                die(f->line, "const= needs range=");
            fprintf(o, ", .kind = KQ_WK_CONST, .min = %s, .max = %s, .absent = %s},\n", f->min,
                    f->max, f->cst);
            continue;
        }
        if (f->has[0])
            fprintf(o, ", .aux = offsetof(%s, %s)", T, f->has);
        if (sub && f->inl) {
            fprintf(o, ", .kind = KQ_WK_MSG, .absent = %s, .sub = &%s},\n",
                    f->absent[0] ? f->absent : "0", sub_t);
            continue;
        }
        if (sub && rep) {
            if (!f->max[0] && !f->fixed[0])
                die(f->line, "a list needs max=");
            fprintf(o, ", .kind = KQ_WK_MSGS, .off = offsetof(%s, %s), .aux = offsetof(%s, %s)", T,
                    f->c, T, count_name(f, nb));
            fprintf(o, ", .max = %s, .sub = &%s},\n", f->fixed[0] ? f->fixed : f->max, sub_t);
            continue;
        }
        if (sub) {
            if (!f->has[0] && !f->req)
                die(f->line, "a message field needs has=, req or inline");
            fprintf(o, ", .kind = KQ_WK_MSG, .off = offsetof(%s, %s), .sub = &%s},\n", T, f->c,
                    sub_t);
            continue;
        }
        if (!strcmp(f->type, "string") && !rep) {
            if (f->text)
                fprintf(o,
                        ", .kind = KQ_WK_TEXT, .off = offsetof(%s, %s), .max = sizeof(((%s "
                        "*)0)->%s) - 1},\n",
                        T, f->c, T, f->c);
            else if (!f->max[0])
                die(f->line, "a string needs max=");
            else
                fprintf(o, ", .kind = KQ_WK_STR, .off = offsetof(%s, %s), .max = %s},\n", T, f->c,
                        f->max);
            continue;
        }
        if (!strcmp(f->type, "bytes") && !rep) {
            if (f->uuid)
                fprintf(o, ", .kind = KQ_WK_UUID, .off = offsetof(%s, %s), .max = 16},\n", T, f->c);
            else if (!f->max[0])
                die(f->line, "bytes need max=");
            else
                fprintf(o,
                        ", .kind = KQ_WK_BYTES, .off = offsetof(%s, %s), .aux = offsetof(%s, "
                        "%s), .max = %s},\n",
                        T, f->c, T, count_name(f, nb), f->max);
            continue;
        }
        if (rep) {
            char off[S * 2], aux[S * 2];

            if (!f->max[0] && !f->fixed[0])
                die(f->line, "a list needs max=");
            if (f->list[0]) {
                snprintf(off, sizeof off, "%s.ids", f->c);
                snprintf(aux, sizeof aux, "%s.n", f->c);
            } else {
                snprintf(off, sizeof off, "%s", f->c);
                snprintf(aux, sizeof aux, "%s", count_name(f, nb));
            }
            k = !strcmp(f->type, "string")  ? "KQ_WK_STRS"
                : !strcmp(f->type, "bytes") ? "KQ_WK_BLOBS"
                : is_int(f->type)           ? "KQ_WK_IDS"
                                            : NULL;
            if (!k)
                die(f->line, "unsupported repeated type %s", f->type);
            fprintf(o, ", .kind = %s, .off = offsetof(%s, %s), .aux = offsetof(%s, %s)", k, T, off,
                    T, aux);
            fprintf(o, ", .max = %s", f->fixed[0] ? f->fixed : f->max);
            if (f->elem[0])
                fprintf(o, ", .elem_max = %s", f->elem);
            if (f->lens[0])
                fprintf(o, ", .aux2 = offsetof(%s, %s)", T, f->lens);
            fprintf(o, "},\n");
            continue;
        }
        if (!is_int(f->type) && strcmp(f->type, "bool"))
            die(f->line, "unsupported type %s (no message of that name in this file)", f->type);
        type_range(ctype(f), &lo, &hi);
        fprintf(o, ", .kind = %s, .off = offsetof(%s, %s), .min = %s, .max = %s", kind(ctype(f)), T,
                f->c, f->min[0] ? f->min : lo, f->max[0] ? f->max : hi);
        if (f->absent[0])
            fprintf(o, ", .absent = %s", f->absent);
        fprintf(o, "},\n");
    }
}

int main(int argc, char **argv)
{
    FILE *in, *types, *th, *tc;
    char guard[S], stem[S], *p;

    if (argc != 5) {
        fprintf(stderr, "usage: kq-wiregen IN.proto TYPES.h TABLES.h TABLES.c\n");
        return 2;
    }
    src = argv[1];
    if (!(in = fopen(src, "r"))) {
        perror(src);
        return 1;
    }
    parse(in);
    fclose(in);
    for (int i = 0; i < 3; i++)
        if ((size_t)snprintf(tmp_paths[i], sizeof tmp_paths[i], "%s.tmp", argv[2 + i]) >=
            sizeof tmp_paths[i])
            die(0, "output path too long");
    if (!(types = fopen(tmp_paths[0], "w")) || !(th = fopen(tmp_paths[1], "w")) ||
        !(tc = fopen(tmp_paths[2], "w"))) {
        perror("kq-wiregen: output");
        die(0, "cannot write the outputs");
    }
    p = strrchr(src, '/');
    snprintf(stem, sizeof stem, "%s", p ? p + 1 : src);
    if ((p = strchr(stem, '.')))
        *p = 0;
    for (size_t i = 0; i <= strlen(stem); i++)
        guard[i] = (char)toupper((unsigned char)stem[i]);

    fprintf(types,
            "/* Generated by kq-wiregen from %s: do not edit. The C structs of its "
            "messages\n * (ownership: see the public header that includes this one). */\n"
            "#ifndef %s_TYPES_H\n#define %s_TYPES_H\n\n#include <stdbool.h>\n"
            "#include <stddef.h>\n#include <stdint.h>\n",
            stem, guard, guard);
    for (int i = 0; i < nm; i++)
        emit_struct(types, &ms[i]);
    fprintf(types, "\n#endif\n");

    fprintf(th,
            "/* Generated by kq-wiregen from %s: do not edit. Its wire tables (wire.h). */\n"
            "#ifndef %s_TABLES_H\n#define %s_TABLES_H\n\n#include \"wire.h\"\n\n",
            stem, guard, guard);
    fprintf(tc,
            "/* Generated by kq-wiregen from %s: do not edit. */\n#include \"%s_tables.h\"\n\n"
            "#include \"%s.pb-c.h\"\n",
            stem, stem, stem);
    for (int i = 0; i < n_includes; i++)
        fprintf(tc, "#include \"%s\"\n", includes[i]);
    for (int i = 0; i < nm; i++) /* the tables named by sub= */
        for (int j = 0; j < ms[i].nf; j++)
            if (ms[i].f[j].sub[0])
                fprintf(tc, "extern const kq_wire_msg %s;\n", ms[i].f[j].sub);
    /* Forward declarations, so a table may name one defined further down. */
    for (int i = 0; i < nm; i++) {
        char t[S * 2];

        if (!ms[i].c[0] && !ms[i].inl[0])
            continue;
        table_name(&ms[i], t, sizeof t);
        fprintf(th, "extern const kq_wire_msg %s;\n", t);
    }
    for (int i = 0; i < nm; i++) {
        char t[S * 2], d[S * 2];
        const char *T = ms[i].inl[0] ? ms[i].inl : ms[i].c;

        if (!T[0])
            continue;
        table_name(&ms[i], t, sizeof t);
        path_name(&ms[i], "__", d, sizeof d);
        if (!ms[i].nf) {
            fprintf(
                tc,
                "\nconst kq_wire_msg %s = {.desc = &kq__%s__descriptor, .size = sizeof(%s)%s};\n",
                t, d, T, ms[i].in_place ? ", .in_place = true" : "");
            continue;
        }
        fprintf(tc, "\nstatic const kq_wire_field %s_f[] = {\n", t);
        emit_rows(tc, &ms[i], T);
        fprintf(tc,
                "};\nconst kq_wire_msg %s = {.desc = &kq__%s__descriptor, .size = sizeof(%s), "
                ".fields = %s_f, .n_fields = sizeof %s_f / sizeof %s_f[0]%s};\n",
                t, d, T, t, t, t, ms[i].in_place ? ", .in_place = true" : "");
    }
    fprintf(th, "\n#endif\n");
    if (ferror(types) | ferror(th) | ferror(tc) | fclose(types) | fclose(th) | fclose(tc))
        die(0, "writing the outputs failed");
    for (int i = 0; i < 3; i++)
        if (rename(tmp_paths[i], argv[2 + i])) {
            perror(argv[2 + i]);
            die(0, "cannot rename %s", tmp_paths[i]);
        }
    return 0;
}
