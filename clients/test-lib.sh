# Sourced by the clients' shell tests (clients/neovim/test/*.sh, clients/helix/test_helix_tmux.sh):
# the binaries they drive and the mock provider they start, spelled once.

# flemma_binaries REPO_ROOT: sets $flemmad and $mock to $FLEMMAD and $FLEMMA_MOCK_PROVIDER when
# set, else to the debug builds in ${CARGO_TARGET_DIR:-REPO_ROOT/target}; exits 1 saying how to
# build them when one is missing.
flemma_binaries() {
  local target="${CARGO_TARGET_DIR:-$1/target}"
  case "$target" in /*) ;; *) target="$1/$target" ;; esac
  flemmad="${FLEMMAD:-$target/debug/flemmad}"
  mock="${FLEMMA_MOCK_PROVIDER:-$target/debug/flemma-mock-provider}"
  local bin
  for bin in "$flemmad" "$mock"; do
    if [ ! -x "$bin" ]; then
      echo "not ok - $bin is not built: run \`cargo build -p flemmad -p flemma-mock-provider\` first" >&2
      exit 1
    fi
  done
}

# flemma_start_mock DIR [ARG...]: starts $mock with ARGs (e.g. --script FILE), its pid in
# $mock_pid and its URL in $mock_url (DIR holds mock.url and mock.log). Waits up to 30 s for the
# URL (a loaded machine may take seconds) and exits 1 without it: a chat must never go on to the
# real provider.
flemma_start_mock() {
  local dir="$1"
  shift
  # A URL file left by an earlier mock in DIR must not be read while this one's redirection
  # has not truncated it yet: remove it first, then wait for a whole URL line.
  rm -f "$dir/mock.url"
  "$mock" "$@" > "$dir/mock.url" 2> "$dir/mock.log" &
  mock_pid=$!
  local _
  mock_url=""
  for _ in $(seq 600); do
    mock_url="$(head -1 "$dir/mock.url" 2> /dev/null || true)"
    case "$mock_url" in http://127.0.0.1:*[0-9]) break ;; esac
    sleep 0.05
  done
  case "$mock_url" in http://127.0.0.1:*[0-9]) ;; *)
    echo "not ok - flemma-mock-provider did not print its URL:" >&2; cat "$dir/mock.log" >&2; exit 1 ;;
  esac
}
