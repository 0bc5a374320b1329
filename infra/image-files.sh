#!/usr/bin/env bash
# The runtime file list of the platform image: run by the Dockerfile's build stage, and by
# packages/deploy-check's image test (on a copy of the built workspace) to prove it starts.
# Usage: bash infra/image-files.sh SRC OUT
#   SRC: a workspace with `npm install` and the build done (it is pruned in place: use a copy)
#   OUT: created; gets package.json, package-lock.json, production node_modules and, for every
#        package and service that the services need at run time, its package.json and dist/.
set -euo pipefail
src=$(cd "$1" && pwd)
out=$2
rm -rf "$out"
mkdir -p "$out"
out=$(cd "$out" && pwd)
cd "$src"

# Production dependencies only (devDependencies of the root and of every workspace go).
npm prune --omit=dev --no-audit --no-fund >/dev/null

cp package.json package-lock.json "$out/"
for dir in packages/* services/*; do
  case "$dir" in packages/testing | packages/deploy-check) continue ;; esac # test helpers only
  case "$dir" in packages/console) continue ;; esac # bundled into the gateway's dist/public/console at its build
  [ -f "$dir/package.json" ] && [ -d "$dir/dist" ] || continue
  mkdir -p "$out/$dir"
  cp "$dir/package.json" "$out/$dir/"
  cp -R "$dir/dist" "$out/$dir/dist"
  # Dependencies npm could not hoist to the root (another version there) live beside the workspace.
  if [ -d "$dir/node_modules" ]; then cp -R "$dir/node_modules" "$out/$dir/node_modules"; fi
  find "$out/$dir/dist" \( -name '*.map' -o -name '*.d.ts' -o -name '*.tsbuildinfo' \) -delete
done
cp -R node_modules "$out/node_modules"
# typeorm declares ts-node as an optional peer, which npm keeps whenever it is installed: the image runs compiled
# JavaScript only (packages/deploy-check's image test starts every service without them).
rm -rf "$out/node_modules/ts-node" "$out/node_modules/typescript" "$out/node_modules/@types"
# Workspace links to what is not in the image (tests, benchmarks) dangle: drop them.
find "$out/node_modules" -maxdepth 2 -type l ! -exec test -e {} \; -delete
