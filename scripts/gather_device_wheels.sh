#!/usr/bin/env bash
# Gathers, into the git-ignored .whl/ folder, the wheels that the GPU machine's image lacks for the recipe and
# the tests (Python 3.12, manylinux x86_64; the machine has no network, so they travel with the working tree).
# The image already has torch, torchaudio, lightning, torchmetrics, sentencepiece, numpy, matplotlib, tqdm,
# pytest, PyYAML and packaging. Versions come from requirements/lock.txt; antlr4-python3-runtime is only an
# sdist on PyPI, so its (pure-Python) wheel is built here with `pip wheel --no-deps`. Needs PyPI (pip).
#
#   bash scripts/gather_device_wheels.sh [--dest .whl]    # then carry [".whl"] (docs/loss.md, "Running the GPU check")
#   bash scripts/gather_device_wheels.sh --print-pins     # the pinned requirements it would gather, no download
#
# Writes <dest>/*.whl and <dest>/requirements.txt (the pins), so that on the machine
#   python3 -m pip install --no-index --find-links .whl -r .whl/requirements.txt
# installs exactly the locked versions.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
python=${PYTHON:-python3}
dest=.whl
print_pins=false
while [[ $# -gt 0 ]]; do
  case "$1" in
    --dest) dest=$2; shift 2 ;;
    --print-pins) print_pins=true; shift ;;
    -h|--help) sed -n '2,13p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "gather_device_wheels.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
done

# hydra-core, omegaconf, antlr4: the configs; soundfile, cffi, pycparser: reading audio; jiwer, rapidfuzz,
# click: WER scoring in the evaluation code and the tests (the image's click may predate jiwer's minimum)
packages=(hydra-core omegaconf antlr4-python3-runtime soundfile cffi pycparser jiwer rapidfuzz click)
lock=requirements/lock.txt
pins=()
for name in "${packages[@]}"; do
  pin=$(grep -i -E "^${name}==" "$lock" || true)
  [[ -n $pin ]] || { echo "gather_device_wheels.sh: $name is not pinned in $lock" >&2; exit 1; }
  pins+=("$pin")
done
if [[ $print_pins == true ]]; then
  printf '%s\n' "${pins[@]}"
  exit 0
fi

mkdir -p "$dest"
rm -f "$dest"/*.whl "$dest"/requirements.txt  # one version of each: two would stop the install
sdist_dir=$(mktemp -d)
trap 'rm -rf "$sdist_dir"' EXIT
# pip matches each manylinux tag exactly, so name the ones these packages publish
platforms=()
for tag in manylinux_2_28_x86_64 manylinux_2_27_x86_64 manylinux_2_17_x86_64 manylinux2014_x86_64 manylinux1_x86_64; do
  platforms+=(--platform "$tag")
done
for pin in "${pins[@]}"; do
  if [[ $pin == antlr4-python3-runtime==* ]]; then
    "$python" -m pip download -q --no-deps --no-binary :all: -d "$sdist_dir" "$pin"
    "$python" -m pip wheel -q --no-deps -w "$dest" "$sdist_dir"/antlr4-python3-runtime-*.tar.gz
  else
    "$python" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
      "${platforms[@]}" -d "$dest" "$pin"
  fi
done
printf '%s\n' "${pins[@]}" > "$dest/requirements.txt.tmp" && mv "$dest/requirements.txt.tmp" "$dest/requirements.txt"
ls -l "$dest"
echo "total: $(du -sb "$dest" | cut -f1) bytes in $dest ($(ls "$dest"/*.whl | wc -l) wheels)"
