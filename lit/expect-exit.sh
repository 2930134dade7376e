#!/usr/bin/env bash
# expect-exit.sh CODE COMMAND...: runs COMMAND (its output passes through) and
# succeeds only if it exits with CODE.
expected=$1
shift
"$@"
actual=$?
if [ "$actual" -ne "$expected" ]; then
  echo "expect-exit: expected exit code $expected, got $actual from: $*" >&2
  exit 1
fi
