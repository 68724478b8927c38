#!/usr/bin/env bash
# The main job: install what is missing, build, run the demo.
# Arguments go to the demo (ring: [threads] [laps]).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
./scripts/install-deps.sh
[ -d build ] || meson setup build -Dbuildtype=release >/dev/null
ninja -C build >/dev/null
exec ./build/apps/ring "$@"
