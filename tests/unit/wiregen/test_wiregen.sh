#!/bin/bash
# kq-wiregen (proto/wiregen.c) on small .proto files: what it writes for each kind of field,
# and the error (file, line, problem) it stops the build with for a wrong annotation.
#   test_wiregen.sh PATH/TO/kq-wiregen
set -u
gen=$1
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fails=0

run() { # NAME PROTO-TEXT: writes $dir/NAME.proto and runs the generator on it
    printf '%s\n' "$2" > "$dir/$1.proto"
    "$gen" "$dir/$1.proto" "$dir/$1_types.h" "$dir/$1_tables.h" "$dir/$1_tables.c" \
        > "$dir/$1.out" 2>&1
}
want() { # FILE TEXT: FILE contains TEXT
    if ! grep -qF -- "$2" "$1"; then
        echo "FAIL: $(basename "$1") lacks: $2"; echo "---"; cat "$1"; echo "---"; fails=$((fails + 1))
    fi
}
refuse() { # NAME PROTO-TEXT MESSAGE: exit status 1 and MESSAGE on stderr
    run "$1" "$2"; local rc=$?
    if [ $rc -ne 1 ]; then echo "FAIL: $1 exited $rc, want 1"; fails=$((fails + 1)); fi
    want "$dir/$1.out" "$3"
}

run good 'syntax = "proto2";
package kq;
// @kq include=kq/x.h
message Ids {  // @kq c=t_ids
  repeated int32 ids = 1;  // @kq n=n max=10
}
// A thing.
message Thing {  // @kq c=t_thing const
  message Part {  // @kq c=t_part
    required string name = 1;  // the name @kq nonempty max=9
  }
  required int32 id = 1;  // @kq min=0
  optional sint32 state = 2;  // @kq t=int8_t range=-1..1 absent=-1
  required bytes uuid = 3;  // @kq uuid nonzero
  repeated Part parts = 4;  // @kq nt=size_t max=100
  repeated int32 replicas = 5;  // @kq list=t_ids max=7
  optional string error_message = 6;  // @kq text max=255
  // @c+ void *priv_;
  required int32 max_bytes = 7;  // @kq const=5 range=0..INT32_MAX
  optional Ids isr = 8;  // @kq has=has_isr
  repeated bytes blobs = 9;  // @kq lens=blob_lens nt=size_t max=3 elem=4
}
message Plain {
  required int32 x = 1;
}'
if [ $? -ne 0 ]; then echo "FAIL: good.proto refused:"; cat "$dir/good.out"; fails=$((fails + 1)); fi
t=$dir/good_types.h c=$dir/good_tables.c h=$dir/good_tables.h
want "$t" "/* A thing. */"
want "$t" "typedef struct t_part {"
want "$t" "    char *name; /* the name */"
want "$t" "    int8_t state;"
want "$t" "    uint8_t uuid[16];"
want "$t" "    const t_part *parts;"
want "$t" "    size_t n_parts;"
want "$t" "    t_ids replicas;"
want "$t" "    char error_message[255 + 1];"
want "$t" "    void *priv_;"
want "$t" "    t_ids isr;"
want "$t" "    bool has_isr;"
want "$t" "    const uint8_t *const *blobs;"
want "$t" "    const size_t *blob_lens;"
want "$h" "extern const kq_wire_msg kq_wt_thing_part;"
want "$c" '#include "kq/x.h"'
want "$c" ".desc = &kq__thing__part__descriptor"
want "$c" '{.name = "id", .flags = 0, .kind = KQ_WK_I32, .off = offsetof(t_thing, id), .min = 0, .max = INT32_MAX},'
want "$c" '{.name = "state", .flags = KQ_WF_ABSENT, .kind = KQ_WK_I8, .off = offsetof(t_thing, state), .min = -1, .max = 1, .absent = -1},'
want "$c" '{.name = "uuid", .flags = KQ_WF_NONZERO, .kind = KQ_WK_UUID'
want "$c" '{.name = "parts", .flags = KQ_WF_SIZE, .kind = KQ_WK_MSGS'
want "$c" '.off = offsetof(t_thing, replicas.ids), .aux = offsetof(t_thing, replicas.n), .max = 7'
want "$c" '{.name = "max_bytes", .flags = 0, .kind = KQ_WK_CONST, .min = 0, .max = INT32_MAX, .absent = 5},'
want "$c" '{.name = "isr", .flags = KQ_WF_HAS, .aux = offsetof(t_thing, has_isr), .kind = KQ_WK_MSG'
want "$c" '.kind = KQ_WK_BLOBS, .off = offsetof(t_thing, blobs), .aux = offsetof(t_thing, n_blobs), .max = 3, .elem_max = 4, .aux2 = offsetof(t_thing, blob_lens)'
if grep -q "Plain\|plain" "$t" "$c"; then echo "FAIL: an unannotated message was generated"; fails=$((fails + 1)); fi

refuse unknown 'message A {  // @kq c=a
  required int32 x = 1;  // @kq colour=red
}' "unknown.proto:2: unknown annotation 'colour=red'"
refuse nomax 'message A {  // @kq c=a
  required string s = 1;
}' "nomax.proto:2: a string needs max="
refuse listmax 'message A {  // @kq c=a
  repeated int32 ids = 1;
}' "listmax.proto:2: a list needs max="
refuse range 'message A {  // @kq c=a
  required int32 x = 1;  // @kq range=5
}' "range.proto:2: range=5: want LO..HI"
refuse msgpresence 'message B {  // @kq c=b
  required int32 x = 1;
}
message A {  // @kq c=a
  optional B b = 1;
}' "msgpresence.proto:5: a message field needs has=, req or inline"
refuse type 'message A {  // @kq c=a
  required Missing m = 1;
}' "type.proto:2: unsupported type Missing"
refuse unbalanced 'message A {  // @kq c=a
  required int32 x = 1;' "unbalanced {"
