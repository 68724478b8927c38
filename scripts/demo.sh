#!/usr/bin/env bash
# The main demo: the pCoR paper's JPEG map viewer on a small local pcor
# application.  Installs what is missing, builds, makes the map if it is
# not there yet, then:
#   scripts/demo.sh              renders the paper's seven regions (2 to
#                                300 tiles, 1:1 to 1:16) with imgTLoader and
#                                with imgCLoader on daemon processes, writes
#                                the images and prints the timing table
#   scripts/demo.sh serve [PORT] the web viewer on http://127.0.0.1:PORT/
#   scripts/demo.sh ring [threads] [laps]   the message-ring example
# PCOR_DEMO_MAP (map directory, default build/demo-map) and
# PCOR_DEMO_DAEMONS (daemon processes, default 2) change the set-up.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
./scripts/install-deps.sh
[ -d build ] || meson setup build -Dbuildtype=release >/dev/null
ninja -C build >/dev/null
cmd=${1:-render}
[ $# -gt 0 ] && shift
if [ "$cmd" = ring ]; then
	exec ./build/apps/ring "$@"
fi
mv=./build/apps/mapviewer/mapviewer
pcorrun=./build/tools/pcorrun
map=${PCOR_DEMO_MAP:-build/demo-map}
np=$(( ${PCOR_DEMO_DAEMONS:-2} + 1 ))
# The paper's map: 15 x 20 tiles of 640x480, 9600x9600 pixels.
"$mv" gen --map "$map" --grid 15x20
case $cmd in
render)
	out=build/demo-out
	mkdir -p "$out/tloader" "$out/cloader"
	echo
	echo "The seven regions into a 600x600 window, best of 3:"
	"$mv" render --map "$map" --paper --repeat 3 -o "$out/tloader"
	"$pcorrun" -n "$np" "$mv" render --map "$map" --loader c --paper \
		--repeat 3 -o "$out/cloader" | grep -v '^loader'
	echo
	echo "Images: $out/cloader/region1-1to1.jpg ... region7-1to16.jpg"
	echo "(imgCLoader: $((np - 1)) daemon processes started by pcorrun;"
	echo " imgTLoader: threads of one process.)"
	echo "Web viewer (pan with the mouse, zoom with the wheel):"
	echo "  scripts/demo.sh serve     then open http://127.0.0.1:8080/"
	;;
serve)
	port=${1:-8080}
	echo "Open http://127.0.0.1:$port/ (Ctrl-C ends it)."
	exec "$pcorrun" -n "$np" "$mv" serve --map "$map" --loader c \
		--port "$port"
	;;
*)
	echo "usage: scripts/demo.sh [render | serve [PORT] | ring [threads] [laps]]" >&2
	exit 2
	;;
esac
