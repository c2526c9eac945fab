#!/bin/sh
# Writes the man page pyramesh(1) to stdout from the CLI's own --help texts,
# so the page and `pyramesh <command> --help` never disagree.
# Usage: man.sh PYRAMESH VERSION
set -e
PM=$1
VERSION=$2
roff() { sed -e 's/\\/\\\\/g' -e 's/^\./\\\&./' -e "s/^'/\\\\\&'/" -e 's/-/\\-/g'; }
echo ".TH PYRAMESH 1 \"\" \"pyramesh $VERSION\" \"User Commands\""
echo ".SH NAME"
echo "pyramesh \\- volumes and point clouds to triangle meshes on CPUs and NVIDIA GPUs"
echo ".SH SYNOPSIS"
echo ".nf"
"$PM" --help | roff
echo ".fi"
for cmd in isosurface reconstruct info demo; do
  echo ".SH $(echo "$cmd" | tr a-z A-Z)"
  echo ".nf"
  "$PM" "$cmd" --help | roff
  echo ".fi"
done
echo ".SH SEE ALSO"
echo "The documentation in the docs/ folder of the source tree."
