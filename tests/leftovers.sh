# leftovers.sh -- sourced by the tests that launch jobs: a job's
# processes may still be dying when it ended (a SIGKILL is delivered, not
# done), so each has 10 s to end.  pidwait's pattern is the marker with
# its first letter bracketed, so that it matches neither pidwait's own
# command line nor that of the timeout running it.  Needs fail().
#
#   procs_gone MARKER
procs_gone() {
	timeout 10 pidwait -f -- "[${1:0:1}]${1:1}"
	if [ $? -eq 124 ] || pgrep -f -- "$1" >/dev/null; then
		pgrep -af -- "$1"
		fail "processes left behind"
	fi
}
