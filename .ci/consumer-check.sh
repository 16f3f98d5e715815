#!/usr/bin/env bash
# Consumer check (#11): build and pack the tarball, then use it the way other teams do, in scratch
# projects outside the repository (under mktemp -d):
#   (a) client only: `npm install <tarball>` in an empty ESM project; no aws-cdk-lib, constructs
#       or esbuild in node_modules; import DyneinClient and Worker with plain node; the CLI
#       (--version, --help, usage errors); the client examples compiled with tsc (nodenext,
#       strict, skipLibCheck false); then `dynein local` from the installed package (after the
#       npm install -D command it prints) and the client quickstart example run against it.
#   (b) CDK: the tarball + aws-cdk-lib + constructs + typescript; every example compiled with tsc
#       (nodenext, strict, skipLibCheck false); each examples/cdk-*.ts app run with plain node
#       must synthesize templates (cdk-nag AwsSolutions runs in each: a finding fails it), without
#       esbuild in node_modules; their templates hold what .ci/consumers/examples-check.mjs asks.
#   (c) the examples type-checked once more with moduleResolution bundler (their own files).
#   (d) CommonJS and ESM: require() and import of every entry point (in the project of (e)).
#   (e) the project `cdk init app --language typescript` generates, with the constructs added:
#       its own `npm test` (Jest, CommonJS) and `npx cdk synth`, its configuration unchanged.
#   (f) publint and @arethetypeswrong/cli on the tarball.
# Runs from .ci/run beside the tests (the quickstart once they ended), or alone:
# `npm run check:package`. KEEP_SCRATCH=1 keeps the scratch directory for a look afterwards;
# TARBALL=<file> checks that tarball instead of building and packing one; ALSO_NODE=<bin
# directory of another Node> runs every step that depends on the Node version (imports, the CLI,
# `dynein local` with the quickstart, the CommonJS and ESM checks, the cdk init project's Jest
# test, which synthesizes the stack) on that Node too, at once, in the same scratch projects
# (.ci/run: Node 24, and Node 22 as ALSO_NODE). Installs, type checks and the package linters do
# not depend on it and run once. DYNEIN_CI_TESTS_ENDED=<file> (.ci/run): the quickstart waits for
# that file.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
export npm_config_update_notifier=false npm_config_fund=false npm_config_audit=false npm_config_loglevel=error
export CDK_DISABLE_VERSION_CHECK=1
readonly CDK_LIB=aws-cdk-lib@2.276.0 CONSTRUCTS=constructs@^10.5.0 TYPESCRIPT=typescript@~5.9 TYPES_NODE=@types/node@^22
started=$(date +%s)
step() { echo "== consumer: $* ($(($(date +%s) - started)) s)"; }
fail() {
  echo "consumer check FAILED: $*" >&2
  exit 1
}
install() { npm install --prefer-offline --no-audit --no-fund "$@" >/dev/null; }
# Runs a command (or a function) on this Node and, with ALSO_NODE, at the same time on that Node
# (its bin directory first on PATH, so `node`, npm's scripts and shebangs all take it); fails if
# either fails, with the other Node's output. The command must not write where its twin does, and
# must check each of its steps itself (set -e does not reach into a command that `||` tests).
on_each_node() {
  if [[ -z ${ALSO_NODE:-} ]]; then
    "$@"
    return
  fi
  local log rc=0 other=0 pid
  log=$(mktemp)
  (PATH=$ALSO_NODE:$PATH "$@") >"$log" 2>&1 &
  pid=$!
  ("$@") || rc=$?
  wait "$pid" || other=$?
  if ((other == 0)); then
    echo "   (and on Node $("$ALSO_NODE/node" -v): passed)"
  else
    echo "   on Node $("$ALSO_NODE/node" -v) it FAILED (exit $other):"
    sed 's/^/   /' "$log"
  fi
  rm -f "$log"
  local failed=()
  ((rc == 0)) || failed+=("$(node -v)")
  ((other == 0)) || failed+=("$("$ALSO_NODE/node" -v)")
  ((${#failed[@]} == 0)) || fail "$* failed on Node ${failed[*]}"
}
# The npm packages the given examples import (but dynein-serverless itself and aws-cdk-lib and
# constructs, installed explicitly), at the ranges the repository's package.json uses.
example_deps() {
  node -e '
    const { readFileSync } = require("node:fs");
    const { builtinModules } = require("node:module");
    const pkg = require(process.argv[1] + "/package.json");
    const known = { ...pkg.peerDependencies, ...pkg.devDependencies, ...pkg.dependencies };
    const skip = new Set(["dynein-serverless", "aws-cdk-lib", "constructs", ...builtinModules]);
    const names = new Set();
    for (const f of process.argv.slice(2)) {
      for (const [, spec] of readFileSync(f, "utf8").matchAll(/^(?:import|export)\s[^;]*?from\s+\x27([^\x27.][^\x27]*)\x27/gm)) {
        const name = spec.split("/").slice(0, spec.startsWith("@") ? 2 : 1).join("/");
        if (!spec.startsWith("node:") && !skip.has(name)) names.add(name);
      }
    }
    for (const n of [...names].sort()) {
      if (!known[n]) { console.error(`examples import ${n}, which package.json does not list: add it to devDependencies`); process.exit(1); }
      console.log(`${n}@${known[n]}`);
    }
  ' "$repo" "$@"
}

scratch=$(mktemp -d "${TMPDIR:-/tmp}/dynein-consumer.XXXXXX")
cleanup() {
  if [[ ${KEEP_SCRATCH:-} == 1 ]]; then echo "scratch kept: $scratch"; else rm -rf "$scratch"; fi
}
trap cleanup EXIT

# Examples are consumer code: only package imports.
if grep -nE "from '\.\.?/" examples/*.ts; then fail "examples/ must import only dynein-serverless, dynein-serverless/cdk and npm packages (the lines above import relative paths)"; fi

version=$(node -p "require('./package.json').version")
if [[ -n ${TARBALL:-} ]]; then
  step "the tarball given: $TARBALL"
  [[ -f $TARBALL ]] || fail "TARBALL=$TARBALL: no such file"
  cp "$TARBALL" "$scratch/dynein-serverless-$version.tgz"
else
  step "npm run build"
  npm run build --silent
  step "npm pack"
  npm pack --ignore-scripts --pack-destination "$scratch" >/dev/null
fi
tarball=$scratch/dynein-serverless-$version.tgz
[[ -f $tarball ]] || fail "npm pack wrote no $tarball"
contents=$(tar tzf "$tarball")
for f in package/package.json package/README.md package/bin/dynein.js package/dist/client/index.js package/dist/client/index.d.ts \
  package/dist/lib/index.js package/dist/lib/index.d.ts package/dist/local/start.mjs package/dist/local/services.mjs \
  package/dist/local/tableService.mjs package/dist/local/compute.mjs package/dist/local/peers.json; do
  grep -qxF "$f" <<<"$contents" || fail "the tarball lacks $f"
done
for name in submit ingest tick dispatch cancel status; do
  grep -qxF "package/dist/lambdas/$name/index.mjs" <<<"$contents" || fail "the tarball lacks the $name Lambda bundle"
done
unwanted=$(grep -E '^package/(test|bench|cdk\.out|\.dynein|\.ci|examples|scripts|node_modules)/|\.tgz$' <<<"$contents" || true)
unwanted+=$(grep -E '\.ts$' <<<"$contents" | grep -vE '\.d\.ts$' || true)
[[ -z $unwanted ]] || fail "the tarball holds files the whitelist should keep out: $unwanted"
echo "tarball: $(du -h "$tarball" | cut -f1) packed, $(wc -l <<<"$contents") files"

# (e), (d) and (f) run beside (a), (b) and (c), in a subshell with its own log: the two chains
# share nothing but the tarball, and one chain of steps one after another leaves a core idle
# once the tests beside CI end (2026-11-28: the consumer checks ended 117 s after them).
(
# (e) the project `cdk init app --language typescript` generates ---------------------------------
step "cdk init project: cdk init app --language typescript (the aws-cdk CLI of package.json), npm install, then the tarball"
init=$scratch/init/hello
mkdir -p "$init" && cd "$init"
"$repo"/node_modules/.bin/cdk init app --language typescript --generate-only >"$scratch/cdk-init.log" 2>&1 ||
  fail "cdk init failed: $(cat "$scratch/cdk-init.log")"
generated=$(cat jest.config.js tsconfig.json | sha256sum)
install
install "$tarball"
cp "$repo"/.ci/consumers/hello-stack.ts lib/hello-stack.ts
cp "$repo"/.ci/consumers/hello.test.ts test/hello.test.ts
[[ $(cat jest.config.js tsconfig.json | sha256sum) == "$generated" && $(node -p 'require("./package.json").type') == undefined ]] ||
  fail "the cdk init project's configuration changed"

# (d) CommonJS and ESM: in the cdk init project, a CommonJS one (no "type") with the tarball and
# aws-cdk-lib installed as a team installs them.
step "CommonJS and ESM (in the cdk init project): require() and import of every entry point; the client loads neither Powertools nor the CDK"
cp "$repo"/.ci/consumers/check.cjs "$repo"/.ci/consumers/check.mjs .
cjs_and_esm() { node check.cjs && node check.mjs; }
on_each_node cjs_and_esm
step "cdk init project: npm test (Jest 30, CommonJS, @swc/jest)"
on_each_node npm test --silent
# On this Node only: its Jest test above synthesized the stack on each Node already; this is the
# aws-cdk CLI running the generated app, as a team deploys it.
step "cdk init project: npx cdk synth"
npx --no-install cdk synth --quiet
[[ -f cdk.out/HelloStack.template.json ]] || fail "cdk synth wrote no cdk.out/HelloStack.template.json"

# (f) package linters ----------------------------------------------------------------------------
step "publint --strict and @arethetypeswrong/cli on the tarball"
cd "$scratch"
"$repo"/node_modules/.bin/publint --strict "$tarball"
# ./openapi.yaml is a document, not a module: there are no types to resolve for it.
"$repo"/node_modules/.bin/attw "$tarball" --profile node16 --exclude-entrypoints ./openapi.yaml
) >"$scratch/init.log" 2>&1 &
init_pid=$!

# (a) client only -------------------------------------------------------------------------------
step "client-only project: npm install the tarball"
client=$scratch/client
mkdir -p "$client/src" && cd "$client"
npm init -y >/dev/null && npm pkg set type=module
install "$tarball"
for p in aws-cdk-lib constructs esbuild; do [[ ! -e node_modules/$p ]] || fail "a client-only install holds node_modules/$p"; done
echo "client-only install: $(du -sh node_modules | cut -f1) in node_modules, $(npm ls --all --parseable 2>/dev/null | tail -n +2 | sort -u | wc -l) packages"
imports() {
  node -e "
import('dynein-serverless').then((m) => {
  for (const name of ['DyneinClient', 'Worker', 'UnrecoverableError', 'DyneinApiError']) {
    if (typeof m[name] !== 'function') throw new Error('dynein-serverless does not export ' + name);
  }
  return import('dynein-serverless/lambda');
}).then((m) => {
  if (typeof m.dyneinLambdaHandler !== 'function') throw new Error('dynein-serverless/lambda does not export dyneinLambdaHandler');
  return import('dynein-serverless/package.json', { with: { type: 'json' } });
}).then((p) => { if (p.default.version !== '$version') throw new Error('dynein-serverless/package.json: version ' + p.default.version); });
"
}
on_each_node imports

step "client-only project: the dynein CLI"
# node_modules/.bin/dynein: the command npm links, run by the node on PATH (its shebang).
dynein=$client/node_modules/.bin/dynein
expect_usage_error() {
  local err code=0
  err=$("$dynein" "$@" 2>&1 >/dev/null) || code=$?
  [[ $code == 2 && -n $err && $(wc -l <<<"$err") == 1 ]] || fail "dynein $* should exit 2 with one line, got $code: $err"
  printf '%s\n' "$err"
}
cli() {
  [[ $("$dynein" --version) == "$version" ]] || fail "dynein --version does not print $version"
  "$dynein" --help | grep -q '^Usage: dynein <command>' || fail "dynein --help prints no usage"
  for c in schedule batch get cancel worker redrive local; do
    "$dynein" "$c" --help | grep -q "^Usage: dynein $c " || fail "dynein $c --help prints no usage"
  done
  expect_usage_error frobnicate >/dev/null
  expect_usage_error get --tenant demo --colour blue >/dev/null
}
on_each_node cli
missing=$(expect_usage_error local)
install_cmd=$(sed -n 's/.*: \(npm install -D .*\)$/\1/p' <<<"$missing")
[[ -n $install_cmd ]] || fail "dynein local without its peers should print the npm install -D command, got: $missing"

step "client-only project: tsc (nodenext, strict, skipLibCheck false) on the client examples"
deps=($(example_deps "$repo"/examples/client-*.ts))
install -D "$TYPESCRIPT" "$TYPES_NODE" "${deps[@]}"
cp "$repo"/examples/client-*.ts src/
cat >tsconfig.json <<'EOF'
{
  "compilerOptions": {
    "target": "ES2022", "module": "nodenext", "moduleResolution": "nodenext", "strict": true,
    "skipLibCheck": false, "types": ["node"], "rootDir": "src", "outDir": "dist"
  },
  "include": ["src"]
}
EOF
npx --no-install tsc -p .

step "client-only project: $install_cmd (for dynein local: the quickstart runs against it last)"
eval "$install_cmd" --prefer-offline --no-audit --no-fund >/dev/null
# `dynein local` on a free port with a data directory of its own (the twin on the other Node has
# its own), the quickstart example against it, then the CLI's schedule, get and cancel. A subshell:
# its EXIT trap stops that stack whatever fails.
quickstart() (
  local_pid=
  data=$(mktemp -d "$client/.dynein.XXXXXX")
  trap '[[ -z $local_pid ]] || { kill -INT "$local_pid" 2>/dev/null; for _ in $(seq 50); do kill -0 "$local_pid" 2>/dev/null || break; sleep 0.2; done; kill -KILL "$local_pid" 2>/dev/null; } || true' EXIT
  export DYNEIN_DATA_DIR=$data
  # --port 0: any free port, named in local.json (a port picked beforehand could be taken first).
  "$dynein" local --port 0 --tenants demo >"$data/local.log" 2>&1 &
  local_pid=$!
  # Up to 90 s: it starts in seconds, but a CI machine busy with the tests beside it (two cores,
  # load 7) once took more than 30 s.
  for _ in $(seq 450); do
    [[ -f $data/local.json ]] && break
    kill -0 "$local_pid" 2>/dev/null || fail "dynein local exited: $(cat "$data/local.log")"
    sleep 0.2
  done
  [[ -f $data/local.json ]] || fail "dynein local not ready after 90 s: $(cat "$data/local.log")"
  out=$(node dist/client-quickstart.js) || fail "the quickstart example failed: $out"
  for line in 'status: ' 'cancelled: CANCELLED' 'hello from the quickstart'; do grep -qF "$line" <<<"$out" || fail "the quickstart example printed no '$line': $out"; done
  job=$("$dynein" schedule --tenant demo --in 1h)
  # Status answers UNKNOWN until ingest stored the job (a second or two): wait for SCHEDULED.
  got=
  for _ in $(seq 50); do
    got=$("$dynein" get --tenant demo "$job") || fail "dynein get failed: $got"
    [[ $got == SCHEDULED\ * ]] && break
    sleep 0.2
  done
  [[ $got == SCHEDULED\ * ]] || fail "dynein get: $job is not SCHEDULED: $got"
  "$dynein" cancel --tenant demo "$job" | grep -q '^CANCELLED ' || fail "dynein cancel: $job is not CANCELLED"
)

# (b) CDK ---------------------------------------------------------------------------------------
step "CDK project: npm install the tarball, $CDK_LIB, $CONSTRUCTS, $TYPESCRIPT and what the examples import"
cdk=$scratch/cdk
mkdir -p "$cdk/src" && cd "$cdk"
npm init -y >/dev/null && npm pkg set type=module
deps=($(example_deps "$repo"/examples/*.ts))
echo "the examples also import: ${deps[*]:-nothing else}"
install "$tarball" "$CDK_LIB" "$CONSTRUCTS" "$TYPESCRIPT" "$TYPES_NODE" "${deps[@]}"
cp "$repo"/examples/*.ts src/
cat >tsconfig.json <<'EOF'
{
  "compilerOptions": {
    "target": "ES2022", "module": "nodenext", "moduleResolution": "nodenext", "strict": true,
    "skipLibCheck": false, "types": ["node"], "rootDir": "src", "outDir": "dist"
  },
  "include": ["src"]
}
EOF
step "CDK project: tsc (nodenext, strict, skipLibCheck false) on every example"
npx --no-install tsc -p .
[[ ! -e node_modules/esbuild ]] || fail "the CDK project holds node_modules/esbuild"
shopt -s nullglob
apps=(dist/cdk-*.js)
[[ ${#apps[@]} -gt 0 ]] || fail "no examples/cdk-*.ts to synthesize"
# Each Node synthesizes into a directory of its own.
synth() {
  local app=$1 name out templates
  name=$(basename "$app" .js)
  out=$cdk/cdk.out/$name-$(node -v)
  CDK_OUTDIR=$out node "$app" || return 1
  templates=("$out"/*.template.json)
  [[ ${#templates[@]} -gt 0 ]] || fail "$name synthesized no template in $out"
  echo "$name: ${#templates[@]} template(s): $(basename -a "${templates[@]}" | tr '\n' ' ')"
}
# On this Node only: the CDK's own code runs the same on both, and the cdk init project below
# synthesizes (Jest, then cdk synth) on each Node.
for app in "${apps[@]}"; do
  step "CDK project: node $app (synth)"
  synth "$app"
done
step "CDK project: what the examples' templates must hold (.ci/consumers/examples-check.mjs)"
node "$repo"/.ci/consumers/examples-check.mjs "$cdk/cdk.out" "$(node -v)"

# (c) bundler resolution -------------------------------------------------------------------------
# skipLibCheck true here (it costs a third of this whole check otherwise): the declaration files
# were checked whole under nodenext above; an entry point bundler resolution cannot find is an
# error in the examples' own files, and one the package's declaration files import is an internal
# resolution error for @arethetypeswrong/cli (its bundler profile, below).
step "CDK project: tsc --noEmit with moduleResolution bundler (strict; declaration files checked under nodenext above)"
cat >tsconfig.bundler.json <<'EOF'
{
  "compilerOptions": {
    "target": "ES2022", "module": "esnext", "moduleResolution": "bundler", "strict": true,
    "skipLibCheck": true, "types": ["node"], "noEmit": true
  },
  "include": ["src"]
}
EOF
npx --no-install tsc -p tsconfig.bundler.json

# The cdk init project and the package linters, run beside the steps above.
init_rc=0
wait "$init_pid" || init_rc=$?
echo "== consumer: (beside the steps above) the cdk init project, CommonJS and ESM, the package linters:"
sed 's/^/   /' "$scratch/init.log"
((init_rc == 0)) || fail "the cdk init project, the CommonJS and ESM checks or the package linters failed (exit $init_rc: above)"

# (a, last) the quickstart -------------------------------------------------------------------------
# A local stack serving a client with deadlines: under .ci/run (DYNEIN_CI_TESTS_ENDED names the
# file it writes when the tests end) it waits for the tests, since at nice 19 beside three test
# files a local stack got no CPU for 30 s and the quickstart's requests timed out (2026-11-28).
if [[ -n ${DYNEIN_CI_TESTS_ENDED:-} && ! -e $DYNEIN_CI_TESTS_ENDED ]]; then
  step "the quickstart waits for the tests beside it to end"
  while [[ ! -e $DYNEIN_CI_TESTS_ENDED ]]; do sleep 1; done
fi
step "client-only project: dynein local; the quickstart example against it"
cd "$client"
on_each_node quickstart

step "passed"
