#!/usr/bin/env bash
# Node.js from the npm registry, for machines whose own node is older than the one wanted.
#
# The registry carries Node itself as the package node-linux-<arch> (a tarball whose bin/ holds
# node); npm stays the machine's. Sourced by .ci/run; usable by hand as well:
#   source .ci/node.sh && node_path 24     # prints the bin directory of Node 24, fetching it once
#   PATH=$(source .ci/node.sh && node_path 22):$PATH npm test
# Fetched versions are kept under ${DYNEIN_NODE_CACHE:-~/.cache/dynein-node}/<major>/.

# The bin directory of the newest Node <major> the registry has, fetched on first use.
node_path() {
  local major=$1 arch
  case "$(uname -m)" in
    x86_64) arch=x64 ;;
    aarch64 | arm64) arch=arm64 ;;
    *)
      echo "node_path: no node-linux package for $(uname -m); install Node $major yourself" >&2
      return 1
      ;;
  esac
  [[ $(uname -s) == Linux ]] || {
    echo "node_path: node-linux-$arch runs on Linux only; install Node $major yourself" >&2
    return 1
  }
  local dir=${DYNEIN_NODE_CACHE:-$HOME/.cache/dynein-node}/$major
  if [[ ! -x $dir/package/bin/node ]]; then
    echo "== fetching Node $major (npm pack node-linux-$arch@$major) into $dir" >&2
    local tmp
    tmp=$(mktemp -d)
    (cd "$tmp" && npm pack --silent "node-linux-$arch@$major" >/dev/null) || {
      rm -rf "$tmp"
      echo "node_path: npm pack node-linux-$arch@$major failed" >&2
      return 1
    }
    mkdir -p "$dir"
    rm -rf "$dir/package"
    tar xzf "$tmp"/node-linux-"$arch"-*.tgz -C "$dir"
    rm -rf "$tmp"
  fi
  echo "$dir/package/bin"
}

# The major version of the node first on PATH (0 when there is none).
node_major() {
  local v
  v=$(node -p 'process.versions.node' 2>/dev/null) || {
    echo 0
    return
  }
  echo "${v%%.*}"
}
