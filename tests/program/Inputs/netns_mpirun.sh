#!/bin/sh
# netns_mpirun.sh MPIRUN PROGRAM ARGS...: runs `PROGRAM ARGS` on 2 ranks,
# each in a network namespace of its own, as on two hosts: namespaces
# dlcPIDa and dlcPIDb joined by a veth pair (10.213.0.1 and 10.213.0.2),
# mpirun and rank 0 in the first, rank 1 and its Open MPI daemon in the
# second (mpirun's "ssh" is `ip netns exec`), and Open MPI's TCP transport
# only, on that interface: the gradients cross a network interface.  Then
# prints the bytes the first namespace's end of the link sent and
# received ("veth: sent N bytes, received M bytes").  Needs root (ip
# netns); removes everything it made, whatever happens; a job that does
# not end within 120 s is stopped.
set -eu
mpirun=$1
shift
id=dlc$$
a=${id}a b=${id}b
tmp=$(mktemp -d)
cleanup() {
    ip netns del "$a" 2>/dev/null || true
    ip netns del "$b" 2>/dev/null || true
    rm -rf "$tmp"
}
trap cleanup EXIT
ip netns add "$a"
ip netns add "$b"
ip link add "${id}x" type veth peer name "${id}y"
ip link set "${id}x" netns "$a"
ip link set "${id}y" netns "$b"
ip -n "$a" addr add 10.213.0.1/24 dev "${id}x"
ip -n "$b" addr add 10.213.0.2/24 dev "${id}y"
for ns in "$a" "$b"; do
    ip -n "$ns" link set lo up
done
ip -n "$a" link set "${id}x" up
ip -n "$b" link set "${id}y" up
# mpirun starts the daemon of host 10.213.0.2 with this instead of ssh
cat > "$tmp/agent" <<AGENT
#!/bin/sh
shift
exec ip netns exec $b sh -c "\$*"
AGENT
chmod +x "$tmp/agent"
printf '10.213.0.1 slots=1\n10.213.0.2 slots=1\n' > "$tmp/hosts"
status=0
ip netns exec "$a" timeout 120 "$mpirun" --hostfile "$tmp/hosts" \
    --mca plm_rsh_agent "$tmp/agent" --mca btl self,tcp \
    --mca btl_tcp_if_include 10.213.0.0/24 --mca oob_tcp_if_include 10.213.0.0/24 \
    -np 2 "$@" || status=$?
ip -n "$a" -s link show "${id}x" | awk '/RX:/ {getline; rx = $1} /TX:/ {getline; tx = $1}
    END {print "veth: sent " tx " bytes, received " rx " bytes"}'
exit $status
