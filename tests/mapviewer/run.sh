#!/usr/bin/env bash
# Map viewer tests: run.sh CASE MAPVIEWER PCORRUN
#   loaders   imgTLoader and imgCLoader (in-process daemon, recvCopy and
#             recvDMA) give the same pixels for several regions and scales
#   pcorrun   the same through 2 daemon processes started by pcorrun
#   missing   a missing and a corrupt tile: placeholders, the log names
#             them, the render completes (exit 3)
#   share     generation by shares (gen --share, gen under pcorrun) makes
#             the same tiles, byte for byte, each share only its own
#   netns     viewer and two daemons on three emulated hosts (network
#             namespaces on a bridge, tiles over tcp): same pixels
#   dkill     a daemon dies mid-render: its tiles come from the replica,
#             pixels equal; with no replica, placeholders
#   dmute     a daemon stays alive but stops answering: after the timeout
#             its tiles come from the replica, pixels equal
# Exit 0 pass, 1 fail, 77 skip.
set -u
case_=$1 mv=$2 pcorrun=$3
tmp=$(mktemp -d)
namespaces=()
cleanup() {
	# Whatever still runs in our namespaces ends with them.
	for ns in "${namespaces[@]}"; do
		ip netns pids "$ns" 2>/dev/null | xargs -r kill -KILL 2>/dev/null
		ip netns del "$ns" 2>/dev/null
	done
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 1' INT TERM
fail() { echo "FAIL: $*"; exit 1; }
# Output kept in a variable must not hide a sanitizer's report.
clean() { ! grep -qE "Sanitizer|runtime error" <<< "$1" || { echo "$1"; fail "sanitizer report"; }; }
# Every step is bounded: a hang is a failure, not a stuck suite.
run() { timeout -k 5 120 "$@"; }

run "$mv" gen --map "$tmp/map" --grid 3x4 --seed 5 --threads 2 >/dev/null ||
	fail "gen"
[ -f "$tmp/map/map.txt" ] || fail "no manifest"
[ "$(ls "$tmp/map/tiles" | wc -l)" -eq 12 ] || fail "not 12 tiles"

# region window: full map, 1:1, 1:2, 1:5 (odd size), zoom in 2x, 1:8
regions=("0,0,1920,1920 600x600" "100,50,600,600 600x600"
	 "300,700,1200,900 600x450" "0,0,1920,1920 384x384"
	 "650,470,300,300 600x600" "0,0,1920,1920 240x240")

# views PREFIX: --region/--window/-o arguments for every region, the
# images named PREFIX0.png, PREFIX1.png...
views() {
	local I p=$1
	for I in "${!regions[@]}"; do
		set -- ${regions[$I]}
		printf '%s\n' --region "$1" --window "$2" -o "$tmp/$p$I.png"
	done
}
ref() { # ref I: the imgTLoader renders (all regions, once)
	[ -f "$tmp/ref$1.png" ] && return
	mapfile -t a < <(views ref)
	run "$mv" render --map "$tmp/map" "${a[@]}" >/dev/null ||
		fail "tloader render"
}
# cmp_all PREFIX: every region's PREFIX image equals the reference
cmp_all() {
	local I
	for I in "${!regions[@]}"; do
		run "$mv" cmp "$tmp/ref$I.png" "$tmp/$1$I.png" >/dev/null ||
			fail "$1: differs from imgTLoader on ${regions[$I]}"
	done
}

case $case_ in
loaders)
	ref 0
	for dma in "" --dma; do
		mapfile -t a < <(views "c$dma")
		run "$mv" render --map "$tmp/map" --loader c $dma "${a[@]}" \
			>/dev/null || fail "cloader $dma render"
		cmp_all "c$dma"
	done
	# Bad views are refused, with a reason.
	for bad in "--region 0,0,1921,10" "--region -1,0,10,10" \
		   "--region 0,0,0,10" "--region 0,0,100,100 --window 0x10" \
		   "--region 0,0,100,100 --window 5000x10" \
		   "--region 0,0,10,10 --window 600x600"; do
		out=$(run "$mv" render --map "$tmp/map" $bad -o "$tmp/x.png" 2>&1)
		[ $? -eq 2 ] || fail "accepted $bad"
		clean "$out"
		echo "$out" | grep -q "mapviewer:" || fail "no reason for $bad"
	done
	;;
pcorrun)
	# One application renders every view: a launch per view would cost
	# more than the views under the sanitizers.
	ref 0
	mapfile -t a < <(views p)
	out=$(run "$pcorrun" -n 3 "$mv" render --map "$tmp/map" --loader c \
		"${a[@]}" 2>&1) || { echo "$out"; fail "pcorrun render"; }
	clean "$out"
	cmp_all p
	;;
missing)
	ref 0
	rm "$tmp/map/tiles/r001_c001.jpg"
	head -c 300 /dev/urandom > "$tmp/map/tiles/r002_c000.jpg"
	for l in t c; do
		out=$(run "$mv" render --map "$tmp/map" --loader $l \
			--region 0,0,1920,1920 --window 600x600 \
			-o "$tmp/m$l.png" 2>&1)
		[ $? -eq 3 ] || fail "loader $l: want exit 3 (placeholders)"
		clean "$out"
		echo "$out" | grep -q "r001_c001.jpg" || fail "log misses missing tile"
		echo "$out" | grep -q "r002_c000.jpg" || fail "log misses corrupt tile"
		echo "$out" | grep -q "2 placeholder" || fail "no placeholder count"
		[ -s "$tmp/m$l.png" ] || fail "no image"
	done
	run "$mv" cmp "$tmp/mt.png" "$tmp/mc.png" >/dev/null ||
		fail "placeholders differ between loaders"
	run "$mv" cmp "$tmp/ref0.png" "$tmp/mt.png" >/dev/null &&
		fail "placeholders look like the map"
	;;
