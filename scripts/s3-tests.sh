#!/usr/bin/env bash
# Runs the core subset of Ceph's s3-tests (test_s3.py + test_headers.py minus the feature
# markers listed in ../shared/reference/object-gateway.md: 303 tests) against a fresh
# `strata serve`, and prints the passed/failed counts.
#
# usage: scripts/s3-tests.sh [--backend embedded|ceph] S3_TESTS_CHECKOUT [pytest args...]
#   --backend ceph     serve on a fresh Ceph (scripts/ceph-minicluster.sh: memstore, 3 OSDs,
#                      pools of 3) through librados, as `strata serve --backend ceph`; the
#                      default is the embedded cluster (one OSD)
#   S3_TESTS_CHECKOUT  a clone of https://github.com/ceph/s3-tests
#   env STRATA         the strata binary (default: $CARGO_TARGET_DIR or target, /release/strata)
#   env PYTHON_VENV    a venv with the suite's requirements (default /work/s3-tests-venv;
#                      create it with: python3 -m venv V && V/bin/pip install -r requirements.txt)
#   env STRATA_DURABLE  false skips fsync in the cluster (faster; default true)
#   env STRATA_SERVE_ARGS  more `strata serve` flags, split on spaces (e.g. "--packing on")
#   extra args go to pytest (e.g. -k test_bucket_list or -x).
# The serve log and the pytest output stay in $WORK (printed at the end).
set -euo pipefail

backend=embedded
if [[ ${1:-} == --backend ]]; then backend=${2:?--backend embedded|ceph}; shift 2; fi
[[ $backend == embedded || $backend == ceph ]] || { echo "--backend embedded|ceph, not $backend" >&2; exit 2; }
suite=${1:?usage: scripts/s3-tests.sh [--backend embedded|ceph] S3_TESTS_CHECKOUT [pytest args...]}
shift
suite=$(cd "$suite" && pwd)
root=$(cd "$(dirname "$0")/.." && pwd)
strata=${STRATA:-}
if [[ -z $strata ]]; then
    candidate="${CARGO_TARGET_DIR:-$root/target}/release/strata"
    if [[ -x $candidate ]]; then strata=$candidate; fi
fi
[[ -x $strata ]] || { echo "no strata binary: build it (cargo build --release -p strata) or set STRATA" >&2; exit 2; }
venv=${PYTHON_VENV:-/work/s3-tests-venv}
[[ -x $venv/bin/pytest ]] || { echo "no pytest in $venv: python3 -m venv $venv && $venv/bin/pip install -r $suite/requirements.txt" >&2; exit 2; }

work=$(mktemp -d /tmp/strata-s3-tests.XXXXXX)
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
admin_port=$(free_port)
s3_port=$(free_port)

# One OSD on one host: the protocol is under test, and a 2-core machine runs the suite faster.
cat >"$work/cluster.toml" <<TOML
scrub_interval_s = 0
durable = ${STRATA_DURABLE:-true}
[[host]]
name = "host0"
[[osd]]
id = 0
host = "host0"
device = "file:osd.0.img:4G"
class = "ssd"
TOML

backend_args=(--config "$work/cluster.toml")
if [[ $backend == ceph ]]; then
    STORE=memstore OSD_SIZE=4G NUM_OSDS=3 POOL_SIZE=3 "$root/scripts/ceph-minicluster.sh" start "$work/ceph" \
        >"$work/ceph-start.log" 2>&1 || { cat "$work/ceph-start.log" >&2; exit 1; }
    backend_args=(--backend ceph --ceph-conf "$work/ceph/ceph.conf")
fi
# The suite speaks plain HTTP and sends SSE-C keys (as radosgw with rgw_crypt_require_ssl
# false) and SSE-S3 requests: a master key for this run only.
od -An -tx1 -N32 /dev/urandom | tr -d ' \n' >"$work/sse.key"
RUST_LOG=${RUST_LOG:-warn} "$strata" serve --data "$work/data" \
    --admin "127.0.0.1:$admin_port" --s3 "127.0.0.1:$s3_port" "${backend_args[@]}" \
    --sse-master-key-file "$work/sse.key" --sse-c-allow-insecure \
    ${STRATA_SERVE_ARGS:-} >"$work/serve.log" 2>&1 &
serve_pid=$!
stop() {
    kill $serve_pid 2>/dev/null; wait $serve_pid 2>/dev/null || true
    if [[ $backend == ceph ]]; then "$root/scripts/ceph-minicluster.sh" purge "$work/ceph" >/dev/null 2>&1 || true; fi
}
trap stop EXIT
for _ in $(seq 1 600); do
    grep -q ready "$work/serve.log" 2>/dev/null && break
    kill -0 $serve_pid 2>/dev/null || { cat "$work/serve.log" >&2; exit 1; }
    sleep 0.1
