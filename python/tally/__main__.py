"""python -m tally ARGS: the tally command (lab, bench, reduce ...) with these arguments.

    python -m tally lab list
    python -m tally lab run --variants cuda-1,cuda-5 --n 2^24

Runs the `tally` executable: the one beside this package's build (build/<preset>/tally, when the
package is used from a build tree), else the first on PATH."""
import os
import shutil
import sys


def find_command():
    here = os.path.dirname(os.path.abspath(__file__))
    beside = os.path.normpath(os.path.join(here, "..", "..", "tally"))  # <build>/python/tally -> <build>/tally
    if os.path.isfile(beside) and os.access(beside, os.X_OK):
        return beside
    return shutil.which("tally")


def main(argv):
    exe = find_command()
    if exe is None:
        print("python -m tally: the tally command was not found (build it with scripts/build.sh, or put it on PATH)",
              file=sys.stderr)
        return 2
    os.execv(exe, [exe, *argv])
    return 0  # not reached


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
