#!/usr/bin/env bash
# Boolean fields and flags in src/actors: class fields set or typed boolean, mutable boolean
# members of the edges' own records, and `let` flags. Each one found must be a scheduling
# guard listed in docs/decisions/scheduling-guards.md (test/shadowState.test.ts checks);
# anything else that says what a thing *is* belongs in its machine as a state or a tag.
cd "$(dirname "$0")/.." || exit 1
grep -rnE \
  -e '^\s+(private |protected |public )?(static )?[a-zA-Z_]+\??(: boolean)?\s*=\s*(true|false);' \
  -e '^\s+(private |protected |public )(static )?[a-zA-Z_]+\??: boolean' \
  -e '^\s+[a-zA-Z_]+\??: boolean;' \
  -e '^\s*let [a-zA-Z_]+(: boolean)?\s*=\s*(true|false)' \
  src/actors src/gateway | sort
