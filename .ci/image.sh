#!/usr/bin/env bash
# Builds scarproxy's container image (Containerfile) offline: the static
# binary on the host, then a FROM scratch image with buildah, else podman,
# else docker.
#
#   .ci/image.sh           build ./scarproxy and the image localhost/scarproxy:latest
#   .ci/image.sh --check   the same in a throwaway image store (CI): check the
#                          image's user, volume, port and entrypoint, and that
#                          the binary it ships starts with the configuration
#                          it ships; leave nothing behind
#
# Settings (environment): IMAGE (default localhost/scarproxy:latest);
# STORAGE_DRIVER for buildah and podman (with --check, default vfs: works
# inside containers, without fuse-overlayfs).
set -euo pipefail
cd "$(dirname "$0")/.."

export PATH="/usr/local/go/bin:$PATH"
image="${IMAGE:-localhost/scarproxy:latest}"
check=false
[[ "${1:-}" == --check ]] && check=true

log() { echo "image.sh: $*" >&2; }

# The binary: static (CGO_ENABLED=0), stamped with the revision (go build
# does not stamp it from a git worktree).
rev="$(git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)"
if [[ -n "$(git status --porcelain 2>/dev/null)" ]]; then
	rev="$rev-dirty"
fi
log "building the static binary ./scarproxy (revision $rev)"
CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.revision=$rev" -o scarproxy ./cmd/scarproxy
if ! go version -m scarproxy | grep -q 'CGO_ENABLED=0'; then
	log "./scarproxy is not static"; exit 1
fi
./scarproxy version

# The binary and the configuration the image ships start and serve.
smoke() {
	local dir out pid addr
	dir="$(mktemp -d)"
	out="$dir/out"
	./scarproxy serve --config container.yaml --data "$dir" --listen 127.0.0.1:0 >"$out" 2>"$dir/err" &
	pid=$!
	for _ in $(seq 1 100); do
		grep -q 'listening on' "$out" 2>/dev/null && break
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.1
	done
	addr="$(grep -o 'http://[^ ]*/v1' "$out" | head -n 1 | sed -e 's|^http://||' -e 's|/v1$||')"
	local ok=0 status=""
	if [[ -n "$addr" ]] && exec 3<>"/dev/tcp/${addr%:*}/${addr##*:}"; then
		printf 'GET /healthz HTTP/1.0\r\nHost: %s\r\n\r\n' "$addr" >&3
		read -r status <&3 || true
		exec 3<&-
		[[ "$status" == "HTTP/1.0 200"* || "$status" == "HTTP/1.1 200"* ]] && ok=1
	fi
	kill "$pid" 2>/dev/null || true
	wait "$pid" 2>/dev/null || true
	if [[ $ok != 1 ]]; then
		log "the binary did not serve container.yaml:"; cat "$out" "$dir/err" >&2
		rm -rf "$dir"; return 1
	fi
	rm -rf "$dir"
	log "the binary serves container.yaml (GET http://$addr/healthz: ${status%$'\r'})"
}
smoke

labels=(--label "org.opencontainers.image.revision=$rev")
store=()
if $check; then
	export STORAGE_DRIVER="${STORAGE_DRIVER:-vfs}"
	tmp="$(mktemp -d)"
	trap 'rm -rf "$tmp"' EXIT
	store=(--root "$tmp/root" --runroot "$tmp/run")
fi

if command -v buildah >/dev/null; then
	tool=(buildah "${store[@]}")
	"${tool[@]}" bud -q --layers=false "${labels[@]}" -t "$image" -f Containerfile . >/dev/null
	inspect=("${tool[@]}" inspect --type image "$image")
elif command -v podman >/dev/null; then
	tool=(podman "${store[@]}")
	"${tool[@]}" build -q "${labels[@]}" -t "$image" -f Containerfile . >/dev/null
	inspect=("${tool[@]}" image inspect "$image")
elif docker info >/dev/null 2>&1; then
	tool=(docker)
	docker build -q "${labels[@]}" -t "$image" -f Containerfile . >/dev/null
	inspect=(docker image inspect "$image")
else
	log "no buildah, podman or docker: built ./scarproxy only (install buildah or podman to build the image)"
	exit 0
fi
log "built $image with ${tool[0]}"

config="$("${inspect[@]}" | tr -d ' \n\t')"
for want in '"User":"65532:65532"' '"/data":{}' '"8080/tcp":{}' '"Entrypoint":["/usr/local/bin/scarproxy","serve"]' \
	'SCARPROXY_CONFIG=/etc/scarproxy/scarproxy.yaml' "org.opencontainers.image.revision\":\"$rev"; do
	if [[ "$config" != *"$want"* ]]; then
		log "the image's configuration lacks $want: $config"; exit 1
	fi
done
log "image checked: user 65532, volume /data, port 8080, entrypoint serve"
if $check; then
	"${tool[@]}" rmi "$image" >/dev/null 2>&1 || true
fi
if ! $check; then
	runner="${tool[0]}"
	[[ "$runner" == buildah ]] && runner=podman
	log "run it: $runner run -p 8080:8080 -v scarproxy-data:/data $image   (a team gateway: compose.yaml)"
fi
