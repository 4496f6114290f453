#!/usr/bin/env bash
# A Scion branch per pull request, for any CI system.
#
#   branch-per-pr.sh open    creates pr-<PR_NUMBER> from the connector's mirror (replacing an older
#                            one, so every push starts from current data), runs the migrations and
#                            the tests against it with DATABASE_URL set
#   branch-per-pr.sh close   deletes pr-<PR_NUMBER> (nothing to do when it is already gone)
#
# Needs: SCION_TOKEN (an org API key: scion keys create ci --role member), SCION_CONNECTOR_ID,
# PR_NUMBER; optional SCION_API_URL, MIGRATE_COMMAND, TEST_COMMAND, SCION (the CLI to run).
set -euo pipefail

: "${SCION_TOKEN:?an org API key (scion keys create ci --role member)}"
: "${SCION_CONNECTOR_ID:?the connector to branch}"
: "${PR_NUMBER:?the pull request number}"
scion=${SCION:-scion}
branch="pr-${PR_NUMBER}"

case "${1:-open}" in
  open)
    $scion branches delete "$branch" --connector "$SCION_CONNECTOR_ID" --missing-ok --wait
    # Only the URL lines reach stdout; progress goes to stderr. A create that completes without a
    # URL exits 1 (fail closed): the migration never runs against an empty DATABASE_URL.
    env_lines=$($scion branches create "$SCION_CONNECTOR_ID" "$branch" --wait --output env)
    # shellcheck disable=SC2046 # NAME=value lines without spaces, split on purpose
    export $env_lines
    # GitHub Actions: make DATABASE_URL visible to the job's later steps.
    if [ -n "${GITHUB_ENV:-}" ]; then printf '%s\n' "$env_lines" >> "$GITHUB_ENV"; fi
    bash -c "${MIGRATE_COMMAND:-true}"
    bash -c "${TEST_COMMAND:-true}"
    ;;
  close)
    $scion branches delete "$branch" --connector "$SCION_CONNECTOR_ID" --missing-ok --wait
    ;;
  *)
    echo "usage: $0 open|close" >&2
    exit 2
    ;;
esac