done
grep -q ready "$work/serve.log" || { echo "strata serve did not start" >&2; cat "$work/serve.log" >&2; exit 1; }

# The users of s3tests.conf.SAMPLE, created the way an operator would.
user() { "$strata" user create --admin "127.0.0.1:$admin_port" --data "$work/data" "$@" >/dev/null; }
user --uid testid --display-name "M. Tester" --email tester@ceph.com \
    --access-key 0555b35654ad1656d804 --secret 'h7GhxuBLTrlhVUyxSPUKUV8r/2EI4ngqJxD7iBdBYLhwluN30JaT3Q=='
user --uid 56789abcdef0123456789abcdef0123456789abcdef0123456789abcdef01234 \
    --display-name john.doe --email john.doe@example.com \
    --access-key NOPQRSTUVWXYZABCDEFG --secret nopqrstuvwxyzabcdefghijklmnabcdefghijklm
user --uid 'testx$9876543210abcdef0123456789abcdef0123456789abcdef0123456789abcdef' \
    --display-name 'testx$tenanteduser' --email tenanteduser@example.com \
    --access-key HIJKLMNOPQRSTUVWXYZA --secret opqrstuvwxyzabcdefghijklmnopqrstuvwxyzab

cat >"$work/s3tests.conf" <<CONF
[DEFAULT]
host = 127.0.0.1
port = $s3_port
is_secure = False
ssl_verify = False

[fixtures]
bucket prefix = strata-{random}-

[s3 main]
display_name = M. Tester
user_id = testid
email = tester@ceph.com
api_name = default
access_key = 0555b35654ad1656d804
secret_key = h7GhxuBLTrlhVUyxSPUKUV8r/2EI4ngqJxD7iBdBYLhwluN30JaT3Q==

[s3 alt]
display_name = john.doe
email = john.doe@example.com
user_id = 56789abcdef0123456789abcdef0123456789abcdef0123456789abcdef01234
access_key = NOPQRSTUVWXYZABCDEFG
secret_key = nopqrstuvwxyzabcdefghijklmnabcdefghijklm

[s3 tenant]
display_name = testx\$tenanteduser
user_id = testx\$9876543210abcdef0123456789abcdef0123456789abcdef0123456789abcdef
access_key = HIJKLMNOPQRSTUVWXYZA
secret_key = opqrstuvwxyzabcdefghijklmnopqrstuvwxyzab
email = tenanteduser@example.com
tenant = testx

# Read by the suite's setup even though the IAM/STS tests are not in the core subset.
[iam]
email = s3@example.com
user_id = 0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef
access_key = ABCDEFGHIJKLMNOPQRST
secret_key = abcdefghijklmnopqrstuvwxyzabcdefghijklmn
display_name = youruseridhere

[iam root]
access_key = AAAAAAAAAAAAAAAAAAaa
secret_key = aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa
user_id = RGW11111111111111111
email = account1@ceph.com

[iam alt root]
access_key = BBBBBBBBBBBBBBBBBBbb
secret_key = bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb
user_id = RGW22222222222222222
email = account2@ceph.com
CONF

# The feature markers the core subset leaves out (see pytest.ini for their meaning).
excluded="lifecycle lifecycle_expiration lifecycle_transition cloud_transition cloud_restore
versioning object_lock encryption sse_s3 bucket_encryption bucket_policy user_policy role_policy
session_policy group_policy abac_test iam_account iam_cross_account iam_role iam_tenant iam_user
test_of_sts webidentity_test token_claims_trust_policy_test token_principal_tag_role_policy_test
token_request_tag_trust_policy_test token_resource_tags_test token_role_tags_test
token_tag_keys_test s3website s3website_routing_rules s3website_redirect_location sns tagging
bucket_logging bucket_logging_cleanup fails_without_logging_rollover target_by_bucket
storage_class checksum appendobject object_ownership s3select conditional_write delete_marker
fails_on_aws fails_on_rgw fails_on_dbstore auth_aws2"
expression=$(for m in $excluded; do printf 'not %s and ' "$m"; done)
expression=${expression% and }

cd "$suite"
set +e
S3TEST_CONF="$work/s3tests.conf" "$venv/bin/pytest" -q -rf -p no:cacheprovider -m "$expression" \
    s3tests/functional/test_s3.py s3tests/functional/test_headers.py "$@" >"$work/pytest.log" 2>&1
set -e
grep -E '^FAILED|^ERROR' "$work/pytest.log" | sed 's/ - .*//' | sort >"$work/failed.txt" || true
summary=$(tail -n 1 "$work/pytest.log")
passed=$(grep -oE '[0-9]+ passed' <<<"$summary" | grep -oE '[0-9]+' || echo 0)
echo "s3-tests core subset ($backend backend): $summary"
echo "passed: $passed / 303   (failed list: $work/failed.txt, log: $work/pytest.log, server: $work/serve.log)"
