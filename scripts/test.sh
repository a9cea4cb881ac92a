#!/usr/bin/env bash
# Runs every test strata has, after installing what the tests need.
# Usage: scripts/test.sh            (from the project root; needs root or sudo for apt-get)
# Environment: STRATA_SKIP_INSTALL=1 skips the package step.
set -euo pipefail
cd "$(dirname "$0")/.."

# Debian packages the tests drive: Ceph's crushtool/osdmaptool (CRUSH conformance), fio and
# libnbd-bin (NBD clients), zstd (trace decompression), qemu-utils (qemu-img/qemu-io NBD clients),
# nbdkit (the NBD transport peer of strata bench cache); a real Ceph for the librados backend's
# tests (crates/ceph/tests: scripts/ceph-minicluster.sh needs ceph-mon, ceph-osd, ceph-mgr,
# ceph-base's monmaptool, ceph-common's ceph-authtool and uuidgen; the backend loads librados2).
# prometheus's promtool checks /metrics (crates/server/tests/metrics.rs), chromium loads the
# dashboard headless (crates/server/tests/dashboard.rs); build-essential is the C compiler and
# linker cargo needs.
packages=(ceph-common fio libnbd-bin zstd qemu-utils nbdkit ceph-mon ceph-osd ceph-mgr ceph-base uuid-runtime prometheus chromium build-essential)
commands=(crushtool fio nbdinfo zstd qemu-img nbdkit ceph-mon ceph-osd ceph-mgr monmaptool uuidgen promtool chromium cc)

if [[ "${STRATA_SKIP_INSTALL:-0}" != 1 ]]; then
    sudo_cmd=()
    [[ $(id -u) -ne 0 ]] && sudo_cmd=(sudo)
    missing=()
    for i in "${!commands[@]}"; do
        command -v "${commands[$i]}" >/dev/null 2>&1 || missing+=("${packages[$i]}")
    done
    ldconfig -p 2>/dev/null | grep -q 'librados\.so\.2 ' || missing+=(librados2)
    if ((${#missing[@]})); then
        echo "== installing Debian packages: ${missing[*]}"
        "${sudo_cmd[@]}" apt-get update -qq
        DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq "${missing[@]}" >/dev/null
    fi
    if ! command -v cargo >/dev/null 2>&1; then
        echo "cargo not found: install Rust 1.95 with rustup first (README, Quick start):" >&2
        echo "  curl -sSf https://sh.rustup.rs | sh -s -- -y --default-toolchain 1.95 && . ~/.cargo/env" >&2
        exit 1
    fi
    rustup component add rustfmt clippy >/dev/null 2>&1 || true
    # boto3 drives the S3 gateway's integration tests (crates/gateway/tests/s3_boto3.rs).
    # Debian's package first: Debian 12's pip refuses the system Python (externally managed).
    if ! python3 -c 'import boto3' >/dev/null 2>&1; then
        echo "== installing python3-boto3 (Debian)"
        "${sudo_cmd[@]}" apt-get install -y -qq python3-boto3 >/dev/null 2>&1 ||
            python3 -m pip install --quiet boto3
    fi
fi

echo "== cargo fmt --check"
cargo fmt --all -- --check
echo "== cargo clippy"
cargo clippy --workspace --all-targets --quiet -- -D warnings
echo "== cargo test"
cargo test --workspace --release 2>&1
