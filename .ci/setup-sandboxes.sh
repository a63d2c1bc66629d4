#!/usr/bin/env bash
# Prepare the sandboxes CodeShift runs agent code in, so their tests run for real in CI:
# bubblewrap, a Docker engine and a local Python base image (no image registry is reachable:
# the image is built from Debian packages with debootstrap and `docker import`).
#
# Needs root (CI runs as root on a fresh machine). Idempotent: what is already there is reused.
# A dockerd started here keeps running for the tests; its PID is in /tmp/sao-online-dockerd.pid.
set -euo pipefail

IMAGE="${SAO_ONLINE_SANDBOX_IMAGE:-sao-online-python:bookworm}"
SUITE=bookworm

if [ "$(id -u)" != 0 ]; then
    echo "setup-sandboxes: not root; skipping (sandbox tests skip where no engine can start)" >&2
    exit 0
fi

missing=()
command -v bwrap > /dev/null || missing+=(bubblewrap)
command -v dockerd > /dev/null || missing+=(docker.io)
command -v debootstrap > /dev/null || missing+=(debootstrap)
if [ "${#missing[@]}" -gt 0 ]; then
    echo "setup-sandboxes: installing ${missing[*]}"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" > /dev/null
fi

if ! docker info > /dev/null 2>&1; then
    echo "setup-sandboxes: starting dockerd"
    # No systemd here: dockerd runs in the background, its log beside its PID file.
    nohup dockerd > /tmp/sao-online-dockerd.log 2>&1 &
    echo $! > /tmp/sao-online-dockerd.pid
    for _ in $(seq 1 60); do
        docker info > /dev/null 2>&1 && break
        sleep 1
    done
    if ! docker info > /dev/null 2>&1; then
        echo "setup-sandboxes: dockerd did not start; Docker tests will skip" >&2
        tail -n 20 /tmp/sao-online-dockerd.log >&2 || true
        exit 0
    fi
fi

if ! docker image inspect "$IMAGE" > /dev/null 2>&1; then
    echo "setup-sandboxes: building $IMAGE with debootstrap"
    root="$(mktemp -d /tmp/sao-online-rootfs.XXXXXX)"
    debootstrap --variant=minbase --include=python3 "$SUITE" "$root" > /tmp/sao-online-debootstrap.log 2>&1 \
        || { tail -n 20 /tmp/sao-online-debootstrap.log >&2; exit 1; }
    # Package caches and docs are not needed to run Python: a smaller image imports faster.
    rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/usr/share/doc "$root"/usr/share/man
    tar -C "$root" -c . | docker import - "$IMAGE" > /dev/null
    rm -rf "$root"
fi
docker run --rm --network none "$IMAGE" python3 -c 'import sys; print("sandbox image python", sys.version.split()[0])'
