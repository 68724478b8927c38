# netns.sh -- emulated hosts for the benchmarks, sourced by their scripts:
# network namespaces on one bridge (needs root), removed on exit.
#
#   netns_up TAG NET N   namespaces TAG"c" (the control one, with the
#                        bridge at NET.1) and TAG"h1".."hN" (eth0 at
#                        NET.2..); sets ctl, agent (NET.1) and hosts (an
#                        array of the host namespaces).  Returns non-zero
#                        when namespaces cannot be made.
#   netns_down           ends what runs in them and removes them.
# TAG must be letters and digits (some launchers take it as a host name).
netns_list=()

netns_down() {
	local ns
	for ns in "${netns_list[@]}"; do
		ip netns pids "$ns" 2>/dev/null | xargs -r kill -KILL 2>/dev/null
		ip netns del "$ns" 2>/dev/null
	done
	netns_list=()
}

netns_up() {
	local tag=$1 net=$2 n=$3 i ns
	ctl=${tag}c agent=$net.1 hosts=()
	ip netns add "$ctl" 2>/dev/null || return 1
	netns_list+=("$ctl")
	ip -n "$ctl" link set lo up
	ip -n "$ctl" link add br0 type bridge || return 1
	ip -n "$ctl" addr add "$agent/24" dev br0
	ip -n "$ctl" link set br0 up
	for i in $(seq 1 "$n"); do
		ns=${tag}h$i
		ip netns add "$ns" || return 1
		netns_list+=("$ns")
		ip -n "$ns" link set lo up
		ip -n "$ctl" link add "v$i" type veth peer name eth0 \
			netns "$ns" || return 1
		ip -n "$ctl" link set "v$i" master br0 up
		ip -n "$ns" addr add "$net.$((i + 1))/24" dev eth0
		ip -n "$ns" link set eth0 up
		hosts+=("$ns")
	done
}
