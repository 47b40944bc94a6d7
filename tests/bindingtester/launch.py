#!/usr/bin/env python3
"""Runs FoundationDB's own bindingtester, unchanged, with this client's stack tester
registered as a known tester.

    launch.py BINDINGTESTER_DIR STACKTESTER [bindingtester.py arguments...]

`bindingtester.py` gives a tester named only by its command line the most conservative
capabilities (64-bit integers, no versionstamp tuple elements). This launcher declares what
fdb-stacktester supports instead, the way FDB's `known_testers.py` declares it for the
official bindings: integers up to 2040 bits, every tuple type including versionstamps,
tenants (so the api test generates TENANT_* instructions and _TENANT variants; the cluster
needs tenant_mode=optional_experimental, which run.sh sets), API version 730. Its testers
are named `rust-mio` and `rust-tokio` (one per driver), usable as the tester or the
`--compare` argument of bindingtester.py.
"""

import os
import sys


def main():
    if len(sys.argv) < 3:
        sys.stderr.write(__doc__)
        return 2
    bindingtester_dir = os.path.realpath(sys.argv[1])
    stacktester = os.path.realpath(sys.argv[2])
    if " " in stacktester:
        # bindingtester.py splits a tester's command on spaces.
        sys.stderr.write("launch.py: the stack tester's path must not contain spaces\n")
        return 2
    # As when bindingtester.py runs as a script: its package through the bindings directory,
    # its sibling modules (`util`) through its own.
    sys.path[:0] = [os.path.dirname(bindingtester_dir), bindingtester_dir]

    from bindingtester import known_testers
    from bindingtester.known_testers import ALL_TYPES, MAX_API_VERSION, Tester

    for driver in ("mio", "tokio"):
        name = "rust-" + driver
        known_testers.testers[name] = Tester(
            name,
            "%s --driver %s" % (stacktester, driver),
            max_int_bits=2040,
            min_api_version=730,
            max_api_version=MAX_API_VERSION,
            types=ALL_TYPES,
            tenants_enabled=True,
        )

    from bindingtester import bindingtester

    return bindingtester.main(sys.argv[3:])


if __name__ == "__main__":
    sys.exit(main())
