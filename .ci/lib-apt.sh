# Sourced by .ci/setup: waiting, bounded, for the locks of another apt or dpkg (on a fresh VM right
# after boot, unattended-upgrades holds them for minutes). apt takes fcntl (POSIX) locks, which
# flock(1) does not see, so the test is fcntl(F_GETLK) from perl: perl-base is Essential on Debian,
# present before setup installs anything, and F_GETLK only asks, it never takes the lock.
# The paths and the bound are environment variables so tests can point them at their own lock files.

APT_LOCK_WAIT_S="${NPUCONF_APT_LOCK_WAIT_S:-600}"
APT_LOCK_POLL_S="${NPUCONF_APT_LOCK_POLL_S:-1}"
APT_LISTS_LOCK="${NPUCONF_APT_LISTS_LOCK:-/var/lib/apt/lists/lock}"
DPKG_FRONTEND_LOCK="${NPUCONF_DPKG_FRONTEND_LOCK:-/var/lib/dpkg/lock-frontend}"
DPKG_LOCK="${NPUCONF_DPKG_LOCK:-/var/lib/dpkg/lock}"

# struct flock on Linux amd64, arm64 and armhf (64-bit off_t): short, short, off_t, off_t, pid_t.
_APT_LOCK_PERL='
use strict;
use warnings;
use Fcntl qw(F_GETLK F_WRLCK F_UNLCK SEEK_SET);
my ($what, $path, $bound, $poll) = @ARGV;
my $layout = "s s x![q] q q i x![q]";
sub holder {
  open(my $fh, "<", $path) or return;  # absent or unreadable: nothing to wait for, apt will say more
  my $lock = pack($layout, F_WRLCK, SEEK_SET, 0, 0, 0);
  fcntl($fh, F_GETLK, $lock) or return;
  my ($type, undef, undef, undef, $pid) = unpack($layout, $lock);
  return if $type == F_UNLCK;
  my $name = "";
  if ($pid > 0 and open(my $comm, "<", "/proc/$pid/comm")) { chomp($name = <$comm> // ""); }
  return $pid > 0 ? " (process $pid" . ($name eq "" ? "" : " $name") . ")" : "";
}
my $held = holder();
exit 0 unless defined $held;
$| = 1;
print STDERR "setup: waiting up to $bound s for $what ($path) held by another package manager$held\n";
my $waited = 0;
while (defined($held = holder())) {
  if ($waited >= $bound) {
    print STDERR "setup: $what ($path) is still held by another package manager$held after $bound s;"
      . " let it finish (or raise NPUCONF_APT_LOCK_WAIT_S) and run .ci/setup again\n";
    exit 1;
  }
  select(undef, undef, undef, $poll);
  $waited += $poll;
}
'

# apt_wait_for_lock WHAT PATH: returns at once when no process holds PATH; otherwise says so on one
# line and waits until it is released (0) or APT_LOCK_WAIT_S seconds have passed (1, with one line).
apt_wait_for_lock() {
  if ! [[ "$APT_LOCK_WAIT_S" =~ ^[0-9]+$ ]]; then
    echo "setup: NPUCONF_APT_LOCK_WAIT_S must be a whole number of seconds, not '$APT_LOCK_WAIT_S'" >&2
    return 1
  fi
  if ! [[ "$APT_LOCK_POLL_S" =~ ^[0-9]+([.][0-9]+)?$ ]] || [[ "$APT_LOCK_POLL_S" =~ ^0+([.]0+)?$ ]]; then
    echo "setup: NPUCONF_APT_LOCK_POLL_S must be a positive number of seconds, not '$APT_LOCK_POLL_S'" >&2
    return 1
  fi
  if ! command -v perl >/dev/null; then
    return 0  # no way to look; apt itself reports a held lock
  fi
  perl -e "$_APT_LOCK_PERL" "$1" "$2" "$APT_LOCK_WAIT_S" "$APT_LOCK_POLL_S"
}
