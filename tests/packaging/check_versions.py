#!/usr/bin/env python3
"""Every program's --version prints the project's version (CMake's PROJECT_VERSION), and so do
the Debian packages: the CPack configuration the build generated gives their Version field
(CPACK_DEBIAN_PACKAGE_VERSION, per component or not, else CPACK_PACKAGE_VERSION, then
-CPACK_DEBIAN_PACKAGE_RELEASE), whose upstream part must be that version. tst_packages checks
the same on the .deb files cpack writes (dpkg-deb -f Version); this one needs no cpack run.

  check_versions.py PROJECT_VERSION CPACK_CONFIG NAME=PROGRAM...
"""
import os
import re
import subprocess
import sys


def fail(message):
    sys.exit(f"check_versions: FAIL: {message}")


def cpack_variables(path):
    """The set(NAME "value") lines of a CPackConfig.cmake."""
    if not os.path.isfile(path):
        fail(f"{path} is missing: configure the build (packaging/CMakeLists.txt writes it)")
    with open(path) as f:
        return dict(re.findall(r'^set\((CPACK_\w+) "([^"]*)"\)', f.read(), re.M))


def main():
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    version, config = sys.argv[1], sys.argv[2]
    if not re.fullmatch(r"\d+\.\d+\.\d+", version):
        fail(f"PROJECT_VERSION {version!r} is not MAJOR.MINOR.PATCH")

    for pair in sys.argv[3:]:
        name, _, program = pair.partition("=")
        r = subprocess.run([program, "--version"], capture_output=True, text=True, timeout=60,
                           env={**os.environ, "QT_QPA_PLATFORM": "offscreen"})
        if r.returncode != 0 or r.stdout != f"{name} {version}\n":
            fail(f"{name} --version exited with {r.returncode} and printed {r.stdout!r}, "
                 f"not '{name} {version}' (stderr: {r.stderr.strip()})")
        print(f"check_versions: {name} --version: {r.stdout.strip()}")

    cpack = cpack_variables(config)
    components = cpack.get("CPACK_COMPONENTS_ALL", "").split(";")
    if cpack.get("CPACK_PACKAGE_VERSION") != version:
        fail(f"CPACK_PACKAGE_VERSION is {cpack.get('CPACK_PACKAGE_VERSION')!r}, not {version}")
    for component in filter(None, components):
        upper = component.upper()
        package = cpack.get(f"CPACK_DEBIAN_{upper}_PACKAGE_NAME", component)
        upstream = cpack.get(f"CPACK_DEBIAN_{upper}_PACKAGE_VERSION",
                             cpack.get("CPACK_DEBIAN_PACKAGE_VERSION",
                                       cpack["CPACK_PACKAGE_VERSION"]))
        release = cpack.get(f"CPACK_DEBIAN_{upper}_PACKAGE_RELEASE",
                            cpack.get("CPACK_DEBIAN_PACKAGE_RELEASE"))
        epoch = cpack.get("CPACK_DEBIAN_PACKAGE_EPOCH")
        field = (f"{epoch}:" if epoch else "") + upstream + (f"-{release}" if release else "")
        if upstream != version:
            fail(f"the {package} package's Version would be {field}: upstream {upstream} is not "
                 f"the programs' {version}")
        print(f"check_versions: Debian package {package}: Version {field}")
    if not any(components):
        fail(f"{config} names no component (CPACK_COMPONENTS_ALL): nothing is packaged")
    print(f"check_versions: OK, everything is {version}")


if __name__ == "__main__":
    main()
