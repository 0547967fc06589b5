#!/bin/bash
# fairway-node: PID 1 of a real test node. It starts containerd, imports the preloaded images,
# installs the node's CNI config, and runs the kubelet with the arguments given to the container
# (test/nodes writes its config and credentials under /etc/fairway-node). When the kubelet exits
# the container ends, and every pod with it: they all live in this container's PID namespace.
set -euo pipefail

conf=/etc/fairway-node
logs=/var/log/fairway-node
mkdir -p "${logs}"

# The container runs with every capability the Docker daemon can give, not --privileged (see
# docs/real-nodes.md), so /sys and the cgroup hierarchies come read-only: the kubelet and runc
# write both. In the container's own cgroup namespace a fresh mount of each hierarchy shows the
# container's cgroup as the root.
mount -o remount,rw /sys
while read -r _ dir fstype opts _; do
  [[ "${fstype}" == cgroup ]] || continue
  sub="$(tr , '\n' <<<"${opts}" | grep -vxE 'ro|rw|nosuid|nodev|noexec|relatime' | paste -sd, -)"
  umount "${dir}"
  mount -t cgroup -o "rw,nosuid,nodev,noexec,relatime,${sub}" cgroup "${dir}"
done < <(grep ' cgroup ' /proc/mounts)

# The kubelet and containerd mount volumes that both must see; the container's root mount is
# private by default.
mount --make-rshared /

# Nodes share the host's network namespace, so pod bridges and the CNI firewall rules land in
# the host's tables: use the iptables backend the host already uses (the one holding rules).
legacy=$( (iptables-legacy-save 2>/dev/null || true) | grep -c '^-' || true)
nft=$( (iptables-nft-save 2>/dev/null || true) | grep -c '^-' || true)
if ((legacy > nft)); then mode=legacy; else mode=nft; fi
update-alternatives --set iptables "/usr/sbin/iptables-${mode}" >/dev/null
update-alternatives --set ip6tables "/usr/sbin/ip6tables-${mode}" >/dev/null

# cAdvisor reads the machine ID; debootstrap leaves none.
[[ -s /etc/machine-id ]] || tr -d - </proc/sys/kernel/random/uuid >/etc/machine-id

# The node's own address (test/nodes writes "<link> <ip>"): the kubelet refuses a loopback node
# IP, so it gets a /32 on a link of its own in the host's network namespace, reachable from this
# host only. A bridge without ports: the dummy link type needs a kernel module that containers
# cannot load and test machines do not always have.
if [[ -f "${conf}/node-ip" ]]; then
  read -r link ip <"${conf}/node-ip"
  ip link show "${link}" >/dev/null 2>&1 || ip link add "${link}" type bridge
  ip addr replace "${ip}/32" dev "${link}"
  ip link set "${link}" up
fi

# The kubernetes Service, routed as kube-proxy routes it (test/nodes Config.KubernetesService):
# the API server listens on the host's 127.0.0.1 only, so a pod's connection to the Service's
# ClusterIP is DNATed there as it enters the host from the node's pod bridge. Loopback
# destinations from outside need route_localnet on that bridge (made here, before the CNI
# plugin, which reuses it), and kube-proxy's guard against its abuse: anything else arriving on
# the bridge for 127.0.0.0/8 is dropped. The rules carry the node's name, so Stop finds them.
if [[ -f "${conf}/kubernetes-service" ]]; then
  read -r node bridge svc_ip svc_port api_port <"${conf}/kubernetes-service"
  ip link show "${bridge}" >/dev/null 2>&1 || ip link add "${bridge}" type bridge
  ip link set "${bridge}" up
  echo 1 >"/proc/sys/net/ipv4/conf/${bridge}/route_localnet"
  tag="fairway-node-${node}"
  iptables -t nat -A PREROUTING -i "${bridge}" -d "${svc_ip}/32" -p tcp --dport "${svc_port}" \
    -m comment --comment "${tag}" -j DNAT --to-destination "127.0.0.1:${api_port}"
  iptables -t filter -I INPUT -i "${bridge}" -d 127.0.0.0/8 -m conntrack ! --ctstate RELATED,ESTABLISHED,DNAT \
    -m comment --comment "${tag}" -j DROP
fi

mkdir -p /etc/cni/net.d
if [[ -f "${conf}/cni.conflist" ]]; then
  cp "${conf}/cni.conflist" /etc/cni/net.d/10-fairway.conflist
fi

# CDI spec directories (containerd 2's cdi_spec_dirs): the tests write stand-in NVIDIA specs into
# /etc/cdi, fairway's agent its own into /var/run/cdi. Made before containerd watches them.
mkdir -p /etc/cdi /var/run/cdi

containerd --config /etc/containerd/config.toml >"${logs}/containerd.log" 2>&1 &
for _ in $(seq 100); do
  ctr version >/dev/null 2>&1 && break
  sleep 0.1
done
ctr version >/dev/null || { echo "fairway-node: containerd did not start:" >&2; tail -20 "${logs}/containerd.log" >&2; exit 1; }
for img in /var/lib/fairway-node/images/*.tar /var/lib/fairway-node/extra-images/*.tar; do
  [[ -f "${img}" ]] || continue
  ctr -n k8s.io images import --snapshotter native "${img}" >/dev/null
done
echo "fairway-node: containerd ready, images: $(ctr -n k8s.io images ls -q | grep -v '^sha256:' | tr '\n' ' ')"

exec kubelet "$@" >"${logs}/kubelet.log" 2>&1
