"""``make lint``: ``verilator --lint-only -Wall`` on generated tops, with the documented waivers
(:data:`spartan_rtl.toolchain.VERILATOR_WAIVERS`). Prints each file's verdict; exits 1 on any
warning."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from spartan_rtl import toolchain


def lint(path):
    path = Path(path)
    top = path.stem
    cmd = ["verilator", "--lint-only", "-Wall", *toolchain.VERILATOR_WAIVERS, "--top-module", top,
           str(path)]
    proc = subprocess.run(cmd, env=toolchain.sim_env(), capture_output=True, text=True)
    return proc.returncode, (proc.stdout + proc.stderr).strip()


def main(argv=None):
    paths = argv if argv is not None else sys.argv[1:]
    if not paths:
        print("lint: no Verilog files given", file=sys.stderr)
        return 2
    failed = 0
    for path in paths:
        code, output = lint(path)
        findings = [line for line in output.splitlines() if line.startswith(("%Warning", "%Error"))]
        print(f"{'clean' if code == 0 and not findings else 'FAIL '} {path}")
        if code or findings:
            failed += 1
            print(output)
    print(f"waivers: {' '.join(toolchain.VERILATOR_WAIVERS)}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
