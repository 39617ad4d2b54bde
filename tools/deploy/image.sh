#!/usr/bin/env bash
# tools/deploy/image.sh: builds the `loom serve` image without a container daemon, as an OCI
# image layout (and, with --docker-archive, a tarball that `docker load` and `podman load`
# take), from the same parts as the Containerfile beside it:
#
#   1. the loom binary, built as the Containerfile's build stage builds it (cgo, -trimpath; the
#      op library's host kernels and CUDA cubins inside it), or given with --loom;
#   2. the run-time libraries it links (glibc, libgcc_s, libstdc++) from the Debian packages
#      that gcr.io/distroless/cc-debian12 is made of, at the versions installed on this machine
#      (the glibc the binary was linked against), fetched with `apt-get download`, which checks
#      them against Debian's signed index; their versions and sha256 go into the image's labels;
#   3. /etc/passwd and /etc/group with root and nonroot (65532), /home/nonroot, /tmp.
#
# The image has no shell, no package manager and no compiler; it runs /usr/local/bin/loom as
# 65532:65532 with the Containerfile's ENTRYPOINT and EXPOSE (tools/deploy's TestImage checks
# that they agree, then runs the image with runc). Two layers: the libraries, then the binary.
# Every file's time is SOURCE_DATE_EPOCH (default 0), so the same inputs give the same digest.
#
#   tools/deploy/image.sh [--out DIR] [--tag TAG] [--loom BINARY] [--docker-archive FILE]
#
# Needs umoci (Debian package umoci), apt-get and dpkg-deb; --docker-archive needs skopeo.
# Prints the image's manifest digest last (`DIR:TAG sha256:...`), also written to DIR/TAG.digest.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
root=$PWD

out=out/image
tag=latest
loom=""
archive=""
while [ $# -gt 0 ]; do
  case "$1" in
    --out) out=$2; shift 2 ;;
    --tag) tag=$2; shift 2 ;;
    --loom) loom=$2; shift 2 ;;
    --docker-archive) archive=$2; shift 2 ;;
    *) echo "tools/deploy/image.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
for tool in umoci apt-get dpkg-deb dpkg-query; do
  command -v "$tool" >/dev/null || { echo "tools/deploy/image.sh: $tool not found (apt-get install umoci)" >&2; exit 1; }
done
if [ -n "$archive" ] && ! command -v skopeo >/dev/null; then
  echo "tools/deploy/image.sh: --docker-archive needs skopeo (apt-get install skopeo)" >&2
  exit 1
fi
# The output is replaced only when it is an OCI layout (an earlier build) or empty: a mistyped
# --out never deletes anything else.
if [ -e "$out" ]; then
  if [ ! -d "$out" ] || { [ ! -f "$out/oci-layout" ] && [ -n "$(ls -A "$out")" ]; }; then
    echo "tools/deploy/image.sh: $out exists and is not an OCI image layout; not replacing it" >&2
    exit 1
  fi
fi
epoch=${SOURCE_DATE_EPOCH:-0}
created=$(date -u -d "@$epoch" +%Y-%m-%dT%H:%M:%SZ)

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# 1. The binary.
if [ -z "$loom" ]; then
  echo "tools/deploy/image.sh: go build ./tools/cmd/loom" >&2
  GOTOOLCHAIN=local CGO_ENABLED=1 GOFLAGS=-trimpath go build -o "$work/loom" ./tools/cmd/loom
  loom=$work/loom
fi
[ -x "$loom" ] || { echo "tools/deploy/image.sh: $loom is not an executable" >&2; exit 1; }

# 2. The libraries: distroless/cc's packages, at the versions this machine's binary links.
pkgs=(libc6 libgcc-s1 libstdc++6)
mkdir -p "$work/debs"
specs=()
for p in "${pkgs[@]}"; do
  v=$(dpkg-query -W -f='${Version}' "$p:amd64" 2>/dev/null || dpkg-query -W -f='${Version}' "$p")
  specs+=("$p=$v")