refuse msgword 'message A {  // @kq struct=a
}' "msgword.proto:1: unknown message annotation 'struct=a'"
refuse standalone 'message A {  // @kq c=a
  // @kq min=0
  required int32 x = 1;
}' "standalone.proto:2: an @kq annotation goes on the line it annotates"
refuse fixedstr 'message A {  // @kq c=a
  repeated string s = 1;  // @kq fixed=4 max=4 elem=9
}' "fixedstr.proto:2: fixed= is for a repeated integer or message field"
refuse ctype 'message A {  // @kq c=a
  required int32 x = 1;  // @kq t=uint8_t
}' "ctype.proto:2: t=uint8_t: an integer field's C type is one of"
refuse noelem 'message A {  // @kq c=a
  repeated string s = 1;  // @kq max=4
}' "noelem.proto:2: a repeated string field needs elem="
refuse hasint 'message A {  // @kq c=a
  optional int32 x = 1;  // @kq has=has_x
}' "hasint.proto:2: has= is for a uuid, a message or an inline message field"
refuse inlinewrong 'message B {  // @kq c=b
  required int32 x = 1;
}
message A {  // @kq c=a
  optional B b = 1;  // @kq inline
}' "inlinewrong.proto:5: inline: B must be annotated inline=a"
refuse inlinemissing 'message B {  // @kq inline=a
  required int32 x = 1;
}
message A {  // @kq c=a
  optional B b = 1;  // @kq has=has_b
}' "inlinemissing.proto:5: B is inline=a: mark the field inline"
refuse onelineenum 'enum E { X = 0; }
message A {  // @kq c=a
  required string s = 1;
}' "onelineenum.proto:3: a string needs max="
refuse listfixed 'message A {  // @kq c=a
  repeated int32 ids = 1;  // @kq list=t_ids fixed=4
}' "listfixed.proto:2: list= is for a repeated integer field (without fixed=)"
refuse list64 'message A {  // @kq c=a
  repeated int64 offsets = 1;  // @kq max=4
}' "list64.proto:2: a repeated integer field is a list of int32"
refuse inlinerep 'message B {  // @kq inline=a
  required int32 x = 1;
}
message A {  // @kq c=a
  repeated B b = 1;  // @kq inline max=3
}' "inlinerep.proto:5: inline is for a singular message field"
refuse subscalar 'message A {  // @kq c=a
  required int32 x = 1;  // @kq sub=t_other
}' "subscalar.proto:2: sub= is for a message field"
refuse ntbad 'message A {  // @kq c=a
  repeated int32 ids = 1;  // @kq nt=long max=4
}' "ntbad.proto:2: nt=long: a list's count is size_t, int or int32_t"
refuse tneedssub 'message B {  // @kq c=b
  required int32 x = 1;
}
message A {  // @kq c=a
  optional B b = 1;  // @kq t=other has=has_b
}' "tneedssub.proto:5: t= on a message field needs sub="
# A table over a struct written elsewhere, filled in place through member paths; a oneof's
# members are neither members nor rows.
run inplace 'message Env {  // @kq use=t_env inplace
  required int32 epoch = 1;  // @kq c=raft.epoch min=0
  // @c+ t_raft raft;
  oneof body {
    Env nested = 10;
  }
}
message Part {  // @kq c=t_withraw
  // @c+ t_raft r;
  required int32 leader = 1;  // @kq c=r.leader
  required int32 index = 2;
}'
[ $? -eq 0 ] || { echo "FAIL: inplace.proto refused:"; cat "$dir/inplace.out"; fails=$((fails + 1)); }
want "$dir/inplace_tables.c" ".off = offsetof(t_env, raft.epoch), .min = 0"
want "$dir/inplace_tables.c" ".in_place = true};"
want "$dir/inplace_tables.c" ".off = offsetof(t_withraw, r.leader)"
want "$dir/inplace_types.h" "    t_raft r;"
want "$dir/inplace_types.h" "    int32_t index;"
if grep -q "nested\|r.leader;\|int32_t leader" "$dir/inplace_tables.c" "$dir/inplace_types.h"; then
    echo "FAIL: a oneof member or a path became a row or a member"; fails=$((fails + 1))
fi
run twospaces 'message  Spaced {  // @kq c=t_spaced
  required int32 x = 1;
}'
want "$dir/twospaces_types.h" "typedef struct t_spaced {"
# A refused file leaves neither an output nor a temporary file behind.
left=$(ls "$dir" | grep -E '^(unknown|nomax|standalone|inlinewrong)_(types|tables)' || true)
[ -z "$left" ] || { echo "FAIL: a refused run left: $left"; fails=$((fails + 1)); }
"$gen" "$dir/none.proto" "$dir/x.h" "$dir/y.h" "$dir/z.c" > "$dir/missing.out" 2>&1
[ $? -eq 1 ] || { echo "FAIL: a missing input did not exit 1"; fails=$((fails + 1)); }
want "$dir/missing.out" "none.proto: No such file or directory"

[ $fails -eq 0 ] && echo "test_wiregen: all passed" && exit 0
echo "test_wiregen: $fails failed"; exit 1
