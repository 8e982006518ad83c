#!/usr/bin/env bash
# npm run e2e:openstack — the OpenStack end-to-end test on its own
# (docs/explanation/openstack-proof.md): builds or reuses the images and the guest (inside
# the test; all cached by input hash), runs
# test/integration/openstack-e2e.test.ts through vitest, and prints the total
# time and the summary lines LAST, one per network variant (unset
# SPCD_E2E_NETWORK: `all`, the Linux bridge variant, then the Open vSwitch one,
# then the same host built by kolla-ansible and adopted, on the same control
# plane, and then the OVN variant in a second run; lb, ovs, adopt or ovn: that
# one alone; npm run e2e:adopt is adopt, npm run e2e:ovn is ovn). The Linux bridge line:
#   openstack_vms_survived=K/N nova_managed_after=0|1 census_mismatches=M shipped_set=1 rabbit_outage_restarts=R dockerd_restart_vm_lost=D max_libvirt_window_s=X max_compute_up_s=Y compute_up_floor_s=F dockerd_compute_up_s=E network_ok=S/T vm_ping_sent=N vm_ping_lost=L max_ping_gap_ms=G ns_ping_sent=N ns_ping_lost=L
#   (T checked steps: 7 (5 with SPCD_E2E_LB_AGENT_STEPS=0), plus one per control container, plus the compute-set upgrade, plus the RabbitMQ outage, plus a dockerd restart with live-restore on (none with SPCD_E2E_DOCKERD_STEPS=0) and one with it off (none with SPCD_E2E_DOCKERD_OFF=0); N = 2 T)
# The Open vSwitch line (test/e2e/openstack-ovs-steps.ts):
#   network=ovs ovs_vms_survived=K/N census_mismatches=M shipped_set=1 network_ok=S/T vm_ping_sent=N vm_ping_lost=L max_ping_gap_ms=G ns_ping_sent=N ns_ping_lost=L ovsdb_upgrade_lost=D vswitchd_upgrade_lost=V vswitchd_window_ms=W vswitchd_restart_ms=R lost_elsewhere=0
#   (T = 7 + the control containers restarted: neutron_server, the DHCP agent and RabbitMQ, every one with
#   SPCD_E2E_OVS_CONTROL=all; this script sets SPCD_E2E_STEPS=full, the CI lane runs 3 steps: test/e2e/openstack-lanes.ts)
# The OVN line (test/e2e/openstack-ovn-steps.ts; a second run of the test, with its own control
# plane on ML2/OVN, after the first unless SPCD_E2E_NETWORK names one variant; npm run e2e:ovn alone):
#   network=ovn ovn_vms_survived=K/N census_mismatches=M shipped_set=1 network_ok=S/T vm_ping_sent=N vm_ping_lost=L max_ping_gap_ms=G ns_ping_sent=N ns_ping_lost=L ovsdb_upgrade_lost=D vswitchd_upgrade_lost=V vswitchd_window_ms=W vswitchd_restart_ms=R lost_elsewhere=0 nova_managed_after=1
#   (T = 8 + 5 control containers: neutron_server, both OVN databases, ovn-northd, RabbitMQ; the
#   namespace pings come from the physnet: OVN has no DHCP agent)
# The adoption line (test/e2e/openstack-adopt-steps.ts):
#   adopted=K/N adopt_restarts=0 units_retired=U units_refused=U vm_ping_lost=L adopt_step_lost=0 openstack_vms_survived=S/S nova_managed_after=1 adopt_s=T census_mismatches=M network_ok=S/T vm_ping_sent=N max_ping_gap_ms=G ns_ping_sent=N ns_ping_lost=L vm_wire_lost=W
#   (checked: every container adopted and none restarted, every unit retired, no packet lost in the
#   takeover nor from the DHCP namespace, no VM lost, not one VM ping lost in any step, in the
#   guests (vm_ping_lost) nor on the host's path from tap to tap (vm_wire_lost))
# Exit status: vitest's (0 when every test passed), non-zero on any lost VM or lost ping packet
# (between the VMs, or from the DHCP namespace to them; in the Open vSwitch variant, outside
# the upgrades of openvswitch_db and vswitchd and the whole set's, which are measured).
# Environment: SPCD_E2E_CACHE (image/guest cache, default /var/cache/spcd-e2e),
#   SPCD_E2E_FORCE=1 (rebuild the images and the guest),
#   SPCD_E2E_LB_AGENT_STEPS=0 (leave out steps 6 and 7, the Linux bridge agent's),
#   SPCD_E2E_DOCKERD_STEPS=0 (leave out steps 11 and 12, the restarts of dockerd),
#   SPCD_E2E_DOCKERD_OFF=0 (leave out step 12, dockerd restarted with live-restore off),
#   SPCD_E2E_NETWORK=all|lb|ovs|adopt|ovn (unset: all, then ovn), SPCD_E2E_OVS_CONTROL=all,
#   SPCD_E2E_STEPS=ci (the CI lane's shorter lists of steps, test/e2e/openstack-lanes.ts).
set -uo pipefail
cd "$(dirname "$0")/../.."
npm run build >/dev/null || exit 1
# The pings from the DHCP namespace need iputils ping on the host (busybox's has no -D/-O).
bash scripts/ensure-ping.sh || exit 1
# The adoption variant counts the VMs' pings on the host too (test/e2e/tap-capture.ts).
bash scripts/ensure-tcpdump.sh || exit 1
summary=$(mktemp /tmp/spcd-e2e-summary.XXXXXX)
trap 'rm -f "$summary"' EXIT
t0=$EPOCHREALTIME
# The long form: every step of the Open vSwitch variant (the CI lane runs a shorter list).
export SPCD_E2E_STEPS="${SPCD_E2E_STEPS:-full}"
e2e() { SPCD_E2E_SUMMARY="$1" npx vitest run --project integration test/integration/openstack-e2e.test.ts 2>&1; }
if [ -n "${SPCD_E2E_NETWORK:-}" ]; then
  e2e "$summary"
  rc=$?