done
# apt-get as root warns that it downloads unsandboxed (to a directory _apt cannot write): that
# line is dropped; apt-get's own status decides.
fetch() {
  local log rc=0
  log=$(cd "$work/debs" && apt-get download -q "${specs[@]}" 2>&1) || rc=$?
  printf '%s\n' "$log" | grep -v "unsandboxed" >&2 || true
  return $rc
}
if ! fetch || [ "$(ls "$work/debs"/*.deb 2>/dev/null | wc -l)" -ne ${#pkgs[@]} ]; then
  echo "tools/deploy/image.sh: apt-get download failed; updating the package lists once" >&2
  sudo_cmd=""
  [ "$(id -u)" = 0 ] || sudo_cmd=sudo
  $sudo_cmd apt-get update -qq >/dev/null
  rm -f "$work/debs"/*.deb
  fetch
fi
base=$work/base
mkdir -p "$base"
labels=()
for deb in "$work/debs"/*.deb; do
  dpkg-deb -x "$deb" "$base"
  name=$(dpkg-deb -f "$deb" Package)
  labels+=(--config.label "dev.loomrt.image.deb.$name=$(dpkg-deb -f "$deb" Version) sha256:$(sha256sum "$deb" | cut -d' ' -f1)")
done
# Only what runs: documentation but the copyright files, locales, gconv modules, lintian and
# the packages' helper programs (ldconfig and the like: no shell runs them) are left out.
find "$base/usr/share" -mindepth 1 -maxdepth 1 ! -name doc -exec rm -rf {} +
find "$base/usr/share/doc" -type f ! -name copyright -delete 2>/dev/null || true
find "$base/usr/share/doc" -type l -delete 2>/dev/null || true
rm -rf "$base/usr/lib/x86_64-linux-gnu/gconv" "$base/usr/bin" "$base/usr/sbin" "$base/sbin" "$base/bin" \
  "$base/usr/libexec" "$base/etc/ld.so.conf.d" "$base/usr/lib/x86_64-linux-gnu/audit"
mkdir -p "$base/etc" "$base/tmp" "$base/home/nonroot" "$base/usr/local/bin"
printf 'root:x:0:0:root:/root:/sbin/nologin\nnobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n' >"$base/etc/passwd"
printf 'root:x:0:\nnobody:x:65534:\nnonroot:x:65532:\n' >"$base/etc/group"
chmod 1777 "$base/tmp"
rootless=()
if [ "$(id -u)" = 0 ]; then
  chown 65532:65532 "$base/home/nonroot"
else
  rootless=(--rootless) # every file root's in the layer; /home/nonroot then not the user's
fi

# 3. The binary's layer.
app=$work/app
mkdir -p "$app/usr/local/bin"
install -m 0755 "$loom" "$app/usr/local/bin/loom"

for d in "$base" "$app"; do
  find "$d" -exec touch -h -d "@$epoch" {} +
done

# The Containerfile's final stage: its ENTRYPOINT, EXPOSE and USER.
cf=tools/deploy/Containerfile
entry=$(grep -E '^ENTRYPOINT ' "$cf" | tail -1 | sed 's/^ENTRYPOINT //')
user=$(grep -E '^USER ' "$cf" | tail -1 | sed 's/^USER //')
ports=$(grep -E '^EXPOSE ' "$cf" | tail -1 | sed 's/^EXPOSE //')
entryargs=()
while IFS= read -r a; do entryargs+=(--config.entrypoint "$a"); done < <(python3 -c 'import json,sys; print("\n".join(json.loads(sys.argv[1])))' "$entry")
portargs=()
for p in $ports; do portargs+=(--config.exposedports "$p/tcp"); done

rm -rf "$out"
mkdir -p "$(dirname "$out")"
umoci init --layout "$out"
umoci new --image "$out:$tag"
umoci insert "${rootless[@]}" --image "$out:$tag" --history.created "$created" \
  --history.created_by "tools/deploy/image.sh: ${specs[*]}, /etc/passwd, /etc/group, /home/nonroot, /tmp" "$base" /
umoci insert "${rootless[@]}" --image "$out:$tag" --history.created "$created" \
  --history.created_by "tools/deploy/image.sh: /usr/local/bin/loom" "$app" /
umoci config --image "$out:$tag" --created "$created" --history.created "$created" \
  --history.created_by "tools/deploy/image.sh: the Containerfile's ENTRYPOINT, USER and EXPOSE" \
  --os linux --architecture amd64 --config.user "$user" --config.workingdir / \
  --config.env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
  --config.env HOME=/home/nonroot \
  "${entryargs[@]}" "${portargs[@]}" "${labels[@]}" \
  --config.label "org.opencontainers.image.source=https://github.com/loomrt/loom" \
  --config.label "org.opencontainers.image.title=loom serve"
umoci gc --layout "$out"

if [ -n "$archive" ]; then
  rm -f "$archive"
  skopeo copy -q "oci:$out:$tag" "docker-archive:$archive:loom-serve:$tag" >&2
fi
digest=$(python3 - "$out" "$tag" <<'EOF'
import json, sys
idx = json.load(open(sys.argv[1] + "/index.json"))
for m in idx["manifests"]:
    if m.get("annotations", {}).get("org.opencontainers.image.ref.name") == sys.argv[2]:
        print(m["digest"])
EOF
)
echo "$digest" >"$out/$tag.digest"
echo "$out:$tag $digest"
