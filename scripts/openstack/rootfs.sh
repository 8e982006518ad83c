# shellcheck shell=bash
# The expensive stage of scripts/openstack/build-images.sh: a Debian tree with
# every package of image/packages installed, as a tarball. Sourced by it; this
# file, image/packages, image/users, image/debconf.preseed and
# scripts/lib/debian-rootfs.sh make up the rootfs input hash.

# openstack_rootfs ROOT SUITE MIRROR DEBS LOG META: builds ROOT; writes the
# package versions as shell assignments to META.
openstack_rootfs() {
  local root="$1" suite="$2" mirror="$3" debs="$4" logf="$5" meta="$6"
  local img="$here/image"
  rootfs_debootstrap "$root" "$suite" "$mirror" "$debs" "$logf" || return 1
  rootfs_prepare "$root" "$debs"

  # 1. Kolla's users and groups, before any package can create its own.
  chroot "$root" groupadd --gid 42400 kolla
  local name uid home
  while read -r name uid home; do
    case "$name" in '' | '#'*) continue ;; esac
    [ "$name" = kolla ] || chroot "$root" groupadd --gid "$uid" "$name"
    chroot "$root" useradd --no-create-home --no-log-init --home-dir "$home" --shell /usr/sbin/nologin \
      --uid "$uid" --gid "$uid" --groups kolla "$name"
  done <"$img/users"

  # 2. adduser, told that Kolla's uids count as system ids: the packages'
  #    postinst scripts call `adduser --system nova`, which exits non-zero for an
  #    existing user whose uid lies outside the system range.
  rootfs_apt "$root" "$logf" adduser || return 1
  sed -i -e '/^#\?\(FIRST\|LAST\)_SYSTEM_[UG]ID=/d' -e '/^#\?FIRST_[UG]ID=/d' "$root/etc/adduser.conf"
  printf '%s\n' 'FIRST_SYSTEM_UID=100' 'LAST_SYSTEM_UID=42999' 'FIRST_SYSTEM_GID=100' 'LAST_SYSTEM_GID=42999' \
    'FIRST_UID=43000' 'FIRST_GID=43000' >>"$root/etc/adduser.conf"

  # 3. debconf: every "configure the database / rabbit / keystone" question "no".
  grep -v '^#' "$img/debconf.preseed" | chroot "$root" debconf-set-selections

  # 4. The packages.
  # shellcheck disable=SC2046
  rootfs_apt "$root" "$logf" $(grep -vE '^[[:space:]]*(#|$)' "$img/packages") || return 1

  # 5. Check what the packages did with the users: every one keeps Kolla's uid.
  while read -r name uid home; do
    case "$name" in '' | '#'*) continue ;; esac
    local got
    got=$(chroot "$root" id -u "$name")
    if [ "$got" != "$uid" ]; then
      log "user $name has uid $got after apt, not $uid"
      return 1
    fi
  done <"$img/users"

  # 6. Kolla's folders; runtime folders that a non-root service cannot create.
  install -d -m 0755 "$root/var/lib/kolla/config_files"
  install -d -m 2775 -g 42400 "$root/var/log/kolla"
  # mariadb's postinst initialised a data folder into the image: the container
  # set's bootstrap initialises its own (a volume), so the image ships it empty.
  rm -rf "${root:?}/var/lib/mysql/"* "${root:?}/var/lib/mysql/".[!.]*

  {
    local p
    for p in python3-nova python3-keystone python3-glance python3-placement python3-neutron \
      mariadb-server rabbitmq-server memcached dumb-init; do
      printf '%s=%s\n' "$(echo "$p" | tr -c 'a-z0-9\n' '_')" \
        "$(chroot "$root" dpkg-query -W -f '${Version}' "$p" | sed -e 's/^[0-9]*://')"
    done
    printf 'package_count=%s\n' "$(chroot "$root" dpkg-query -W -f '.\n' | wc -l)"
  } >"$meta"

  rootfs_release "$root"
  rootfs_slim "$root"
  install -d -m 0755 -o 42434 -g 42434 "$root/run/mysqld"
  install -d -m 0755 -o 42457 -g 42457 "$root/run/memcached"
  install -d -m 1777 "$root/run/lock"
}