else
  # The three variants on one control plane, then OVN on its own (ML2/OVN from the start).
  ovn_summary=$(mktemp /tmp/spcd-e2e-summary.XXXXXX)
  SPCD_E2E_NETWORK=all e2e "$summary"
  rc=$?
  SPCD_E2E_NETWORK=ovn e2e "$ovn_summary" || rc=$?
  cat "$ovn_summary" >>"$summary"
  rm -f "$ovn_summary"
fi
awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "e2e_openstack_wall_s=%.1f\n", b - a }'
if [ -s "$summary" ]; then
  cat "$summary"
  if grep -q '^openstack_vms_survived=' "$summary"; then
    lb=$(grep '^openstack_vms_survived=' "$summary")
    grep -q '^openstack_vms_survived=\([0-9]*\)/\1 nova_managed_after=1 census_mismatches=0 ' <<<"$lb" || [ "$rc" != 0 ] || rc=1
    grep -q ' vm_ping_lost=0 ' <<<"$lb" || [ "$rc" != 0 ] || rc=1
    grep -q ' shipped_set=1 ' <<<"$lb" || [ "$rc" != 0 ] || rc=1
    [ "${SPCD_E2E_DOCKERD_STEPS:-1}" = 0 ] || grep -q ' dockerd_restart_vm_lost=0 ' <<<"$lb" || [ "$rc" != 0 ] || rc=1
    grep -q ' ns_ping_lost=0\( \|$\)' <<<"$lb" || [ "$rc" != 0 ] || rc=1
  fi
  if grep -q '^network=ovs ' "$summary"; then
    ovs=$(grep '^network=ovs ' "$summary")
    grep -q ' ovs_vms_survived=\([0-9]*\)/\1 census_mismatches=0 shipped_set=1 ' <<<"$ovs" || [ "$rc" != 0 ] || rc=1
    grep -q ' lost_elsewhere=0\( \|$\)' <<<"$ovs" || [ "$rc" != 0 ] || rc=1
  fi
  if grep -q '^network=ovn ' "$summary"; then
    ovn=$(grep '^network=ovn ' "$summary")
    grep -q ' ovn_vms_survived=\([0-9]*\)/\1 census_mismatches=0 shipped_set=1 ' <<<"$ovn" || [ "$rc" != 0 ] || rc=1
    grep -q ' lost_elsewhere=0 nova_managed_after=1$' <<<"$ovn" || [ "$rc" != 0 ] || rc=1
  fi
  if grep -q '^adopted=' "$summary"; then
    ad=$(grep '^adopted=' "$summary")
    grep -q '^adopted=\([0-9]*\)/\1 adopt_restarts=0 units_retired=\1 units_refused=\1 vm_ping_lost=[0-9]* adopt_step_lost=0 openstack_vms_survived=\([0-9]*\)/\2 nova_managed_after=1 ' <<<"$ad" || [ "$rc" != 0 ] || rc=1
    grep -q ' vm_wire_lost=0$' <<<"$ad" || [ "$rc" != 0 ] || rc=1
    grep -q ' vm_ping_lost=0 ' <<<"$ad" || [ "$rc" != 0 ] || rc=1
    grep -q ' census_mismatches=0 ' <<<"$ad" || [ "$rc" != 0 ] || rc=1
    grep -q ' ns_ping_lost=0 ' <<<"$ad" || [ "$rc" != 0 ] || rc=1
  fi
else
  # The test did not get as far as its summary (e.g. vitest could not start).
  echo "openstack_vms_survived=0/0 nova_managed_after=0 census_mismatches=0 shipped_set=0 rabbit_outage_restarts=nan dockerd_restart_vm_lost=nan max_libvirt_window_s=nan max_compute_up_s=nan compute_up_floor_s=nan dockerd_compute_up_s=nan vm_ping_sent=0 vm_ping_lost=nan max_ping_gap_ms=nan ns_ping_sent=0 ns_ping_lost=nan"
  [ "$rc" != 0 ] || rc=1
fi
exit "$rc"
