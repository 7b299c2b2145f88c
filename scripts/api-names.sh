#!/usr/bin/env bash
# Counts the names of tracestat's public API: every public item a user can name by a path
# from the crate root (functions, types, traits, constants, statics, type aliases, macros),
# each path once, modules and associated items (methods, fields, variants) not counted, items
# hidden from the docs (`__private`) left out. Re-exports are followed, so a name reachable by
# two paths counts twice: the crate promises one path per item.
#
#   scripts/api-names.sh            # the count, by module and by kind
#   scripts/api-names.sh --list     # every path, one a line
#
# Reads nightly rustdoc's JSON (`cargo +nightly rustdoc -- -Z unstable-options --output-format
# json`), with every feature, into target/api-names/. Needs a nightly toolchain and python3.
set -euo pipefail
cd "$(dirname "$0")/.."

list=0
[[ "${1:-}" == "--list" ]] && list=1

export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-target/api-names}"
cargo +nightly rustdoc -q -p tracestat --all-features -- -Z unstable-options \
  --output-format json >&2
json="$CARGO_TARGET_DIR/doc/tracestat.json"

python3 - "$json" "$list" <<'EOF'
import collections, json, sys

doc = json.load(open(sys.argv[1]))
index, list_all = doc["index"], sys.argv[2] == "1"
counted = {"function", "struct", "enum", "trait", "constant", "static", "type_alias", "macro",
           "union", "trait_alias", "proc_macro"}
paths, seen = set(), set()

def kind(item):
    return next(iter(item["inner"]))

def walk(module_id, prefix):
    if module_id in seen:
        return
    seen.add(module_id)
    for child in index[str(module_id)]["inner"]["module"]["items"]:
        item = index.get(str(child))
        if item is None or item["visibility"] != "public":
            continue
        name = item["name"]
        if kind(item) == "use":
            use = item["inner"]["use"]
            target = index.get(str(use["id"])) if use["id"] is not None else None
            if target is None:
                # A re-export of another crate's item (the `traced` attribute macro).
                paths.add(("::".join(prefix + [use["name"]]), "reexport"))
                continue
            if use["is_glob"]:
                walk(use["id"], prefix)
                continue
            item, name = target, use["name"]
        k = kind(item)
        if k == "module":
            walk(item["id"], prefix + [name])
        elif k in counted:
            paths.add(("::".join(prefix + [name]), k))

walk(doc["root"], ["tracestat"])
if list_all:
    for path, k in sorted(paths):
        print(f"{path}\t{k}")
    sys.exit()
by_module = collections.Counter(p.split("::")[1] if p.count("::") > 1 else "(root)" for p, _ in paths)
by_kind = collections.Counter(k for _, k in paths)
consts = sum(1 for p, k in paths if k == "constant" and p.split("::")[-1].startswith(("MAX_", "DEFAULT_")))
print(f"public names: {len(paths)} ({by_kind['macro']} macros; {consts} MAX_*/DEFAULT_* constants)")
print("by module: " + ", ".join(f"{m} {n}" for m, n in sorted(by_module.items())))
print("by kind:   " + ", ".join(f"{k} {n}" for k, n in sorted(by_kind.items())))
EOF