share)
	# Share 0 of 3 holds the tiles daemon 0 owns and those it keeps for
	# daemon 2 (its replica).
	run "$mv" gen --map "$tmp/s0" --grid 3x4 --seed 5 --share 0/3 \
		--threads 2 >/dev/null || fail "gen --share"
	n=$(ls "$tmp/s0/tiles" | wc -l)
	[ "$n" -gt 0 ] && [ "$n" -lt 12 ] || fail "share 0/3 made $n of 12 tiles"
	for f in "$tmp"/s0/tiles/*; do
		cmp -s "$f" "$tmp/map/tiles/$(basename "$f")" ||
			fail "$(basename "$f") differs from the whole map's"
	done
	# Two processes, each its share: together the whole map.
	run "$pcorrun" -n 2 "$mv" gen --map "$tmp/s2" --grid 3x4 --seed 5 \
		--threads 2 >/dev/null || fail "gen under pcorrun"
	for f in "$tmp"/map/tiles/*; do
		cmp -s "$f" "$tmp/s2/tiles/$(basename "$f")" ||
			fail "$(basename "$f") missing or different"
	done
	;;
netns)
	command -v ip >/dev/null || { echo "SKIP: no ip"; exit 77; }
	tag="mv$$"
	ip netns add "${tag}ctl" 2>/dev/null ||
		{ echo "SKIP: cannot create network namespaces"; exit 77; }
	namespaces+=("${tag}ctl")
	net="10.214.$(( $$ % 250 + 1 ))"
	ip -n "${tag}ctl" link set lo up
	ip -n "${tag}ctl" link add br0 type bridge || fail "no bridge support"
	ip -n "${tag}ctl" addr add "$net.1/24" dev br0
	ip -n "${tag}ctl" link set br0 up
	hosts=()
	for i in 1 2 3; do
		ns="${tag}h$i"
		ip netns add "$ns" || fail "ip netns add $ns"
		namespaces+=("$ns")
		hosts+=("$ns")
		ip -n "$ns" link set lo up
		ip -n "${tag}ctl" link add "v$i" type veth peer name eth0 \
			netns "$ns" || fail "no veth support"
		ip -n "${tag}ctl" link set "v$i" master br0 up
		ip -n "$ns" addr add "$net.$((i + 1))/24" dev eth0
		ip -n "$ns" link set eth0 up
	done
	hostlist=$(IFS=,; echo "${hosts[*]}")
	ref 0
	mapfile -t a < <(views n)
	out=$(run ip netns exec "${tag}ctl" "$pcorrun" -n 3 -H "$hostlist" \
		--rsh "ip netns exec %h" --agent-if "$net.1" "$mv" render \
		--map "$tmp/map" --loader c --hosts "${a[@]}" 2>&1) ||
		{ echo "$out"; fail "render on 3 hosts"; }
	clean "$out"
	# Three processes, three different hosts.
	[ "$(grep -E "^(viewer|daemon [01]): .* on host " <<< "$out" |
		sed 's/.* on host //' | sort -u | wc -l)" -eq 3 ] ||
		{ echo "$out"; fail "not on three hosts"; }
	cmp_all n
	;;
dkill)
	ref 0
	# Two daemons; daemon 0 dies after 2 replies: its other tiles come
	# from daemon 1, which holds the replicas.
	out=$(run "$pcorrun" -n 3 --keep-going "$mv" render --map "$tmp/map" \
		--loader c --die-after 0,2 --timeout-ms 5000 \
		--region 0,0,1920,1920 --window 600x600 -o "$tmp/k.png" 2>&1)
	clean "$out"
	echo "$out" | grep -q "from a replica" || { echo "$out"; fail "no replica used"; }
	run "$mv" cmp "$tmp/ref0.png" "$tmp/k.png" || fail "replica render differs"
	# One daemon, no replica: placeholders, and the render completes.
	out=$(run "$pcorrun" -n 2 --keep-going "$mv" render --map "$tmp/map" \
		--loader c --die-after 0,2 --timeout-ms 5000 \
		--region 0,0,1920,1920 --window 600x600 -o "$tmp/k1.png" 2>&1)
	clean "$out"
	echo "$out" | grep -q "placeholder" || { echo "$out"; fail "no placeholders"; }
	echo "$out" | grep -q "marked down" || fail "viewer did not say the daemon is down"
	[ -s "$tmp/k1.png" ] || fail "no image"
	;;
dmute)
	ref 0
	out=$(run "$pcorrun" -n 3 "$mv" render --map "$tmp/map" --loader c \
		--mute-after 0,2 --timeout-ms 3000 --region 0,0,1920,1920 \
		--window 600x600 -o "$tmp/u.png" 2>&1)
	st=$?
	clean "$out"
	[ $st -eq 0 ] || { echo "$out"; fail "exit $st"; }
	echo "$out" | grep -q "no answer in 3000 ms" || { echo "$out"; fail "no timeout seen"; }
	echo "$out" | grep -q "from a replica" || fail "no replica used"
	run "$mv" cmp "$tmp/ref0.png" "$tmp/u.png" || fail "replica render differs"
	;;
*) echo "unknown case $case_"; exit 2 ;;
esac
echo "PASS: $case_"
exit 0
