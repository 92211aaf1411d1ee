# Sourced by tests/dist/npm, pypi and oci: what every way of installing mcpspec is checked with.
# shellcheck shell=bash

# drive BIN_DIR BINARY: with BIN_DIR first on a PATH that has node and the system's tools but no
# cargo, the `mcpspec` installed there says the same --version as BINARY (the binary packed),
# creates a spec's database, checks the spec (its summary pinned), and serves it to an MCP
# client over stdio (client.mjs: tools/list, a call, a refused argument, SIGTERM and exit 0).
drive() {
  local bin_dir="$1" binary="$2" here node_dir
  here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
  node_dir="$(dirname "$(command -v node)")"
  (
    export PATH="$bin_dir:$node_dir:/usr/bin:/bin"
    if command -v cargo >/dev/null; then
      echo "error: cargo is on the installed command's PATH ($(command -v cargo))" >&2
      exit 1
    fi
    local want got checked work
    want="$("$binary" --version)"
    got="$(mcpspec --version)"
    if [[ "$got" != "$want" ]]; then
      echo "error: the installed mcpspec --version said '$got', the binary packed '$want'" >&2
      exit 1
    fi
    echo "ok: $(command -v mcpspec): $got"
    work="$(mktemp -d)"
    trap 'rm -rf "$work"' EXIT
    cd "$work"
    cp "$here/parts.yaml" .
    mcpspec init --spec parts.yaml --db parts.db --sample
    checked="$(mcpspec check --spec parts.yaml)"
    if [[ "$checked" != "ok: 1 spec, 1 tool;"* ]]; then
      echo "error: mcpspec check --spec parts.yaml said: $checked" >&2
      exit 1
    fi
    node "$here/client.mjs" parts.yaml parts.db
  )
}
